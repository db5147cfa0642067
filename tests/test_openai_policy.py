"""The openai backend against real servers on loopback: gymflow's own OpenAI-compatible server
(serving a scripted policy and the embedded tiny model), and servers that fail on purpose."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from ports import free_port  # tests/ is on the path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.tool_calls import render_call
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.loopback import LoopbackServer
from gymflow.env.resources_server import build_app
from gymflow.environments.counter.environment import CounterEnvironment
from gymflow.eval.evaluation import evaluate_policy
from gymflow.policy.base import ChatTurn
from gymflow.policy.openai_backend import OpenAIChatPolicy
from gymflow.policy.openai_server import build_openai_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.policy.spec import load_policy
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.chat_turns import chat_items, extend_token_view
from gymflow.rollout.driver import run_episodes, training_batch
from gymflow.rollout.episode import Episode, Sampling

ENV = CounterEnvironment()
LONG = Sampling(max_completion_tokens=1 << 20)  # scripted tokens are bytes: no budget cut
ANSWER_42 = {"choices": [{"message": {"role": "assistant", "content": "42"}}]}


def counter_script(prompt: str, turn: int, observations: list[str]) -> str:
    """The counter's gold episode, worked out from the request and the observed count."""
    a, b = (int(x) for x in re.findall(r"add (\d+)", prompt))
    if turn < 2:
        return render_call("increment_counter", {"count": (a, b)[turn]})
    if turn == 2:
        return render_call("get_counter_value", {})
    return str(json.loads(observations[-1])["count"])


def episodes(policy, tasks, sampling=LONG, seeds=None):
    app = build_app(ENV)

    async def go():
        async with EnvClient(app=app) as client:
            return await run_episodes(
                client, ENV, policy, tasks, sampling, seeds or list(range(len(tasks)))
            )

    eps = asyncio.run(go())
    assert not app.state.sessions.live, "every session is closed, whatever happened"
    return eps


def played_texts(ep) -> list[str]:
    out = []
    for it in ep.items[1:]:
        if it["type"] == "function_call":
            out.append(render_call(it["name"], json.loads(it["arguments"])))
        elif it["type"] == "message":
            out.append(it["content"])
    return out


@pytest.fixture(scope="module")
def tasks():
    return build_tasks(ENV, 6, seed=21, heldout_frac=0.0, val_frac=0.0)


@pytest.fixture(scope="module")
def scripted() -> Iterator[LoopbackServer]:
    with LoopbackServer(build_openai_app(ScriptedPolicy(counter_script), "scripted")) as server:
        yield server


def test_gold_over_http_scores_one_with_the_in_process_token_view(scripted, tasks):
    policy = OpenAIChatPolicy(scripted.url + "/v1", "scripted", token_ids=True)
    served = episodes(policy, tasks)
    local = episodes(ScriptedPolicy(counter_script), tasks)
    assert [e.reward for e in served] == [1.0] * len(tasks)
    for s, loc in zip(served, local, strict=True):
        assert played_texts(s) == ENV.gold_turns(s.task)
        assert s.turns == 4 and s.tool_calls == 3
        assert s.items == loc.items  # structured tool_calls map to the same items
        assert s.has_token_view
        assert (s.prompt_ids, s.completion_ids, s.env_mask) == (
            loc.prompt_ids,
            loc.completion_ids,
            loc.env_mask,
        )
    batcher = scripted.app.state.batcher
    assert batcher.batches < scripted.app.state.requests, "concurrent turns share a generate call"
    assert training_batch(served)["env_reward"] == [1.0] * len(tasks)


def test_text_tool_calls_are_parsed_by_the_client_and_evaluation_works(tasks):
    # A server without a tool parser (vLLM serve without --tool-call-parser) sends the text.
    app = build_openai_app(ScriptedPolicy(counter_script), "raw", parse_tool_calls=False)
    with LoopbackServer(app) as server:
        policy = OpenAIChatPolicy(server.url + "/v1", "raw")
        served = episodes(policy, tasks)
        rows, summary = evaluate_policy(ENV, build_app(ENV), policy, tasks, max_new_tokens=256)
    assert [e.reward for e in served] == [1.0] * len(tasks)
    assert all(not e.has_token_view and e.prompt_ids == [] for e in served)
    assert summary["success"] == 1.0 and summary["n"] == len(tasks)
    with pytest.raises(GymflowError) as err:
        training_batch(served)
    assert err.value.kind == FailureKind.NO_TOKEN_VIEW


