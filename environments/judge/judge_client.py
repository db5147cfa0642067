"""Ask an OpenAI-compatible judge for a verdict, with bounded retries and a kind for every failure.

The judge is any server speaking ``/v1/chat/completions``: vLLM serve, a hosted API, or
``gymflow policy serve`` (any gymflow policy). Requests go through gymflow's ``openai`` backend
(:class:`gymflow.policy.openai_backend.OpenAIChatPolicy`: timeouts, retries of transport errors,
429 and 5xx, a kind for each failure), run on a fresh event loop per verdict because ``verify``
is synchronous and runs in a worker process (``heavy_verify``). A reply that is not a verdict is
asked again (a new seed) up to ``verdict_retries`` times. What cannot be had raises
:class:`JudgeFailure`, never a score.

Settings come from the process environment, because the resources server builds the
environment with no arguments in its verifier workers:

* ``GYMFLOW_JUDGE_URL`` — base URL up to ``/v1`` (required; no built-in judge is used silently);
* ``GYMFLOW_JUDGE_MODEL`` — model name sent to the server (default ``judge``);
* ``GYMFLOW_JUDGE_TIMEOUT_S`` (30), ``GYMFLOW_JUDGE_RETRIES`` (2: transport retries per
  request), ``GYMFLOW_JUDGE_VERDICT_RETRIES`` (1: new asks after a malformed verdict),
  ``GYMFLOW_JUDGE_MAX_TOKENS`` (256);
* ``GYMFLOW_JUDGE_API_KEY`` — bearer token, read from the environment only (never logged).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.sessions import RequestError
from gymflow.policy.base import ChatRequest
from gymflow.policy.openai_backend import OpenAIChatPolicy

URL_VARIABLE = "GYMFLOW_JUDGE_URL"
KEY_VARIABLE = "GYMFLOW_JUDGE_API_KEY"
NO_VERDICT_STATUS = 424
"""HTTP status of ``/verify`` when the judge gave no verdict ("failed dependency"). A 4xx, so
the env client passes the kind through instead of retrying: this module already retried."""

_POLICY_KIND = {
    FailureKind.TIMEOUT: FailureKind.JUDGE_TIMEOUT,
    FailureKind.POLICY_UNAVAILABLE: FailureKind.JUDGE_UNAVAILABLE,
    FailureKind.POLICY_ERROR: FailureKind.JUDGE_UNAVAILABLE,
}


class JudgeFailure(GymflowError, RequestError):
    """No verdict: a judge kind and what happened.

    A :class:`GymflowError` for callers of ``verify`` (the CLI prints its kind), and a
    :class:`RequestError` for the resources server, which answers it as status 424 with the kind
    in the body. Pickled with its kind, so it crosses the verifier's process pool intact.
    """

    def __init__(self, kind: FailureKind, message: str) -> None:
        GymflowError.__init__(self, kind, message)
        self.status, self.message = NO_VERDICT_STATUS, message

    def __reduce__(self):  # the base classes' args hold only the message: keep the kind too
        return (type(self), (self.kind, self.message))


@dataclass(frozen=True)
class JudgeSettings:
    url: str
    model: str = "judge"
    timeout_s: float = 30.0
    retries: int = 2
    verdict_retries: int = 1
    max_tokens: int = 256

    @classmethod
    def from_env(cls) -> JudgeSettings:
        """Read the ``GYMFLOW_JUDGE_*`` variables; :class:`JudgeFailure` when no URL is set."""
        url = os.environ.get(URL_VARIABLE, "").strip()
        if not url:
            raise JudgeFailure(
                FailureKind.JUDGE_NOT_CONFIGURED,
                f"the judge environment needs a judge: set {URL_VARIABLE} to an OpenAI-compatible "
                "base URL (e.g. http://127.0.0.1:8123/v1; `python -m gymflow.environments."
                "judge.reference_judge --port 8123` serves a deterministic one)",
            )
        env = os.environ
        try:
            return cls(
                url=url,
                model=env.get("GYMFLOW_JUDGE_MODEL", "judge"),
                timeout_s=float(env.get("GYMFLOW_JUDGE_TIMEOUT_S", 30)),
                retries=int(env.get("GYMFLOW_JUDGE_RETRIES", 2)),
                verdict_retries=int(env.get("GYMFLOW_JUDGE_VERDICT_RETRIES", 1)),
                max_tokens=int(env.get("GYMFLOW_JUDGE_MAX_TOKENS", 256)),
            )
        except ValueError as exc:
            raise JudgeFailure(
                FailureKind.JUDGE_NOT_CONFIGURED,
                f"a GYMFLOW_JUDGE_* setting is not a number: {exc}",
            ) from None


class HttpJudge:
    """``judge(messages, seed) -> reply text`` over HTTP; raises :class:`JudgeFailure`.

    Keeps one event loop and one connection pool for its life (a new HTTP client per verdict
    cost more than the reference judge's answer). Call it from a thread with no running event
    loop: the verifier's worker processes, a script, a test.
    """

    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = s = settings
        self.policy = OpenAIChatPolicy(
            s.url,
            s.model,
            api_key=os.environ.get(KEY_VARIABLE) or None,
            timeout_s=s.timeout_s,
            retries=s.retries,
            backoff_s=0.2,
            max_concurrency=1,
        )
        self._loop = asyncio.new_event_loop()

    def __call__(self, messages: list[dict], seed: int) -> str:
        s = self.settings
        request = ChatRequest(messages, None, s.max_tokens, 0.0, seed)
        (turn,) = self._loop.run_until_complete(self.policy.chat([request]))
        if turn.error is not None:
            kind = _POLICY_KIND.get(turn.error.kind, FailureKind.JUDGE_UNAVAILABLE)
            raise JudgeFailure(kind, f"judge at {s.url}: {turn.error.detail}")
        if not turn.finished:
            raise JudgeFailure(
                FailureKind.JUDGE_BAD_VERDICT,
                f"judge at {s.url} hit its {s.max_tokens}-token limit before ending its verdict",
            )
        return turn.text

    def close(self) -> None:
        self._loop.run_until_complete(self.policy.aclose())
        self._loop.close()
