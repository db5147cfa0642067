"""The resources server and its client, in-process (ASGI) and over real HTTP (uvicorn)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from starlette.responses import JSONResponse, PlainTextResponse

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.scoring import Score
from gymflow.core.tool_calls import render_call
from gymflow.core.trajectory import assistant_items
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment, TaskDraft
from gymflow.env.loopback import LoopbackServer
from gymflow.env.resources_server import build_app
from gymflow.env.sessions import RequestError, Session, SessionStore
from gymflow.environments.tool_call import ToolCallEnvironment

ENV = ToolCallEnvironment()
TASKS = build_tasks(ENV, 30, 11, 0.0, 0.0)
MAX_BODY = 64 * 1024


def run(coro):
    return asyncio.run(coro)


def gold_items(task) -> list[dict]:
    return assistant_items(ENV.gold_text(task), 0)


def task_for(tool: str):
    return next(t for t in TASKS if t.ground_truth["tool"] == tool)


# --- a small stateful environment: tools that read and change per-session state ---------------


def add_note(session: dict, text: str) -> dict:
    """Add a note.

    Args:
        text: The note.
    """
    if not text:
        raise ValueError("empty note")
    session["notes"].append(text)
    return {"count": len(session["notes"])}


def list_notes(session: dict) -> list[str]:
    """All notes of this session."""
    return list(session["notes"])


class NotesEnv(Environment):
    name = "notes"

    def tools(self):
        return [add_note, list_notes]

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        return [
            TaskDraft([{"role": "user", "content": f"note {i}"}], {"text": f"n{i}"}, seed)
            for i in range(n)
        ]

    def verify(self, task, items) -> Score:
        return Score(reward=0.0, success=False)

    def gold_text(self, task) -> str:
        return render_call("add_note", {"text": task.ground_truth["text"]})

    def new_state(self, task) -> dict:
        return {"notes": []}


# --- servers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[LoopbackServer]:
    with LoopbackServer(build_app(ENV, max_body_bytes=MAX_BODY, client_session_ids=True)) as server:
        yield server


@pytest.fixture(params=["asgi", "http"])
def make_client(request, live) -> Callable[..., EnvClient]:
    """A factory of clients for one server, in-process or over a real socket."""
    if request.param == "asgi":
        app = build_app(ENV, max_body_bytes=MAX_BODY, client_session_ids=True)
        return lambda **kw: EnvClient(app=app, **kw)
    return lambda **kw: EnvClient(base_url=live.url, **kw)


@pytest.fixture(params=["asgi", "http"])
def raw_client(request, live) -> Callable[[], httpx.AsyncClient]:
    """Plain httpx, to send bodies the EnvClient never would."""
    if request.param == "asgi":
        app = build_app(ENV, max_body_bytes=MAX_BODY, client_session_ids=True)
        return lambda: httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://env"
        )
    return lambda: httpx.AsyncClient(base_url=live.url, timeout=10)


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


async def expect_error(coro, kind: FailureKind) -> GymflowError:
    with pytest.raises(GymflowError) as info:
        await coro
    assert info.value.kind is kind, info.value
    return info.value


# --- the happy path ---------------------------------------------------------------------------


def test_health_and_tools(make_client):
    async def main():
        async with make_client() as client:
            health = await client.request("GET", "/health")
            assert (
                health["ok"] is True and health["env"] == "tool_call" and health["version"] == "1"
            )
            assert isinstance(health["sessions"], int)
            assert await client.tools() == ENV.tool_schemas

    run(main())


def test_seed_verify_gold_close(make_client):
    async def main():
        async with make_client() as client:
            for task in TASKS[:5]:
                sid = await client.seed_session(task)
                score = await client.verify(sid, gold_items(task))
                assert score["reward"] == 1.0 and score["success"] is True
                assert score["failure_kind"] is None
                assert await client.close_session(sid) is True

    run(main())


def test_seed_answer_echoes_prompt_and_tools(raw_client):
    async def main():
        async with raw_client() as http:
            task = TASKS[0]
            resp = await http.post("/seed_session", json={"task": task.model_dump()})
            assert resp.status_code == 200
            data = resp.json()
            assert data["prompt"] == task.prompt and data["tools"] == task.tools
            assert len(data["session_id"]) == 32

    run(main())


def test_verify_scores_like_the_environment(make_client):
    async def main():
        task = task_for("set_timer")
        texts = [render_call("set_timer", {"minutes": "5"}), "no call", ENV.gold_text(task) + "}"]
        async with make_client() as client:
            sid = await client.seed_session(task)
            for text in texts:
                items = assistant_items(text, 0)
                assert await client.verify(sid, items) == ENV.verify(task, items).to_dict()
            await client.close_session(sid)

    run(main())


def test_tool_calls_return_outputs(make_client):
    async def main():
        async with make_client() as client:
            sid = await client.seed_session(TASKS[0])
            result = await client.call_tool(sid, "set_timer", {"minutes": 5})
            assert result == {"output": {"timer_set": True, "minutes": 5}, "error": None}
            weather = await client.call_tool(sid, "get_weather", {"city": "Oslo"})
            assert weather["error"] is None and weather["output"]["unit"] == "celsius"
            await client.close_session(sid)

    run(main())


# --- sessions -------------------------------------------------------------------------------------


def test_close_is_idempotent_and_a_closed_id_is_never_reused(make_client):
    async def main():
        async with make_client() as client:
            sid = await client.seed_session(TASKS[1])
            assert await client.close_session(sid) is True
            assert await client.close_session(sid) is False
            assert await client.close_session(sid) is False
            err = await expect_error(client.seed_session(TASKS[1], sid), FailureKind.SESSION_EXISTS)
            assert sid in str(err)
            await expect_error(client.verify(sid, gold_items(TASKS[1])), FailureKind.SESSION_CLOSED)
            await expect_error(
                client.call_tool(sid, "set_timer", {"minutes": 1}), FailureKind.SESSION_CLOSED
            )

    run(main())


def test_seed_with_explicit_id_and_reuse_of_a_live_id(make_client):
    async def main():
        async with make_client() as client:
            sid = f"mine-{time.monotonic_ns()}"
            assert await client.seed_session(TASKS[2], sid) == sid
            await expect_error(client.seed_session(TASKS[3], sid), FailureKind.SESSION_EXISTS)
            assert (await client.verify(sid, gold_items(TASKS[2])))["reward"] == 1.0  # untouched
            await client.close_session(sid)

    run(main())


def test_closed_id_refused_with_409(raw_client):
    async def main():
        async with raw_client() as http:
            sid = f"closed-{time.monotonic_ns()}"
            body = {"task": TASKS[0].model_dump(), "session_id": sid}
            assert (await http.post("/seed_session", json=body)).status_code == 200
            assert (await http.post("/close_session", json={"session_id": sid})).json() == {
                "closed": True
            }
            resp = await http.post("/seed_session", json=body)
            assert resp.status_code == 409
            assert resp.json()["error"]["kind"] == "session_exists"

    run(main())


def test_unknown_session_is_an_error_of_its_own_kind(make_client):
    async def main():
        async with make_client() as client:
            await expect_error(client.verify("nope", []), FailureKind.UNKNOWN_SESSION)
            await expect_error(
                client.call_tool("nope", "set_timer", {"minutes": 1}), FailureKind.UNKNOWN_SESSION
            )
            assert await client.close_session("never-seeded") is False

    run(main())


def test_unknown_session_is_404(raw_client):
    async def main():
        async with raw_client() as http:
            resp = await http.post("/verify", json={"session_id": "nope", "items": []})
            assert resp.status_code == 404
            assert resp.json() == {
                "error": {"kind": "unknown_session", "message": "no session nope"}
            }

    run(main())


def test_task_of_another_environment_is_refused(make_client):
    async def main():
        other = build_tasks(NotesEnv(), 1, 0, 0.0, 0.0)[0]
        async with make_client() as client:
            err = await expect_error(client.seed_session(other), FailureKind.BAD_REQUEST)
            assert "notes" in str(err)

    run(main())


def test_ttl_expiry_frees_the_session():
    async def main():
        app = build_app(ENV, ttl_s=0.05, client_session_ids=True)
        async with EnvClient(app=app) as client:
            first = await client.seed_session(TASKS[0])
            second = await client.seed_session(TASKS[1])
            assert set(app.state.sessions.live) == {first, second}
            await asyncio.sleep(0.15)
            await expect_error(
                client.verify(first, gold_items(TASKS[0])), FailureKind.SESSION_EXPIRED
            )
            assert (await client.request("GET", "/health"))["sessions"] == 0
            assert app.state.sessions.live == {}
            await expect_error(
                client.call_tool(second, "set_timer", {"minutes": 1}), FailureKind.SESSION_EXPIRED
            )
            await expect_error(client.seed_session(TASKS[0], first), FailureKind.SESSION_EXISTS)

    run(main())


def test_use_keeps_a_session_alive_and_expiry_follows_last_use():
    store = SessionStore(ttl_s=100.0, max_sessions=10)
    now = time.monotonic()
    for sid in ("a", "b", "c"):
        store.add(sid, Session(TASKS[0], None, now + 100.0))
    store.live["a"].expires_at = now - 1  # "a" is overdue ...
    store.live["b"].expires_at = now - 1
    store.get("c")
    with pytest.raises(RequestError) as info:
        store.get("a")  # ... so touching it now is refused and frees it
    assert info.value.kind is FailureKind.SESSION_EXPIRED
    assert list(store.live) == ["b", "c"]
    store.live["b"].expires_at = now + 100.0
    store.get("b")  # refreshed and moved behind "c"
    assert list(store.live) == ["c", "b"]
    assert store.live["b"].expires_at > now + 99
    store.live["c"].expires_at = now - 1
    store.expire()
    assert list(store.live) == ["b"] and set(store.closed) == {"a", "c"}


def test_session_cap():
    async def main():
        app = build_app(ENV, max_sessions=2)
        async with EnvClient(app=app) as client:
            first = await client.seed_session(TASKS[0])
            await client.seed_session(TASKS[1])
            err = await expect_error(client.seed_session(TASKS[2]), FailureKind.SESSION_LIMIT)
            assert "cap 2" in str(err)
            assert len(app.state.sessions.live) == 2
            await client.close_session(first)
            third = await client.seed_session(TASKS[2])
            assert (await client.verify(third, gold_items(TASKS[2])))["reward"] == 1.0

    run(main())


def test_session_cap_answers_429():
    async def main():
        app = build_app(ENV, max_sessions=1)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://env"
        ) as http:
            body = {"task": TASKS[0].model_dump()}
            assert (await http.post("/seed_session", json=body)).status_code == 200
            resp = await http.post("/seed_session", json=body)
            assert resp.status_code == 429 and resp.json()["error"]["kind"] == "session_limit"

    run(main())


def test_sessions_are_isolated():
    async def main():
        env = NotesEnv()
        task_a, task_b = build_tasks(env, 2, 0, 0.0, 0.0)
        app = build_app(env)
        async with EnvClient(app=app) as client:
            a = await client.seed_session(task_a)
            b = await client.seed_session(task_b)
            assert (await client.call_tool(b, "add_note", {"text": "b1"}))["output"] == {"count": 1}
            before = (
                app.state.sessions.live[b].tool_calls,
                list(app.state.sessions.live[b].state["notes"]),
            )
            # session a: good calls, then every kind of mistake
            assert (await client.call_tool(a, "add_note", {"text": "a1"}))["output"] == {"count": 1}
            assert (await client.call_tool(a, "add_note", {"text": ""}))["error"][
                "kind"
            ] == "tool_error"
            assert (await client.call_tool(a, "add_note", {"text": 1}))["error"][
                "kind"
            ] == "bad_arguments"
            assert (await client.call_tool(a, "erase_all", {}))["error"]["kind"] == "unknown_tool"
            await expect_error(
                client.request("POST", "/tools/add_note", {"session_id": a, "arguments": 3}),
                FailureKind.BAD_REQUEST,
            )
            assert (await client.call_tool(a, "list_notes", {}))["output"] == ["a1"]
            live_b = app.state.sessions.live[b]
            assert before == (live_b.tool_calls, live_b.state["notes"])  # b untouched
            assert (await client.call_tool(b, "list_notes", {}))["output"] == ["b1"]
            await client.close_session(a)
            assert (await client.call_tool(b, "list_notes", {}))["output"] == ["b1"]

    run(main())


def test_tool_calls_are_isolated_across_sessions_over_http(make_client):
    async def main():
        async with make_client() as client:
            a = await client.seed_session(TASKS[0])
            b = await client.seed_session(TASKS[1])
            for _ in range(3):
                await client.call_tool(a, "send_email", {"to": "x@evil.example", "subject": "s"})
            await client.close_session(a)
            assert (await client.verify(b, gold_items(TASKS[1])))["reward"] == 1.0
            await client.close_session(b)

    run(main())


def test_concurrent_sessions(make_client):
    async def main():
        async with make_client() as client:
            sids = await asyncio.gather(*(client.seed_session(t) for t in TASKS))
            assert len(set(sids)) == len(TASKS)
            scores = await asyncio.gather(
                *(client.verify(s, gold_items(t)) for s, t in zip(sids, TASKS, strict=True))
            )
            assert all(s["reward"] == 1.0 for s in scores)
            closed = await asyncio.gather(*(client.close_session(s) for s in sids))
            assert all(closed)

    run(main())


# --- tool errors are observations, not crashes ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "kind", "says"),
    [
        ("delete_everything", {}, "unknown_tool", "delete_everything"),
        ("set_timer", {"minutes": "5"}, "bad_arguments", "minutes"),
        ("set_timer", {"minutes": 5, "force": True}, "bad_arguments", "force"),
        ("set_timer", {}, "bad_arguments", "minutes"),
        ("get_weather", {"city": "Oslo", "unit": "kelvin"}, "bad_arguments", "unit"),
        ("set_timer", {"minutes": 0}, "tool_error", "between 1 and 600"),
        (
            "send_email",
            {"to": "eve@evil.example", "subject": "hi"},
            "tool_error",
            "outside acme.com",
        ),
        (
            "convert_currency",
            {"amount": 5, "from_currency": "XXX", "to_currency": "USD"},
            "tool_error",
            "XXX",
        ),
    ],
)
def test_bad_tool_calls_answer_200_with_an_error(make_client, name, arguments, kind, says):
    async def main():
        async with make_client() as client:
            sid = await client.seed_session(TASKS[0])
            result = await client.call_tool(sid, name, arguments)
            assert result["output"] is None
            assert result["error"]["kind"] == kind
            assert says in result["error"]["message"]
            # the server is still up and the session still works
            assert (await client.call_tool(sid, "set_timer", {"minutes": 2}))["error"] is None
            assert (await client.verify(sid, gold_items(TASKS[0])))["reward"] == 1.0
            await client.close_session(sid)

    run(main())


@pytest.mark.parametrize(
    "name", ["", "a/b", "..", ".", "x?y=1", "has space", "#frag", "%2F", "météo", "../health"]
)
def test_any_tool_name_a_model_writes_is_an_unknown_tool(make_client, name):
    async def main():
        async with make_client() as client:
            sid = await client.seed_session(TASKS[0])
            result = await client.call_tool(sid, name, {})
            assert result["error"]["kind"] == "unknown_tool"
            assert repr(name) in result["error"]["message"]
            await client.close_session(sid)

    run(main())


# --- malformed requests -----------------------------------------------------------------------


def test_oversized_body_is_413(raw_client):
    async def main():
        async with raw_client() as http:
            big = json.dumps({"session_id": "x", "items": [{"pad": "a" * (MAX_BODY + 10)}]})
            resp = await http.post(
                "/verify", content=big.encode(), headers={"content-type": "application/json"}
            )
            assert resp.status_code == 413
            assert resp.json()["error"]["kind"] == "payload_too_large"
            assert (await http.get("/health")).status_code == 200

    run(main())


def test_body_at_the_limit_is_read(raw_client):
    async def main():
        async with raw_client() as http:
            body = json.dumps({"session_id": "x", "items": []})
            body = body[:-1] + " " * (MAX_BODY - len(body)) + "}"
            assert len(body.encode()) == MAX_BODY
            resp = await http.post("/verify", content=body.encode())
            assert resp.status_code == 404  # read and parsed; the session just does not exist

    run(main())


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        (b'{"session_id": "\xff\xfe"}', 400, "not_utf8"),
        (b"\xc3\x28", 400, "not_utf8"),
        (b'{"session_id": ', 400, "invalid_json"),
        (b"", 400, "invalid_json"),
        (b"{'session_id': 'x'}", 400, "invalid_json"),
        (b"[" * 20_000, 400, "invalid_json"),  # nested too deeply for the JSON decoder
        (b"[]", 422, "bad_request"),
        (b'{"session_id": 5, "items": []}', 422, "bad_request"),
        (b'{"session_id": "x"}', 422, "bad_request"),
        (b'{"session_id": "x", "items": "no"}', 422, "bad_request"),
    ],
)
def test_malformed_bodies(raw_client, body, status, kind):
    async def main():
        async with raw_client() as http:
            resp = await http.post(
                "/verify", content=body, headers={"content-type": "application/json"}
            )
            assert resp.status_code == status, resp.text
            error = resp.json()["error"]
            assert error["kind"] == kind and error["message"]
            assert (await http.get("/health")).json()["ok"] is True

    run(main())


def test_malformed_seed_and_tool_bodies(raw_client):
    async def main():
        async with raw_client() as http:
            resp = await http.post("/seed_session", content=b'{"task": {"task_id": 1}}')
            assert resp.status_code == 422 and "task" in resp.json()["error"]["message"]
            resp = await http.post("/tools/set_timer", content=b"\xff")
            assert resp.status_code == 400 and resp.json()["error"]["kind"] == "not_utf8"
            resp = await http.post("/close_session", content=b"nope")
            assert resp.status_code == 400 and resp.json()["error"]["kind"] == "invalid_json"

    run(main())


# --- the client when the server is unreachable, hangs or fails --------------------------------


def test_dead_server_is_env_unavailable_after_bounded_attempts():
    async def main():
        client = EnvClient(
            base_url=f"http://127.0.0.1:{closed_port()}", retries=2, backoff_s=0.01, timeout_s=0.5
        )
        async with client:
            start = time.monotonic()
            err = await expect_error(client.request("GET", "/health"), FailureKind.ENV_UNAVAILABLE)
            assert time.monotonic() - start < 5
            assert "after 3 attempts" in str(err) and "ConnectError" in str(err)
            await expect_error(client.seed_session(TASKS[0]), FailureKind.ENV_UNAVAILABLE)

    run(main())


class HangingServer:
    """Accepts connections and never answers; counts the connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted.append(conn)

    def __enter__(self) -> HangingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(5)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


