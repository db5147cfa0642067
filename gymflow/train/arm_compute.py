"""What each training arm spent, counted one way for all: :class:`~gymflow.eval.arms.ArmCompute`
from the SFT control's and GRPO's results (online RFT counts its own, :func:`gymflow.train.rft.
run_rft`'s ``compute``).

* SFT control: every step an update on ``batch_size`` demonstrations; it samples nothing; its
  trained tokens are the demonstrations' completion tokens, ``batch_size`` a step on average.
* GRPO: every group it generated (dynamic sampling's replacements included) is
  ``num_generations`` samples; the completions it trained on are
  :func:`gymflow.train.grpo.completions_trained`; tokens, where its rollouts were stored, are
  the stored rows' model tokens (``env_mask``), generated and trained (``used_for_training``).

Both spend evenly over their steps as far as :func:`gymflow.eval.arms.at_equal` is concerned
(no curve), which is how a trainer with a fixed batch and no sampling (SFT) runs; GRPO's steps
vary with dynamic sampling's refills, so its time at a step is an estimate there.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.eval.arms import ArmCompute


def sft_compute(
    result: dict, batch_size: int, demos: list[dict], tokenizer=None, arm: str = "sft_control"
) -> ArmCompute:
    """The SFT control's compute from :func:`gymflow.train.sft.run_sft`'s result; with
    ``tokenizer`` its trained tokens are counted from ``demos``' completions (else 0)."""
    steps = int(result["steps"])
    per_demo = 0.0
    if tokenizer is not None and demos:
        ids = tokenizer([d["completion"] for d in demos], add_special_tokens=False)["input_ids"]
        lengths = [len(i) for i in ids]
        per_demo = sum(lengths) / len(lengths)
    return ArmCompute(
        arm=arm, steps=steps, updates=steps, examples_trained=steps * batch_size,
        tokens_trained=round(steps * batch_size * per_demo), wall_s=float(result["wall_s"]),
    )  # fmt: skip


def grpo_compute(
    result: dict, settings, rollouts: Path | None = None, arm: str = "grpo"
) -> ArmCompute:
    """GRPO's compute from :func:`gymflow.train.grpo.run_grpo`'s result and its settings;
    ``rollouts``: the folder its rows were stored in (``<run>/rollouts``) for the token counts."""
    from gymflow.train.grpo import completions_trained

    steps = int(result["steps"])
    groups = int(result["dynamic_sampling"]["groups_generated"])
    generated = trained = 0
    if rollouts is not None and Path(rollouts).is_dir():
        import polars as pl

        from gymflow.rollout.store import read_parts

        model = read_parts(Path(rollouts)).select(
            pl.col("env_mask").list.sum().alias("t"), "used_for_training"
        )
        generated = int(model["t"].sum() or 0)
        trained = int(model.filter(pl.col("used_for_training"))["t"].sum() or 0)
    return ArmCompute(
        arm=arm, steps=steps, updates=steps, samples_generated=groups * settings.num_generations,
        examples_trained=completions_trained(steps, settings), tokens_generated=generated,
        tokens_trained=trained, wall_s=float(result["wall_s"]),
    )  # fmt: skip
