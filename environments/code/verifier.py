"""The code verifier: the reply's function against the task's hidden tests, in the sandbox.

Reward 1.0 iff every test passes, else 0.0. HumanEval tests are one ``check`` function whose
asserts stop at the first failure, so a "fraction of tests passed" does not exist for them;
all-or-nothing also leaves nothing to farm. Every 0 carries a failure kind:
``missing_entry_point`` (no code, or no function of that name), ``syntax_error``,
``runtime_error`` (an exception, an early exit, a non-plain return value), ``test_failed``,
``timeout`` (CPU or wall clock), ``memory_limit``, ``sandbox_violation`` (a refused operation,
even one the code caught), ``payload_too_large``. A sandbox that cannot start raises
(``env_unavailable``): an infrastructure fault is never scored as the answer's failure.
"""

from __future__ import annotations

from dataclasses import replace

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_text
from gymflow.environments.code.answer import assemble, extract_code
from gymflow.environments.code.execution import Program, run_program
from gymflow.environments.code.sandbox import Limits


def score(truth: dict, items: list[dict], limits: Limits, isolation: str = "auto") -> Score:
    """Score the episode ``items`` against ``truth`` (HumanEval fields, optional ``cpu_s``)."""
    code = extract_code(final_assistant_text(items))
    if not code.strip():
        return _failed(FailureKind.MISSING_ENTRY_POINT, "the answer holds no code")
    entry_point = truth["entry_point"]
    program = Program(
        code=assemble(truth["prompt"], code, entry_point),
        setup=truth["prompt"],
        test=truth["test"],
        entry_point=entry_point,
    )
    limits = replace(limits, cpu_s=int(truth.get("cpu_s", limits.cpu_s)))
    outcome = run_program(program, limits, isolation)
    if outcome.verdict == "passed":
        return Score(1.0, True, None, {"tests": 1.0}, "")
    return _failed(FailureKind(outcome.verdict), outcome.detail)


def _failed(kind: FailureKind, detail: str) -> Score:
    return Score(0.0, False, kind, {"tests": 0.0}, detail)