def test_hanging_server_is_env_unavailable_after_timeouts():
    async def main():
        with HangingServer() as hang:
            client = EnvClient(base_url=hang.url, retries=1, backoff_s=0.01, timeout_s=0.3)
            async with client:
                start = time.monotonic()
                err = await expect_error(client.verify("s", []), FailureKind.ENV_UNAVAILABLE)
                elapsed = time.monotonic() - start
            assert 0.6 <= elapsed < 5  # two attempts, each waited for its timeout
            assert "after 2 attempts" in str(err) and "Timeout" in str(err)
            assert len(hang.accepted) == 2  # retried exactly once, then gave up

    run(main())


def flaky_app(fail_first: int, status: int = 503, body: str = "upstream broke"):
    calls = {"n": 0}

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        calls["n"] += 1
        if calls["n"] <= fail_first:
            response = PlainTextResponse(body, status_code=status)
        else:
            response = JSONResponse({"ok": True})
        await response(scope, receive, send)

    return app, calls


def test_server_errors_are_retried_then_succeed():
    async def main():
        app, calls = flaky_app(fail_first=2)
        async with EnvClient(app=app, retries=2, backoff_s=0.001) as client:
            assert await client.request("GET", "/health") == {"ok": True}
        assert calls["n"] == 3

    run(main())


