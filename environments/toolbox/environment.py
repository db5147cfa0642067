"""The toolbox environment: generator + BFCL-rule verifier + probes on gymflow's base.

Unlike ``tool_call`` (five fixed tools, one call), each task carries its own toolbox
(``Task.tools``), so the environment's own tool list is empty and ``GET /tools`` shows none.
"""

from __future__ import annotations

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import parse_assistant_text, render_call
from gymflow.env.environment import Environment, Probe, TaskDraft
from gymflow.environments.tool_call.bfcl_import import gold_text, tool_schema
from gymflow.environments.toolbox import generator, verifier

TRUTH_KEYS = ("category", "functions", "answer", "level", "family", "source")


class ToolboxEnvironment(Environment):
    name = "toolbox"
    version = "1"
    max_turns = 1

    def tools(self):
        return []  # every task shows its own toolbox

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        drafts = []
        for row in generator.generate(n, seed):
            truth = {key: row[key] for key in TRUTH_KEYS}
            drafts.append(
                TaskDraft(
                    prompt=[{"role": "user", "content": row["request"]}],
                    ground_truth=truth,
                    seed=seed,
                    tools=[tool_schema(doc) for doc in row["functions"]],
                    split="heldout" if row["source"] == "unseen" else None,
                )
            )
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        return verifier.score(task.ground_truth, items)

    def gold_text(self, task: Task) -> str:
        return gold_text(task.ground_truth)

    def probes(self, task: Task) -> list[Probe]:
        truth = task.ground_truth
        first = truth["functions"][0]["name"]
        probes = [
            Probe("empty", "", -1.0),
            Probe("unclosed_call", render_call(first, {})[: -len("</tool_call>")], -1.0),
            Probe("unknown_tool", render_call("delete_everything", {}), 0.2),
        ]
        if truth["answer"] is None:
            return [*probes, Probe("unneeded_call", render_call(first, {}), 0.2)]
        gold = self.gold_text(task)
        calls = parse_assistant_text(gold).calls
        name, args = calls[0]
        key = next(iter(args))
        wrong = {**args, key: _changed(args[key])}
        probes += [
            Probe("plain_text", "Sure, I can help with that.", -1.0),
            Probe("trailing_garbage", gold + '"}}', -1.0),
            Probe("extra_call", gold + render_call(name, args), 0.2),
            Probe("wrong_value", gold.replace(render_call(name, args), render_call(name, wrong), 1), 0.99),
            Probe("extra_argument", gold.replace(render_call(name, args), render_call(name, {**args, "force": True}), 1), 0.99),
        ]  # fmt: skip
        if len(calls) > 1:
            probes.append(Probe("one_call_short", render_call(name, args), 0.2))
        return probes


def _changed(value: object) -> object:
    """A value of the same type that differs from ``value`` (a nested one at its first key)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, list):
        return [*value, "zzz"]
    if isinstance(value, dict):
        key = next(iter(value))
        return {**value, key: _changed(value[key])}
    return f"{value}zzz"