def test_tiny_model_served_episodes_are_produced_and_scored(tmp_path_factory, tasks):
    cfg = TinyModelConfig(
        hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, corpus_size=300
    )
    path = ensure_tiny_model(
        tmp_path_factory.mktemp("cache"),
        "counter",
        lambda: tokenizer_corpus(ENV, cfg.corpus_size, 5),
        cfg,
    )
    local = TransformersPolicy.from_path(path)
    with LoopbackServer(build_openai_app(local, "tiny")) as server:
        policy = OpenAIChatPolicy(server.url + "/v1", "tiny", token_ids=True)
        served = episodes(policy, tasks, Sampling(max_new_tokens=24), seeds=[7] * len(tasks))
        requests = server.app.state.requests
    kinds = {str(k) for k in FailureKind}
    assert sum(e.turns for e in served) == requests
    for ep in served:
        assert not ep.policy_failed and ep.turns >= 1 and len(ep.items) > 1
        assert isinstance(ep.reward, float) and ep.score["failure_kind"] in kinds | {None}
        if ep.has_token_view:  # the first turn at least re-encodes exactly
            assert ep.prompt_ids == local.encode_prompt(ep.task.prompt, ep.task.tools)
            assert len(ep.completion_ids) == len(ep.logprobs) == len(ep.env_mask)
            model_lps = [lp for lp, m in zip(ep.logprobs, ep.env_mask, strict=True) if m]
            assert model_lps and all(lp <= 0.0 for lp in model_lps)
    assert any(e.has_token_view for e in served)


def _call(name, arguments, id_="c1") -> dict:
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_structured_calls_are_held_to_the_strict_parser():
    ok = chat_items(ChatTurn(text="let me add", tool_calls=[_call("f", '{"x": 1}')]), 2)
    assert ok == [
        {"type": "function_call", "call_id": "call_2_0", "name": "f", "arguments": '{"x": 1}'}
    ]
    assert chat_items(ChatTurn(tool_calls=[_call("f", {"x": 1})]), 0)[0]["arguments"] == '{"x": 1}'
    for bad in ('{"x": 1', '{"x": NaN}', '{"x": 1, "x": 2}', "[1]", {"x": float("nan")}):
        (item,) = chat_items(ChatTurn(tool_calls=[_call("f", bad)]), 0)
        assert item["type"] == "message" and item["parse_error"].startswith("invalid_json"), bad
    (item,) = chat_items(ChatTurn(tool_calls=[_call("", "{}")]), 0)
    assert "needs a function name" in item["parse_error"]


def test_token_view_is_kept_only_while_prompts_extend_the_sampled_tokens():
    ep = Episode(task=None, seed=0)
    for turn, (prompt, out) in enumerate([([1, 2], [3, 4]), ([1, 2, 3, 4, 8, 9], [5])]):
        ep.turns = turn + 1
        reply = ChatTurn(prompt_token_ids=prompt, token_ids=out, logprobs=[-0.5] * len(out))
        extend_token_view(ep, reply)
    assert (ep.prompt_ids, ep.completion_ids) == ([1, 2], [3, 4, 8, 9, 5])
    assert ep.env_mask == [1, 1, 0, 0, 1]
    assert ep.logprobs == [-0.5, -0.5, 0.0, 0.0, -0.5] and ep.has_token_view
    ep.turns += 1  # the server re-tokenized turn 1 differently: [3, 7] is not what was sampled
    retokenized = [1, 2, 3, 7, 8, 9, 5]
    extend_token_view(ep, ChatTurn(prompt_token_ids=retokenized, token_ids=[6], logprobs=[-1.0]))
    assert not ep.has_token_view and ep.completion_ids == [] and ep.prompt_ids == []
    fresh = Episode(task=None, seed=0, turns=1)
    extend_token_view(fresh, ChatTurn(text="no ids from a hosted API"))
    assert not fresh.has_token_view


# --- failures ----------------------------------------------------------------------------------


def test_server_down_is_policy_unavailable_after_capped_retries(tasks):
    policy = OpenAIChatPolicy(
        f"http://127.0.0.1:{free_port()}/v1", "m", retries=2, backoff_s=0.01, timeout_s=2
    )
    eps = episodes(policy, tasks[:3])
    assert policy.attempts == 3 * 3  # 1 + 2 retries per episode, then it stops
    for ep in eps:
        assert ep.policy_failed and ep.turns == 0 and ep.reward == 0.0
        assert ep.score["failure_kind"] == "policy_unavailable"
        assert "after 3 attempts" in ep.score["detail"]
    with pytest.raises(GymflowError) as err:
        training_batch(eps)
    assert err.value.kind == FailureKind.POLICY_UNAVAILABLE


@pytest.fixture(scope="module")
def faulty() -> Iterator[LoopbackServer]:
    """One server, a behaviour per path prefix; counts the requests each prefix got."""
    app = FastAPI()
    app.state.hits = {}

    @app.post("/{mode}/v1/chat/completions")
    async def answer(mode: str, request: Request):
        body = await request.json()
        hits = app.state.hits
        hits[mode] = hits.get(mode, 0) + 1
        if mode == "fail500":
            return PlainTextResponse("boom", status_code=500)
        if mode == "garbage":
            return PlainTextResponse("<html>not json</html>")
        if mode == "nochoices":
            return JSONResponse({"choices": []})
        if mode == "flaky" and hits[mode] % 2 == 1:  # every request fails once, then works
            return PlainTextResponse("busy", status_code=503)
        if mode == "oddseeds" and body["seed"] % 2:
            return JSONResponse({"error": {"message": "no"}}, status_code=400)
        return JSONResponse(ANSWER_42)

    with LoopbackServer(app) as server:
        yield server


