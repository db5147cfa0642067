"""The measures of one evaluation, from its episode rows (:func:`gymflow.eval.evaluation.episode_row`).

:func:`measure` gives, for any set of rows (one environment, or several pooled), every figure
``gymflow eval`` reports, each with a 95 % interval where one applies:

* ``success`` (Wilson over episodes) and ``reward`` (mean over scored episodes) — the keys and
  meanings of :func:`~gymflow.eval.evaluation.summarize`, which this extends;
* ``pass_at``/``mean_at`` — with K samples per task, pass@k for k = 1, 2, 4, … K by the
  unbiased estimator (:func:`~gymflow.eval.stats.pass_at_k`) and mean@K (a task's mean success
  over its K samples), both averaged over tasks with an interval *across tasks*, so the K
  correlated samples of one task do not pass for K independent ones;
* ``well_formed`` (the environment's format check, :meth:`~gymflow.env.environment.Environment.well_formed`),
  ``right_tool`` and ``arg_accuracy`` (only where the verifier reports ``tool`` / ``args``
  components), ``tool_execution`` (episodes whose executed tool calls all ran without an error,
  among those that executed one), ``unsafe_rate``;
* ``turns``, ``tool_calls``, ``tokens`` (prompt + completion of the token view; for a message
  backend without one, of the usage its server reported), ``latency_p50``
  / ``latency_p95`` (seconds per episode, seed to verdict), and ``usage`` with ``cost_usd``
  where the backend reported token usage (``openai``) and prices were given;
* ``failure_buckets`` — per failure kind: its category (format, wrong tool, bad arguments,
  unsafe, incomplete, hallucinated tool, env error, timeout, policy error, wrong answer),
  count, share, and two example episodes (task, rollout id, answer excerpt, detail).
"""

from __future__ import annotations

from collections import defaultdict

from gymflow.core.failures import FailureKind as K
from gymflow.eval.evaluation import summarize
from gymflow.eval.stats import mean_ci, pass_at_k, percentile, wilson

CATEGORY = {
    **dict.fromkeys(
        [K.INVALID_JSON, K.NO_TOOL_CALL, K.MULTIPLE_CALLS, K.INVALID_TRAJECTORY, K.NO_ANSWER,
         K.ANSWER_TOO_LONG, K.SYNTAX_ERROR, K.MISSING_ENTRY_POINT],
        "format",
    ),
    K.WRONG_TOOL: "wrong tool",
    K.UNKNOWN_TOOL: "hallucinated tool",
    K.BAD_ARGUMENTS: "bad arguments",
    K.UNSAFE_ACTION: "unsafe",
    K.SANDBOX_VIOLATION: "unsafe",
    K.TRUNCATED: "incomplete",
    **dict.fromkeys([K.TIMEOUT, K.VERIFY_TIMEOUT, K.JUDGE_TIMEOUT], "timeout"),
    **dict.fromkeys(
        [K.POLICY_UNAVAILABLE, K.POLICY_ERROR, K.BACKEND_UNAVAILABLE, K.NO_TOKEN_VIEW],
        "policy error",
    ),
    **dict.fromkeys(
        [K.WRONG_ANSWER, K.TEST_FAILED, K.RUNTIME_ERROR, K.MEMORY_LIMIT, K.ANSWER_UNCHECKABLE],
        "wrong answer",
    ),
}  # fmt: skip
"""The issue's failure buckets by kind; any other kind (an env or server fault) is ``env error``."""

EXAMPLES_PER_KIND = 2


def category(kind: str) -> str:
    return CATEGORY.get(kind, "env error")  # type: ignore[call-overload]


def ks_for(samples: int) -> list[int]:
    """The k of pass@k reported for ``samples`` per task: 1, 2, 4, … and ``samples`` itself.

    >>> ks_for(1), ks_for(8), ks_for(5)
    ([1], [1, 2, 4, 8], [1, 2, 4, 5])
    """
    ks, k = [], 1
    while k < samples:
        ks.append(k)
        k *= 2
    return [*ks, samples]


