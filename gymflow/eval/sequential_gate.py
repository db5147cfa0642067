"""The held-out half of the gate, run sequentially: batches of tasks until every verdict settles.

:func:`run_heldout` takes the held-out task ids in the gate's seeded random order and an
``evaluate(label, task_ids) -> rows`` callable (the stage's: real greedy episodes; the
benchmark's: rows stored by an earlier run). Each look evaluates the next ``batch`` tasks for
the start, the champion and every candidate whose verdict is still open, then judges
(:func:`judge`). A candidate whose verdict is settled — its gains over the start and the
champion shown by their confidence sequences, or a loss shown — keeps that verdict, judged on
the tasks it had then. A refused one is not evaluated further; one that passed goes on while
another candidate is open, so that GRPO − control, which picks between two that pass, is
judged on every task the gate used. It stops when no verdict is open (with
``settle_choice``, also when GRPO − control is settled) or every task is used. With
``sequential`` off one batch holds every task: the full gate, the same rule on every task.

Every comparison is paired on the tasks both policies ran, which are a prefix of the order: a
candidate that stopped early is compared with the start on its own prefix, and GRPO with its
control on the shorter of theirs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from gymflow.eval.evaluation import summarize
from gymflow.eval.evidence import Paired, paired
from gymflow.eval.gate import (
    CHEAPEST_FIRST,
    Candidate,
    Champion,
    Effort,
    GateResult,
    GateSettings,
    choice_settled,
    choose,
    latency_figures,
)

Evaluate = Callable[[str, list[str]], list[dict]]
"""``(policy label, task ids) -> one evaluation row per task, in that order``."""


def gate_order(task_ids: list[str], seed: int) -> list[str]:
    """The held-out task ids in the gate's seeded random order (the same for every policy).

    >>> gate_order(["a", "b", "c"], 0) == gate_order(["c", "a", "b"], 0)
    True
    """
    order = sorted(task_ids)
    random.Random(f"gate-{seed}").shuffle(order)
    return order


def with_latency(rows: list[dict]) -> dict:
    """The evaluation summary of ``rows`` with the gate's latency figures."""
    figures = latency_figures(
        [r["completion_tokens"] for r in rows], [r["latency_s"] for r in rows]
    )
    return summarize(rows) | figures


@dataclass
class HeldOut:
    """What the held-out phase leaves: every policy's rows (a prefix of the order each), the
    candidates as last judged, GRPO − control, the decision and the effort."""

    rows: dict[str, list[dict]]
    candidates: list[Candidate]
    vs_control: Paired | None
    result: GateResult
    effort: Effort
    looks: list[dict] = field(default_factory=list)
    """Per look: tasks so far and the open candidates (the reason's trail)."""
    judged_on: dict[str, int] = field(default_factory=dict)
    between: dict = field(default_factory=dict)
    """The other pairs of arms (:func:`arm_pairs`)."""
    """Per candidate settled before the end: the tasks its verdict was judged on (it may have
    been evaluated on more, beside a candidate still open, for GRPO − control)."""

    def figures(self, label: str) -> dict:
        """``label``'s held-out figures on every task it ran: the run's table, whose paired
        gains are on those tasks too (a verdict settled earlier is judged on fewer,
        ``judged_on``, and its reason says so)."""
        return with_latency(self.rows[label])


def run_heldout(
    order: list[str],
    names: list[str],
    evaluate: Evaluate,
    settings: GateSettings,
    env_of: dict[str, str] | None = None,
    champion_label: str | None = None,
    start_label: str = "the start",
    checkpoints: dict[str, str] | None = None,
    checkpoint_rule: str | None = None,
) -> HeldOut:
    """The held-out phase (see the module docstring). ``names``: the candidates' labels
    (``grpo``, ``sft_control``); ``champion_label``: the champion's label (``champion vN``)
    when it is compared; ``env_of``: each task's environment (a mix judged per environment)."""
    step = settings.batch if settings.sequential else len(order)
    refs = ["baseline"] + (["champion"] if champion_label else [])
    rows: dict[str, list[dict]] = {label: [] for label in refs + names}
    open_ = list(names)
    looks = []
    settled_at: dict[str, int] = {}  # a settled verdict stays as judged on its tasks then
    while True:
        used = min(len(order), len(rows["baseline"]) + max(1, step))
        for label in refs + open_:
            rows[label] += evaluate(label, order[len(rows[label]) : used])
        exhausted = used == len(order)
        effort = _effort(settings, rows, len(order), checkpoint_rule)
        judged = judge(rows, names, settings, env_of, champion_label, start_label, checkpoints,
                       effort, exhausted, judged_on=settled_at)  # fmt: skip
        result, vs_control = judged.result, judged.vs_control
        for v in result.verdicts:
            if v.settled:
                settled_at.setdefault(v.candidate, len(rows[v.candidate]))
        open_ = [v.candidate for v in result.verdicts if not v.settled]
        settled = choice_settled(result, vs_control, judged.between)
        if open_ or (settings.settle_choice and not settled):
            # a candidate that passed goes on beside one still open, so that GRPO − control is
            # judged on every task the gate used, not on the prefix where the first one settled
            open_ = [v.candidate for v in result.verdicts if v.passed or not v.settled]
        looks.append({"tasks": used, "open": list(open_)})
        if not open_ or exhausted:
            judged.looks, judged.judged_on = looks, settled_at
            return judged


