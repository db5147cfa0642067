"""The whole lifecycle's wall-time budget (``LifecycleConfig.run_budget_s``).

SFT and GRPO have their own limits (``sft.time_budget_s``, ``grpo.time_budget_s``, step caps,
SFT's sampled-success target); a run budget caps both by what is left of the run: the stages
before them count with their own recorded wall time — so a resumed run, whose finished stages
come back from the cache with the times they took, gets the same budgets again and reuses its
cached stages — and ``run_budget_reserve_s`` is kept for the held-out gate and what follows.
SFT may take at most half of what is left then, so GRPO keeps the other half; GRPO gets the
rest. Each gets at least ``MIN_STAGE_S``: a few steps, not none, when the budget is spent
(the run then overruns it, and ``summary.json`` shows by how much). The SFT control trains for
GRPO's wall time, so it follows.

The flow applies it by handing each training phase a config whose stage budget is the smaller
of the two (:func:`budgeted`), and :func:`run_budget_record` says in ``summary.json`` what it
gave and whether it bound. Without ``run_budget_s`` nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.stage_results import StageResult

MIN_STAGE_S = 30.0
"""The least SFT or GRPO is given when the run budget is (nearly) spent."""


def spent_s(results: Iterable[StageResult | None]) -> float:
    """The recorded wall time of the finished stages among ``results``."""
    return round(sum(r.stage.wall_s or 0.0 for r in results if r is not None), 2)


def stage_limit(cfg: LifecycleConfig, phase: str, spent: float) -> float | None:
    """The run budget's cap on ``phase`` (``"sft"`` or ``"grpo"``) after ``spent`` seconds,
    or None without a run budget.

    >>> cfg = LifecycleConfig(run_budget_s=500, run_budget_reserve_s=40)
    >>> stage_limit(cfg, "sft", 20.0), stage_limit(cfg, "grpo", 150.0)
    (220.0, 310.0)
    >>> stage_limit(cfg, "grpo", 480.0)  # spent: GRPO still gets a few steps
    30.0
    >>> stage_limit(LifecycleConfig(), "grpo", 150.0) is None
    True
    """
    if cfg.run_budget_s is None:
        return None
    left = cfg.run_budget_s - spent - cfg.run_budget_reserve_s
    return round(max(MIN_STAGE_S, left / 2 if phase == "sft" else left), 1)


def budgeted(cfg: LifecycleConfig, phase: str, spent: float) -> LifecycleConfig:
    """``cfg`` with ``phase``'s time budget lowered to the run budget's cap where that is
    smaller (``cfg`` itself when it is not, or there is no run budget)."""
    limit = stage_limit(cfg, phase, spent)
    own = getattr(cfg, phase).time_budget_s
    if limit is None or (own is not None and own <= limit):
        return cfg
    settings = getattr(cfg, phase).model_copy(update={"time_budget_s": limit})
    return cfg.model_copy(update={phase: settings})


def binds(cfg: LifecycleConfig, used: LifecycleConfig, phase: str) -> bool:
    """Whether the run budget lowered ``phase``'s time budget (``used`` from :func:`budgeted`)."""
    return getattr(used, phase).time_budget_s != getattr(cfg, phase).time_budget_s


def name_the_limit(cfg: LifecycleConfig, used: dict[str, LifecycleConfig], *results):
    """``results`` (SFT's, GRPO's: ``None`` when it did not run) with ``stopped_by``
    ``"run_budget"`` where the time budget that stopped the stage was the run budget's."""
    out = []
    for phase, result in zip(("sft", "grpo"), results, strict=True):
        if (
            result is not None
            and result.stopped_by == "time_budget"
            and phase in used
            and binds(cfg, used[phase], phase)
        ):
            result = result.model_copy(update={"stopped_by": "run_budget"})
        out.append(result)
    return out


def run_budget_record(
    cfg: LifecycleConfig, spent: dict[str, float], used: dict[str, LifecycleConfig]
) -> dict | None:
    """``summary.json``'s ``run_budget``: the budget, what the stages before each phase had
    spent, the time budget each phase got and whether the run budget set it."""
    if cfg.run_budget_s is None:
        return None
    phases = {
        phase: {
            "spent_before_s": spent[phase],
            "time_budget_s": getattr(used[phase], phase).time_budget_s,
            "set_by_run_budget": binds(cfg, used[phase], phase),
        }
        for phase in used
    }
    return {"budget_s": cfg.run_budget_s, "reserve_s": cfg.run_budget_reserve_s, **phases}
