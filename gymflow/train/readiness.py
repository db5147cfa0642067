"""RL readiness: a preflight that asks, before GRPO's first step, whether the start can learn.

GRPO learns only from groups whose rewards differ. A start that solves every training task
(or none) gives groups of one reward each, and every such group has zero advantage: the run
spends its budget on rollouts that teach nothing. On SmolLM2 the SFT start solved ~98 % of its
training rollouts and 85–93 % of GRPO's groups were zero-variance (docs/tuning.md); on the
embedded default the share is ~20 %. The preflight measures this before training:

* a seeded sample of ``tasks`` tasks of GRPO's pool (spread evenly over the tasks' difficulty
  levels when they carry one, :func:`gymflow.train.curriculum.level_of`), each rolled out
  ``samples`` times (default: GRPO's group size G) at GRPO's temperature and token budget;
* **pass@1** (the mean sampled success) and **pass@G** (:func:`gymflow.eval.stats.pass_at_k`),
  and the **expected zero-variance share**: for each task the chance that a group of G of its
  samples holds one reward only, ``Σ_v C(n_v, G) / C(n, G)`` over its distinct rewards ``v``
  (``n_v`` samples each; exact for G = n, unbiased for n > G), averaged over the tasks — each
  level weighted by its share of the pool;
* a **verdict**: inside the learnable band (pass@1 within ``band`` and the zero-variance share
  at most ``max_zero_variance``); ``too_easy`` or ``too_hard`` (pass@1 above or below the
  band); ``flat`` (pass@1 inside it, yet most tasks' samples agree: each task solved always
  or never, or a temperature too low to vary) — said in one line with the figures;
  ``on_outside: "refuse"`` stops the stage with ``start_not_learnable`` instead;
* with levels and ``curriculum`` on, the levels GRPO may draw from (:mod:`gymflow.train.curriculum`)
  and the prediction for that narrower pool.

The result is ``preflight.json`` in the GRPO folder (a resumed stage reads it instead of
sampling again), MLflow metrics ``preflight/*``, and ``summary.json``'s ``grpo.preflight``, where
the run's report puts it beside the zero-variance share GRPO then measured. What it does not
know: how the share moves as the policy learns (the pool retires solved tasks, which lowers it;
a policy that collapses onto one answer raises it) — the comparison in the report says how far
the prediction held.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.eval.stats import mean_ci, pass_at_k
from gymflow.policy.base import Policy
from gymflow.train.curriculum import CurriculumPool, CurriculumSettings, frontier, level_of
from gymflow.train.task_pool import TASK_POOL_FILE

PREFLIGHT_FILE = "preflight.json"
Verdict = Literal["in_band", "too_easy", "too_hard", "flat"]


class PreflightSettings(BaseModel):
    """The RL-readiness preflight before GRPO (gymflow.train.readiness)."""

    model_config = {"extra": "forbid"}

    tasks: int = Field(
        16,
        ge=1,
        description="Tasks of GRPO's pool the preflight samples (spread evenly over the tasks' "
        "difficulty levels when they carry one).",
    )
    samples: int | None = Field(
        None, ge=2, description="Samples per task (None: grpo.num_generations, the group size)."
    )
    band: tuple[float, float] = Field(
        (0.1, 0.9),
        description="The learnable band of the start's pass@1 at GRPO's temperature: below its "
        "low end most groups fail alike, above its high end most succeed alike.",
    )
    max_zero_variance: float = Field(
        0.8,
        ge=0.0,
        le=1.0,
        description="Highest expected share of zero-variance groups still inside the band.",
    )
    on_outside: Literal["warn", "refuse"] = Field(
        "warn",
        description='A start outside the band: "warn" (one line, then GRPO runs) or "refuse" '
        "(the stage stops with start_not_learnable and the figures).",
    )
    curriculum: CurriculumSettings | None = Field(
        default_factory=CurriculumSettings,
        description="When the pool's tasks carry a difficulty level: draw GRPO's tasks from "
        "the levels inside the band, moving on as the pool's pass rates rise "
        "(gymflow.train.curriculum); null: every level, as generated.",
    )

    @model_validator(mode="after")
    def _band_in_order(self) -> PreflightSettings:
        low, high = self.band
        if not 0.0 <= low < high <= 1.0:
            raise ValueError(f"band must be two rates 0 <= low < high <= 1, got {list(self.band)}")
        return self


class LevelFigures(BaseModel):
    """The preflight's figures on the sampled tasks of one difficulty level."""

    tasks: int
    pool: int
    """Tasks of this level in GRPO's pool."""
    pass_at_1: float
    zero_variance: float


