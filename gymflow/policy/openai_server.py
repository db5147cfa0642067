"""An OpenAI-compatible server for any token-level gymflow :class:`~gymflow.policy.base.Policy`.

``POST /v1/chat/completions`` (``messages``, ``tools``, ``temperature``, ``max_tokens`` or
``max_completion_tokens``, ``n=1``, ``seed``, ``logprobs``, and vLLM's ``return_token_ids``) and
``GET /v1/models``. What ``gymflow policy serve`` runs; the ``openai`` backend, an LLM judge or
any OpenAI client can talk to it.

A conversation is encoded the way the agent loop encodes it in-process: the leading messages
with the policy's chat template (``encode_prompt``), then each assistant turn
(``encode_assistant``) and each tool result (``encode_observation``). So the served policy sees
the ids it would see in-process, and a client that keeps ``prompt_token_ids`` gets a token view
that matches the in-process one whenever re-tokenizing the model's text gives back its ids.
Tool calls the model writes as ``<tool_call>`` text are parsed strictly
(:mod:`gymflow.core.tool_calls`) into structured ``tool_calls``; text that does not parse is returned
as it is, so the client sees the model's mistake, not a server error.

Concurrent requests are batched: a worker collects what arrived within ``batch_window_s`` and
runs one ``generate`` per (max tokens, temperature) group in a thread, off the event loop.
When every request of a batch has a seed, each samples with its own (a list of seeds, as the
in-process driver gives), so a seeded answer does not depend on what shares its batch; a batch
where some request has none shares one seed (the first given).
Not covered: streaming, ``n > 1``, ``stop``, ``top_p``/``top_k``, ``tool_choice`` other than
``auto``/``none``, and user messages after the first assistant turn.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from gymflow.core.failures import FailureKind
from gymflow.core.tool_calls import parse_assistant_text, render_call
from gymflow.policy.base import Generation, Policy


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # OpenAI clients send fields we do not use

    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict | None = None
    # OpenAI clients send null for "unset": every optional field takes None.
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int | None = None
    seed: int | None = None
    logprobs: bool | None = None
    return_token_ids: bool | None = None
    stream: bool | None = None


class BadRequest(Exception):
    def __init__(
        self, message: str, status: int = 400, kind: FailureKind = FailureKind.BAD_REQUEST
    ):
        super().__init__(message)
        self.message, self.status, self.kind = message, status, kind


def build_openai_app(
    policy: Policy,
    model_name: str = "gymflow-policy",
    api_key: str | None = None,
    max_tokens_limit: int = 1024,
    default_max_tokens: int = 256,
    batch_window_s: float = 0.005,
    max_batch: int = 64,
    parse_tool_calls: bool = True,
) -> FastAPI:
    """An ASGI app serving ``policy``; run it with uvicorn (``gymflow policy serve``).

    ``parse_tool_calls=False`` returns the model's text as is (like vLLM serve without a tool
    parser), which leaves the parsing to the client.
    """
    app = FastAPI(title=f"gymflow policy {model_name}")
    batcher = Batcher(policy, batch_window_s, max_batch)
    app.state.batcher = batcher
    app.router.on_shutdown.append(batcher.stop)
    app.state.requests = 0
    expected = f"Bearer {api_key}".encode() if api_key else None

    @app.exception_handler(BadRequest)
    async def _bad(request: Request, exc: BadRequest) -> JSONResponse:
        return _error(exc.status, exc.kind, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error(400, FailureKind.BAD_REQUEST, f"{where}: {first.get('msg')}")

    def authorize(request: Request) -> None:
        given = request.headers.get("authorization", "").encode()
        if expected is not None and not hmac.compare_digest(given, expected):
            raise BadRequest("missing or wrong bearer token", 401, FailureKind.UNAUTHORIZED)

    @app.get("/v1/models")
    async def models(request: Request) -> dict:
        authorize(request)
        entry = {"id": model_name, "object": "model", "created": 0, "owned_by": "gymflow"}
        return {"object": "list", "data": [entry]}

    @app.post("/v1/chat/completions")
    async def chat_completions(req: ChatCompletionRequest, request: Request) -> Any:
        authorize(request)
        app.state.requests += 1
        if (req.n or 1) != 1 or req.stream:
            raise BadRequest("only n=1 without streaming is served")
        if req.tool_choice not in (None, "auto", "none"):
            raise BadRequest("tool_choice must be 'auto' or 'none'")
        max_new = req.max_completion_tokens or req.max_tokens or default_max_tokens
        if max_new > max_tokens_limit:
            raise BadRequest(f"max tokens {max_new} is over this server's limit {max_tokens_limit}")
        tools = req.tools if req.tool_choice != "none" else None
        prompt = encode_conversation(policy, req.messages, tools)
        try:
            temperature = 1.0 if req.temperature is None else req.temperature
            gen = await batcher.generate(prompt, max_new, temperature, req.seed)
        except Exception as exc:  # a 5xx: the client retries a bounded number of times
            message = f"generation failed: {type(exc).__name__}: {exc}"
            return _error(500, FailureKind.POLICY_ERROR, message)
        return _completion(model_name, prompt, gen, bool(tools) and parse_tool_calls, req)

    return app


def encode_conversation(
    policy: Policy, messages: list[dict], tools: list[dict] | None
) -> list[int]:
    """Token ids of a conversation, ready for the next assistant turn (see the module doc)."""
    roles = [m.get("role") for m in messages]
    first = next((i for i, r in enumerate(roles) if r not in ("system", "user")), len(roles))
    head = [{"role": m["role"], "content": _text(m.get("content"))} for m in messages[:first]]
    if not head:
        raise BadRequest("the conversation must start with a system or user message")
    ids = list(policy.encode_prompt(head, tools))
    rest = messages[first:]
    if rest and rest[-1].get("role") == "assistant":
        raise BadRequest("the last message is an assistant turn: nothing to answer")
    for i, m in enumerate(rest):
        role = m.get("role")
        if role == "assistant":
            encode = getattr(policy, "encode_assistant", None)
            if encode is None:
                raise BadRequest(f"{type(policy).__name__} cannot encode an assistant turn")
            ids += encode(_assistant_text(m))
        elif role == "tool":
            last = i + 1 == len(rest) or rest[i + 1].get("role") != "tool"
            ids += policy.encode_observation(_text(m.get("content")), last=last)
        else:
            raise BadRequest(f"a {role!r} message after the first assistant turn is not served")
    return ids


class Batcher:
    """Runs concurrent requests as few ``generate`` calls (one worker, one generate at a time)."""

    def __init__(self, policy: Policy, window_s: float, max_batch: int) -> None:
        self.policy, self.window_s, self.max_batch = policy, window_s, max_batch
        self.batches = 0
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None

    async def generate(
        self, prompt: list[int], max_new: int, temperature: float, seed: int | None
    ) -> Generation:
        if self._worker is None or self._worker.done():
            self._queue = asyncio.Queue()
            self._worker = asyncio.create_task(self._run())
        done = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(((max_new, temperature), prompt, seed, done))
        return await done

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            pending = [await self._queue.get()]
            await asyncio.sleep(self.window_s)  # let the other requests of this turn arrive
            while not self._queue.empty() and len(pending) < self.max_batch:
                pending.append(self._queue.get_nowait())
            groups: dict[tuple, list] = {}
            for entry in pending:
                groups.setdefault(entry[0], []).append(entry)
            for (max_new, temperature), entries in groups.items():
                await self._generate(entries, max_new, temperature)

    async def _generate(self, entries: list, max_new: int, temperature: float) -> None:
        live = [e for e in entries if not e[3].done()]  # a client that hung up is skipped
        if not live:
            return
        seeds = [e[2] for e in live]
        seed = seeds if None not in seeds else next((x for x in seeds if x is not None), None)
        self.batches += 1
        try:
            gens = await asyncio.to_thread(
                self.policy.generate,
                [e[1] for e in live],
                max_new,
                temperature=temperature or 1.0,
                greedy=temperature == 0.0,
                seed=seed,
            )
        except Exception as exc:  # every waiting request learns it; the worker keeps serving
            for e in live:
                if not e[3].done():
                    e[3].set_exception(exc)
            return
        for e, gen in zip(live, gens, strict=True):
            if not e[3].done():
                e[3].set_result(gen)


def _completion(
    model_name: str, prompt: list[int], gen: Generation, parse: bool, req: ChatCompletionRequest
) -> dict:
    parsed = parse_assistant_text(gen.text) if parse and gen.finished else None
    if parsed is not None and parsed.calls and parsed.error is None:
        calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
            }
            for name, args in parsed.calls
        ]
        message: dict = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": gen.text}
        finish = "stop" if gen.finished else "length"
    choice: dict = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    if req.logprobs:
        # Tokens named by id (vLLM's ``return_tokens_as_token_ids`` form): lossless, and a
        # scripted policy has no vocabulary to name them with.
        content = [
            {"token": f"token_id:{t}", "logprob": lp, "bytes": None, "top_logprobs": []}
            for t, lp in zip(gen.token_ids, gen.logprobs, strict=True)
        ]
        choice["logprobs"] = {"content": content}
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(gen.token_ids),
            "total_tokens": len(prompt) + len(gen.token_ids),
        },
    }
    if req.return_token_ids:
        body["prompt_token_ids"] = prompt
        choice["token_ids"] = gen.token_ids
    return body


def _assistant_text(message: dict) -> str:
    """An assistant message as the model would have written it (calls in the template's form)."""
    text = _text(message.get("content"))
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function", tc) if isinstance(tc, dict) else {}
        args = fn.get("arguments", {})
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except json.JSONDecodeError:
            raise BadRequest(f"tool call arguments are not JSON: {args[:100]!r}") from None
        text += render_call(str(fn.get("name", "")), args)
    return text


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _error(status: int, kind: FailureKind, message: str) -> JSONResponse:
    """OpenAI's error shape, plus gymflow's ``kind``."""
    error = {"message": message, "type": "invalid_request_error", "kind": str(kind), "code": None}
    return JSONResponse({"error": error}, status_code=status)
