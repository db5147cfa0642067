"""gymflow: the RLVR lifecycle for LLM agents."""

import os as _os

# PyTorch's CPU threads wait for one another at the end of every parallel op, and OpenMP's
# default lets a waiting thread spin. With other work on the cores (the SFT control beside GRPO,
# the Prefect and MLflow servers, another job) a spinning thread holds the core its partner
# needs, and an op can cost a scheduler time slice: 2026-11-27, 2 cores at load ~8.6, SmolLM2
# sampling 4 x 8 tokens took 82 s spinning and 3.5 s waiting passively. On a quiet AVX-512
# machine (benchmarks/cpu_wait_policy.py, best of 3, embedded-default shapes) passive waiting
# costs 39 % on sampling and 10 % on training when the process is alone, and saves 66 % and
# 40 % when a second one shares the cores, as GRPO and its control do for most of a run. Read
# when torch loads, so it is set here, before any of the library imports torch; an environment
# that sets it keeps its own.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
