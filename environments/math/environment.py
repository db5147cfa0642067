"""The math environment: one question, one reply, its final answer checked with math-verify.

Tasks: seeded arithmetic and simple algebra (:mod:`gymflow.environments.math.generator`, what
``generate`` returns, for training), and the evaluation sets GSM8K test and MATH-500
(:mod:`gymflow.environments.math.loaders`, ``heldout``, ids kept; also ``gymflow verify`` formats).
The verifier (:mod:`gymflow.environments.math.verifier`) is pure and CPU-heavy (sympy), so the
resources server runs it in a process pool (``heavy_verify``).
"""

from __future__ import annotations

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment, Probe, TaskDraft
from gymflow.environments.math import generator, loaders, verifier
from gymflow.environments.math.probes import probes_for


class MathEnvironment(Environment):
    name = "math"
    version = "1"
    max_turns = 1
    heavy_verify = True

    def tools(self):
        return []

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        drafts = []
        for problem in generator.generate(n, seed):
            truth = {
                "answer": problem.answer,
                "solution": problem.solution,
                "source": "generated",
                "level": problem.level,
            }
            drafts.append(TaskDraft(loaders.prompt_for(problem.question), truth, seed))
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        return verifier.score(task.ground_truth, items)

    def gold_text(self, task: Task) -> str:
        return task.ground_truth["solution"]

    def probes(self, task: Task) -> list[Probe]:
        return probes_for(task.ground_truth["answer"])

    def importers(self):
        return dict(loaders.IMPORTERS)
