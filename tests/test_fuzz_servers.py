"""Fuzzing every environment's resources server: no 5xx, every error in the documented shape.

Two generators, both against the real app of each environment (in-process ASGI):

* schemathesis, from the server's own OpenAPI schema (request bodies included): random and
  schema-shaped bodies on every endpoint, up to ``CASES_PER_OPERATION`` valid and as many
  invalid ones each;
* hypothesis strategies that get past the session lookup, which random bodies rarely do: a
  real session of a generated task, then random tool arguments on every tool, random
  trajectories (well-formed items with random content, and arbitrary JSON) on ``/verify``, and
  random ground truths on ``/seed_session``.

Together they send each server over 1,000 requests (the last test counts them).

The rule for every answer: status < 500, and a 4xx body is exactly
``{"error": {"kind", "message"}}`` with a known kind; a 200 from ``/verify`` is a score whose
reward lies in the environment's range.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

from gymflow.core.failures import FailureKind
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.registry import get_env, list_envs
from gymflow.env.resources_server import build_app

CASES_PER_OPERATION = 110
KINDS = {str(kind) for kind in FailureKind}
ENVS = list_envs()


CHECKED: Counter[str] = Counter()
"""Answers checked per environment (read by the last test)."""


def check_answer(
    env_name: str, status: int, body: object, reward_range: tuple[float, float] | None = None
):
    CHECKED[env_name] += 1
    assert status < 500, (status, body)
    if status >= 400:
        assert isinstance(body, dict) and set(body) == {"error"}, body
        assert set(body["error"]) == {"kind", "message"}, body
        assert body["error"]["kind"] in KINDS, body
    elif reward_range is not None and isinstance(body, dict) and "reward" in body:
        low, high = reward_range
        assert low <= body["reward"] <= high, body


def _schemathesis_test(env_name: str):
    """One test over every operation of ``env_name``'s server: schemathesis' schema-shaped cases,
    positive and negative, up to ``CASES_PER_OPERATION`` of each.

    Driven by hypothesis here rather than by schemathesis' pytest plugin (``schema.parametrize``):
    under pytest-xdist with two workers the plugin sent each server 10 requests instead of ~900
    (schemathesis 4.32), and the suite runs on two workers."""

    def test():
        schema = schemathesis.openapi.from_asgi("/openapi.json", build_app(get_env(env_name)))
        for result in schema.get_all_operations():
            operation = result.ok()
            for mode in GenerationMode:

                @given(case=operation.as_strategy(generation_mode=mode))
                @settings(
                    max_examples=CASES_PER_OPERATION,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                    database=None,
                )
                def one(case):
                    response = case.call()
                    try:
                        body = response.json()
                    except ValueError:
                        body = response.text
                    check_answer(env_name, response.status_code, body)

                try:
                    one()
                except Unsatisfiable:  # an operation without inputs has no invalid request
                    assert mode is GenerationMode.NEGATIVE, operation.label

    return test


for _name in ENVS:  # one test per environment, named after it
    globals()[f"test_schemathesis_{_name}_finds_no_5xx_and_no_stray_error_shape"] = (
        _schemathesis_test(_name)
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ITEM = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("message"), "role": st.sampled_from(["assistant", "user", "tool"]),
         "content": st.text(max_size=200)}
    ),
    st.fixed_dictionaries(
        {"type": st.just("function_call"), "name": st.text(max_size=20),
         "arguments": st.text(max_size=80) | JSON.map(str), "call_id": st.text(max_size=8)}
    ),
    st.fixed_dictionaries(
        {"type": st.just("function_call_output"), "call_id": st.text(max_size=8),
         "output": st.text(max_size=80)}
    ),
    JSON,
)  # fmt: skip


async def _raw(client: EnvClient, path: str, payload: dict) -> tuple[int, object]:
    from gymflow.core import fast_json

    status, raw = await client._targets[0].send(
        "POST", path, fast_json.dumps(payload), client._headers
    )
    return status, fast_json.loads(raw)


@pytest.mark.parametrize("env_name", ENVS)
def test_random_trajectories_tool_arguments_and_ground_truths(env_name):
    env = get_env(env_name)
    tasks = build_tasks(env, 6, 5, 0.0, 0.0)
    app = build_app(env)
    tools = sorted(env.tool_specs) + ["no_such_tool"]

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        task_idx=st.integers(0, len(tasks) - 1),
        items=st.lists(ITEM, max_size=6),
        tool=st.sampled_from(tools),
        arguments=st.dictionaries(st.text(max_size=12), JSON, max_size=4),
        ground_truth=st.dictionaries(st.text(max_size=12), JSON, max_size=4),
    )
    def one(task_idx, items, tool, arguments, ground_truth):
        async def main():
            async with EnvClient(app=app) as client:
                task = tasks[task_idx]
                status, body = await _raw(client, "/seed_session", {"task": task.model_dump()})
                check_answer(env_name, status, body)
                sid = body["session_id"]
                status, body = await _raw(
                    client, f"/tools/{tool}", {"session_id": sid, "arguments": arguments}
                )
                check_answer(env_name, status, body)
                status, body = await _raw(
                    client, "/verify", {"session_id": sid, "items": items, "close": True}
                )
                check_answer(env_name, status, body, env.reward_range)
                odd = task.model_copy(update={"ground_truth": ground_truth})
                status, body = await _raw(client, "/seed_session", {"task": odd.model_dump()})
                check_answer(env_name, status, body)
                if status == 200:
                    await client.close_session(body["session_id"])

        asyncio.run(main())

    try:
        one()
    finally:
        app.state.verifier.shutdown(kill=True)


def test_every_environment_got_over_1000_cases():
    """Runs last (file order): the fuzz above reached every server at least 1,000 times."""
    ran = {name: CHECKED[name] for name in ENVS if CHECKED[name]}
    if not ran:
        pytest.skip("the fuzz tests of this file were not selected")
    print("answers checked per environment:", ran)
    assert all(n >= 1000 for n in ran.values()), ran
