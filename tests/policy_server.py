"""``gymflow policy serve`` as its own process on a free loopback port, for tests that need a
real OpenAI-compatible server (a policy to evaluate, a teacher)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from ui_process import GYMFLOW, free_port


@contextmanager
def served_policy(model: str, name: str, start_s: float = 60.0) -> Iterator[str]:
    """Serve ``model`` (a folder or token backend spec) as ``name``; yields the base URL
    (``http://127.0.0.1:PORT/v1``) once ``/v1/models`` answers, and stops the process after."""
    port = free_port()
    proc = subprocess.Popen(
        [GYMFLOW, "policy", "serve", "--model", model, "--port", str(port), "--name", name],
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + start_s
    try:
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "policy serve did not start"
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(15)