def measure(rows: list[dict], prices: tuple[float, float] | None = None) -> dict:
    """Every figure of the module docstring for ``rows``; ``prices`` are USD per million
    prompt / completion tokens (cost is reported only with them and with usage)."""
    out = summarize(rows)
    n = len(rows)
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["env"], r["task_id"])].append(r)
    samples = min((len(g) for g in groups.values()), default=1)
    out |= {
        "n_tasks": len(groups),
        "samples": samples,
        "scored": sum(r["scored"] for r in rows),
        "pass_at": _pass_at(groups, samples),
        "mean_at": {str(samples): _ci_of([_mean(g, "success") for g in groups.values()])},
        "unsafe": _rate([r["unsafe"] for r in rows]),
        "right_tool": _rate([r["components"]["tool"] == 1.0 for r in rows if _has(r, "tool")]),
        "arg_accuracy": _ci_of([r["components"]["args"] for r in rows if _has(r, "args")]),
        "tool_execution": _rate([r["tool_errors"] == 0 for r in rows if r["tool_calls"]]),
        "turns": _mean(rows, "turns"),
        "tool_calls": _mean(rows, "tool_calls"),
        "tokens": sum(_tokens(r) for r in rows) / max(1, n),
        "model_tokens": _mean(rows, "model_tokens"),
        "latency_p50": percentile([r["latency_s"] for r in rows if r["scored"]], 50),
        "latency_p95": percentile([r["latency_s"] for r in rows if r["scored"]], 95),
        "usage": _usage(rows, prices),
        "failure_buckets": failure_buckets(rows),
    }
    return out


def failure_buckets(rows: list[dict]) -> list[dict]:
    """Failed episodes grouped by kind, most frequent first, two examples each."""
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if not r["success"]:
            by_kind[r["failure_kind"] or "unsuccessful"].append(r)
    buckets = []
    for kind, members in sorted(by_kind.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        buckets.append(
            {
                "kind": kind,
                "category": category(kind) if kind != "unsuccessful" else "below full reward",
                "count": len(members),
                "share": len(members) / max(1, len(rows)),
                "examples": [_example(r) for r in members[:EXAMPLES_PER_KIND]],
            }
        )
    return buckets


def _example(r: dict) -> dict:
    keys = ("env", "task_id", "sample_idx", "rollout_id", "reward", "answer", "failure_detail")
    return {k: r[k] for k in keys}


def _pass_at(groups: dict[tuple[str, str], list[dict]], samples: int) -> dict:
    out = {}
    for k in ks_for(samples):
        values = [pass_at_k(len(g), sum(r["success"] for r in g), k) for g in groups.values()]
        out[str(k)] = _ci_of(values)
    return out


def _rate(flags: list[bool]) -> dict | None:
    """A proportion with its Wilson interval; ``None`` when nothing applies."""
    if not flags:
        return None
    hits = sum(flags)
    return {"value": hits / len(flags), "ci95": list(wilson(hits, len(flags))), "n": len(flags)}


def _ci_of(values: list[float]) -> dict | None:
    """A mean with its normal interval clipped to the values' range; ``None`` for no values."""
    if not values:
        return None
    lo, hi = mean_ci(values)
    return {
        "value": sum(values) / len(values),
        "ci95": [max(lo, min(values)), min(hi, max(values))],
        "n": len(values),
    }


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / max(1, len(rows))


def _tokens(r: dict) -> int:
    """An episode's tokens: its token view, else the usage its server reported."""
    view = r["prompt_tokens"] + r["completion_tokens"]
    return view or r["usage_prompt_tokens"] + r["usage_completion_tokens"]


def _has(r: dict, component: str) -> bool:
    return r["scored"] and component in r["components"]


def _usage(rows: list[dict], prices: tuple[float, float] | None) -> dict | None:
    prompt = sum(r["usage_prompt_tokens"] for r in rows)
    completion = sum(r["usage_completion_tokens"] for r in rows)
    if not prompt and not completion:
        return None
    cost = None
    if prices is not None:
        cost = (prompt * prices[0] + completion * prices[1]) / 1e6
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost_usd": cost,
        "cost_usd_per_episode": cost / max(1, len(rows)) if cost is not None else None,
    }
