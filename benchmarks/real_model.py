"""The real pretrained model on this machine: SmolLM2-135M-Instruct, from its pinned wheel.

    python benchmarks/real_model.py [--json] [--out FILE] [--threads N]

Figures a later GPU run can be compared with, all through the product's own paths:

* ``load_first_s``: the GGUF dequantized and saved as a plain folder (``materialize`` into an
  empty cache) plus a policy load; ``load_cached_s``: the same spec loaded again (the folder
  found); ``TransformersPolicy.from_path``.
* ``generate_tokens_per_s``: 32 tool_call prompts (tools rendered into the system prompt),
  sampled at T=1, 48 new tokens each, one batched call; new tokens (to EOS) / wall seconds.
* ``sft_step_s``: ``run_sft`` on 8 gold demonstrations per step (the ``datasets/smollm2.json``
  preset's batch), 3 steps, fp32, full fine-tuning with gradient checkpointing (the mean over
  the steps; the loss over the 49,152-token vocabulary included).
* ``grpo_step_s``: ``run_grpo`` on tool_call with B×G = 2×4 rollouts of ≤ 48 tokens (the
  preset's), against the environment in-process, rollouts stored as Parquet, gradient
  checkpointing; median of 3 steps after a warm-up.
* ``peak_rss_gb``: the process's peak resident memory over all of the above.

The model is fetched first if it is not in the project's cache (``gymflow models fetch``).
The load average is reported with the figures: on a shared 2-core machine it moves them.
"""

from __future__ import annotations

import datetime
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.grpo_step import StepTimer  # noqa: E402
from benchmarks.report import arguments, emit  # noqa: E402
from gymflow.core.paths import cache_dir  # noqa: E402
from gymflow.data.task_set import build_tasks  # noqa: E402
from gymflow.env.registry import get_env  # noqa: E402
from gymflow.env.resources_server import build_app  # noqa: E402
from gymflow.policy.gguf_checkpoint import materialize  # noqa: E402
from gymflow.policy.model_catalog import fetch  # noqa: E402
from gymflow.policy.transformers_backend import TransformersPolicy  # noqa: E402
from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo  # noqa: E402
from gymflow.train.sft import SFTSettings, demonstrations, run_sft  # noqa: E402

NAME = "smollm2-135m-instruct"
MAX_NEW_TOKENS = 48


def load_times(gguf: Path, scratch: Path) -> tuple[dict, Path]:
    started = time.perf_counter()
    folder = materialize(gguf, scratch / "cache")
    TransformersPolicy.from_path(folder)
    first = time.perf_counter() - started
    started = time.perf_counter()
    policy = TransformersPolicy.from_path(materialize(gguf, scratch / "cache"))
    cached = time.perf_counter() - started
    del policy
    return {"load_first_s": round(first, 2), "load_cached_s": round(cached, 2)}, folder


def generation(folder: Path, tasks) -> dict:
    policy = TransformersPolicy.from_path(folder)
    prompts = [policy.encode_prompt(t.prompt, t.tools) for t in tasks[:32]]
    started = time.perf_counter()
    outs = policy.generate(prompts, max_new_tokens=MAX_NEW_TOKENS, greedy=False)
    wall = time.perf_counter() - started
    new_tokens = sum(len(o.token_ids) for o in outs)
    return {
        "generate_batch": len(prompts),
        "prompt_tokens_mean": round(statistics.mean(len(p) for p in prompts), 1),
        "generate_s": round(wall, 2),
        "generate_tokens_per_s": round(new_tokens / wall, 1),
    }


def sft_step(folder: Path, env, tasks, out: Path) -> dict:
    from transformers import AutoTokenizer

    demos = demonstrations(env, AutoTokenizer.from_pretrained(folder), tasks[:48])
    settings = SFTSettings(
        max_steps=3, batch_size=8, eval_every=10**6, warmup_steps=0, gradient_checkpointing=True
    )
    done = run_sft(folder, out, demos, settings, log_to_mlflow=False)
    return {"sft_batch": 8, "sft_step_s": round(done["wall_s"] / done["steps"], 2)}


def grpo_step(folder: Path, env, tasks, out: Path) -> dict:
    settings = GRPOSettings(
        max_steps=4, prompts_per_step=2, num_generations=4, max_new_tokens=MAX_NEW_TOKENS,
        dynamic_sampling=False, save_every=10**6, time_budget_s=None, seed=0,
        gradient_checkpointing=True,
    )  # fmt: skip
    timer = StepTimer()
    source = RolloutSource(env, build_app(env), tasks, settings, out_dir=out)
    run_grpo(folder, out, source, settings, log_to_mlflow=False, resume=False, callbacks=[timer])
    return {
        "grpo_rollouts_per_step": settings.prompts_per_step * settings.num_generations,
        "grpo_step_s": round(statistics.median(timer.times[1:]), 2),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    env = get_env("tool_call")
    tasks = build_tasks(env, 200, seed=1, heldout_frac=0.0, val_frac=0.0)
    gguf = fetch(NAME, cache_dir())
    result = {
        "benchmark": "real_model",
        "model": NAME,
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {args.threads} torch threads",
        "load_avg_start": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        loads, folder = load_times(gguf, scratch)
        result.update(loads)
        result.update(generation(folder, tasks))
        result.update(sft_step(folder, env, tasks, scratch / "sft"))
        result.update(grpo_step(folder, env, tasks, scratch / "grpo"))
    result["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    result["load_avg_end"] = round(os.getloadavg()[0], 2)
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
