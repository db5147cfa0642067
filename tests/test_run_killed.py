"""``gymflow run`` SIGKILLed while GRPO and its SFT control train side by side leaves no process
behind (Prefect's temporary server, the control worker, multiprocessing's resource tracker), and
resuming the run finishes it.

A real smoke lifecycle in a subprocess with its own home; the processes are read from ``/proc``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gymflow.core.watchdog import _alive, descendants

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _wait_for_control_worker(
    run: subprocess.Popen, run_dir: Path, timeout_s: float
) -> dict[int, int]:
    """The run's descendants once the spawned SFT-control worker is training: a spawned
    process while its folder exists (other spawned processes come and go before it: the
    verifier profile's two scoring processes, for one)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert run.poll() is None, "the run ended before GRPO started"
        found = descendants(run.pid)
        training = (run_dir / "sft_control").is_dir()  # the worker made it: torch loaded
        if training and any("spawn_main" in _cmdline(pid) for pid in found):
            time.sleep(1)  # the watchdog (every 0.5 s) has recorded the worker
            return descendants(run.pid)
        time.sleep(0.5)
    raise AssertionError("no SFT-control worker appeared")


def test_killed_run_leaves_no_orphans_and_resumes(tmp_path):
    env = {**os.environ, "GYMFLOW_HOME": str(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)  # the run starts its own temporary Prefect server
    # GRPO gets 10 steps, not the smoke's 3: on a fast machine 3 end (and the control worker with
    # them) within two seconds of the worker's start, before the kill can find both training.
    args = [
        GYMFLOW, "run", "--smoke", "--set", "grpo.max_steps=10", "--run-id", "killed",
        "--out", str(tmp_path / "runs"),
    ]  # fmt: skip
    run = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        children = _wait_for_control_worker(run, tmp_path / "runs" / "killed", timeout_s=600)
        # what each one is, read before the kill: the watchdog ends them within half a second
        # of it, and a dead process's command line reads empty
        kinds = {pid: _cmdline(pid) for pid in children}
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert any("uvicorn" in cmd or "prefect" in cmd for cmd in kinds.values()), kinds
    assert any("spawn_main" in cmd for cmd in kinds.values()), kinds

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p, s) for p, s in children.items()):
        time.sleep(0.2)
    left = {pid: kinds[pid] for pid, start in children.items() if _alive(pid, start)}
    assert not left, f"still running after the run was killed: {left}"

    started = time.monotonic()
    resumed = subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads((tmp_path / "runs" / "killed" / "summary.json").read_text())
    assert summary["grpo"]["steps"] == 10
    print(f"resume finished in {time.monotonic() - started:.0f} s")
