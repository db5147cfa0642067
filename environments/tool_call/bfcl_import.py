"""Read BFCL's files as ``bfcl-eval`` ships them into tool_call tasks (``--format bfcl``).

A question file (``bfcl_eval/data/BFCL_v4_simple_python.json``, JSON lines ``{id, question,
function}``) has its possible answers in ``possible_answer/<same name>`` beside it (``{id,
ground_truth}``); irrelevance files have none. Each row becomes a Task that keeps BFCL's id,
shows the function docs as tools (BFCL's type names turned into JSON schema, as BFCL's own
``GORILLA_TO_OPENAPI`` mapping does: ``dict``→object, ``float``→number, ``tuple``→array,
``any``→string) and carries ``{"bfcl": {category, functions, answer}}`` as ground truth, which
makes the verifier use :mod:`gymflow.environments.tool_call.bfcl`. Imported tasks are ``heldout``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path

from gymflow.core.failures import FailureKind
from gymflow.core.jsonl import InputFileError, read_jsonl
from gymflow.core.task_record import Task, content_hash
from gymflow.core.tool_calls import render_call
from gymflow.environments.tool_call.bfcl import CALL_CATEGORIES, CATEGORIES

JSON_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "any": "string",
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
}
NO_CALL_TEXT = "None of the available functions can do this."


class BfclImporter:
    """``--format bfcl``: ``for_file(path)`` loads the possible answers beside ``path``.

    Called on a row alone it has no answers, which is enough for irrelevance rows only.
    """

    def __call__(self, row: dict) -> Task:
        return import_row(row, {})

    def for_file(self, path: Path) -> Callable[[dict], Task]:
        answer_file = Path(path).parent / "possible_answer" / Path(path).name
        answers: dict[str, list] = {}
        if answer_file.is_file():
            for line, row in read_jsonl(answer_file):
                if not isinstance(row.get("id"), str) or not isinstance(
                    row.get("ground_truth"), list
                ):
                    raise InputFileError(
                        answer_file,
                        line,
                        "a possible answer needs a string 'id' and a list 'ground_truth'",
                        FailureKind.SCHEMA_VIOLATION,
                    )
                answers[row["id"]] = row["ground_truth"]
        return lambda row: import_row(row, answers, answer_file)


def category_of(task_id: str) -> str:
    """``live_simple_0-0-0`` → ``live_simple``; ``simple_python_12`` → ``simple_python``."""
    return re.sub(r"_\d+(-\d+)*$", "", task_id)


def import_row(row: dict, answers: dict[str, list], answer_file: Path | None = None) -> Task:
    task_id = row["id"]
    if not isinstance(task_id, str):
        raise TypeError("id must be a string")
    category = category_of(task_id)
    if category not in CATEGORIES:
        raise ValueError(
            f"BFCL category {category!r} is not supported (supported: {', '.join(CATEGORIES)})"
        )
    question, functions = row["question"], row["function"]
    if not isinstance(question, list) or len(question) != 1 or not isinstance(question[0], list):
        raise ValueError("question must hold exactly one turn (a list of messages)")
    if not isinstance(functions, list) or not all(isinstance(f, dict) for f in functions):
        raise TypeError("function must be a list of function docs")
    answer = None
    if category in CALL_CATEGORIES:
        if task_id not in answers:
            where = answer_file or "possible_answer/ (use for_file)"
            raise ValueError(f"no possible answer for {task_id!r} in {where}")
        answer = answers[task_id]
        names = {f["name"] for f in functions}
        missing = [name for call in answer for name in call if name not in names]
        if missing:
            raise ValueError(f"possible answer names unknown functions {missing}")
    truth = {"bfcl": {"category": category, "functions": functions, "answer": answer}}
    prompt = [dict(message) for message in question[0]]
    return Task(
        task_id=task_id,
        env="tool_call",
        split="heldout",
        prompt=prompt,
        tools=[tool_schema(f) for f in functions],
        ground_truth=truth,
        generator="bfcl-eval",
        seed=0,
        content_hash=content_hash(prompt, truth),
    )


def tool_schema(function: dict) -> dict:
    """A BFCL function doc as a chat-completions tool with JSON-schema parameters."""
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": function.get("description", ""),
            "parameters": json_schema(function["parameters"]),
        },
    }


def json_schema(node: dict) -> dict:
    """Rename BFCL's types everywhere in ``node`` (properties and items, any depth)."""
    out = copy.deepcopy(node)
    out["type"] = JSON_TYPES.get(out.get("type", "string"), "string")
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: json_schema(v) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = json_schema(out["items"])
    return out


def gold_text(case: dict) -> str:
    """The first allowed value of every parameter, as calls; plain text for no-call tasks."""
    if case["answer"] is None:
        return NO_CALL_TEXT
    docs = {doc["name"]: doc for doc in case["functions"]}
    text = ""
    for call in case["answer"]:
        ((name, allowed),) = call.items()
        props = docs[name]["parameters"]["properties"]
        args = {}
        for param, values in allowed.items():
            value = _first(values)
            if value is not _ABSENT:
                args[param] = _render(props.get(param, {}), value)
        text += render_call(name, args)
    return text


_ABSENT = object()


def _first(values: list) -> object:
    return next((v for v in values if v != ""), _ABSENT)


def _render(detail: dict, value: object) -> object:
    """A possible-answer value as a literal: dicts (and lists of dicts) hold alternatives."""
    if detail.get("type") == "dict" and isinstance(value, dict):
        return _render_dict(value)
    if detail.get("items", {}).get("type") == "dict" and isinstance(value, list):
        return [_render_dict(v) if isinstance(v, dict) else v for v in value]
    return value


def _render_dict(options: dict) -> dict:
    out = {}
    for key, values in options.items():
        value = _first(values)
        if value is not _ABSENT:
            out[key] = value
    return out
