"""Stage 2: profile the verifier on policy samples, gold answers and adversarial probes.

Every sample is scored once in each of two processes (:mod:`gymflow.eval.profiling`). The
report goes to MLflow (``reports/verifier_profile.json``, the reward histogram PNG, the whole
sample table as markdown and HTML) and to Prefect (the probe table, the sample table as a
markdown artifact) *before* the stage raises, so a stopped run shows why.
"""

from __future__ import annotations

import json

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
from gymflow.lifecycle.prefect_artifacts import markdown_artifact, table_artifact
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import Checkpoint, TaskData, VerifierProfile
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.episode import Sampling


def profile_verifiers(
    run: RunContext, cfg: LifecycleConfig, data: TaskData, policy: Checkpoint
) -> VerifierProfile:
    """Raises (stopping the flow) if the verifier is non-deterministic, errs, rewards a probe
    above its ceiling or rejects a gold answer. A mix profiles every environment's verifier on
    its own tasks (``profile_samples`` each, reports under ``reports/<env>/``), publishes every
    report, then stops on the first problem found."""
    import mlflow

    with stage(run, "profile_verifier") as info:
        val, train = read_tasks(data.paths["val"]), read_tasks(data.paths["train"])
        sampling = Sampling(max_new_tokens=cfg.max_new_tokens, temperature=cfg.grpo.temperature)
        backend = TransformersPolicy.from_path(policy.path)
        mix = cfg.envs is not None
        done = {}
        for name in cfg.env_weights:
            env = get_env(name)
            tasks = [t for t in val if t.env == name] or [t for t in train if t.env == name]
            report = profile_verifier(env, tasks, cfg.profile_samples, cfg.seed, backend, sampling)
            folder = run.dir / "reports" / (name if mix else "")
            summary = _publish(report, env, folder, name if mix else None)
            done[name] = (report, summary)
        summaries = [summary for _, summary in done.values()]
        mlflow.log_metrics(
            {"profile_n": sum(s["n"] for s in summaries),
             "profile_deterministic": float(all(s["determinism"]["differing"] == 0
                                                for s in summaries)),
             "profile_problems": sum(len(s["problems"]) for s in summaries)}
        )  # fmt: skip
        for report, _ in done.values():
            report.raise_for_problems()
    first = done[cfg.env][1]
    n = sum(s["n"] for s in summaries)
    return VerifierProfile(
        n=n,
        by_source=first["by_source"] if not mix else _by_source(done),
        report=str(run.dir / "reports" / (cfg.env if mix else "") / "verifier_profile.json"),
        policy_share=sum(s["policy_share"] * s["n"] for s in summaries) / max(1, n),
        deterministic=all(s["determinism"]["differing"] == 0 for s in summaries),
        reports={name: str(run.dir / "reports" / name / "verifier_profile.json") for name in done}
        if mix
        else {},
        stage=info,
    )


def _by_source(done: dict) -> dict:
    """A mix's samples per source, per environment (``{env: by_source}``)."""
    return {name: summary["by_source"] for name, (_, summary) in done.items()}


def _publish(report, env, folder, mix_env: str | None) -> dict:
    """The report of one environment's verifier: JSON, PNG, samples as markdown and HTML in the
    run folder and MLflow (``reports/`` or ``reports/<env>/``), the probe and sample tables in
    Prefect (keys suffixed with the environment in a mix); returns its summary."""
    import mlflow

    summary = profile_summary(report, env.reward_range)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "verifier_profile.json"
    path.write_text(json.dumps(summary, indent=2))
    markdown = samples_markdown(summary)
    (folder / "verifier_samples.md").write_text(markdown)
    (folder / "verifier_samples.html").write_text(samples_html(summary))
    plot_rewards(summary, env.reward_range, path.with_suffix(".png"))
    where = "reports" if mix_env is None else f"reports/{mix_env}"
    for name in ("verifier_profile.json", "verifier_profile.png", "verifier_samples.md",
                 "verifier_samples.html"):  # fmt: skip
        mlflow.log_artifact(str(folder / name), artifact_path=where)
    latency = summary["verify_latency_ms"].get("first_process", {})
    prefix = "" if mix_env is None else f"{mix_env}/"
    mlflow.log_metrics(
        {f"{prefix}profile_policy_share": summary["policy_share"],
         **{f"{prefix}verify_ms_{k}": v for k, v in latency.items()}}
    )  # fmt: skip
    suffix = "" if mix_env is None else "-" + mix_env.replace("_", "-")  # Prefect's key rules
    table_artifact(
        key=f"verifier-probes{suffix}",
        table=summary["probes"] or [{"probe": "(the environment has no probes)"}],
        description=f"Each probe kind of {env.name}: samples, highest reward, its ceiling, how "
        "many went over it.",
    )
    markdown_artifact(
        key=f"verifier-samples{suffix}",
        markdown=markdown,
        description=f"Every profiled sample of {env.name}, both scores and the whole trajectory.",
    )
    return summary
