"""The math verifier: a pure function from (ground truth, trajectory items) to a Score.

Reward is 1.0 when the final answer equals the gold answer (math-verify, see
:mod:`gymflow.environments.math.equivalence`) and 0.0 otherwise; every 0.0 carries a failure kind:

========================  ==============================================================
``no_answer``             no assistant text, or nothing to extract: no ``\\boxed{}``, no
                          ``####`` line, no number; or the last ``\\boxed{`` never closes
``answer_too_long``       the reply is over 32,000 characters or its answer over 200
``answer_uncheckable``    the answer uses a refused command (``\\binom``, ``\\sum`` ...), a
                          huge exact number (``9^{9^{9}}``), or its check ran out of CPU
``wrong_answer``          an answer was extracted and checked, and it is not the gold
``unknown_tool``          a tool call: this environment has no tools
``invalid_json``          malformed tool-call markup in the reply
========================  ==============================================================

"No extractable answer" is scored like a wrong answer (0.0, not a penalty below it): a
penalty would reward any boxed guess over an honest non-answer, and the kind keeps the two
apart in every report. Components (for metrics; the reward is ``correct`` alone):
``answer_found`` (an answer was extracted), ``boxed`` (it came from ``\\boxed{}``),
``correct``.

>>> item = {"type": "message", "role": "assistant", "content": "2 + 2 = \\\\boxed{4}"}
>>> score({"answer": "4"}, [item]).reward
1.0
"""

from __future__ import annotations

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_message
from gymflow.environments.math.equivalence import Uncheckable, equivalent
from gymflow.environments.math.extract import extract_answer


def score(ground_truth: dict, items: list[dict]) -> Score:
    """Score the last assistant turn in ``items`` (Responses-style) against the gold answer."""
    if any(it.get("type") == "function_call" for it in items):
        return _zero(FailureKind.UNKNOWN_TOOL, "a tool call; this environment has no tools")
    last = final_assistant_message(items)
    if last is None:
        return _zero(FailureKind.NO_ANSWER, "no assistant message")
    if last.get("parse_error"):
        return _zero(FailureKind.INVALID_JSON, str(last["parse_error"]))
    content = last.get("content")
    if not isinstance(content, str):
        return _zero(FailureKind.NO_ANSWER, "the assistant message has no text")
    found = extract_answer(content)
    if found.text is None:
        kind = FailureKind.ANSWER_TOO_LONG if found.problem == "too_long" else FailureKind.NO_ANSWER
        return _zero(kind, found.detail)
    comps = {"answer_found": 1.0, "boxed": float(found.source == "boxed"), "correct": 0.0}
    gold = str(ground_truth["answer"])
    try:
        correct = equivalent(gold, found.text)
    except Uncheckable as exc:
        return Score(0.0, False, FailureKind.ANSWER_UNCHECKABLE, comps, str(exc))
    if not correct:
        detail = f"{_short(found.text)} ({found.source}) is not {_short(gold)}"
        return Score(0.0, False, FailureKind.WRONG_ANSWER, comps, detail)
    return Score(1.0, True, None, {**comps, "correct": 1.0}, "")


def _zero(kind: FailureKind, detail: str) -> Score:
    comps = {"answer_found": 0.0, "boxed": 0.0, "correct": 0.0}
    return Score(0.0, False, kind, comps, detail)


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