@pytest.mark.parametrize(
    ("mode", "kind", "tries"),
    [
        ("fail500", "policy_unavailable", 3),
        ("garbage", "policy_error", 1),
        ("nochoices", "policy_error", 1),
    ],
)
def test_bad_answers_become_kinded_episode_failures(faulty, tasks, mode, kind, tries):
    policy = OpenAIChatPolicy(f"{faulty.url}/{mode}/v1", "m", retries=2, backoff_s=0.01)
    eps = episodes(policy, tasks[:2])
    assert [e.score["failure_kind"] for e in eps] == [kind, kind]
    assert faulty.app.state.hits[mode] == 2 * tries


def test_retries_recover_and_one_bad_request_ends_only_its_episode(faulty, tasks):
    flaky = OpenAIChatPolicy(f"{faulty.url}/flaky/v1", "m", retries=2, backoff_s=0.01)
    eps = episodes(flaky, tasks[:2])
    assert faulty.app.state.hits["flaky"] == 4 and flaky.attempts == 4
    assert all(not e.policy_failed and e.score["failure_kind"] == "bad_arguments" for e in eps)

    mixed = OpenAIChatPolicy(f"{faulty.url}/oddseeds/v1", "m", retries=2, backoff_s=0.01)
    eps = episodes(mixed, tasks[:4], seeds=[0, 1, 2, 3])
    kinds = [e.score["failure_kind"] for e in eps]
    assert kinds == ["bad_arguments", "policy_error", "bad_arguments", "policy_error"]
    assert "HTTP 400" in eps[1].score["detail"]


def test_a_hanging_server_times_out():
    hang = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    hang.bind(("127.0.0.1", 0))
    hang.listen(16)  # the kernel accepts connections; nobody ever answers
    try:
        url = f"http://127.0.0.1:{hang.getsockname()[1]}/v1"
        policy = OpenAIChatPolicy(url, "m", timeout_s=0.3, retries=1, backoff_s=0.01)
        started = time.monotonic()
        (ep,) = episodes(policy, build_tasks(ENV, 1, seed=3, heldout_frac=0.0, val_frac=0.0))
        elapsed = time.monotonic() - started
    finally:
        hang.close()
    assert ep.score["failure_kind"] == "timeout" and policy.attempts == 2
    assert 0.6 <= elapsed < 3.0


# --- the server's contract -----------------------------------------------------------------------


def test_server_refuses_what_it_does_not_serve_and_checks_the_key(monkeypatch, tasks):
    app = build_openai_app(ScriptedPolicy(counter_script), "scripted", api_key="sekret")
    user = [{"role": "user", "content": "add 1 then add 2 then get the count"}]
    with LoopbackServer(app) as server:
        http = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer sekret"})
        assert http.get("/v1/models").json()["data"][0]["id"] == "scripted"
        ok = http.post("/v1/chat/completions", json={"messages": user, "tools": ENV.tool_schemas})
        call = ok.json()["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call == {"name": "increment_counter", "arguments": '{"count": 1}'}
        nulls = {"messages": user, "temperature": None, "n": None, "max_tokens": None}
        assert http.post("/v1/chat/completions", json=nulls).status_code == 200
        for bad in (
            {"messages": user, "n": 2},
            {"messages": user, "stream": True},
            {"messages": []},
            {"messages": user, "max_tokens": 10**6},
            {"messages": [*user, {"role": "assistant", "content": "hi"}, *user]},
        ):
            resp = http.post("/v1/chat/completions", json=bad)
            assert resp.status_code == 400 and resp.json()["error"]["kind"] == "bad_request", bad
        assert httpx.get(server.url + "/v1/models").status_code == 401

        spec = f"openai:{server.url}/v1?model=scripted&retries=0"
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("GYMFLOW_POLICY_API_KEY", raising=False)
        (ep,) = episodes(load_policy(spec), tasks[:1])
        assert ep.score["failure_kind"] == "policy_error" and "401" in ep.score["detail"]
        monkeypatch.setenv("GYMFLOW_POLICY_API_KEY", "sekret")
        (ep,) = episodes(load_policy(spec), tasks[:1])
        assert ep.reward == 1.0


def test_a_policy_without_encode_assistant_answers_first_turns_only(tasks):
    # A policy that cannot encode a past assistant turn: a clear 400, not a 500.
    class FirstTurnOnly(ScriptedPolicy):
        encode_assistant = None

    app = build_openai_app(FirstTurnOnly(counter_script), "plain")

    async def go():
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://x"
        ) as c:
            user = {"role": "user", "content": "add 1 then add 2 then get the count"}
            first = await c.post("/v1/chat/completions", json={"messages": [user]})
            said = {"role": "assistant", "content": "ok"}
            tool = {"role": "tool", "content": "{}"}
            later = await c.post("/v1/chat/completions", json={"messages": [user, said, tool]})
            return first, later

    first, later = asyncio.run(go())
    assert first.status_code == 200
    assert later.status_code == 400 and "cannot encode an assistant turn" in later.text
