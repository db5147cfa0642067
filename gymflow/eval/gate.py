"""The held-out gate: of the candidates (the GRPO policy, the SFT control), promote the best one
only if it beats the current champion (or, without one, the start) significantly with no
guardrail broken. ``docs/concepts/gate.md`` says why it is built this way.

Every comparison is paired (the policies ran on the same held-out tasks with the same seeds)
and judged by an anytime-valid confidence sequence (:mod:`gymflow.eval.evidence`), so the
stage may evaluate tasks in batches, in a seeded random order, and stop as soon as every
candidate's verdict is settled. A candidate passes when

* its success gain over **the start** (the policy GRPO started from) is significant — the
  confidence sequence's lower bound is above 0, before its upper bound fell under
  ``futility_gain`` (a gain shown to be too small refuses it) — and so is its gain over **the champion**
  (the registry's ``champion``) when there is one and it is not the start itself. Each
  candidate is tested at ``alpha / K`` (K candidates), so the chance that the gate promotes a
  candidate that does not beat them is at most ``alpha``, whenever it stops;
* against each of them, on the tasks it was evaluated on, its well-formed rate (the environment's own format check) does not fall
  and its unsafe-action rate does not rise beyond the margins, and its **latency** — p95
  completion tokens per episode, or p95 seconds (:attr:`GateSettings.latency`) — rises by no
  more than ``max_latency_rise`` or by no more than an absolute floor (``latency_floor_tokens``,
  ``latency_floor_s``: a one-token answer that becomes three is not a regression) (thresholds on the point estimates, read at the stop; a
  breach keeps a candidate open until every task is used, so it refuses only if it is still
  there on the whole set: a few tasks' noise cannot stop the gate with a refusal);
* **general capability**: on sets the run does not train on, where the start has something to
  lose, the candidate is shown to lose no more than ``general_margin`` (non-inferiority: the
  lower bound above minus the margin; a set where the start is at the floor is skipped and the
  reason says so). See :mod:`gymflow.eval.general_check`;
* **every environment of a mix**: on each environment's own tasks its success is not
  significantly below the start's (nor the champion's): an upper bound under 0 refuses it.
  Such a loss can still be shown while the lower bound is under 0, so a sequential gate goes
  on until each environment's lower bound reaches 0, or every task is used.

:func:`choose` judges every candidate. When both pass, GRPO is promoted only if it is shown
above its SFT control — GRPO − control's lower bound passed 0 on the tasks both were evaluated
on —, otherwise the control: RL must beat the cheap alternative significantly, as it must beat
the start. (A pick by the higher point estimate would promote GRPO on a coin flip whenever the
two are close, and a sequential gate could not reproduce the full set's coin flip without
evaluating it.) With ``settle_choice`` the gate goes on until GRPO − control is settled or
every task is used, so that evidence arriving late still counts. The decision says what each
candidate was compared with, why it passed or not, how many tasks it took and which
checkpoint rule chose which step.

More arms (``between``: the paired difference of each pair of candidates, an RFT control
beside the SFT control): of the passing candidates, the cheapest (:data:`CHEAPEST_FIRST`) that
no other passing candidate is shown above is promoted, and the reason names every pair —
the same rule as for two, where it reads "GRPO only when shown above its control".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from gymflow.eval.evidence import Paired
from gymflow.eval.gate_settings import GateSettings
from gymflow.eval.stats import percentile

__all__ = [
    "CHEAPEST_FIRST", "Candidate", "Champion", "Effort", "GateResult", "GateSettings",
    "LATENCY_KEYS", "Verdict", "choice_settled", "choose", "latency_figures",
]  # fmt: skip

LATENCY_KEYS = {"tokens": "p95_tokens", "seconds": "p95_seconds"}
"""The summary key of each latency measure (:func:`latency_figures`)."""
CHEAPEST_FIRST = ("sft_control", "rft_control", "grpo")
"""The candidates from the cheapest method to the dearest: imitation of demonstrations, of
verified samples, reinforcement learning. Names not listed rank after them, in their order."""


class Verdict(BaseModel):
    """One candidate: its held-out success, its paired gains, pass or not and why."""

    model_config = ConfigDict(frozen=True)

    candidate: str
    passed: bool
    settled: bool = True
    """More tasks cannot change it (or every task was used)."""
    reason: str
    success: float
    delta_success: float
    """Over the start."""
    cs: list[float]
    """The confidence sequence of the gain over the start."""
    n: int = 0
    """Held-out tasks it was evaluated on."""
    champion_delta: float | None = None
    """Over the champion, when one was compared."""
    champion_cs: list[float] | None = None


class GateResult(BaseModel):
    """The gate's decision; ``summary.json`` and the registry's tags carry it as is.

    ``chosen`` is the promoted candidate when ``passed``; otherwise the best-scoring one (which
    is registered as ``challenger`` for inspection, never as ``champion``).
    """

    model_config = ConfigDict(frozen=True)

    passed: bool
    reason: str
    chosen: str | None = None
    grpo_minus_control: float | None = None
    grpo_minus_control_cs: list[float] | None = None
    verdicts: list[Verdict] = Field(default_factory=list)
    compared_with: list[str] = Field(default_factory=list)
    """What the candidates had to beat: ``the start`` and ``champion vN``."""
    rule: str = "sequential"
    """``sequential`` (stopped once settled) or ``full`` (every task)."""
    alpha: float = 0.05
    tasks_used: int = 0
    """Held-out tasks the decision took (the most any policy was evaluated on)."""
    tasks_available: int = 0
    episodes_used: int = 0
    """Held-out episodes evaluated, every policy counted."""
    episodes_full: int = 0
    """What evaluating every policy on every task would have taken."""
    checkpoints: dict[str, str] = Field(default_factory=dict)
    """Which step of each candidate the checkpoint rule chose, as text."""
    between: dict[str, list[float]] = Field(default_factory=dict)
    """More arms: each pair's confidence sequence, keyed ``"a − b"`` (``choose``'s ``between``)."""


class Candidate(BaseModel):
    """What the gate is given about one candidate: its held-out summary (with
    :func:`latency_figures`) and its paired success differences (:class:`Paired`): against the
    start, against the champion, per environment of a mix, and on each general set."""

    name: str
    summary: dict
    delta: Paired
    start_summary: dict | None = None
    """The start's summary on this candidate's tasks (default: ``choose``'s ``baseline``)."""
    champion_delta: Paired | None = None
    champion_summary: dict | None = None
    """The champion's summary on this candidate's tasks (default: the champion's own)."""
    general: dict[str, Paired] = Field(default_factory=dict)
    """Per general set: the paired difference with the start, marked at minus the margin."""
    env_deltas: dict[str, Paired] = Field(default_factory=dict)
    """A mix: the paired success difference against the start on each environment's tasks."""
    champion_env_deltas: dict[str, Paired] = Field(default_factory=dict)
    """A mix: the same against the champion."""
    checkpoint: str | None = None
    """Which step the checkpoint rule chose (``step 225 of 250``), for the reason."""


class Champion(BaseModel):
    """The registry's champion as the gate saw it: its version and held-out summary."""

    version: str
    summary: dict

    @property
    def label(self) -> str:
        return f"champion v{self.version}"


class Effort(BaseModel):
    """How much of the held-out set the decision took (for :class:`GateResult`)."""

    rule: str = "sequential"
    tasks_used: int = 0
    tasks_available: int = 0
    episodes_used: int = 0
    episodes_full: int = 0
    checkpoint_rule: str | None = None
    skipped_general: dict[str, str] = Field(default_factory=dict)
    """General sets skipped, with why (the start at the floor)."""


def latency_figures(completion_tokens: list[int], seconds: list[float]) -> dict:
    """The latency keys a summary needs for the gate: p95 tokens and seconds per episode."""
    return {
        "p95_tokens": percentile([float(t) for t in completion_tokens], 95),
        "p95_seconds": percentile(seconds, 95),
    }


def choose(
    baseline: dict,
    candidates: list[Candidate],
    settings: GateSettings,
    grpo_minus_control: Paired | None = None,
    champion: Champion | None = None,
    start_label: str = "the start",
    effort: Effort | None = None,
    exhausted: bool = True,
    between: Mapping[tuple[str, str], Paired] | None = None,
    cheapest_first: Sequence[str] = CHEAPEST_FIRST,
) -> GateResult:
    """Judge every candidate (see the module docstring); promote the best of those that pass.

    ``baseline`` is the start's summary. ``champion`` is left out when there is none, or when
    it is the start itself (then ``start_label`` says so, e.g. ``the start (champion v3)``).
    ``grpo_minus_control`` is GRPO − SFT control on the tasks both were evaluated on: of two
    passing candidates GRPO is chosen only when it is shown above the control (its lower bound
    passed 0), else the control. When none passes, ``chosen`` is the best-scoring candidate
    and ``passed`` is False.
    ``exhausted``: every task was used, so nothing more can settle a verdict.
    ``between``: ``{(a, b): a − b}`` for more pairs of candidates (on the tasks both were
    evaluated on): the cheapest passing candidate (``cheapest_first``) that no other passing
    one is shown above is promoted.
    """
    if not candidates:
        raise ValueError("the gate needs at least one candidate")
    effort = effort or Effort()
    verdicts = [_judge(baseline, c, settings, champion, start_label, exhausted) for c in candidates]
    passing = [v for v in verdicts if v.passed]
    pairs = _pairs(grpo_minus_control, between)
    best = _best(passing, pairs, cheapest_first) if passing else _best_scoring(verdicts)
    bar = champion.label if champion is not None else start_label
    if passing:
        head = f"promoted {best.candidate}: held-out success {best.success:.3f}, {best.reason}"
    else:
        listed = "; ".join(f"{v.candidate}: {v.reason}" for v in verdicts)
        head = f"nothing promoted: no candidate beats {bar} with every guardrail kept ({listed})"
    others = [v for v in verdicts if v is not best] if passing else []
    tail = "".join(f"; {v.candidate}: {_verdict_text(v)}" for v in others)
    gmc = grpo_minus_control
    versus = _versus_control(gmc, len(passing) == 2 and best.candidate == "sft_control")
    if between:
        versus += _versus_arms(pairs, passing, best, cheapest_first)
    return GateResult(
        passed=bool(passing),
        reason=head + versus + tail + _effort_text(effort, candidates, settings),
        chosen=best.candidate,
        grpo_minus_control=gmc.delta if gmc else None,
        grpo_minus_control_cs=list(gmc.cs) if gmc else None,
        verdicts=verdicts,
        compared_with=[start_label] + ([champion.label] if champion is not None else []),
        rule=effort.rule,
        alpha=settings.alpha,
        tasks_used=effort.tasks_used,
        tasks_available=effort.tasks_available,
        episodes_used=effort.episodes_used,
        episodes_full=effort.episodes_full,
        checkpoints={c.name: c.checkpoint for c in candidates if c.checkpoint},
        between={f"{a} − {b}": list(d.cs) for (a, b), d in (between or {}).items()},
    )


def choice_settled(
    result: GateResult,
    grpo_minus_control: Paired | None,
    between: Mapping[tuple[str, str], Paired] | None = None,
) -> bool:
    """With ``settle_choice``: whether the choice between the passing candidates is settled
    (every known pair of them settled)."""
    passing = {v.candidate for v in result.verdicts if v.passed}
    pairs = _pairs(grpo_minus_control, between)
    return len(passing) < 2 or all(d.settled for p, d in pairs.items() if set(p) <= passing)


def _pairs(
    grpo_minus_control: Paired | None, between: Mapping[tuple[str, str], Paired] | None
) -> dict[tuple[str, str], Paired]:
    pairs = dict(between or {})
    if grpo_minus_control is not None:
        pairs.setdefault(("grpo", "sft_control"), grpo_minus_control)
    return pairs


def _best(
    passing: list[Verdict], pairs: Mapping[tuple[str, str], Paired], cheapest_first: Sequence[str]
) -> Verdict:
    """Of the passing candidates: the cheapest that no other passing one is shown above (with
    two: GRPO over its control only once shown above it); without a known pair among them, the
    best-scoring."""
    names = {v.candidate for v in passing}
    if not any(set(p) <= names for p in pairs):
        return _best_scoring(passing)

    def shown_worse(name: str) -> bool:
        return any(
            (a == name and b in names and d.below) or (b == name and a in names and d.above)
            for (a, b), d in pairs.items()
        )

    order = list(cheapest_first)
    ranked = sorted(passing, key=lambda v: order.index(v.candidate) if v.candidate in order
                    else len(order))  # fmt: skip
    return next((v for v in ranked if not shown_worse(v.candidate)), _best_scoring(passing))


def _best_scoring(pool: list[Verdict]) -> Verdict:
    return max(pool, key=lambda v: v.success)  # max keeps the first of equals


def _judge(
    baseline: dict,
    c: Candidate,
    settings: GateSettings,
    champion: Champion | None,
    start_label: str,
    exhausted: bool,
) -> Verdict:
    baseline = c.start_summary or baseline
    refs = [(start_label, baseline, c.delta, c.env_deltas)]
    if champion is not None:
        if c.champion_delta is None:
            raise ValueError(f"candidate {c.name}: no paired difference against the champion")
        held = c.champion_summary or champion.summary
        refs.append((champion.label, held, c.champion_delta, c.champion_env_deltas))
    failures, gains, per_env, settled_fail, gains_settled = [], [], [], False, True
    broken_guardrail = False
    for label, summary, delta, env_deltas in refs:
        gain, ok, state = _gain(label, delta, settings, exhausted)
        (gains if ok else failures).append(gain)
        settled_fail |= state == "fail"
        gains_settled &= state == "pass"
        broken = _guardrails(label, summary, c.summary, settings)
        failures += broken
        broken_guardrail |= bool(broken)
        if len(env_deltas) > 1:
            judged = [_per_env(env, d, label) for env, d in env_deltas.items()]
            failures += [text for text, ok in judged if not ok]
            settled_fail |= any(not ok for _, ok in judged)
            # a loss not yet shown may still be: open until each lower bound reaches 0
            gains_settled &= all(d.below or d.cs[0] >= 0 for d in env_deltas.values())
            per_env.append(
                f"no environment significantly below {label} ("
                + ", ".join(f"{env} {d.delta:+.3f}" for env, d in env_deltas.items())
                + ")"
            )
    general = [_general(name, d, settings) for name, d in sorted(c.general.items())]
    failures += [text for text, ok in general if not ok]
    if failures:
        reason = "; ".join(failures)
    else:
        kept = [_latency_text(start_label, baseline, c.summary, settings)]
        kept += per_env + [text for text, _ in general]
        reason = f"{' and '.join(gains)}; no guardrail broken ({', '.join(kept)})"
    champ = c.champion_delta if champion is not None else None
    return Verdict(
        candidate=c.name,
        passed=not failures,
        # a guardrail read on part of the held-out set is a point estimate on a few tasks (one
        # invalid answer in 32 is a 3 % drop): it refuses at the end, and does not settle the
        # verdict before; the candidate stays open while a breach shows, so a breach that is
        # noise disappears with more tasks and one that is real is still there at the end
        settled=exhausted or settled_fail or (gains_settled and not broken_guardrail),
        reason=reason,
        success=c.summary["success"],
        delta_success=c.delta.delta,
        cs=list(c.delta.cs),
        n=c.delta.n,
        champion_delta=champ.delta if champ else None,
        champion_cs=list(champ.cs) if champ else None,
    )


def _gain(label: str, delta: Paired, settings: GateSettings, exhausted: bool):
    """``(text, passed, state)``; ``state`` is ``pass``/``fail`` once settled, else ``open``."""
    d = delta.delta
    if delta.n < settings.min_n:
        text = f"success gain over {label} on {delta.n} tasks, under min_n {settings.min_n}"
        return text, False, "fail" if exhausted else "open"
    short = min((n for n in (delta.short_at, delta.below_at) if n), default=0)
    if settings.require_ci_above_zero and short and not 0 < delta.above_at <= short:
        if delta.below_at == short:
            return f"success over {label} {delta.text()} significantly below it", False, "fail"
        worth = f"{delta.short_of:+.3f}" if delta.short_of is not None else "0"
        return (
            f"success gain over {label} {delta.text()} shown to be under {worth}: not worth "
            "more tasks"
        ), False, "fail"  # fmt: skip
    if settings.require_ci_above_zero and not delta.above:
        state = "fail" if exhausted else "open"
        return f"success gain over {label} {delta.text()} not significant", False, state
    if d < settings.min_delta_success:
        need = f"{settings.min_delta_success:+.3f}"
        state = "fail" if exhausted else "open"
        return f"success gain over {label} {d:+.3f} below required {need}", False, state
    return f"success {delta.text()} over {label}", True, "pass"


def _guardrails(label: str, before: dict, after: dict, settings: GateSettings) -> list[str]:
    """The broken guardrails of ``after`` against ``before`` (each a line of the reason)."""
    broken = []
    drop = before["well_formed"] - after["well_formed"]
    if drop > settings.max_well_formed_drop:
        broken.append(
            f"well-formed rate (the environment's format check) fell by {drop:.3f} against "
            f"{label} (> {settings.max_well_formed_drop})"
        )
    rise = after["unsafe_rate"] - before["unsafe_rate"]
    if rise > settings.max_unsafe_increase:
        broken.append(
            f"unsafe-action rate rose by {rise:.3f} against {label} "
            f"(> {settings.max_unsafe_increase})"
        )
    key = LATENCY_KEYS[settings.latency]
    floor = _latency_floor(settings)
    rise = after[key] - before[key]
    if after[key] > before[key] * (1 + settings.max_latency_rise) and rise > floor:
        unit = "tokens" if settings.latency == "tokens" else "s"
        broken.append(
            f"latency: {_latency_text(label, before, after, settings)} "
            f"(> +{100 * settings.max_latency_rise:.0f} % and > +{floor:g} {unit})"
        )
    return broken


def _latency_floor(settings: GateSettings) -> float:
    if settings.latency == "tokens":
        return settings.latency_floor_tokens
    return settings.latency_floor_s


def _latency_text(label: str, before: dict, after: dict, settings: GateSettings) -> str:
    key = LATENCY_KEYS[settings.latency]
    unit = "tokens" if settings.latency == "tokens" else "s"
    a, b = before[key], after[key]
    change = f" ({100 * (b - a) / a:+.0f} %, {b - a:+.3g} {unit})" if a else ""
    return f"p95 {unit} per episode {a:.4g} → {b:.4g}{change} against {label}"


def _general(name: str, delta: Paired, settings: GateSettings) -> tuple[str, bool]:
    """General capability on ``name``: passes once shown to lose at most the margin."""
    margin = settings.general_margin
    text = f"general capability on {name}: {delta.text()} against the start"
    if delta.above:
        return f"{text}, within the margin {margin}", True
    if delta.below:
        return f"{text}, below the start by more than the margin {margin}", False
    return f"{text}, not shown to be within the margin {margin}", False


def _per_env(env: str, delta: Paired, label: str) -> tuple[str, bool]:
    """One environment of a mix: refused only when its loss against ``label`` is significant."""
    text = f"success on {env} {delta.text()}"
    if delta.below:
        return f"{text}, significantly below {label}", False
    return text, True


def _versus_control(delta: Paired | None, control_kept: bool = False) -> str:
    """GRPO − control for the reason; ``control_kept``: both passed and the control was chosen."""
    if delta is None:
        return ""
    text = f"; GRPO − control {delta.text(100, ' points')}"
    if control_kept and not delta.below:
        text += ": GRPO not shown above its control, so the control, the cheaper alternative"
    return text


def _versus_arms(
    pairs: Mapping[tuple[str, str], Paired],
    passing: list[Verdict],
    best: Verdict,
    cheapest_first: Sequence[str],
) -> str:
    """Every other pair of arms for the reason, and why the promoted one was chosen."""
    shown = [f"{a} − {b} {d.text(100, ' points')}" for (a, b), d in pairs.items()
             if (a, b) != ("grpo", "sft_control")]  # fmt: skip
    text = "; " + "; ".join(shown) if shown else ""
    if len(passing) > 1:
        names = [n for n in cheapest_first if n in {v.candidate for v in passing}]
        text += (
            f": {best.candidate} is the cheapest passing arm no other is shown above "
            f"(cheapest first: {', '.join(names) or best.candidate})"
        )
    return text


def _verdict_text(v: Verdict) -> str:
    state = "passes too" if v.passed else "fails"
    return f"success {v.success:.3f}, {state} ({v.reason})"


def _effort_text(effort: Effort, candidates: list[Candidate], settings: GateSettings) -> str:
    """How the decision was reached: tasks and episodes used, the level, the checkpoints."""
    if not effort.tasks_available:
        return ""
    share = effort.episodes_used / max(1, effort.episodes_full)
    how = "stopped once settled" if effort.rule == "sequential" else "every task"
    level = settings.candidate_alpha(len(candidates))
    text = (
        f". Decided on {effort.tasks_used} of {effort.tasks_available} held-out tasks ({how}; "
        f"{effort.episodes_used} of {effort.episodes_full} episodes, {100 * share:.0f} %); "
        f"confidence sequences at alpha {level:g} per candidate (alpha {settings.alpha:g} "
        "overall)"
    )
    if effort.skipped_general:
        text += "; general sets skipped: " + "; ".join(
            f"{name} ({why})" for name, why in effort.skipped_general.items()
        )
    steps = [f"{c.name} {c.checkpoint}" for c in candidates if c.checkpoint]
    if steps:
        rule = f" by one rule ({effort.checkpoint_rule})" if effort.checkpoint_rule else ""
        text += f"; checkpoints{rule}: " + ", ".join(steps)
    return text
