"""``gymflow env serve counter`` as its own process, for the tests that kill and restart it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

GYMFLOW = [str(Path(sys.executable).with_name("gymflow"))]  # the installed command
TASKS = Path(__file__).resolve().parents[1] / "environments/counter/examples/nemo_gym_tasks.jsonl"


def serve_env(port: int, tasks: Path = TASKS, fmt: str = "nemo_gym") -> subprocess.Popen:
    """``gymflow env serve counter`` holding ``tasks`` (the server scores only its own)."""
    server = subprocess.Popen(
        [*GYMFLOW, "env", "serve", "counter", "--port", str(port), "--tasks", str(tasks),
         "--format", fmt],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
    server.kill()
    raise AssertionError("the env server did not start")
