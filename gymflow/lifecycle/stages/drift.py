"""Stage 2b: the verifier drift sentinel (:mod:`gymflow.eval.drift`), before any training.

When the registry has a champion and an environment's verifier (its version or its code) is
no longer the one the champion was gated with (the version's ``lineage.verifiers`` tag), the
champion run's stored held-out episodes are scored again with today's verifier. The report
(``reports/verifier_drift.{md,json}``, MLflow, a Prefect markdown artifact) lists every flipped
verdict *before* the stage raises, so a stopped run shows why; more than
``gate.drift_max_flip_share`` flipped stops the flow with ``verifier_drift`` naming the tasks.
"""

from __future__ import annotations

import json
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.env.registry import get_env
from gymflow.eval.drift import DriftReport, changed_verifiers, rescore, verifier_identity
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.model_registry import champion_version
from gymflow.lifecycle.prefect_artifacts import markdown_artifact
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import DriftCheck, TaskData

VERIFIERS_TAG = "lineage.verifiers"
"""The registry version's record of the verifiers it was gated with (``tasks/promote.py``)."""
RUN_DIR_TAG = "lineage.run_dir"
"""Where the version's run folder (and its stored held-out episodes) was."""


def check_verifier_drift(run: RunContext, cfg: LifecycleConfig, data: TaskData) -> DriftCheck:
    """Raises ``verifier_drift`` (stopping the flow) when the champion's stored verdicts flip
    beyond the threshold under today's verifiers; otherwise says what it checked."""
    import mlflow

    with stage(run, "verifier_drift") as info:
        report = _check(run, cfg)
        folder = run.dir / "reports"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "verifier_drift.json").write_text(report.model_dump_json(indent=1))
        (folder / "verifier_drift.md").write_text(report.markdown())
        mlflow.log_artifact(str(folder / "verifier_drift.md"), artifact_path="reports")
        mlflow.log_metrics({"drift/episodes": report.episodes, "drift/flips": len(report.flips)})
        if report.episodes:
            markdown_artifact(
                report.markdown(), key="verifier-drift",
                description="The champion's stored held-out verdicts under today's verifier.",
            )  # fmt: skip
        if report.stopped:
            tasks = report.flipped_tasks()
            shown = ", ".join(tasks[:10]) + (
                f" and {len(tasks) - 10} more" if len(tasks) > 10 else ""
            )
            raise GymflowError(
                FailureKind.VERIFIER_DRIFT,
                f"{len(report.flips)} of {report.episodes} stored held-out verdicts of "
                f"{report.champion} flip under the current verifier ({_changes(report)}; more "
                f"than {100 * report.threshold:g} %): tasks {shown}. If the change is meant, "
                "re-gate the champion (gymflow eval) or raise gate.drift_max_flip_share; the "
                f"flips are in {folder / 'verifier_drift.md'}",
            )
    return DriftCheck(
        checked=report.checked,
        episodes=report.episodes,
        flipped_tasks=report.flipped_tasks(),
        report=str(folder / "verifier_drift.md"),
        stage=info,
    )


def _check(run: RunContext, cfg: LifecycleConfig) -> DriftReport:
    from mlflow import MlflowClient

    name = cfg.model_name
    envs = {env: get_env(env) for env in cfg.env_weights}
    now = verifier_identity(list(envs.values()))
    version = champion_version(name)
    if version is None:
        return DriftReport(checked=f"no champion of {name}: nothing to compare with")
    champion = f"{name} v{version}"
    tags = MlflowClient().get_model_version(name, version).tags
    then = json.loads(tags[VERIFIERS_TAG]) if VERIFIERS_TAG in tags else None
    versions = {cfg.env: tags["lineage.env_version"]} if "lineage.env_version" in tags else {}
    versions = versions if cfg.envs is None else {}
    if then is None and not versions:
        return DriftReport(
            champion=champion, checked=f"{champion} records no verifier: nothing to compare with"
        )
    changed = changed_verifiers(then, now, versions)
    if not changed:
        return DriftReport(
            champion=champion,
            checked=f"unchanged: every verifier is the one {champion} was gated with",
        )
    run_dir = Path(
        tags.get(RUN_DIR_TAG) or Path(run.home) / "runs" / tags.get("gymflow.run_id", "")
    )
    if not (run_dir / "eval").is_dir():
        return DriftReport(
            champion=champion, changed=changed,
            checked=f"changed since {champion} was gated, but its stored held-out episodes "
            f"are not at {run_dir}: nothing re-scored",
        )  # fmt: skip
    episodes, flips = rescore(run_dir, {env: envs[env] for env in changed})
    threshold = cfg.gate.drift_max_flip_share
    share = len(flips) / episodes if episodes else 0.0
    return DriftReport(
        champion=champion, changed=changed, episodes=episodes, flips=flips, threshold=threshold,
        stopped=share > threshold,
        checked=f"changed since {champion} was gated: {episodes} stored held-out episodes of "
        f"{run_dir.name} re-scored, {len(flips)} verdicts flipped ({100 * share:.1f} %, "
        f"threshold {100 * threshold:g} %)",
    )  # fmt: skip


def _changes(report: DriftReport) -> str:
    return "; ".join(
        f"{env} version {c['then']['version']} → {c['now']['version']}, code "
        f"{c['then']['digest']} → {c['now']['digest']}"
        for env, c in report.changed.items()
    )
