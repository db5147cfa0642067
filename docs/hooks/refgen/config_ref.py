"""The configuration reference: every field of ``LifecycleConfig`` and of the models nested in
it, with its type, default, allowed range and description, read from the pydantic models."""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass, replace

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from refgen import cell, code, table

_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "length ≥",
           "max_length": "length ≤"}  # fmt: skip


REQUIRED = "(required)"
"""The default of a field that has none: the config must set it."""


@dataclass(frozen=True)
class ConfigField:
    """One field, named by its dotted path (``grpo.task_pool.failed_share``)."""

    path: str
    type: str
    default: str
    range: str
    description: str
    section: bool  # a nested model: its fields follow under its path


def _nested_models(annotation: object) -> list[type[BaseModel]]:
    args = typing.get_args(annotation) or (annotation,)
    return [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]


def type_name(annotation: object) -> str:
    """A reader's spelling of a type: ``int``, ``float | None``, ``"cpu" | "cuda"``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if annotation is type(None):
        return "None"
    if origin is not None:
        inner = ", ".join(type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"{annotation.__name__} (section)"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return REQUIRED
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(its fields' defaults)"
    return json.dumps(value, default=str)


def _range(field: FieldInfo) -> str:
    parts = []
    for meta in field.metadata:
        for name, sign in _BOUNDS.items():
            bound = getattr(meta, name, None)
            if bound is not None:
                parts.append(f"{sign} {bound:g}" if isinstance(bound, float) else f"{sign} {bound}")
    return ", ".join(parts)


def _description(field: FieldInfo, nested: list[type[BaseModel]]) -> str:
    if field.description:
        return field.description
    for model in nested:  # a section without its own description: its model's docstring
        if model.__doc__ and not model.__doc__.startswith(f"{model.__name__}("):
            return " ".join(model.__doc__.strip().split("\n\n")[0].split())
    if nested:  # documented field by field in the rows that follow
        return f"`{nested[0].__name__}`: the fields below."
    return ""


def config_fields(model: type[BaseModel] | None = None, prefix: str = "") -> list[ConfigField]:
    """Every field of ``model`` (default: ``LifecycleConfig``), nested models' fields after
    their section's row, in declaration order."""
    if model is None:
        from gymflow.lifecycle.config import LifecycleConfig

        model = LifecycleConfig
    out: list[ConfigField] = []
    for name, field in model.model_fields.items():
        nested = _nested_models(field.annotation)
        out.append(
            ConfigField(
                path=prefix + name,
                type=type_name(field.annotation),
                default=_default(field),
                range=_range(field),
                description=_description(field, nested),
                section=bool(nested),
            )
        )
        if field.discriminator and len(nested) > 1:  # a tagged union: one section, by its tag
            out[-1] = replace(out[-1], type=f'by "{field.discriminator}" (section)')
            out += _variant_fields(field, nested, f"{prefix}{name}.")
            continue
        for sub in nested:
            out += config_fields(sub, f"{prefix}{name}.")
    return out


def _variant_fields(
    field: FieldInfo, variants: list[type[BaseModel]], prefix: str
) -> list[ConfigField]:
    """A tagged union's rows: the tag once (each value with its model's first sentence), then
    each variant's own fields, marked with the value they belong to."""
    tag = field.discriminator
    default = field.default_factory() if field.default_factory else field.default
    values = [typing.get_args(v.model_fields[tag].annotation)[0] for v in variants]
    first = [" ".join((v.__doc__ or "").strip().split("\n\n")[0].split()) for v in variants]
    out = [
        ConfigField(
            path=prefix + tag,
            type=" | ".join(json.dumps(value) for value in values),
            default=json.dumps(getattr(default, tag)),
            range="",
            description="; ".join(
                f'"{value}": {text.rstrip(".")}' for value, text in zip(values, first, strict=True)
            ),
            section=False,
        )
    ]
    for value, variant in zip(values, variants, strict=True):
        for f in config_fields(variant, prefix):
            if f.path != prefix + tag:
                out.append(replace(f, description=f'With "{value}": {f.description}'))
    return out


def stack_fields() -> list[ConfigField]:
    """The team stack's settings file (``gymflow stack``: ``gymflow/stack/settings.py``)."""
    from gymflow.stack.settings import StackSettings

    return config_fields(StackSettings)


