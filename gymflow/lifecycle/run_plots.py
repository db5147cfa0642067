"""The run's plots, as PNG: what a person would rather look at than read.

* ``heldout_success.png`` — held-out success of the start (baseline), the GRPO candidate and the
  SFT control, with their 95 % CIs, the promoted one marked;
* ``training_curves.png`` — SFT's (and the control's) sampled validation success per check;
  per GRPO step the rollouts' mean reward and success rate, with GRPO's greedy validation
  success and the step handed to the gate (``grpo/validation.json``); and per step the share
  of generated groups with zero variance, its 10-step mean and its share over the whole run;
* ``reward_hist.png`` — held-out reward histograms of each policy and of GRPO's training rollouts.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from gymflow.lifecycle.stage_results import LifecycleResults
from gymflow.rollout.store import read_rollouts
from gymflow.train.checkpoint_choice import VALIDATION_FILE

PLOTS_DIR = "plots"


def draw_plots(run_dir: Path, results: LifecycleResults) -> list[Path]:
    """Write the PNGs under ``run_dir/plots`` (Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = run_dir / PLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    rollouts = read_rollouts(run_dir)  # once: both GRPO plots draw on them
    return [
        _save(plt, _heldout_success(plt, results), folder / "heldout_success.png"),
        _save(
            plt, _training_curves(plt, run_dir, results, rollouts), folder / "training_curves.png"
        ),
        _save(plt, _reward_hist(plt, run_dir, results, rollouts), folder / "reward_hist.png"),
    ]


def grpo_steps(run_dir: Path, rows: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per GRPO step: mean reward and success of the rollouts trained on, and the share of
    generated groups whose samples all got one reward (zero variance: nothing to learn).
    ``rows``: the run's rollouts when already read."""
    rows = read_rollouts(run_dir) if rows is None else rows
    groups = rows.group_by("iteration", "group_id").agg(
        zero=pl.col("reward").n_unique() == 1, used=pl.col("used_for_training").any()
    )
    used = rows.filter(pl.col("used_for_training"))
    per_step = used.group_by("iteration").agg(
        reward=pl.col("reward").mean(), success=pl.col("success").cast(pl.Float64).mean()
    )
    zero = groups.group_by("iteration").agg(
        zero_variance=pl.col("zero").mean(), groups=pl.len(), zero_groups=pl.col("zero").sum()
    )
    return per_step.join(zero, on="iteration", how="full", coalesce=True).sort("iteration")


def zero_variance_share(steps: pl.DataFrame) -> float | None:
    """Zero-variance groups over all groups generated in the run (``grpo_steps`` rows)."""
    total = steps["groups"].sum() if steps.height else 0
    return steps["zero_groups"].sum() / total if total else None


def _policies(results: LifecycleResults) -> list[tuple[str, dict, str]]:
    """``(label, held-out summary, candidate name)`` of each policy the gate evaluated."""
    gate = results.heldout_gate
    out = [("start (baseline)", gate.baseline, ""), ("GRPO", gate.candidate, "grpo")]
    if gate.sft_control is not None:
        out.append(("SFT control", gate.sft_control.summary, "sft_control"))
    return out


def _heldout_success(plt, results: LifecycleResults):
    gate = results.heldout_gate
    policies = _policies(results)
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for i, (_, s, name) in enumerate(policies):
        lo, hi = s["success_ci95"]
        promoted = gate.gate.passed and name == gate.gate.chosen
        color = "tab:green" if promoted else ("tab:gray" if not name else "tab:blue")
        ax.bar(i, s["success"], yerr=[[s["success"] - lo], [hi - s["success"]]], capsize=5,
               color=color, label="promoted" if promoted else None)  # fmt: skip
        ax.text(i, hi + 0.02, f"{s['success']:.3f}", ha="center", fontsize=8)
    ax.set_xticks(range(len(policies)), [p[0] for p in policies])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(f"held-out success (n={gate.n}, 95 % CI)")
    chosen = gate.gate.chosen
    ax.set_title(
        f"promoted: {chosen}" if gate.gate.passed else f"nothing promoted (best: {chosen})"
    )
    if gate.gate.passed:
        ax.legend(fontsize=7, loc="upper left")
    return fig


def _training_curves(plt, run_dir: Path, results: LifecycleResults, rollouts: pl.DataFrame):
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.2))
    sft_ax, grpo_ax, zero_ax = axes
    for label, history, key in (
        ("SFT (sampled)", results.sft.history if results.sft else [], "sampled_success"),
        ("SFT control (greedy)", results.sft_control.history if results.sft_control else [],
         "success"),  # the gate's one checkpoint rule, as GRPO's
    ):  # fmt: skip
        if history:
            sft_ax.plot([h["step"] for h in history], [h[key] for h in history],
                        marker="o", label=label)  # fmt: skip
    sft_ax.set(title="SFT: val success", xlabel="step", ylim=(0, 1))
    sft_ax.legend(fontsize=7)
    steps = grpo_steps(run_dir, rollouts)
    grpo_ax.plot(steps["iteration"], steps["reward"], marker=".", label="mean reward")
    grpo_ax.plot(steps["iteration"], steps["success"], marker=".", label="success")
    low = min(0.0, *(steps["reward"].drop_nulls().to_list() or [0.0]))  # rewards may go below 0
    validation = run_dir / "grpo" / VALIDATION_FILE
    if validation.is_file():  # x = optimizer steps done: rollouts of step k feed step k + 1
        chosen = json.loads(validation.read_text())
        points = chosen["history"]
        grpo_ax.plot([h["step"] for h in points], [h["success"] for h in points], marker="o",
                     color="tab:green", label="greedy val success")  # fmt: skip
        grpo_ax.axvline(chosen["chosen_step"], color="tab:green", ls=":", label="handed on")
    grpo_ax.set(title="GRPO rollouts trained on", xlabel="step", ylim=(low - 0.05, 1.05))
    grpo_ax.legend(fontsize=7)
    zero_ax.plot(steps["iteration"], steps["zero_variance"], marker=".", ls="", alpha=0.4,
                 color="tab:red", label="per step")  # fmt: skip
    smooth = steps["zero_variance"].rolling_mean(10, min_samples=1)
    zero_ax.plot(steps["iteration"], smooth, color="tab:red", label="10-step mean")
    share = zero_variance_share(steps)
    run_share = f" (run: {share:.0%})" if share is not None else ""
    zero_ax.set(title=f"GRPO: zero-variance groups{run_share}", xlabel="step", ylim=(0, 1.05))
    zero_ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _reward_hist(plt, run_dir: Path, results: LifecycleResults, rollouts: pl.DataFrame):
    gate = results.heldout_gate
    rows = [("GRPO training rollouts", rollouts["reward"].drop_nulls())]
    paths = {"start (baseline)": "baseline", "GRPO": "candidate", "SFT control": "sft_control"}
    for label, _, _ in _policies(results):
        path = run_dir / "eval" / f"heldout-{paths[label]}.parquet"
        if path.exists():
            rows.append((f"held-out: {label}", pl.read_parquet(path)["reward"]))
    fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 2.8), sharey=False)
    for ax, (label, rewards) in zip(axes, rows, strict=True):
        ax.hist(rewards.to_list(), bins=20, range=(min(0.0, rewards.min() or 0.0), 1.0))
        ax.set(title=label, xlabel="reward")
    axes[0].set_ylabel("episodes")
    fig.suptitle(f"reward histograms (held-out n={gate.n})", fontsize=9)
    fig.tight_layout()
    return fig


def _save(plt, fig, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
