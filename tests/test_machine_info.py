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