def test_persistent_server_errors_are_env_unavailable_not_a_decode_crash():
    async def main():
        app, calls = flaky_app(fail_first=100, status=500, body="Internal Server Error")
        async with EnvClient(app=app, retries=2, backoff_s=0.001) as client:
            err = await expect_error(client.request("GET", "/health"), FailureKind.ENV_UNAVAILABLE)
        assert calls["n"] == 3
        assert "HTTP 500" in str(err)

    run(main())


def test_client_errors_are_not_retried():
    async def main():
        app, calls = flaky_app(fail_first=100, status=404, body="Not Found")
        async with EnvClient(app=app, retries=3, backoff_s=0.001) as client:
            err = await expect_error(client.request("GET", "/x"), FailureKind.BAD_REQUEST)
        assert calls["n"] == 1
        assert "404" in str(err) and "Not Found" in str(err)

    run(main())


def test_unknown_error_kind_and_route_fall_back_to_bad_request(make_client):
    async def main():
        async def app(scope, receive, send):
            body = {"error": {"kind": "martian", "message": "??"}}
            await JSONResponse(body, status_code=418)(scope, receive, send)

        async with EnvClient(app=app, retries=0) as client:
            err = await expect_error(client.request("GET", "/"), FailureKind.BAD_REQUEST)
            assert "??" in str(err)
        async with make_client() as client:
            await expect_error(client.request("GET", "/no/such/route"), FailureKind.BAD_REQUEST)

    run(main())


