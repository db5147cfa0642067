"""The counter environment: add numbers to a per-session counter, then read it back.

A request like "add 1 then add 2 then get the count" is done with the tools
``increment_counter(count)`` and ``get_counter_value()`` over several turns, then a final
answer with the number. The counter lives in the session (seeded from the task's
``initial_count``), so concurrent episodes never see each other's counts.

Verification is by outcome and pure: the verifier replays the episode's successful tool calls
on a fresh counter and compares the result with ``expected_count`` (the NeMo Gym reward: 1 iff
the counter ends at the expected value); the final answer must also state that value.

NeMo Gym's own task rows (``responses_create_params`` + ``initial_count`` + ``expected_count``,
as in its ``example_session_state_mgmt/data/example.jsonl``) are read unchanged by the
``nemo_gym`` importer: ``gymflow verify --env counter --format nemo_gym``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.core.trajectory import final_assistant_message, final_assistant_text
from gymflow.data.nemo_gym import nemo_task
from gymflow.env.environment import Environment, Probe, TaskDraft


class Counter:
    def __init__(self, value: int) -> None:
        self.value = value


def increment_counter(session: Counter, count: int) -> dict:
    """Add to the counter.

    Args:
        count: The amount to add.
    """
    session.value += count
    return {"count": session.value}


def get_counter_value(session: Counter) -> dict:
    """Read the counter."""
    return {"count": session.value}


class CounterEnvironment(Environment):
    name = "counter"
    version = "1"
    max_turns = 4
    reward_range = (0.0, 1.0)

    def tools(self):
        return [increment_counter, get_counter_value]

    def new_state(self, task: Task) -> Counter:
        return Counter(int(task.ground_truth["initial_count"]))

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        rng = random.Random(seed)
        drafts = []
        for _ in range(n):
            a, b, start = rng.randint(1, 9), rng.randint(1, 9), rng.randint(0, 9)
            prompt = [{"role": "user", "content": f"add {a} then add {b} then get the count"}]
            truth = {"initial_count": start, "increments": [a, b], "expected_count": start + a + b}
            drafts.append(TaskDraft(prompt, truth, seed))
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        return score(task.ground_truth, items)

    def gold_text(self, task: Task) -> str:
        return str(task.ground_truth["expected_count"])

    def gold_turns(self, task: Task) -> list[str]:
        """The texts of a perfect episode, turn by turn (calls, then the answer)."""
        calls = [render_call("increment_counter", {"count": c}) for c in _increments(task)]
        return [*calls, render_call("get_counter_value", {}), self.gold_text(task)]

    def importers(self) -> dict[str, Callable[[dict], Task]]:
        return {"nemo_gym": self.import_nemo_gym}

    def import_nemo_gym(self, row: dict) -> Task:
        """A NeMo Gym counter row, unchanged: ``initial_count`` and ``expected_count`` (ints).

        Its rows have no id, so the id is ``counter-<content hash[:12]>`` of (prompt, those two
        fields): stable across files and line order, as for generated tasks.
        """
        truth = {}
        for key in ("initial_count", "expected_count"):
            if type(row[key]) is not int:
                raise TypeError(f"{key} must be an integer, got {row[key]!r}")
            truth[key] = row[key]
        return nemo_task(row, self, truth)

    def probes(self, task: Task) -> list[Probe]:
        expected = task.ground_truth["expected_count"]
        return [
            Probe("answer_without_calls", str(expected), 0.0),
            Probe("empty", "", 0.0),
            Probe("off_by_one", str(expected + 1), 0.0),
        ]


def score(truth: dict, items: list[dict]) -> Score:
    """Replay the calls whose outputs were not errors; reward 1 iff count and answer match."""
    value = int(truth["initial_count"])
    outputs = {
        it.get("call_id"): it.get("output")
        for it in items
        if it.get("type") == "function_call_output"
    }
    for it in items:
        if it.get("type") != "function_call" or it.get("name") != "increment_counter":
            continue
        if _is_error(outputs.get(it.get("call_id"))):
            continue
        try:
            count = json.loads(it["arguments"]).get("count")
        except (json.JSONDecodeError, AttributeError, TypeError):
            continue
        if type(count) is int:
            value += count
    message = final_assistant_message(items)
    answer = final_assistant_text(items).strip()
    state_ok = value == truth["expected_count"]
    answer_ok = answer == str(truth["expected_count"])
    comps = {"state": float(state_ok), "answer": float(answer_ok)}
    if message is not None and message.get("parse_error"):
        return Score(0.0, False, FailureKind.INVALID_JSON, comps, message["parse_error"])
    if not state_ok:
        return Score(0.0, False, FailureKind.BAD_ARGUMENTS, comps, f"counter ends at {value}")
    if not answer_ok:
        return Score(
            0.0,
            False,
            FailureKind.NO_TOOL_CALL if message is None else FailureKind.BAD_ARGUMENTS,
            comps,
            "wrong final answer",
        )
    return Score(1.0, True, None, comps, "")


def _increments(task: Task) -> list[int]:
    """The additions a perfect episode makes.

    Generated tasks list them; NeMo Gym rows do not, so they are read from the request ("add 1
    then add 2") when they add up to the expected count, else one call adds the difference
    (the reward is the final count either way).
    """
    truth = task.ground_truth
    if "increments" in truth:
        return list(truth["increments"])
    need = truth["expected_count"] - truth["initial_count"]
    request = " ".join(m["content"] for m in task.prompt if m["role"] == "user")
    asked = [int(n) for n in re.findall(r"\badd (-?\d+)", request)]
    return asked if asked and sum(asked) == need else [need]


def _is_error(output: str | None) -> bool:
    if output is None:
        return True
    try:
        return isinstance(json.loads(output), dict) and "error" in json.loads(output)
    except json.JSONDecodeError:
        return True
