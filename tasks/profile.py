"""Stage 2: profile the verifier on gold answers, adversarial probes and policy samples."""

from __future__ import annotations

import json

from prefect import task
from prefect.artifacts import create_table_artifact

from gymflow.data.task_table import read_tasks
from gymflow.env.registry import get_env
from gymflow.eval.evaluation import sample_texts
from gymflow.eval.profiling import profile_verifier
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import Checkpoint, TaskData, VerifierProfile
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="profile_verifier", **STAGE_OPTIONS)
def profile_verifier_stage(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> VerifierProfile:
    """Raises (stopping the flow) if the verifier is non-deterministic or rewards a probe."""
    import mlflow

    with stage(run, "profile_verifier") as info:
        env = get_env(cfg.env)
        tasks = read_tasks(data.paths["val"])[: max(8, cfg.profile_samples // 4)]
        texts = sample_texts(env, policy.path, tasks, cfg.max_new_tokens, seed=cfg.seed)
        report = profile_verifier(env, tasks, texts, cfg.profile_samples, cfg.seed)
        path = run.dir / "reports" / "verifier_profile.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2))
        mlflow.log_artifact(str(path), artifact_path="reports")
        mlflow.log_artifact(str(_plot(report, path.with_suffix(".png"))), artifact_path="reports")
        mlflow.log_metrics(
            {"profile_n": report["n"], "profile_deterministic": float(report["deterministic"])}
        )
        create_table_artifact(
            key="verifier-profile",
            table=[
                {k: r[k] for k in ("source", "task_id", "reward", "failure_kind")}
                for r in report["rows"]
            ],
            description="Verifier profile: every sample scored twice (see MLflow for the full report).",
        )
    return VerifierProfile(
        n=report["n"], by_source=report["by_source"], report=str(path), stage=info
    )


def _plot(report: dict, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3))
    for source in sorted({r["source"].split(":")[0] for r in report["rows"]}):
        rewards = [r["reward"] for r in report["rows"] if r["source"].split(":")[0] == source]
        ax.hist(rewards, bins=20, range=(-1, 1), alpha=0.6, label=f"{source} (n={len(rewards)})")
    ax.set_xlabel("reward")
    ax.set_ylabel("samples")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
