"""The ``openai`` backend: any OpenAI-compatible chat/completions server as a message-level policy.

vLLM serve, SGLang, a hosted API or :mod:`gymflow.policy.openai_server`. Requests for all live episodes
of a turn go out concurrently (at most ``max_concurrency`` at a time). Each request has a
timeout and capped retries with exponential backoff; then it becomes a turn with an ``error``
(kind ``timeout``, ``policy_unavailable`` or ``policy_error``) that ends its episode, never an
exception that takes the batch down and never a silent reward 0.

Retried: connection errors, timeouts, 408, 429 and 5xx. Not retried: other 4xx (the server
says the request is wrong; sending it again will not help) and a 200 whose body is not a chat
completion. With ``token_ids=True`` the vLLM extensions ``return_token_ids`` and ``logprobs``
are asked for, so episodes get a token view (a hosted API refuses unknown fields: leave it off).

The API key goes only where it cannot be read on the way: over https, or over plain http to a
loopback address. To any other plain-http host it is withheld (a warning says so, and a 401
names the reason) unless ``allow_insecure_key`` (spec option ``insecure_key=1``) says the
network in between is trusted.

httpx, not the openai SDK: the SDK's own retries and types would hide what this module must
decide (what is retried, what kind a failure gets), and it is one more heavy dependency.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.policy.base import ChatRequest, ChatTurn

RETRIED_STATUS = {408, 429}
log = logging.getLogger(__name__)


def key_travels_safely(base_url: str) -> bool:
    """Whether a bearer token sent to ``base_url`` is safe from the network: https, or a
    loopback host (``127.0.0.0/8``, ``::1``, ``localhost``).

    >>> [key_travels_safely(u) for u in ("https://api.x/v1", "http://127.0.0.1:8000/v1")]
    [True, True]
    >>> key_travels_safely("http://10.0.0.5:8000/v1")
    False
    """
    url = urlsplit(base_url)
    if url.scheme == "https":
        return True
    host = url.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FunctionCall(_Wire):
    name: str
    arguments: str | dict


class ToolCall(_Wire):
    id: str | None = None
    type: str = "function"
    function: FunctionCall


class AssistantMessage(_Wire):
    role: str = "assistant"
    content: str | list[dict] | None = None
    tool_calls: list[ToolCall] | None = None


class TokenLogprob(_Wire):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[dict] = Field(default_factory=list)


class ChoiceLogprobs(_Wire):
    content: list[TokenLogprob] | None = None


class Choice(_Wire):
    index: int = 0
    message: AssistantMessage
    finish_reason: str | None = None
    logprobs: ChoiceLogprobs | None = None
    token_ids: list[int] | None = None
    """vLLM extension (``return_token_ids``): the sampled ids, EOS included."""


class Usage(_Wire):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ChatCompletion(_Wire):
    """The parts of a chat completion this project reads (and its server writes)."""

    id: str = ""
    object: str = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[Choice] = Field(min_length=1)
    usage: Usage | None = None
    prompt_token_ids: list[int] | None = None
    """vLLM extension (``return_token_ids``): the rendered prompt's ids."""


def to_turn(completion: ChatCompletion) -> ChatTurn:
    choice = completion.choices[0]
    content = choice.message.content
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    calls = [tc.model_dump() for tc in choice.message.tool_calls or []]
    lps = choice.logprobs.content if choice.logprobs else None
    return ChatTurn(
        text=content or "",
        tool_calls=calls,
        finished=choice.finish_reason != "length",
        prompt_token_ids=completion.prompt_token_ids,
        token_ids=choice.token_ids,
        logprobs=[t.logprob for t in lps] if lps is not None else None,
        usage=completion.usage.model_dump() if completion.usage else None,
    )


class OpenAIChatPolicy:
    """A :class:`~gymflow.policy.base.ChatPolicy` over ``POST {base_url}/chat/completions``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_concurrency: int = 32,
        token_ids: bool = False,
        extra_body: dict | None = None,
        allow_insecure_key: bool = False,
    ) -> None:
        self.base_url, self.model = base_url.rstrip("/"), model
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.max_concurrency, self.token_ids = max_concurrency, token_ids
        self.extra_body = extra_body or {}
        self.key_withheld = bool(api_key) and not (
            allow_insecure_key or key_travels_safely(self.base_url)
        )
        """An API key was given but not sent: plain http to a host that is not loopback."""
        if self.key_withheld:
            log.warning("%s", self._withheld_reason())
            api_key = None
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: httpx.AsyncClient | None = None
        self._gate: asyncio.Semaphore | None = None
        self.attempts = 0
        """HTTP requests sent, retries included (for tests and reports)."""

    def _withheld_reason(self) -> str:
        return (
            f"the API key was not sent to {self.base_url}: plain http to a host that is not "
            "loopback; use https, or add insecure_key=1 to the openai: spec to send it anyway"
        )

    def _client(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        # httpx pools and asyncio semaphores belong to one event loop; evaluation and GRPO run
        # a fresh loop per batch, so a new loop gets a new client (the old one died with its loop).
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._loop = loop
            self._http = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self._headers,
                timeout=self.timeout_s,
                limits=httpx.Limits(max_connections=self.max_concurrency),
            )
            self._gate = asyncio.Semaphore(self.max_concurrency)
        return self._http, self._gate

    async def aclose(self) -> None:
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.aclose()
        self._http = None

    async def chat(self, requests: list[ChatRequest]) -> list[ChatTurn]:
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    def body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "max_completion_tokens": request.max_tokens,
            "temperature": request.temperature,
            "n": 1,
        }
        if request.tools:
            body["tools"] = request.tools
        if request.seed is not None:
            body["seed"] = request.seed
        if self.token_ids:
            body["logprobs"] = True
            body["return_token_ids"] = True
        return {**body, **self.extra_body}

    async def _one(self, request: ChatRequest) -> ChatTurn:
        http, gate = self._client()
        payload = self.body(request)
        kind, why = FailureKind.POLICY_UNAVAILABLE, ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            self.attempts += 1
            try:
                async with gate:
                    resp = await http.post("/chat/completions", json=payload)
            except httpx.TimeoutException:
                kind, why = FailureKind.TIMEOUT, f"no answer within {self.timeout_s} s"
                continue
            except httpx.TransportError as exc:
                kind, why = FailureKind.POLICY_UNAVAILABLE, f"{type(exc).__name__}: {exc}"
                continue
            if resp.status_code >= 500 or resp.status_code in RETRIED_STATUS:
                kind, why = FailureKind.POLICY_UNAVAILABLE, _status(resp)
                continue
            if resp.status_code >= 400:
                why = f"{self.base_url}: {_status(resp)}"
                if self.key_withheld and resp.status_code in (401, 403):
                    why += f" ({self._withheld_reason()})"
                return _failed(FailureKind.POLICY_ERROR, why)
            try:
                return to_turn(ChatCompletion.model_validate_json(resp.content))
            except ValidationError as exc:
                detail = f"answer is not a chat completion ({exc.error_count()} problems, first: "
                detail += f"{exc.errors()[0]['msg']}): {resp.text[:200]!r}"
                return _failed(FailureKind.POLICY_ERROR, f"{self.base_url}: {detail}")
        return _failed(
            kind,
            f"{self.base_url}/chat/completions failed after {self.retries + 1} attempts: {why}",
        )


def _status(resp: httpx.Response) -> str:
    return f"HTTP {resp.status_code}: {resp.text[:200]}"


def _failed(kind: FailureKind, message: str) -> ChatTurn:
    return ChatTurn(error=GymflowError(kind, message))
