"""pass@k beside greedy pass@1 on held-out tasks, for one arm's policy.

Methods that reinforce only successes can raise pass@1 and lower pass@k at large k (Zhu et al.
2025, arXiv 2506.01347), so the arms (SFT control, online RFT, GRPO) are compared on both: the
greedy pass@1 the gate scores, and pass@k for k = 1, 2, 4, … ``k`` from ``k`` samples per task
at ``temperature``, by the unbiased estimator of Chen et al. 2021
(:func:`gymflow.eval.stats.pass_at_k`, averaged over tasks with an interval across tasks by
:func:`gymflow.eval.metrics.measure`). Both evaluations run through
:func:`gymflow.eval.evaluation.evaluate_policy`, the one episode driver.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from gymflow.core.task_record import Task
from gymflow.env.environment import Environment
from gymflow.eval.evaluation import evaluate_policy
from gymflow.eval.metrics import measure
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS
from gymflow.rollout.store import Lineage

PASS_K = 8
"""Samples per held-out task for pass@k."""


class PassAtK(BaseModel):
    """Greedy pass@1 and sampled pass@k of one policy on the same held-out tasks."""

    k: int
    n_tasks: int
    temperature: float
    greedy: dict
    """Greedy pass@1: ``{"value", "ci95", "n"}`` (a Wilson interval over the tasks)."""
    pass_at: dict[str, dict]
    """Sampled: ``{"1": {"value", "ci95", "n"}, "2": …, str(k): …}`` (interval across tasks)."""
    greedy_reward: float
    """Mean greedy reward (partial credit, where the verifier gives it)."""
    greedy_by_task: dict[str, float] = {}
    """Greedy success of each task, in the tasks' order (for paired comparisons)."""

    def text(self) -> str:
        """``greedy pass@1 0.500 [0.40, 0.60], pass@1 0.410 [...], pass@8 0.800 [...] (64 tasks)``."""

        def one(d: dict) -> str:
            lo, hi = d["ci95"]
            return f"{d['value']:.3f} [{lo:.2f}, {hi:.2f}]"

        return (
            f"greedy pass@1 {one(self.greedy)}, pass@1 {one(self.pass_at['1'])}, "
            f"pass@{self.k} {one(self.pass_at[str(self.k)])} ({self.n_tasks} tasks, "
            f"T {self.temperature:g})"
        )


def heldout_pass_at_k(
    env: Environment,
    app,
    policy,
    tasks: list[Task],
    k: int = PASS_K,
    seed: int = 0,
    temperature: float = 1.0,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    out_dir: Path | None = None,
    label: str = "arm",
) -> PassAtK:
    """``policy`` (a token or message backend) on ``tasks``: greedy once, then ``k`` samples
    each at ``temperature`` with seeds from ``seed``. With ``out_dir`` both evaluations' episodes
    are stored as rollouts there (iteration 0 greedy, 1 sampled; ``label`` names the policy)."""
    if k < 1:
        raise ValueError(f"pass@k needs k >= 1, got {k}")

    def lineage(iteration: int) -> Lineage:
        return Lineage("passk", iteration, 0, label, env.name, env.version, "")

    common = {"max_new_tokens": max_new_tokens, "seed": seed, "out_dir": out_dir}
    greedy_rows, greedy = evaluate_policy(env, app, policy, tasks, greedy=True, lineage=lineage(0), **common)
    sampled_rows, _ = evaluate_policy(
        env, app, policy, tasks, greedy=False, samples=k, temperature=temperature,
        lineage=lineage(1), **common,
    )  # fmt: skip
    return PassAtK(
        k=k,
        n_tasks=len(tasks),
        temperature=temperature,
        greedy={"value": greedy["success"], "ci95": greedy["success_ci95"], "n": greedy["n"]},
        pass_at=measure(sampled_rows)["pass_at"],
        greedy_reward=greedy["reward"],
        greedy_by_task={r["task_id"]: float(r["success"]) for r in greedy_rows},
    )
