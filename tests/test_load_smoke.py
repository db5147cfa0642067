"""The load benchmark's workload, small, in CI: many sessions live at once over real HTTP against
one server and against two replicas — no request fails, every gold verify scores 1, and every
session is closed afterwards. The 10,000-session figures come from
``benchmarks/env/load/load.py``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import start_server  # noqa: E402
from benchmarks.env.load.load import ENV, rss_mb, wave  # noqa: E402


@pytest.mark.parametrize("workers", [1, 2])
def test_sessions_live_at_once_all_succeed_and_close(workers):
    tasks = build_tasks(get_env(ENV), 100, seed=3, heldout_frac=0.0, val_frac=0.0)
    proc, url, _ = start_server(ENV, workers)
    live_at_peak: list[int] = []

    def count_live() -> None:
        live_at_peak.append(_live_sessions(url, workers))

    try:
        result = asyncio.run(wave(url, tasks, 1500, 64, count_live))
        assert result["errors"] == 0 and result["rewards"] == 0, result
        assert live_at_peak == [1500]  # all seeded and open together
        assert _live_sessions(url, workers) == 0
        assert rss_mb(proc.pid) > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _live_sessions(url: str, workers: int) -> int:
    port = int(url.rsplit(":", 1)[1])
    return sum(
        httpx.get(f"http://127.0.0.1:{port + k}/health").json()["sessions"] for k in range(workers)
    )
