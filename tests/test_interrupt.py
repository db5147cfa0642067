"""Ctrl-C on ``gymflow run``, as a terminal sends it (SIGINT to the whole process group).

The first one stops the run within seconds: exit code 130, one line naming ``gymflow rerun``,
no traceback, no process of the run left, the Prefect flow run marked Crashed; the rerun then
completes. A second one stops it at once. (:mod:`gymflow.cli.supervise`)
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gymflow.core.watchdog import descendants

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))
LONG_GRPO = ["--smoke", "--set", "grpo.max_steps=2000", "--set", "grpo.time_budget_s=900"]


class Running:
    """``gymflow run`` in a process group of its own (a terminal's foreground job), its output
    read line by line with the time each line came."""

    def __init__(self, home: Path, *args: str) -> None:
        env = os.environ | {"GYMFLOW_HOME": str(home), "GYMFLOW_PROGRESS": "lines"}
        for name in [n for n in env if n.startswith(("PREFECT_", "MLFLOW_"))]:
            del env[name]  # settings this pytest process holds for its own home
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [GYMFLOW, "run", *args], cwd=home, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, process_group=0,
        )  # fmt: skip
        self.lines: list[tuple[str, str]] = []
        self.seen: dict[int, int] = {}
        for stream, tag in ((self.proc.stdout, "out"), (self.proc.stderr, "err")):
            threading.Thread(target=self._read, args=(stream, tag), daemon=True).start()

    def _read(self, stream, tag: str) -> None:
        for line in stream:
            self.lines.append((tag, line.rstrip("\n")))

    def wait_for(self, text: str, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(text in line for _, line in self.lines):
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.text()}"
            self.seen.update(descendants(self.proc.pid))
            time.sleep(0.2)
        self.seen.update(descendants(self.proc.pid))

    def interrupt(self) -> float:
        """SIGINT to the group, as Ctrl-C does; seconds until the command exited."""
        sent = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)
        self.proc.wait(60)
        return time.monotonic() - sent

    def text(self, tag: str | None = None) -> str:
        return "\n".join(line for t, line in self.lines if tag in (None, t))

    def left(self) -> list[str]:
        """Processes of the run still alive (same pid and start time as seen)."""
        from gymflow.core.watchdog import _alive

        return [f"{pid}: {_cmdline(pid)}" for pid, start in self.seen.items() if _alive(pid, start)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def _flow_state(home: Path, run_id: str) -> str | None:
    with sqlite3.connect(home / ".prefect" / "prefect.db") as db:
        row = db.execute("select state_type from flow_run where name = ?", (run_id,)).fetchone()
    return row[0] if row else None


@pytest.mark.slow
def test_ctrl_c_stops_the_run_quickly_and_the_rerun_completes(tmp_path):
    run = Running(tmp_path, *LONG_GRPO)
    run.wait_for("grpo: started")
    time.sleep(2)  # inside GRPO's first steps, the control training beside it
    took = run.interrupt()
    time.sleep(0.5)  # a process killed last may take a moment to leave /proc
    assert run.proc.returncode == 130, run.text()
    assert took < 15, f"{took:.1f} s to stop"
    errors = run.text("err")
    assert "Traceback" not in errors and "EventsWorker" not in errors, errors
    (line,) = [t for t in errors.splitlines() if "gymflow rerun" in t]
    run_id = line.rsplit(" ", 1)[-1]
    assert line == f"[interrupted] run {run_id} stopped; resume it with: gymflow rerun {run_id}"
    assert run.left() == []
    assert _flow_state(tmp_path, run_id) == "CRASHED"

    env = os.environ | {"GYMFLOW_HOME": str(tmp_path)}
    for name in [n for n in env if n.startswith(("PREFECT_", "MLFLOW_"))]:
        del env[name]
    again = subprocess.run(
        [GYMFLOW, "rerun", run_id, "--set", "grpo.max_steps=3", "--quiet"], cwd=tmp_path,
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    summary = json.loads((tmp_path / "runs" / run_id / "summary.json").read_text())
    assert summary["run_id"] == run_id and summary["registry"]["version"]


@pytest.mark.slow
def test_a_second_ctrl_c_stops_it_at_once(tmp_path):
    run = Running(tmp_path, *LONG_GRPO)
    run.wait_for("sft: started")
    os.killpg(run.proc.pid, signal.SIGINT)
    time.sleep(0.3)
    took = run.interrupt()
    time.sleep(0.5)
    assert run.proc.returncode == 130 and took < 3, (took, run.text())
    assert "Traceback" not in run.text("err"), run.text("err")
    assert run.left() == []