class Readiness(BaseModel):
    """What the preflight measured and concluded (``preflight.json``)."""

    tasks: int
    samples: int
    group_size: int
    temperature: float
    pass_at_1: float
    pass_at_1_ci95: tuple[float, float]
    pass_at_k: float
    """pass@G: the chance a group holds at least one success."""
    zero_variance: float
    """Expected share of GRPO's groups whose G rewards are all equal, on the whole pool."""
    zero_variance_ci95: tuple[float, float]
    band: tuple[float, float]
    max_zero_variance: float
    verdict: Verdict
    levels: dict[str, LevelFigures] | None = None
    open_levels: list[int] | None = None
    """The levels GRPO starts drawing from (the curriculum); None: all of the pool."""
    predicted_zero_variance: float
    """The expected zero-variance share of what GRPO will draw (the open levels only)."""
    message: str
    wall_s: float

    @property
    def outside(self) -> bool:
        return self.verdict != "in_band"


def zero_variance_chance(rewards: list[float | None], group: int) -> float:
    """Chance that ``group`` of these samples, drawn without replacement, share one reward.

    >>> zero_variance_chance([1.0, 1.0, 1.0, 1.0], 4), zero_variance_chance([1.0, 0.2, 1.0, 1.0], 4)
    (1.0, 0.0)
    >>> round(zero_variance_chance([1.0, 1.0, 1.0, 0.2], 2), 3)  # C(3,2) / C(4,2)
    0.5
    """
    if not 1 <= group <= len(rewards):
        raise ValueError(f"a group of {group} needs at least as many samples, got {len(rewards)}")
    counts = Counter(rewards).values()
    return sum(math.comb(n, group) for n in counts) / math.comb(len(rewards), group)


def sample_tasks(pool: list[Task], n: int, seed: int) -> list[Task]:
    """``n`` tasks of ``pool`` (seeded), taken in turn from each difficulty level so every level
    is measured; one level (or none) is a plain seeded sample."""
    rng = random.Random(f"preflight-{seed}")
    by_level: dict[int | None, list[Task]] = {}
    for task in pool:
        by_level.setdefault(level_of(task), []).append(task)
    queues = [rng.sample(tasks, len(tasks)) for _, tasks in sorted(by_level.items(), key=_key)]
    chosen: list[Task] = []
    while len(chosen) < min(n, len(pool)):
        for queue in queues:
            if queue and len(chosen) < n:
                chosen.append(queue.pop())
    return chosen


def assess(
    rows: list[dict],
    tasks: list[Task],
    pool: list[Task],
    group: int,
    temperature: float,
    settings: PreflightSettings,
    wall_s: float = 0.0,
) -> Readiness:
    """The figures and verdict from sampled ``rows`` (``task_id``, ``success``, ``reward``; at
    least ``group`` per task) of ``tasks``, a sample of ``pool``. Pure: no model, no server."""
    by_task: dict[str, list[dict]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row)
    per_task = {}
    for task in tasks:
        mine = by_task.get(task.task_id, [])
        if len(mine) < group:
            raise ValueError(f"task {task.task_id}: {len(mine)} samples, a group needs {group}")
        wins = sum(bool(r["success"]) for r in mine)
        per_task[task.task_id] = (
            wins / len(mine),
            pass_at_k(len(mine), wins, group),
            zero_variance_chance([r["reward"] for r in mine], group),
        )
    levels = _levels(tasks, pool, per_task)
    weights = _weights(tasks, pool, levels)
    p1, pk, zv = (sum(w * per_task[t.task_id][i] for t, w in weights) for i in range(3))
    low, high = settings.band
    verdict: Verdict = "in_band"
    if p1 > high:
        verdict = "too_easy"
    elif p1 < low:
        verdict = "too_hard"
    elif zv > settings.max_zero_variance:
        verdict = "flat"
    open_levels, predicted = None, zv
    if levels is not None and settings.curriculum is not None:
        rates = {int(k): v.pass_at_1 for k, v in levels.items()}
        open_levels = frontier(rates, settings.band)
        open_pool = sum(v.pool for k, v in levels.items() if int(k) in open_levels)
        predicted = sum(
            v.zero_variance * v.pool / open_pool for k, v in levels.items() if int(k) in open_levels
        )
    figures = Readiness(
        tasks=len(tasks),
        samples=len(rows) // max(1, len(tasks)),
        group_size=group,
        temperature=temperature,
        pass_at_1=p1,
        pass_at_1_ci95=mean_ci([per_task[t.task_id][0] for t in tasks]),
        pass_at_k=pk,
        zero_variance=zv,
        zero_variance_ci95=mean_ci([per_task[t.task_id][2] for t in tasks]),
        band=settings.band,
        max_zero_variance=settings.max_zero_variance,
        verdict=verdict,
        levels=levels,
        open_levels=open_levels,
        predicted_zero_variance=predicted,
        message="",
        wall_s=round(wall_s, 2),
    )
    return figures.model_copy(update={"message": verdict_line(figures)})


