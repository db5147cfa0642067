"""One report per run: ``report.md`` in the run folder, in MLflow and in Prefect.

The report has the held-out table (start, GRPO candidate, SFT control with 95 % CIs), the gate's
decision and why, the registry action, every stage's wall time, links to both UIs and the plots
(:mod:`gymflow.lifecycle.run_plots`). The MLflow parent run gets it as its description (without
the images, which MLflow's description cannot show) and the plots as artifacts under ``plots/``;
the Prefect flow run gets it as the ``run-report`` markdown artifact.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.core.machine import machine_line
from gymflow.lifecycle.prefect_artifacts import markdown_artifact
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.run_plots import draw_plots
from gymflow.lifecycle.stage_results import LifecycleResults
from gymflow.lifecycle.summary import (
    ENV_TABLE_HEADER,
    GENERAL_TABLE_HEADER,
    env_table_rows,
    gate_lines,
    general_table_rows,
    policy_rows,
    preflight_line,
    registry_line,
    training_lines,
    verdict_lines,
)

_RATES = ("success", "reward", "well_formed")


def summary_markdown(summary: dict) -> str:
    """The held-out table, the gate, the registry and the stages' wall times, as markdown."""
    h = summary["heldout"]
    lines = [
        f"Held-out n={h['n']}, greedy. Config digest `{summary['config_digest']}`, "
        f"env `{summary['env']}`, started from {summary['policy_start']}.",
        "",
        "| policy | " + " | ".join(f"{k} [95% CI]" for k in _RATES) + " |",
        "|---|" + "---|" * len(_RATES),
    ]
    names = ("start (baseline)", "GRPO candidate", "SFT control (same time)",
             "RFT control (same time)")  # fmt: skip
    for label, s in policy_rows(summary, names):
        cells = (f"{s[k]:.3f} [{s[k + '_ci95'][0]:.3f}, {s[k + '_ci95'][1]:.3f}]" for k in _RATES)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += _table("Per environment (paired on each one's held-out tasks):",
                    ENV_TABLE_HEADER, env_table_rows(summary))  # fmt: skip
    lines += _table(
        "General capability (sets the run does not train on; success or gold-answer "
        "probability, paired; the gate's confidence sequences):",
        GENERAL_TABLE_HEADER, general_table_rows(summary),
    )  # fmt: skip
    lines += _table(_PASS_TITLE, ["policy", "environment", "greedy pass@1", "pass@k [95% CI]"],
                    _pass_rows(summary))  # fmt: skip
    gate = summary["gate"]
    head, *candidates = gate_lines(summary)
    lines += [
        "",
        *_sft_lines(summary),
        *[part for line in verdict_lines(summary)[:1] for part in (f"**{line}**", "")],
        *(f"- {line}" for line in training_lines(summary) if not line.startswith("SFT ran")),
        "",
        *([line, ""] if (line := preflight_line(summary)) else []),
        f"**{head.removesuffix(' (full reason in report.md)').replace('gate:', 'Gate:', 1)}**",
        "",
        *(f"- {line.strip()}" for line in candidates),
        "",
        f"Why, in full: {gate['reason']}",
        "",
        *_drift_lines(summary.get("verifier_drift")),
        f"**{registry_line(summary).replace('registry: ', 'Registry: ', 1)}.**",
        "",
        "| stage | wall s |",
        "|---|---|",
        *(f"| {k} | {v:.1f} |" for k, v in summary["stages"].items() if v is not None),
        f"| **total** | {summary['wall_s']:.1f} |",
    ]
    if summary.get("machine"):  # runs from before the summary recorded it have none
        lines += ["", f"Machine: {machine_line(summary['machine'])}."]
    return "\n".join(lines)


_PASS_TITLE = (
    "pass@k beside greedy pass@1 (k samples per task at temperature 1, the unbiased estimator; "
    "the first held-out tasks in the gate's order):"
)


def _pass_rows(summary: dict) -> list[list[str]]:
    rows = []
    for label, by_env in (summary.get("pass_at_k") or {}).items():
        for env, f in by_env.items():
            k = str(f["k"])
            lo, hi = f["pass_at"][k]["ci95"]
            rows.append([label, env, f"{f['greedy']['value']:.3f}",
                         f"pass@{k} {f['pass_at'][k]['value']:.3f} [{lo:.3f}, {hi:.3f}]"])  # fmt: skip
    return rows


def _sft_lines(summary: dict) -> list[str]:
    """Why SFT ran or not, and each environment's format check that decided it."""
    decision = summary.get("sft_decision")
    if not decision:  # runs from before the summary recorded it
        return []
    lines = [f"**SFT {'ran' if decision['ran'] else 'skipped'}:** {decision['reason']}", ""]
    for env, rule in (summary.get("format_check") or {}).items():
        lines += [f"Format check of `{env}` (Environment.well_formed): {rule}", ""]
    return lines


def _drift_lines(drift: dict | None) -> list[str]:
    """The verifier drift sentinel's finding (the flipped tasks when any flipped)."""
    if not drift:
        return []
    flipped = drift.get("flipped_tasks") or []
    tail = f"; flipped: {', '.join(flipped)}" if flipped else ""
    return [f"**Verifier drift:** {drift['checked']}{tail}.", ""]


def _table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    """A titled markdown table; nothing without rows."""
    if not rows:
        return []
    return [
        "",
        title,
        "",
        "| " + " | ".join(header) + " |",
        "|---|" + "---|" * (len(header) - 1),
        *("| " + " | ".join(cells) + " |" for cells in rows),
    ]


def report_markdown(summary: dict, plots: list[Path], run_dir: Path) -> str:
    links = summary.get("links", {})
    ui = " · ".join(
        f"[{name}]({url})"
        for name, url in (("Prefect flow run", links.get("prefect")), ("MLflow run", links.get("mlflow")))
        if url
    )  # fmt: skip
    images = [f"![{p.stem}]({p.relative_to(run_dir).as_posix()})" for p in plots]
    return "\n".join(
        [f"# gymflow run `{summary['run_id']}`", "", ui, "", summary_markdown(summary), "",
         "## Plots", "", *images, "", "Config: `config.json`; numbers: `summary.json`.", ""]
    )  # fmt: skip


def publish_report(run: RunContext, results: LifecycleResults, summary: dict) -> Path:
    """Write ``report.md`` and the plots; put them in MLflow (parent run) and Prefect."""
    import mlflow

    plots = draw_plots(run.dir, results)
    path = run.dir / "report.md"
    path.write_text(report_markdown(summary, plots, run.dir))
    with mlflow.start_run(run_id=run.mlflow_parent_id):
        mlflow.log_artifacts(str(plots[0].parent), artifact_path="plots")
        mlflow.log_artifact(str(path))
        description = summary_markdown(summary) + "\n\nPlots: artifacts `plots/`; `report.md`."
        mlflow.set_tag("mlflow.note.content", description)
    _prefect_artifact(path.read_text(), summary["run_id"])
    return path


def _prefect_artifact(markdown: str, run_id: str) -> None:
    markdown_artifact(markdown, "run-report", f"The report of lifecycle run {run_id}")
