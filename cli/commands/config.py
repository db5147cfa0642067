"""``gymflow config show`` and ``gymflow config schema``: see every setting of a run.

``show`` prints the config a ``gymflow run`` with the same ``--config``, ``--set`` and
``--smoke`` would use — every field, defaults included — as JSON that ``--config`` reads back;
``--run ID`` shows that run's saved config (with any changes on top). ``schema`` prints
:class:`~gymflow.lifecycle.config.LifecycleConfig`'s JSON Schema: each field's type, default,
range and description. A wrong setting is the same one ``bad_config`` line as for a run.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from gymflow.cli.common import command_group, run_option, set_option

config_app = command_group("Run config: the resolved one with defaults, its schema.")


@config_app.command("show")
def show(
    config: Path = typer.Option(None, help="JSON file with LifecycleConfig fields to override."),
    sets: list[str] = set_option(),
    smoke: bool = typer.Option(False, help="Start from the --smoke budget instead of the default."),
    run: str = run_option("Start from this run's saved config (<home>/runs/RUN_ID/config.json)."),
    changed: bool = typer.Option(
        False,
        "--changed",
        help="Only the fields that differ from the default config (with --smoke: what the "
        "smoke budget changes, and what --set and --config change on top).",
    ),
) -> None:
    """Print the resolved run config as JSON (every field, defaults included).

    Example: gymflow config show --set grpo.learning_rate=1e-4 > my.json; gymflow run --config my.json
    """
    from gymflow.cli.errors import fail, fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.home import project_home
    from gymflow.lifecycle.run_config import parse_sets, read_overrides, run_config

    saved = None
    if run is not None:
        saved = project_home() / "runs" / run / "config.json"
        if not saved.exists():
            fail("bad_request", f"no run {run!r}: {saved} does not exist (see gymflow runs list)")
    try:
        overrides = read_overrides(config) if config is not None else None
        cfg = run_config(saved, overrides, smoke, None, parse_sets(sets))
    except GymflowError as exc:
        fail_with(exc)
    value = cfg.model_dump(mode="json")
    if changed:
        value = _difference(value, LifecycleConfig().model_dump(mode="json"))
    typer.echo(json.dumps(value, indent=2))


def _difference(value: dict, base: dict) -> dict:
    """The parts of ``value`` that differ from ``base``, nested settings field by field."""
    out = {}
    for key, v in value.items():
        b = base.get(key)
        if isinstance(v, dict) and isinstance(b, dict):
            if inner := _difference(v, b):
                out[key] = inner
        elif v != b:
            out[key] = v
    return out


@config_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of the run config: every field's type, default, range, description.

    Example: gymflow config schema > lifecycle-config.schema.json
    """
    from gymflow.lifecycle.config import LifecycleConfig

    typer.echo(json.dumps(LifecycleConfig.model_json_schema(), indent=2))