def verdict_line(r: Readiness) -> str:
    """The preflight's one line: verdict, figures, band, and what to do when outside it."""
    lo, hi = r.pass_at_1_ci95
    zlo, zhi = r.zero_variance_ci95
    said = {"in_band": "inside the learnable band", "too_easy": "too easy for GRPO",
            "too_hard": "too hard for GRPO", "flat": "flat for GRPO"}[r.verdict]  # fmt: skip
    line = (
        f"preflight: the start is {said}: pass@1 {r.pass_at_1:.2f} [{lo:.2f}, {hi:.2f}], "
        f"pass@{r.group_size} {r.pass_at_k:.2f}, expected zero-variance groups "
        f"{100 * r.zero_variance:.0f} % [{100 * max(0.0, zlo):.0f}, {100 * min(1.0, zhi):.0f}] "
        f"on {r.tasks} training tasks x {r.samples} samples at T {r.temperature:g} "
        f"(band: pass@1 in [{r.band[0]:g}, {r.band[1]:g}], zero-variance <= "
        f"{100 * r.max_zero_variance:.0f} %)"
    )
    if r.levels is not None:
        rates = ", ".join(f"{k}: {v.pass_at_1:.2f}" for k, v in r.levels.items())
        line += f"; pass@1 by level {rates}"
    if r.open_levels is not None:
        line += (
            f"; the curriculum starts GRPO on level(s) {', '.join(map(str, r.open_levels))} "
            f"(expected zero-variance {100 * r.predicted_zero_variance:.0f} %)"
        )
    if r.outside:
        line += "; " + _ADVICE[r.verdict]
    return line


_ADVICE = {
    "too_easy": "most groups will be all-correct: hand over from SFT earlier "
    "(sft.target_sampled_success), raise grpo.temperature, or train on harder tasks "
    "(docs/how-to/rl-readiness.md)",
    "too_hard": "most groups will fail alike: train the start longer by SFT, lower "
    "grpo.temperature, or train on easier tasks (docs/how-to/rl-readiness.md)",
    "flat": "most tasks are solved by all of a group's samples or by none: sample the "
    'difficulty pool (grpo.task_sampling "difficulty") so solved tasks retire, or raise '
    "grpo.temperature (docs/how-to/rl-readiness.md)",
}


def enforce(readiness: Readiness, settings: PreflightSettings) -> None:
    """Refuse a start outside the band when ``on_outside`` says so (``start_not_learnable``)."""
    if readiness.outside and settings.on_outside == "refuse":
        raise GymflowError(FailureKind.START_NOT_LEARNABLE, readiness.message)


def preflight(
    servers: dict[str, tuple],
    start: str | Path | Policy,
    pool: list[Task],
    group: int,
    temperature: float,
    max_new_tokens: int,
    settings: PreflightSettings,
    seed: int,
    out_file: Path | None = None,
) -> Readiness:
    """Sample the start (a checkpoint, or a policy already loaded) on a sample of ``pool`` and
    judge it (:func:`assess`). ``servers`` is ``{env name: (environment, in-process app)}``;
    ``out_file`` (``preflight.json``) is read instead when it is there (a resumed stage) and
    written otherwise."""
    if out_file is not None and out_file.is_file():
        return Readiness.model_validate_json(out_file.read_text())
    from gymflow.eval.evaluation import evaluate_policy
    from gymflow.policy.transformers_backend import TransformersPolicy

    started = time.time()
    samples = settings.samples or group
    tasks = sample_tasks(pool, settings.tasks, seed)
    loaded = isinstance(start, (str, Path))
    policy = TransformersPolicy.from_path(start) if loaded else start
    rows: list[dict] = []
    for name, (env, app) in servers.items():
        mine = [t for t in tasks if t.env == name] if len(servers) > 1 else tasks
        if mine:
            rows += evaluate_policy(
                env, app, policy, mine, greedy=False, samples=samples, temperature=temperature,
                max_new_tokens=max_new_tokens, seed=seed + 4099, keep_incomplete=True,
            )[0]  # fmt: skip
    del policy
    result = assess(rows, tasks, pool, group, temperature, settings, time.time() - started)
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(json.dumps(result.model_dump(), indent=2))
    return result


