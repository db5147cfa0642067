"""10,000 concurrent sessions in one server: no state crosses sessions, memory comes back.

The property: whatever interleaving of tool calls hits whichever of 10,000 live sessions,
every session's counter equals its own start plus its own increments. Memory is counted in
allocated heap blocks (``sys.getallocatedblocks``: cheap, unlike tracemalloc, and what sessions
hold): after closing, or after the TTL frees them, what stays is only the bounded memory of
ended ids. ``benchmarks/env_server.py`` reports the same in MB.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.counter.environment import CounterEnvironment

N = 10_000
ENV = CounterEnvironment()
TASKS = build_tasks(ENV, 200, 9, 0.0, 0.0)


async def seed_all(client: EnvClient, n: int) -> tuple[list[str], list[int]]:
    tasks = [TASKS[i % len(TASKS)] for i in range(n)]
    sids = await asyncio.gather(*(client.seed_session(t) for t in tasks))
    return list(sids), [int(t.ground_truth["initial_count"]) for t in tasks]


class Sessions:
    """One server with N live sessions and the model of what each counter must read."""

    def __init__(self) -> None:
        self.app = build_app(ENV)
        self.client = EnvClient(app=self.app)
        self.sids, self.expected = asyncio.run(seed_all(self.client, N))


SESSIONS: Sessions | None = None


def sessions() -> Sessions:
    global SESSIONS
    if SESSIONS is None:
        SESSIONS = Sessions()
    return SESSIONS


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    ops=st.lists(
        st.tuples(st.integers(0, N - 1), st.integers(-1000, 1000)), min_size=1, max_size=200
    ),
    spot=st.lists(st.integers(0, N - 1), min_size=1, max_size=50),
)
def test_no_state_crosses_sessions_under_any_interleaving(ops, spot):
    s = sessions()

    async def main():
        # all calls of one example go out at once and interleave on the server
        outs = await asyncio.gather(
            *(s.client.call_tool(s.sids[i], "increment_counter", {"count": c}) for i, c in ops)
        )
        assert all(o["error"] is None for o in outs)
        for i, c in ops:
            s.expected[i] += c
        touched = sorted({i for i, _ in ops} | set(spot))
        reads = await asyncio.gather(
            *(s.client.call_tool(s.sids[i], "get_counter_value", {}) for i in touched)
        )
        for i, read in zip(touched, reads, strict=True):
            assert read["output"] == {"count": s.expected[i]}, f"session {i} crossed"

    asyncio.run(main())
    assert len(s.app.state.sessions.live) == N


def test_every_session_still_reads_its_own_count_then_all_close():
    s = sessions()

    async def main():
        reads = await asyncio.gather(
            *(s.client.call_tool(sid, "get_counter_value", {}) for sid in s.sids)
        )
        assert [r["output"]["count"] for r in reads] == s.expected
        closed = await asyncio.gather(*(s.client.close_session(sid) for sid in s.sids))
        assert all(closed)

    asyncio.run(main())
    assert not s.app.state.sessions.live


async def close_all(client: EnvClient, sids: list[str]) -> None:
    assert all(await asyncio.gather(*(client.close_session(sid) for sid in sids)))


def _heap_blocks() -> int:
    gc.collect()
    return sys.getallocatedblocks()


def test_memory_returns_to_baseline_after_close_and_after_ttl():
    app = build_app(ENV, ttl_s=600.0)
    client = EnvClient(app=app)
    baseline = _heap_blocks()
    sids, _ = asyncio.run(seed_all(client, N))
    live = _heap_blocks()
    asyncio.run(close_all(client, sids))
    del sids
    after_close = _heap_blocks()

    app_ttl = build_app(ENV, ttl_s=0.5)
    client_ttl = EnvClient(app=app_ttl)
    before_ttl = _heap_blocks()
    asyncio.run(seed_all(client_ttl, N))
    time.sleep(0.6)
    asyncio.run(client_ttl.request("GET", "/health"))  # expiry runs on use
    assert not app_ttl.state.sessions.live
    after_ttl = _heap_blocks()
    grown = live - baseline
    assert grown > 20 * N, f"10k sessions should hold real state, grew only {grown} blocks"
    # what stays is the memory of ended ids (bounded by max_closed), not the sessions
    assert after_close - baseline < 0.1 * grown, (baseline, live, after_close)
    assert after_ttl - before_ttl < 0.1 * grown, (before_ttl, after_ttl)
