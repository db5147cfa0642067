"""What one GRPO step's rollout batch says: the figures logged per step and shown in progress.

A step's batch is ``G`` consecutive episodes per task (one group each); ``used`` marks the
episodes the update trained on (dynamic sampling may drop groups whose rewards are all equal:
they carry no advantage). The zero-variance share — groups whose rewards were all equal — is
the readiness figure GRPO is watched by (``docs/how-to/rl-readiness.md``): here per step from a
batch, in :func:`zero_variance_share` for a whole run from its dynamic-sampling counters, and
in :mod:`gymflow.lifecycle.run_plots` per step from the stored rollouts.

>>> from types import SimpleNamespace as E
>>> batch = [E(reward=r, score={"success": r == 1.0}, task=E(env="a")) for r in (1, 0, 0, 0)]
>>> step_metrics(batch, [True, True, False, False], 2)["rollouts/zero_variance_share"]
0.5
"""

from __future__ import annotations

from collections.abc import Sequence

from gymflow.train.task_pool import has_variance


def step_metrics(
    episodes: Sequence, used: list[bool], group_size: int, per_env: bool = False
) -> dict[str, float]:
    """``rollouts/*`` of one step: mean reward of the episodes trained on, success rate and
    count of those generated, zero-variance share of its groups; with ``per_env`` the same per
    environment of a mix (``rollouts/<env>/...``)."""
    rewards = [e.reward for e, u in zip(episodes, used, strict=True) if u]
    groups = [episodes[i : i + group_size] for i in range(0, len(episodes), group_size)]
    flat = sum(not has_variance([e.reward for e in group]) for group in groups)
    out = {
        "rollouts/reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
        "rollouts/success_rate": sum(e.score["success"] for e in episodes) / len(episodes),
        "rollouts/generated": len(episodes),
        "rollouts/zero_variance_share": flat / len(groups),
    }
    return out | (_per_env(episodes, used, group_size) if per_env else {})


def _per_env(episodes: Sequence, used: list[bool], group_size: int) -> dict[str, float]:
    """A mix's step per environment: mean reward of the episodes trained on, success rate of
    those generated, groups trained on. A step's groups are consecutive runs of
    ``group_size`` episodes of one task, hence of one environment."""
    out: dict[str, float] = {}
    for name in sorted({e.task.env for e in episodes}):
        mine = [(e, u) for e, u in zip(episodes, used, strict=True) if e.task.env == name]
        trained = [e.reward for e, u in mine if u]
        out[f"rollouts/{name}/success_rate"] = sum(e.score["success"] for e, _ in mine) / len(mine)
        out[f"rollouts/{name}/groups_trained"] = len(trained) / group_size
        if trained:
            out[f"rollouts/{name}/reward_mean"] = sum(trained) / len(trained)
    return out


def zero_variance_share(dynamic_sampling: dict) -> float | None:
    """The share of a run's groups (refills included) whose rewards were all equal, from
    GRPO's dynamic-sampling counters.

    >>> zero_variance_share({"groups_generated": 80, "groups_zero_variance": 20})
    0.25
    """
    generated = dynamic_sampling.get("groups_generated") or 0
    return dynamic_sampling.get("groups_zero_variance", 0) / generated if generated else None
