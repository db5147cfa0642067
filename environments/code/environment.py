"""The code environment: write a Python function that passes hidden unit tests.

Single turn, no tools: the task shows a function's signature and docstring; the reply's last
```python block (or the whole reply) is the function. Tasks come from the seeded generator
(small functions a tiny model can learn) or from HumanEval (the ``humaneval`` importer and
:func:`gymflow.environments.code.humaneval.load_tasks`). Verification runs code, so it is heavy
(``heavy_verify``): the resources server runs it off the event loop, in a process pool.

The sandbox tier comes from ``GYMFLOW_CODE_ISOLATION`` (``auto``, ``bwrap``, ``unshare``,
``none``; default ``auto``, see :mod:`gymflow.environments.code.sandbox`). A host with neither
bubblewrap nor Landlock runs no answer unless ``GYMFLOW_CODE_INSECURE_SANDBOX=1``
(:mod:`gymflow.environments.code.kernel_layer`); :meth:`CodeEnvironment.preflight` says so
before a server starts.
"""

from __future__ import annotations

import os

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.env.environment import Environment, Probe, TaskDraft
from gymflow.environments.code import generator, humaneval, kernel_layer, probes, sandbox, verifier
from gymflow.environments.code.sandbox import Limits


class CodeEnvironment(Environment):
    name = "code"
    version = "1"
    max_turns = 1
    heavy_verify = True

    def __init__(self, isolation: str | None = None, limits: Limits | None = None) -> None:
        self.isolation = isolation or os.environ.get("GYMFLOW_CODE_ISOLATION", "auto")
        self.limits = limits or Limits()

    def tools(self):
        return []

    def preflight(self) -> None:
        """Raise ``env_unavailable`` (one line: what is missing, how to get it) when this host
        cannot sandbox answers: ``gymflow env serve code`` calls it before serving."""
        kernel_layer.require(sandbox.resolve(self.isolation))

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        drafts = []
        for fields in generator.generate(n, seed):
            prompt = [{"role": "user", "content": generator.user_message(fields["prompt"])}]
            drafts.append(TaskDraft(prompt, fields, seed))
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        return verifier.score(task.ground_truth, items, self.limits, self.isolation)

    def gold_text(self, task: Task) -> str:
        return f"```python\n{probes.gold_code(task.ground_truth)}```"

    def probes(self, task: Task) -> list[Probe]:
        return probes.probes_for(task)

    def importers(self):
        return {"humaneval": lambda row: humaneval.task_from_row(row, self.tool_schemas)}
