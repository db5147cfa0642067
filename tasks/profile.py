"""Stage 2: profile the verifier on policy samples, gold answers and adversarial probes.

Every sample is scored once in each of two processes (:mod:`gymflow.eval.profiling`). The
report goes to MLflow (``reports/verifier_profile.json``, the reward histogram PNG, the whole
sample table as markdown and HTML) and to Prefect (the probe table, the sample table as a
markdown artifact) *before* the stage raises, so a stopped run shows why.
"""

from __future__ import annotations

import json

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from gymflow.data.task_table import read_tasks
from gymflow.env.registry import get_env
from gymflow.eval.profile_report import (
    plot_rewards,
    profile_summary,
    samples_html,
    samples_markdown,
)
from gymflow.eval.profiling import profile_verifier
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import Checkpoint, TaskData, VerifierProfile
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.episode import Sampling
from gymflow.tasks.options import STAGE_OPTIONS


@task(name="profile_verifier", **STAGE_OPTIONS)
def profile_verifier_stage(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> VerifierProfile:
    """Raises (stopping the flow) if the verifier is non-deterministic, errs, rewards a probe
    above its ceiling or rejects a gold answer."""
    import mlflow

    with stage(run, "profile_verifier") as info:
        env = get_env(cfg.env)
        tasks = read_tasks(data.paths["val"]) or read_tasks(data.paths["train"])
        sampling = Sampling(max_new_tokens=cfg.max_new_tokens, temperature=cfg.grpo.temperature)
        backend = TransformersPolicy.from_path(policy.path)
        report = profile_verifier(env, tasks, cfg.profile_samples, cfg.seed, backend, sampling)
        summary = profile_summary(report, env.reward_range)
        folder = run.dir / "reports"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "verifier_profile.json"
        path.write_text(json.dumps(summary, indent=2))
        markdown = samples_markdown(summary)
        (folder / "verifier_samples.md").write_text(markdown)
        (folder / "verifier_samples.html").write_text(samples_html(summary))
        plot_rewards(summary, env.reward_range, path.with_suffix(".png"))
        for name in ("verifier_profile.json", "verifier_profile.png", "verifier_samples.md",
                     "verifier_samples.html"):  # fmt: skip
            mlflow.log_artifact(str(folder / name), artifact_path="reports")
        latency = summary["verify_latency_ms"].get("first_process", {})
        mlflow.log_metrics(
            {"profile_n": summary["n"], "profile_policy_share": summary["policy_share"],
             "profile_deterministic": float(summary["determinism"]["differing"] == 0),
             "profile_problems": len(summary["problems"]),
             **{f"verify_ms_{k}": v for k, v in latency.items()}}
        )  # fmt: skip
        create_table_artifact(
            key="verifier-probes",
            table=summary["probes"] or [{"probe": "(the environment has no probes)"}],
            description="Each probe kind: samples, highest reward, its ceiling, how many "
            "went over it.",
        )
        create_markdown_artifact(
            key="verifier-samples",
            markdown=markdown,
            description="Every profiled sample, both scores and the whole trajectory.",
        )
        report.raise_for_problems()
    return VerifierProfile(
        n=summary["n"],
        by_source=summary["by_source"],
        report=str(path),
        policy_share=summary["policy_share"],
        deterministic=summary["determinism"]["differing"] == 0,
        stage=info,
    )
