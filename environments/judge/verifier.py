"""Grade a reply with a judge: the pure part of the judge environment's verifier.

``grade(truth, items, judge, seed)`` takes the judge as a callable (messages, seed) -> reply
text, so it is tested without a server. The reply's final assistant message is the answer; an
empty one (or a turn that is only tool calls) scores 0 with ``no_answer`` and the judge is not
asked. Otherwise the judge's reply must be a verdict in the rubric's strict format
(:func:`gymflow.environments.judge.rubric.parse_verdict`); a malformed one is asked again with
the next seed, up to ``verdict_retries`` times.

No verdict is not a score of 0: when the judge cannot be reached, times out or keeps answering
garbage, the returned :class:`~gymflow.core.scoring.Score` carries a judge failure kind
(:data:`NO_VERDICT`) and ``components["judged"] == 0.0``; its ``reward`` field is only a
placeholder. :class:`gymflow.environments.judge.environment.JudgeEnvironment` never hands such
a score to a trainer: it raises instead (see its docstring).
"""

from __future__ import annotations

from collections.abc import Callable

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_text
from gymflow.environments.judge.judge_client import JudgeFailure
from gymflow.environments.judge.rubric import BadVerdict, Rubric, judge_messages, parse_verdict

Judge = Callable[[list[dict], int], str]

NO_VERDICT = frozenset(
    {
        FailureKind.JUDGE_NOT_CONFIGURED,
        FailureKind.JUDGE_UNAVAILABLE,
        FailureKind.JUDGE_TIMEOUT,
        FailureKind.JUDGE_BAD_VERDICT,
    }
)
"""Failure kinds that mean the judge gave no verdict: the episode has no reward at all."""


def grade(
    truth: dict, items: list[dict], judge: Judge, seed: int, verdict_retries: int = 1
) -> Score:
    """The judge's score / scale as reward; success only at the top of the scale."""
    answer = final_assistant_text(items).strip()
    if not answer:
        return Score(0.0, False, FailureKind.NO_ANSWER, {"judged": 0.0}, "empty answer")
    scale_max = Rubric.model_validate(truth["rubric"]).scale_max
    messages = judge_messages(truth, answer)
    problem = ""
    for attempt in range(verdict_retries + 1):
        try:
            reply = judge(messages, seed + attempt)
        except JudgeFailure as exc:
            return _no_verdict(exc.kind, exc.message)
        try:
            points, reason = parse_verdict(reply, scale_max)
        except BadVerdict as exc:
            problem = f"{exc} (reply: {reply[:120]!r})"
            continue
        comps = {"judged": 1.0, "judge_score": float(points)}
        if points == scale_max:
            return Score(1.0, True, None, comps, reason)
        return Score(points / scale_max, False, FailureKind.WRONG_ANSWER, comps, reason)
    return _no_verdict(
        FailureKind.JUDGE_BAD_VERDICT, f"no verdict in {verdict_retries + 1} asks; last: {problem}"
    )


def _no_verdict(kind: FailureKind, detail: str) -> Score:
    return Score(0.0, False, kind, {"judged": 0.0}, detail)
