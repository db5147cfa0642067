"""What a run records about its machine: read from this machine, not assumed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gymflow.core.machine import machine_info, machine_line


def test_machine_info_reads_this_machine():
    info = machine_info()
    assert info["cores"] == os.cpu_count()
    assert len(info["load_avg"]) == 3
    import torch

    assert info["torch"] == torch.__version__ and info["torch_threads"] == torch.get_num_threads()
    assert info["torch_kernels"] == torch.backends.cpu.get_cpu_capability()
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo: the CPU's name and flags come from platform only")
    text = cpuinfo.read_text()
    assert info["cpu"] in text  # the model name, as the kernel reports it
    flags = next((line for line in text.splitlines() if line.startswith(("flags", "Features"))), "")
    if info["vector"] is not None:
        assert info["vector"] in flags.split()


def test_machine_line_names_cpu_vector_unit_and_load():
    info = {"cpu": "AMD EPYC", "vector": "avx2", "cores": 2, "memory_gib": 23.5,
            "load_avg": [1.5, 0.75, 0.5]}  # fmt: skip
    assert machine_line(info) == (
        "AMD EPYC (avx2), 2 cores, 23.5 GiB, load 1.5 / 0.75 / 0.5 (1 / 5 / 15 min)"
    )
    bare = {"cpu": "arm64", "vector": None, "cores": 8, "memory_gib": None, "load_avg": [0, 0, 0]}
    assert machine_line(bare) == "arm64, 8 cores, load 0 / 0 / 0 (1 / 5 / 15 min)"


def test_machine_line_says_when_torch_ran_narrower_kernels_than_the_cpu_has():
    """An AVX-512 CPU made to run AVX2 kernels (the slower machine kind, emulated) is not
    reported as a plain AVX-512 run."""
    info = {"cpu": "AMD EPYC", "vector": "avx512f", "cores": 2, "memory_gib": None,
            "load_avg": [4, 3, 2], "torch_kernels": "AVX2"}  # fmt: skip
    assert machine_line(info).startswith("AMD EPYC (avx512f, torch kernels AVX2), 2 cores")
    assert machine_line(info | {"torch_kernels": "AVX512"}).startswith("AMD EPYC (avx512f), 2")


def test_torch_kernels_follow_aten_cpu_capability():
    """Read from torch in a process started with its AVX2 kernels, not assumed from the CPU."""
    import subprocess
    import sys

    if machine_info()["vector"] not in ("amx_tile", "avx512f", "avx2"):
        pytest.skip("a CPU without AVX2 has no AVX2 kernels to run")
    ran = subprocess.run(
        [sys.executable, "-c", "from gymflow.core.machine import machine_info as m; "
         "print(m()['torch_kernels'])"],
        capture_output=True, text=True, env=os.environ | {"ATEN_CPU_CAPABILITY": "avx2"},
        timeout=120, check=True,
    )  # fmt: skip
    assert ran.stdout.strip() == "AVX2"
