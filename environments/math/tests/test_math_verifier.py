"""math: the verifier's verdicts and kinds, its bounds, and that it runs in threads and workers."""

from __future__ import annotations

import contextlib
import doctest
import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from gymflow.core.failures import FailureKind
from gymflow.core.trajectory import assistant_items
from gymflow.data.task_set import build_tasks
from gymflow.environments.math import MathEnvironment, deadline, equivalence, guards, verifier
from gymflow.environments.math.deadline import DeadlineExceeded, call_with_cpu_limit
from gymflow.environments.math.verifier import score


def _reply(text: str) -> list[dict]:
    return assistant_items(text, 0)


@pytest.mark.parametrize(
    ("gold", "reply"),
    [
        ("18", "She makes \\boxed{18} dollars."),
        ("18", "\\boxed{\\$18.00}"),
        ("18", "\\boxed{18 \\text{ dollars}}"),
        ("1000", "\\boxed{1,000}"),
        ("18", "so 9 * 2 = 18\n#### 18"),
        ("18", "The answer is 18."),
        ("\\frac{1}{2}", "\\boxed{0.5}"),
        ("\\frac{1}{2}", "\\boxed{\\dfrac12}"),
        ("5", "\\boxed{x = 5}"),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\boxed{(3, \\pi/2)}"),
        ("90^\\circ", "\\boxed{90}"),
        ("\\text{Evelyn}", "\\boxed{\\text{Evelyn}}"),
        ("x^3+3x-6", "\\boxed{-6 + 3x + x^3}"),
        ("[-2,7]", "\\boxed{[-2, 7]}"),
        (
            "\\begin{pmatrix} -1 \\\\ 2 \\end{pmatrix}",
            "\\boxed{\\begin{pmatrix}-1\\\\2\\end{pmatrix}}",
        ),
    ],
)
def test_equal_forms_score_one(gold, reply):
    s = score({"answer": gold}, _reply(reply))
    assert (s.reward, s.success, s.failure_kind) == (1.0, True, None), s.detail
    assert s.components["correct"] == 1.0


@pytest.mark.parametrize(
    ("gold", "reply", "kind"),
    [
        ("18", "\\boxed{17}", FailureKind.WRONG_ANSWER),
        ("18", "\\boxed{18} no wait \\boxed{19}", FailureKind.WRONG_ANSWER),
        ("5", "\\boxed{1, 2, 3, 4, 5}", FailureKind.WRONG_ANSWER),
        ("5", "\\boxed{5 \\text{ or } 7}", FailureKind.WRONG_ANSWER),
        ("\\frac{1}{2}", "\\boxed{0.49}", FailureKind.WRONG_ANSWER),
        ("18", "I could not solve it.", FailureKind.NO_ANSWER),
        ("18", "", FailureKind.NO_ANSWER),
        ("18", "\\boxed{18} and \\boxed{18", FailureKind.NO_ANSWER),
        ("18", "x" * 40_000 + "\\boxed{18}", FailureKind.ANSWER_TOO_LONG),
        ("18", "\\boxed{18" + " + 0" * 60 + "}", FailureKind.ANSWER_TOO_LONG),
        ("120", "\\boxed{\\binom{10}{3}}", FailureKind.ANSWER_UNCHECKABLE),
        ("5", "\\boxed{\\sum_{i=1}^{10^{9}} i}", FailureKind.ANSWER_UNCHECKABLE),
        ("5", "\\boxed{9^{9^{9}}}", FailureKind.ANSWER_UNCHECKABLE),
        ("5", "\\boxed{100000!}", FailureKind.ANSWER_UNCHECKABLE),
        ("5", "\\boxed{2^{6000}}", FailureKind.ANSWER_UNCHECKABLE),
        ("5", "\\boxed{(x+1)^{100000}}", FailureKind.ANSWER_UNCHECKABLE),
        ("5", '<tool_call>{"name": "calc", "arguments": {}}</tool_call>', FailureKind.UNKNOWN_TOOL),
        ("5", "<tool_call>\\boxed{5}", FailureKind.INVALID_JSON),
    ],
)
def test_failures_score_zero_with_their_kind(gold, reply, kind):
    s = score({"answer": gold}, _reply(reply))
    assert (s.reward, s.success, s.failure_kind) == (0.0, False, kind)
    assert s.detail