def judge(
    rows: dict[str, list[dict]],
    names: list[str],
    settings: GateSettings,
    env_of: dict[str, str] | None = None,
    champion_label: str | None = None,
    start_label: str = "the start",
    checkpoints: dict[str, str] | None = None,
    effort: Effort | None = None,
    exhausted: bool = True,
    general: dict[str, dict[str, Paired]] | None = None,
    judged_on: dict[str, int] | None = None,
) -> HeldOut:
    """The decision on the rows so far (``general``: per candidate, its general sets;
    ``judged_on``: a candidate settled earlier is judged on its first that many tasks, so
    tasks evaluated after, for GRPO − control, cannot change its verdict)."""
    alpha = settings.candidate_alpha(len(names))
    env_of = env_of or {}
    candidates = []
    for name in names:
        mine = rows[name][: (judged_on or {}).get(name)]
        n = len(mine)
        start, champ = rows["baseline"][:n], rows.get("champion", [])[:n]
        candidates.append(
            Candidate(
                name=name,
                summary=with_latency(mine),
                delta=_success(mine, start, alpha, settings.futility_gain),
                start_summary=with_latency(start),
                champion_delta=_success(mine, champ, alpha, settings.futility_gain)
                if champion_label
                else None,
                champion_summary=with_latency(champ) if champion_label else None,
                env_deltas=_per_env(mine, start, alpha, env_of),
                champion_env_deltas=_per_env(mine, champ, alpha, env_of) if champion_label else {},
                general=(general or {}).get(name, {}),
                checkpoint=(checkpoints or {}).get(name),
            )
        )
    vs_control = None
    if {"grpo", "sft_control"} <= set(names):
        n = min(len(rows["grpo"]), len(rows["sft_control"]))
        vs_control = _success(rows["grpo"][:n], rows["sft_control"][:n], alpha)
    between = arm_pairs(rows, names, alpha)
    effort = effort or _effort(settings, rows, max(len(r) for r in rows.values()), None)
    champion = None
    if champion_label:
        summary = with_latency(rows["champion"])
        champion = Champion(version=champion_label.removeprefix("champion v"), summary=summary)
    result = choose(with_latency(rows["baseline"]), candidates, settings, vs_control, champion,
                    start_label, effort, exhausted, between or None)  # fmt: skip
    return HeldOut(rows, candidates, vs_control, result, effort, between=between)


def arm_pairs(rows: dict[str, list[dict]], names: list[str], alpha: float) -> dict:
    """``{(dearer, cheaper): dearer − cheaper}`` for every pair of arms beyond GRPO − SFT
    control (which the gate reads as ``grpo_minus_control``), on the tasks both ran: with an
    RFT control, GRPO − RFT and RFT − SFT. Nothing with two arms or fewer."""
    arms = [n for n in CHEAPEST_FIRST if n in names]
    out = {}
    for i, cheaper in enumerate(arms):
        for dearer in arms[i + 1 :]:
            if (dearer, cheaper) == ("grpo", "sft_control"):
                continue
            n = min(len(rows[dearer]), len(rows[cheaper]))
            out[(dearer, cheaper)] = _success(rows[dearer][:n], rows[cheaper][:n], alpha)
    return out


def _success(a: list[dict], b: list[dict], alpha: float, short_of: float | None = None) -> Paired:
    success = [float(r["success"]) for r in a], [float(r["success"]) for r in b]
    return paired(*success, alpha, short_of=short_of)


def _per_env(
    a: list[dict], b: list[dict], alpha: float, env_of: dict[str, str]
) -> dict[str, Paired]:
    """A mix: :func:`_success` on each environment's tasks; nothing for one environment."""
    if len(set(env_of.values())) < 2:
        return {}
    present = {env_of.get(r["task_id"]) for r in a}
    envs = [env for env in dict.fromkeys(env_of.values()) if env in present]  # the mix's order
    out = {}
    for env in envs:
        mine = [i for i, r in enumerate(a) if env_of.get(r["task_id"]) == env]
        out[env] = _success([a[i] for i in mine], [b[i] for i in mine], alpha)
    return out


def _effort(
    settings: GateSettings, rows: dict[str, list[dict]], available: int, rule: str | None
) -> Effort:
    return Effort(
        rule="sequential" if settings.sequential else "full",
        tasks_used=max(len(r) for r in rows.values()),
        tasks_available=available,
        episodes_used=sum(len(r) for r in rows.values()),
        episodes_full=available * len(rows),
        checkpoint_rule=rule,
    )
