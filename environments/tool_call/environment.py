"""The tool_call environment: generator + verifier + probes on gymflow's Environment base."""

from __future__ import annotations

import json

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.env.environment import Environment, Probe, TaskDraft
from gymflow.environments.tool_call import bfcl, bfcl_import, generator, verifier
from gymflow.environments.tool_call.tools import TOOLS


class ToolCallEnvironment(Environment):
    name = "tool_call"
    version = "1"
    max_turns = 1

    def tools(self):
        return list(TOOLS)

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        drafts = []
        for row in generator.generate(n, seed):
            prompt = [{"role": "user", "content": row["request"]}]
            truth = {"tool": row["tool"], "arguments": row["arguments"]}
            drafts.append(TaskDraft(prompt=prompt, ground_truth=truth, seed=row["seed"]))
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        if "bfcl" in task.ground_truth:  # an imported BFCL task: BFCL's AST rules
            return bfcl.score(task.ground_truth["bfcl"], items)
        return verifier.score(task.ground_truth, items)

    def importers(self):
        return {"bfcl": bfcl_import.BfclImporter()}

    def gold_text(self, task: Task) -> str:
        if "bfcl" in task.ground_truth:
            return bfcl_import.gold_text(task.ground_truth["bfcl"])
        return render_call(task.ground_truth["tool"], task.ground_truth["arguments"])

    def probes(self, task: Task) -> list[Probe]:
        if "bfcl" in task.ground_truth:
            return _bfcl_probes(task.ground_truth["bfcl"])
        tool, args = task.ground_truth["tool"], dict(task.ground_truth["arguments"])
        gold = render_call(tool, args)
        first_key = next(iter(args))
        wrong = dict(args)
        value = wrong[first_key]
        wrong[first_key] = value + 1 if isinstance(value, int) else f"{value}x"
        stringly = {k: str(v) for k, v in args.items()}
        other_tool = next(t.__name__ for t in TOOLS if t.__name__ != tool)
        probes = [
            Probe("empty", "", -1.0),
            Probe("plain_text", "Sure, I can help with that.", -1.0),
            Probe("trailing_garbage", gold + '"}}', -1.0),
            Probe("unclosed_call", gold[: -len("</tool_call>")], -1.0),
            Probe("bare_json", json.dumps({"name": tool, "arguments": args}), -1.0),
            Probe("legacy_shape", f'<tool_call>{{"tool": "{tool}"}}</tool_call>', -1.0),
            Probe("repeated_call", gold + gold, -1.0),
            Probe("stuffed_calls", render_call(other_tool, {}) + gold, -1.0),
            Probe("no_arguments", render_call(tool, {}), 0.6),
            Probe("wrong_value", render_call(tool, wrong), 0.99),
            Probe("extra_argument", render_call(tool, {**args, "force": True}), 0.99),
            Probe("wrong_tool", render_call(other_tool, args), 0.2),
            Probe("unknown_tool", render_call("delete_everything", args), 0.2),
        ]
        if stringly != args:  # all-string gold arguments (get_weather, send_email) are the gold
            probes.append(Probe("string_typed_args", render_call(tool, stringly), 0.99))
        if tool == "send_email":
            leaked = {**args, "to": args["to"].replace("@acme.com", "@evil.example")}
            probes.append(Probe("outside_domain", render_call(tool, leaked), 0.79))
        return probes


def _bfcl_probes(case: dict) -> list[Probe]:
    """A few answers no BFCL task may reward: broken syntax, an unknown or unneeded call."""
    first = case["functions"][0]["name"]
    probes = [
        Probe("unclosed_call", render_call(first, {})[: -len("</tool_call>")], -1.0),
        Probe("unknown_tool", render_call("delete_everything", {}), 0.2),
    ]
    if case["answer"] is None:
        probes.append(Probe("unneeded_call", render_call(first, {}), 0.2))
    else:
        probes.append(Probe("plain_text", bfcl_import.NO_CALL_TEXT, -1.0))
    return probes
