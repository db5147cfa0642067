"""OpenAI function schemas and strict argument validation derived from typed Python callables.

A tool is a plain function (or method) with type hints and a Google-style docstring. pydantic
turns the signature into a model, which gives both the JSON schema served at ``GET /tools`` and
strict validation of the arguments a model produced (``"5"`` is not an ``int``; unknown
arguments are refused). transformers has ``get_json_schema`` too, but importing transformers in
an environment server costs seconds; pydantic is already loaded by FastAPI.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

_ARG_LINE = re.compile(r"^\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")
_SECTION = re.compile(r"^(Args|Arguments|Returns|Raises|Yields|Examples?|Notes?):\s*$")


@dataclass(frozen=True)
class ToolSpec:
    """A callable with its derived argument model and OpenAI function schema."""

    name: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    schema: dict

    def validate(self, arguments: dict) -> dict:
        """Strictly validate ``arguments``; returns them with defaults filled in.

        Raises ``ValueError`` with one line per problem (pydantic's messages).
        """
        try:
            return self.args_model.model_validate(arguments, strict=True).model_dump()
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ValueError(problems) from None


def tool_spec(fn: Callable[..., Any], skip: tuple[str, ...] = ("self", "session")) -> ToolSpec:
    """Derive a :class:`ToolSpec` from ``fn``'s signature, type hints and docstring."""
    hints = get_type_hints(fn)
    doc = inspect.getdoc(fn) or ""
    summary, arg_docs = _parse_docstring(doc)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if pname in skip:
            continue
        if pname not in hints:
            raise TypeError(f"tool {fn.__name__}: argument {pname!r} has no type hint")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints[pname], default)
    model = create_model(  # type: ignore[call-overload]
        f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    params = model.model_json_schema()
    params.pop("title", None)
    for pname, prop in params.get("properties", {}).items():
        prop.pop("title", None)
        if arg_docs.get(pname):
            prop["description"] = arg_docs[pname]
    params.setdefault("required", [])
    schema = {
        "type": "function",
        "function": {"name": fn.__name__, "description": summary, "parameters": params},
    }
    return ToolSpec(name=fn.__name__, fn=fn, args_model=model, schema=schema)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Summary (first paragraph, up to a section header) and per-argument descriptions.

    An argument's description may continue on lines indented deeper than its name.
    """
    summary_lines: list[str] = []
    for line in doc.splitlines():
        if not line.strip() or _SECTION.match(line):
            break
        summary_lines.append(line.strip())
    arg_docs: dict[str, str] = {}
    in_args = False
    arg_indent = -1
    current: str | None = None
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:"):
            in_args, arg_indent, current = True, -1, None
            continue
        if not in_args or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_args = False
            continue
        if current is not None and arg_indent >= 0 and indent > arg_indent:
            arg_docs[current] = f"{arg_docs[current]} {line.strip()}".strip()
            continue
        match = _ARG_LINE.match(line)
        if match:
            current, arg_indent = match.group(1), indent
            arg_docs[current] = match.group(2).strip()
    return " ".join(summary_lines), arg_docs