def test_components_tell_format_from_correctness():
    assert score({"answer": "4"}, _reply("\\boxed{5}")).components == {
        "answer_found": 1.0,
        "boxed": 1.0,
        "correct": 0.0,
    }
    assert score({"answer": "4"}, _reply("it is 4")).components["boxed"] == 0.0
    assert score({"answer": "4"}, _reply("")).components["answer_found"] == 0.0


def test_no_assistant_message_is_no_answer():
    prompt = [{"type": "message", "role": "user", "content": "What is 2 + 2?"}]
    assert score({"answer": "4"}, prompt).failure_kind == FailureKind.NO_ANSWER


def test_a_slow_answer_is_stopped_by_the_cpu_limit(monkeypatch):
    """~160 s of sympy simplify without the limit; refused once it has used the limit."""
    monkeypatch.setattr(equivalence, "CPU_LIMIT_S", 0.5)  # 2.0 s in use; the same mechanism
    slow = "\\boxed{(1+\\sqrt{2}+\\sqrt{3}+\\sqrt{5}+\\sqrt{7})^{64}}"
    start = time.thread_time()
    s = score({"answer": "5"}, _reply(slow))
    used = time.thread_time() - start
    assert s.failure_kind == FailureKind.ANSWER_UNCHECKABLE and "0.5 s of CPU" in s.detail
    assert 0.5 <= used < 1.5


def test_cpu_limit_in_a_thread_and_no_stray_raise_after_return():
    def spin(seconds: float):
        def run() -> str:
            t = time.thread_time()
            while time.thread_time() - t < seconds:
                pass
            return "done"

        return run

    outcome: dict[str, object] = {}

    def worker() -> None:
        try:
            call_with_cpu_limit(spin(5.0), 0.1)
        except DeadlineExceeded as exc:
            outcome["raised"] = str(exc)
        stray = 0
        for _ in range(60):  # calls that end right about their budget
            try:
                with contextlib.suppress(DeadlineExceeded):
                    call_with_cpu_limit(spin(0.01), 0.01)
                sum(range(20_000))  # a raise that escaped would land here
            except DeadlineExceeded:
                stray += 1
        outcome["stray"] = stray

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=30)
    assert outcome == {"raised": "over 0.1 s of CPU time", "stray": 0}
    assert call_with_cpu_limit(spin(0.01), 1.0) == "done"


def _gold_and_probe_rewards(n: int) -> list[tuple[float, float]]:
    env = MathEnvironment()
    out = []
    for task in build_tasks(env, n, seed=3, heldout_frac=0.0, val_frac=0.0):
        gold = env.verify(task, _reply(env.gold_text(task))).reward
        wrong = env.verify(task, _reply(env.probes(task)[2].text)).reward  # wrong_answer
        out.append((gold, wrong))
    return out


def test_verify_from_a_thread_and_a_spawned_worker_process():
    expected = [(1.0, 0.0)] * 10
    results: list = []
    thread = threading.Thread(target=lambda: results.append(_gold_and_probe_rewards(10)))
    thread.start()
    thread.join(timeout=60)
    assert results == [expected]
    spawn = multiprocessing.get_context("spawn")  # as the resources server's VerifyPool does
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        assert pool.submit(_gold_and_probe_rewards, 10).result(timeout=120) == expected


def test_verify_is_deterministic():
    env = MathEnvironment()
    (task,) = build_tasks(env, 1, seed=4, heldout_frac=0.0, val_frac=0.0)
    for probe in env.probes(task):
        first, second = (env.verify(task, _reply(probe.text)).to_dict() for _ in range(2))
        assert first == second


@pytest.mark.parametrize("module", [verifier, guards, equivalence, deadline])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0
