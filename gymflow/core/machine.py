"""Which machine a run or a benchmark ran on, so that figures from two machines are not compared
as if they were one.

The lifecycle's GRPO stage and its SFT control are bounded by wall time, so the same seed on a
slower CPU trains fewer steps; and a CPU with other vector units runs other kernels, whose float
sums differ, so even SFT's stopping step can move. ``summary.json`` and every benchmark's JSON
carry :func:`machine_info` for that reason.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

# The instruction sets that decide which CPU kernels PyTorch runs, widest first.
_VECTOR_FLAGS = ("amx_tile", "avx512f", "avx2", "avx", "asimd", "neon")
# The kernels torch picks by default for a vector unit (torch.backends.cpu.get_cpu_capability).
_KERNELS = {"avx512f": "AVX512", "avx2": "AVX2"}


def machine_info() -> dict:
    """The CPU (model and widest vector unit), core count, memory, load averages now, Python
    and PyTorch (version, intra-op threads, and the CPU kernels it runs: ``AVX2`` on an
    AVX-512 CPU when ``ATEN_CPU_CAPABILITY`` narrows them) of this process's machine."""
    cpu, flags = _cpu()
    info = {
        "cpu": cpu,
        "vector": next((f for f in _VECTOR_FLAGS if f in flags), None),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    try:
        import torch
    except ImportError:
        return info
    return info | {
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_kernels": torch.backends.cpu.get_cpu_capability(),
    }


def machine_line(info: dict) -> str:
    """One line for reports: ``AMD EPYC (avx2), 2 cores, 24 GiB, load 1.2 / 0.9 / 0.8``; the
    vector unit reads ``avx512f, torch kernels AVX2`` where torch ran narrower kernels than the
    CPU has (an emulation of the slower machine kind: benchmarks/slower_machine.sh)."""
    vector = info.get("vector") or ""
    kernels = info.get("torch_kernels")
    if kernels and vector and _KERNELS.get(vector, kernels) != kernels:
        vector = f"{vector}, torch kernels {kernels}"
    vector = f" ({vector})" if vector else ""
    memory = f", {info['memory_gib']:g} GiB" if info.get("memory_gib") else ""
    load = " / ".join(f"{x:g}" for x in info["load_avg"])
    return f"{info['cpu']}{vector}, {info['cores']} cores{memory}, load {load} (1 / 5 / 15 min)"


def _cpu() -> tuple[str, set[str]]:
    """The CPU's model name and feature flags from ``/proc/cpuinfo`` (Linux); elsewhere
    :func:`platform.processor` and no flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), set()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    model = fields.get("model name") or fields.get("Model") or platform.machine()
    flags = fields.get("flags") or fields.get("Features") or ""
    return model, set(flags.split())


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)
