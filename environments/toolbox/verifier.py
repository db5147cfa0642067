"""The toolbox verifier: BFCL's rules (:mod:`gymflow.environments.tool_call.bfcl`) on
generated tasks, with one rule of its own: declining takes words.

BFCL counts any answer without a call as a correct refusal, an empty one included; a policy
trained on that reward could learn to say nothing whenever unsure. Here an empty reply is
``no_answer`` at −1 on every task. Everything else is BFCL's verdict and this project's reward
scale: −1 for a malformed answer, a missing call, or several calls where one is due; else
+0.4 when the called tools are the expected ones, +0.4 × the share of expected calls matched
(any order), +0.2; success only for BFCL's "valid".

>>> truth = {"category": "irrelevance", "functions": [], "answer": None}
>>> score(truth, [{"type": "message", "role": "assistant", "content": ""}]).failure_kind
<FailureKind.NO_ANSWER: 'no_answer'>
>>> score(truth, [{"type": "message", "role": "assistant", "content": "No tool does that."}]).success
True
"""

from __future__ import annotations

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.environments.tool_call import bfcl
from gymflow.environments.tool_call.verifier import assistant_outputs, format_failure


def score(ground_truth: dict, items: list[dict]) -> Score:
    """Score the assistant's output ``items`` (Responses-style) against a toolbox task."""
    outputs, failure = assistant_outputs(items)
    if failure:
        return failure
    calls = [it for it in outputs if it.get("type") == "function_call"]
    said = "".join(str(it.get("content") or "") for it in outputs if it.get("type") == "message")
    if not calls and not said.strip():
        return format_failure(FailureKind.NO_ANSWER, "an empty reply")
    return bfcl.score(ground_truth, items)
