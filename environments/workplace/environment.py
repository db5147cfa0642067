"""The workplace environment: WorkBench's office sandbox behind 27 tools, scored by outcome.

Tasks are the 690 real WorkBench requests (:mod:`gymflow.environments.workplace.workbench`)
and seeded synthetic ones (:mod:`gymflow.environments.workplace.generator`); ``generate(n,
seed)`` interleaves them (real first in a seeded order, until the 690 are used). Each session
gets a copy-on-write :class:`~gymflow.environments.workplace.sandbox.Sandbox`; the verifier
replays the gold calls and the episode's calls on fresh sandboxes and compares the outcomes.
"""

from __future__ import annotations

import random

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.env.environment import Environment, Probe, TaskDraft
from gymflow.environments.workplace import generator, verifier
from gymflow.environments.workplace.outcome import changes
from gymflow.environments.workplace.probes import probes_for
from gymflow.environments.workplace.sandbox import Sandbox
from gymflow.environments.workplace.tools import TOOLS
from gymflow.environments.workplace.workbench import (
    import_nemo_gym,
    import_workbench,
    prompt_for,
    truth_from_workbench,
    workbench_rows,
)

NO_CHANGE_ANSWER = "Nothing needs to change for this request, so I left everything as it is."


class WorkplaceEnvironment(Environment):
    name = "workplace"
    version = "1"
    max_turns = 16
    """Up to 12 gold calls, one per turn, then the answer; room for a few searches."""

    def tools(self):
        return list(TOOLS)

    def new_state(self, task: Task) -> Sandbox:
        return Sandbox()

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        rows = list(workbench_rows())
        random.Random(seed).shuffle(rows)
        n_real = min(len(rows), (n + 1) // 2)
        real = [(r["query"], truth_from_workbench(r)) for r in rows[:n_real]]
        synthetic = [(q, {"calls": c}) for q, c in generator.generate(n - n_real, seed)]
        drafts = []
        while real or synthetic:  # alternate real and synthetic while both last
            source = real if real and (len(drafts) % 2 == 0 or not synthetic) else synthetic
            query, truth = source.pop(0)
            drafts.append(TaskDraft(prompt_for(query), truth, seed))
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        return verifier.score(task.ground_truth, items)

    def gold_text(self, task: Task) -> str:
        """All gold calls in one turn (the one-turn view), or the answer if none is needed."""
        calls = task.ground_truth["calls"]
        if not calls:
            return NO_CHANGE_ANSWER
        return "".join(render_call(c["name"], c["arguments"]) for c in calls)

    def gold_turns(self, task: Task) -> list[str]:
        """One gold call per turn, then a plain answer."""
        calls = task.ground_truth["calls"]
        if not calls:
            return [NO_CHANGE_ANSWER]
        answer = f"Done: I made the {len(calls)} change(s) you asked for."
        return [*(render_call(c["name"], c["arguments"]) for c in calls), answer]

    def probes(self, task: Task) -> list[Probe]:
        calls = task.ground_truth["calls"]
        gold = verifier.gold_replay(calls)
        return probes_for(calls, changes(gold.sandbox) > 0)

    def importers(self):
        return {"workbench": import_workbench, "nemo_gym": import_nemo_gym}