def test_non_json_success_is_env_unavailable():
    async def main():
        async def app(scope, receive, send):
            await PlainTextResponse("<html>proxy page</html>")(scope, receive, send)

        async with EnvClient(app=app, retries=0) as client:
            err = await expect_error(client.request("GET", "/health"), FailureKind.ENV_UNAVAILABLE)
            assert "proxy page" in str(err)

    run(main())


def test_client_needs_exactly_one_target():
    with pytest.raises(ValueError):
        EnvClient()
    with pytest.raises(ValueError):
        EnvClient(app=build_app(ENV), base_url="http://127.0.0.1:1")


def test_ended_ids_are_remembered_up_to_a_byte_bound():
    cost = len("a") + SessionStore.ENDED_ID_OVERHEAD
    store = SessionStore(ttl_s=100.0, max_sessions=10, max_closed_bytes=3 * cost)
    now = time.monotonic()
    for sid in ("a", "b", "c", "d"):
        store.add(sid, Session(TASKS[0], None, now + 100.0))
        store.close(sid)
    assert list(store.closed) == ["b", "c", "d"]  # "a", the oldest, was forgotten
    assert store.closed_bytes == 3 * cost
    with pytest.raises(RequestError) as info:
        store.add("d", Session(TASKS[0], None, now + 100.0))
    assert info.value.kind is FailureKind.SESSION_EXISTS


def test_closing_an_id_nobody_seeded_is_not_remembered():
    store = SessionStore(ttl_s=100.0, max_sessions=10)
    assert store.close("never-seeded") is False
    assert store.closed == {} and store.closed_bytes == 0
    store.add("never-seeded", Session(TASKS[0], None, time.monotonic() + 100.0))  # not blocked


def test_live_sessions_are_capped_in_bytes():
    store = SessionStore(ttl_s=100.0, max_sessions=10, max_live_bytes=1000)
    now = time.monotonic()
    store.add("a", Session(TASKS[0], None, now + 100.0, weight=600))
    with pytest.raises(RequestError) as info:
        store.add("b", Session(TASKS[0], None, now + 100.0, weight=600))
    assert info.value.kind is FailureKind.SESSION_LIMIT and info.value.status == 429
    store.close("a")
    assert store.live_bytes == 0
    store.add("b", Session(TASKS[0], None, now + 100.0, weight=600))