def drawn_pool(
    readiness: Readiness, pool: list[Task], grpo, ledger: Path
) -> tuple[list[Task], CurriculumPool | None]:
    """What GRPO draws from after the preflight: ``(pool, curriculum pool or None)``. With
    difficulty levels and the curriculum on, the difficulty pool limited to the open levels
    (:class:`~gymflow.train.curriculum.CurriculumPool`, its ledger ``ledger``), or with uniform
    sampling the pool cut to them; else the pool as it is. ``grpo`` is the run's GRPO settings."""
    if readiness.open_levels is None:
        return pool, None
    if grpo.task_sampling == "uniform":
        return [t for t in pool if level_of(t) in readiness.open_levels], None
    rates = {int(level): figures.pass_at_1 for level, figures in readiness.levels.items()}
    curriculum = CurriculumPool(
        pool, grpo.task_pool, rates, grpo.preflight.band, grpo.preflight.curriculum, grpo.seed,
        ledger,
    )  # fmt: skip
    return pool, curriculum


def before_grpo(
    servers: dict[str, tuple],
    start: str | Path,
    pool: list[Task],
    grpo,
    folder: Path,
    report: Callable[[Readiness, Path], None],
) -> tuple[Readiness, list[Task], CurriculumPool | None]:
    """GRPO's preflight as its stage runs it, in GRPO's ``folder``: sampled with the run's GRPO
    settings ``grpo`` (or read from ``preflight.json`` there), handed to ``report`` with that
    file (said, logged) before ``on_outside`` may refuse it, then what GRPO draws from
    (:func:`drawn_pool`, its ledger the folder's task pool file). Returns ``(readiness, pool,
    curriculum pool or None)``."""
    out = folder / PREFLIGHT_FILE
    ready = preflight(
        servers, start, pool, grpo.num_generations, grpo.temperature, grpo.max_new_tokens,
        grpo.preflight, grpo.seed, out,
    )  # fmt: skip
    report(ready, out)
    enforce(ready, grpo.preflight)
    pool, task_pool = drawn_pool(ready, pool, grpo, folder / TASK_POOL_FILE)
    return ready, pool, task_pool


def metrics(readiness: Readiness) -> dict[str, float]:
    """The ``preflight/*`` figures MLflow gets."""
    return {
        "preflight/pass_at_1": readiness.pass_at_1,
        "preflight/pass_at_k": readiness.pass_at_k,
        "preflight/zero_variance_share": readiness.zero_variance,
        "preflight/predicted_zero_variance_share": readiness.predicted_zero_variance,
        "preflight/in_band": float(not readiness.outside),
        "preflight/wall_s": readiness.wall_s,
    }


def _key(item: tuple[int | None, list[Task]]) -> tuple[bool, int]:
    return (item[0] is None, item[0] or 0)


def _levels(
    tasks: list[Task], pool: list[Task], per_task: dict[str, tuple[float, float, float]]
) -> dict[str, LevelFigures] | None:
    """Per-level figures when the tasks carry levels (every one of them), else None."""
    levels = [level_of(t) for t in tasks]
    if not tasks or any(level is None for level in levels) or len(set(levels)) < 2:
        return None
    in_pool = Counter(level_of(t) for t in pool)
    out = {}
    for level in sorted(set(levels)):
        mine = [per_task[t.task_id] for t in tasks if level_of(t) == level]
        out[str(level)] = LevelFigures(
            tasks=len(mine),
            pool=in_pool[level],
            pass_at_1=sum(m[0] for m in mine) / len(mine),
            zero_variance=sum(m[2] for m in mine) / len(mine),
        )
    return out


def _weights(
    tasks: list[Task], pool: list[Task], levels: dict[str, LevelFigures] | None
) -> list[tuple[Task, float]]:
    """Each sampled task's weight in the pool-wide figures: its level's share of the pool,
    split among the level's sampled tasks (plain means without levels)."""
    if levels is None:
        return [(t, 1.0 / len(tasks)) for t in tasks]
    covered = sum(v.pool for v in levels.values())
    return [
        (t, levels[str(level_of(t))].pool / covered / levels[str(level_of(t))].tasks) for t in tasks
    ]
