"""Failure kinds: every non-success outcome carries one, so nothing hides as a silent reward 0.

A kind is a short stable string stored in rollout rows, eval rows and error messages. Model
mistakes (``invalid_json``, ``wrong_tool`` ...) are scored outcomes; infrastructure faults
(``env_unavailable``, ``timeout``) are raised as :class:`GymflowError` after bounded retries.
"""

from __future__ import annotations

from enum import StrEnum


class FailureKind(StrEnum):
    # model output problems (scored, never a crash)
    INVALID_JSON = "invalid_json"
    NO_TOOL_CALL = "no_tool_call"
    MULTIPLE_CALLS = "multiple_calls"
    UNKNOWN_TOOL = "unknown_tool"
    WRONG_TOOL = "wrong_tool"
    BAD_ARGUMENTS = "bad_arguments"
    UNSAFE_ACTION = "unsafe_action"
    TRUNCATED = "truncated"
    # request / infrastructure problems (raised or returned as errors with a kind)
    BAD_REQUEST = "bad_request"
    UNKNOWN_SESSION = "unknown_session"
    SESSION_CLOSED = "session_closed"
    SESSION_EXPIRED = "session_expired"
    SESSION_LIMIT = "session_limit"
    UNAUTHORIZED = "unauthorized"
    WRONG_WORKER = "wrong_worker"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    NOT_UTF8 = "not_utf8"
    TOOL_ERROR = "tool_error"
    ENV_UNAVAILABLE = "env_unavailable"
    TIMEOUT = "timeout"
    POLICY_UNAVAILABLE = "policy_unavailable"
    """The policy server could not be reached or kept failing (5xx, 429) after capped retries."""
    POLICY_ERROR = "policy_error"
    """The policy server answered, but not with a usable completion (4xx, not JSON, no choice)."""
    BACKEND_UNAVAILABLE = "backend_unavailable"
    """A policy backend was asked for whose package or hardware is missing (vllm without a GPU)."""
    NO_TOKEN_VIEW = "no_token_view"
    """Training was asked of episodes without token ids (a message-level backend)."""
    SCHEMA_VIOLATION = "schema_violation"
    CORRUPT_FILE = "corrupt_file"
    VERIFIER_NONDETERMINISTIC = "verifier_nondeterministic"
    PROBE_REWARDED = "probe_rewarded"
    INJECTED_FAILURE = "injected_failure"


class GymflowError(RuntimeError):
    """An error with a kind. The message says what went wrong and where, for a person."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(f"[{kind}] {message}")
        self.kind = kind
        self.detail = message
