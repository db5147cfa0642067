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
    INVALID_TRAJECTORY = "invalid_trajectory"
    """Trajectory items not of the Responses shape a verifier reads (sent by a client)."""
    # code answers (environments/code): how a program failed its hidden tests
    SYNTAX_ERROR = "syntax_error"
    MISSING_ENTRY_POINT = "missing_entry_point"
    RUNTIME_ERROR = "runtime_error"
    TEST_FAILED = "test_failed"
    MEMORY_LIMIT = "memory_limit"
    SANDBOX_VIOLATION = "sandbox_violation"
    # request / infrastructure problems (raised or returned as errors with a kind)
    BAD_REQUEST = "bad_request"
    UNKNOWN_TASK = "unknown_task"
    """A response names a task the tasks file does not hold (``gymflow verify``): unscored."""
    UNKNOWN_SESSION = "unknown_session"
    SESSION_CLOSED = "session_closed"
    SESSION_EXPIRED = "session_expired"
    SESSION_LIMIT = "session_limit"
    SESSION_EXISTS = "session_exists"
    """A client-chosen session id that is live or was used before."""
    UNAUTHORIZED = "unauthorized"
    WRONG_WORKER = "wrong_worker"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    NOT_UTF8 = "not_utf8"
    TOOL_ERROR = "tool_error"
    VERIFIER_ERROR = "verifier_error"
    """The verifier raised on a well-formed trajectory: a bug in the environment, not retried."""
    VERIFY_TIMEOUT = "verify_timeout"
    """The verifier did not answer within the server's per-call limit."""
    INTERNAL_ERROR = "internal_error"
    """A server bug: the request was well-formed and still failed (reported, not retried)."""
    DISK_FULL = "disk_full"
    """No space left on the device a file was being written to."""
    ENV_UNAVAILABLE = "env_unavailable"
    AGENT_UNAVAILABLE = "agent_unavailable"
    """An agent server or capturing proxy could not be reached or kept failing (capped retries)."""
    TIMEOUT = "timeout"
    TRACKING_UNAVAILABLE = "tracking_unavailable"
    """The MLflow tracking server named by MLFLOW_TRACKING_URI (or tracking.uri) does not answer."""
    ORCHESTRATOR_UNAVAILABLE = "orchestrator_unavailable"
    """The Prefect server named by PREFECT_API_URL does not answer, or refuses its auth string."""
    VERSION_MISMATCH = "version_mismatch"
    """A server runs another major.minor release of MLflow or Prefect than this machine's client."""
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
    BAD_CONFIG = "bad_config"
    """A run configuration with an unknown key, a value out of range, or a file that is not JSON."""
    UNUSABLE_CHECKPOINT = "unusable_checkpoint"
    """A model folder gymflow cannot drive: no chat template, no EOS, or a foreign tool-call format."""
    VERIFIER_NONDETERMINISTIC = "verifier_nondeterministic"
    PROBE_REWARDED = "probe_rewarded"
    GOLD_REJECTED = "gold_rejected"
    """The verifier scores a task's gold answer below its top: the verifier or the task is wrong."""
    VERIFIER_DRIFT = "verifier_drift"
    """The verifier changed since the champion was gated and flips its stored verdicts."""
    DATA_LEAKAGE = "data_leakage"
    """A held-out task, or a near-duplicate of one, is in the data a policy would train on."""
    INJECTED_FAILURE = "injected_failure"
    FOLDER_BUSY = "folder_busy"
    """Another process holds the folder's writer lock (two collectors into one folder)."""
    STAGE_ABANDONED = "stage_abandoned"
    """A stage running beside another stopped because that one failed (the SFT control)."""
    START_NOT_LEARNABLE = "start_not_learnable"
    """GRPO's preflight found the start outside the learnable band and was told to refuse."""
    # answers graded against a reference (environments/judge, environments/reasoning_gym)
    NO_ANSWER = "no_answer"
    """The reply holds no answer to grade (empty, or not in the answer format asked for)."""
    WRONG_ANSWER = "wrong_answer"
    """An answer was graded and scored below the top (partial credit may still be given)."""
    ANSWER_TOO_LONG = "answer_too_long"
    """The reply or its extracted answer is over the verifier's size cap (environments/math)."""
    ANSWER_UNCHECKABLE = "answer_uncheckable"
    """The answer needs what the checker refuses to evaluate, or over its CPU budget (math)."""
    # an LLM judge as the verifier (environments/judge): no verdict, so no reward either
    JUDGE_NOT_CONFIGURED = "judge_not_configured"
    """No judge endpoint is set (GYMFLOW_JUDGE_URL)."""
    JUDGE_UNAVAILABLE = "judge_unavailable"
    """The judge server could not be reached or kept failing (5xx, 4xx) after capped retries."""
    JUDGE_TIMEOUT = "judge_timeout"
    """The judge did not answer within its timeout, after capped retries."""
    JUDGE_BAD_VERDICT = "judge_bad_verdict"
    """The judge answered, but not with a verdict in the asked format or in the score range."""
    # a third-party scorer this project wraps (environments/reasoning_gym)
    SCORER_REFUSED = "scorer_refused"
    """A task family whose scorer failed its self-check (rewards garbage, lacks answers)."""


class GymflowError(RuntimeError):
    """An error with a kind. The message says what went wrong and where, for a person."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(f"[{kind}] {message}")
        self.kind = kind
        self.detail = message

    def __reduce__(self):  # picklable, so it crosses from a verify worker process as itself
        return (type(self), (self.kind, self.detail))