def problems() -> list[str]:
    """Fields without a description (the page would show an empty cell)."""
    return [
        f"config field {f.path} has no description"
        for f in [*config_fields(), *stack_fields()]
        if not f.description
    ]


def _how_to_set() -> str:
    from refgen.cli_ref import has_option

    lines = [
        "Every `gymflow run` resolves one `LifecycleConfig`: the defaults below, then "
        "`--smoke` (a reduced budget) when asked, then the fields of a JSON file given with "
        "`--config FILE` (nested sections merge field by field), then `--seed`. "
        "Unknown keys and out-of-range values are refused before any work, one "
        "`[bad_config]` line per field. A resumed run (`gymflow rerun RUN_ID`) uses "
        "its saved `config.json`; `--config` then merges "
        "fixes onto it.",
        "",
        "```json",
        "{",
        '  "grpo": {"learning_rate": 2e-4, "max_steps": 100},',
        '  "gate": {"general_envs": []}',
        "}",
        "```",
    ]
    if has_option(["run"], "--set"):
        lines += [
            "",
            "One field at a time, without a file: `gymflow run --set grpo.learning_rate=2e-4 "
            "--set gate.general_envs=[]` (dotted paths from the table, values in JSON, "
            "applied after `--config`); `rerun` and `deploy` take `--set` too.",
        ]
    if has_option(["config", "show"], None):
        lines += [
            "",
            "`gymflow config show` prints the resolved config, defaults included (with "
            "`--config`, `--set`, `--run RUN_ID`: what that run would use); `gymflow config "
            "schema` prints its JSON Schema.",
        ]
    return "\n".join(lines)


def _anchor(section: str) -> str:
    return section.replace("_", "-")


def _row(f: ConfigField) -> list[str]:
    if f.section and "." not in f.path:  # a top-level section: its own table below
        facts = [cell(f.type), f"[its fields](#{_anchor(f.path)})"]
    elif f.section:
        facts = [cell(f.type), "its fields follow"]
    elif f.default == REQUIRED:
        facts = [cell(f.type), "required"]
    else:
        facts = [cell(f.type), f"default {code(f.default)}"]
    if f.range:
        facts.append(cell(f.range))
    name = f"**{code(f.path)}**" if f.section else code(f.path)
    return [name, "<br>".join(facts), cell(f.description)]


def page() -> str:
    """The markdown of ``reference/config.md``: the top-level fields, then one table per
    section (a nested settings model) with its fields under their dotted names."""
    fields = config_fields()
    top = [f for f in fields if "." not in f.path]
    sections = [f for f in top if f.section]
    header = ["field", "type, default, range", "description"]
    parts = [
        "# Configuration reference",
        "",
        "_Generated from `gymflow/lifecycle/config.py` and the settings models it nests "
        "when the docs are built: it cannot drift from the code._",
        "",
        _how_to_set(),
        "",
        f"{len(fields)} fields: the top-level ones first, then one table per section "
        f"({', '.join(f'[{code(s.path)}](#{_anchor(s.path)})' for s in sections)}).",
        "",
        "## Top level",
        "",
        table(header, [_row(f) for f in top]),
    ]
    for s in sections:
        inside = [f for f in fields if f.path.startswith(s.path + ".")]
        parts += [f"## `{s.path}` {{#{_anchor(s.path)}}}", "", cell(s.description), "",
                  table(header, [_row(f) for f in inside])]  # fmt: skip
    parts += [
        "## The team stack {#the-team-stack}",
        "",
        "Not a run's config: the settings file of `gymflow stack up|status|down` "
        "(`<home>/stack.json`, or `--settings FILE`), from `gymflow/stack/settings.py`; "
        "see [Run it for a team](../how-to/team.md). Its secrets are never in it: "
        "`MLFLOW_AUTH_ADMIN_PASSWORD` and `PREFECT_SERVER_API_AUTH_STRING` come from the "
        "environment.",
        "",
        table(header, [_row(f) for f in stack_fields()]),
    ]
    return "\n".join(parts)


def unused() -> list[str]:
    """Nothing: the config page holds no text of its own keyed by field."""
    return []
