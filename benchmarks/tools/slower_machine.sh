#!/usr/bin/env bash
# Runs a command as if on the slower of this project's two 2-core machine kinds (AMD EPYC with
# AVX2 only), from the faster one (AVX-512): an emulation, for when a session has only the
# faster kind. Its figures are labelled "AVX2 emulated", never reported as that machine's.
#
#   benchmarks/tools/slower_machine.sh COMMAND...          # e.g. .venv/bin/gymflow run --seed 0
#   NICE=4 benchmarks/tools/slower_machine.sh COMMAND...   # a lighter slowdown
#
# Two parts:
# - the float path: torch, MKL and oneDNN use their AVX2 kernels (the variables below), whose
#   sums differ from the AVX-512 ones, so a fixed seed takes the path it takes on that machine;
# - the speed: one busy loop pinned to each core at nice +NICE (default 3), so every process of
#   the command gets about 1024 / (1024 + weight(NICE)) of a core: 61 % at nice 3.
# Why by hand: no library slows a process tree by a set factor; a cgroup CPU quota caps the
# total over both cores, so a one-process stage (SFT) would not slow down at all.
#
# Calibrated against the real machine (docs/results/default.md, "The slower machine kind,
# emulated"): its lifecycle of seed 0, 2026-11-27, ran 132 GRPO steps in the 340 s budget (two
# other seeds 118 and 134) and took 649 s; emulated at nice 3 (torch's AVX2 kernels only, before
# MKL's and oneDNN's were added), 2026-11-28: 124 steps, 661 s. With all three, 2.5-2.6 s a GRPO
# step, as on the real machine (2.6 s).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 COMMAND..." >&2; exit 2; }
NICE=${NICE:-3}
if ! grep -q avx512f /proc/cpuinfo; then
    echo "slower_machine: this CPU has no AVX-512: it is the slower kind already; running as is" >&2
    exec "$@"
fi
pids=()
for core in 0 1; do
    nice -n "$NICE" taskset -c "$core" python3 -c "while True: pass" &
    pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
export ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
"$@"
