"""The gate's general-capability guardrail: policies on task sets the run does not train on.

A guardrail must be able to fail on the runs it guards, so it measures where the start has
something to lose, and asks the candidate to be shown to lose at most a margin there
(non-inferiority, ``GateSettings.general_margin``):

* an environment's held-out split (``GateSettings.general_envs``: a tool_call run is also
  checked on math and games), the first ``general_n`` of its tasks as
  :func:`gymflow.eval.splits.eval_tasks` finds them, measured by ``general_measure``: the
  per-token probability of each task's gold answer (:mod:`gymflow.eval.gold_probability`;
  the default: a tool_call start that solves no math task still gives math's answers some
  probability), or greedy success;
* an external set (``GateSettings.general_sets``: ``bfcl:simple_python``,
  ``bfcl:live_simple``), a public benchmark's held-out tasks, by greedy success; the start
  and every candidate are evaluated there (they are the run's transfer figures too).

:func:`check_general` takes a set's tasks in a seeded random order, in batches. The start is
measured on the first batch: if it scores at most the margin it is at the floor — a candidate
cannot lose more than the margin there — and the set is skipped, and said so. Otherwise every
candidate is measured batch by batch until its confidence sequence (at the gate's level)
settles: its lower bound above minus the margin (kept), its upper bound below it (lost), or the
set used up without either (not shown: refused). Every policy runs on the same tasks with the
same seeds, so each comparison is paired.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from gymflow.core.task_record import Task
from gymflow.data.data_catalog import SETS
from gymflow.data.task_table import dataset_hash
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.eval_engine import EvalEngine
from gymflow.eval.evaluation import evaluate_policy
from gymflow.eval.evidence import Paired, paired
from gymflow.eval.gold_probability import gold_probabilities
from gymflow.rollout.store import Lineage

GoldPairs = Callable[[object, object, list[Task]], list[list[dict]]]
"""``(environment, tokenizer, tasks) -> per task its gold (prompt, completion) pairs``."""


@dataclass(frozen=True)
class GeneralSet:
    """One set of the check: ``name`` is an environment (its held-out split) or an external
    set's name; ``limit`` its first tasks; ``measure`` what is compared."""

    name: str
    env: str
    split: str
    limit: int
    measure: str = "success"

    @property
    def folder(self) -> str:
        """The episodes' folder under ``<run>/eval/`` (without the policy's label)."""
        return f"heldout-{self.name}" if self.split == "heldout" else self.name.replace(":", "-")

    @property
    def external(self) -> bool:
        return self.split != "heldout"


class GeneralOutcome(BaseModel):
    """One set's result: what each policy scored, each candidate's comparison, or why skipped."""

    name: str
    measure: str
    margin: float
    available: int
    """Tasks in the set."""
    skipped: str | None = None
    """Why the set could not guard anything (the start at the floor); None when judged."""
    values: dict[str, float] = Field(default_factory=dict)
    """Mean measure per policy (``baseline`` = the start) over the tasks it ran."""
    n: dict[str, int] = Field(default_factory=dict)
    deltas: dict[str, Paired] = Field(default_factory=dict)
    """Per candidate: its paired difference with the start, marked at minus the margin."""


def general_envs(wanted: list[str], trained: set[str]) -> list[str]:
    """``wanted`` without the environments the run trains on, in order, once each.

    >>> general_envs(["math", "tool_call", "games", "math"], {"tool_call"})
    ['math', 'games']
    """
    return [e for i, e in enumerate(wanted) if e not in trained and e not in wanted[:i]]


def env_sets(envs: list[str], limit: int, measure: str = "success") -> list[GeneralSet]:
    return [GeneralSet(env, env, "heldout", limit, measure) for env in envs]


def external_sets(names: list[str], limit: int) -> list[GeneralSet]:
    """
    >>> external_sets(["bfcl:live_simple"], 100)
    [GeneralSet(name='bfcl:live_simple', env='tool_call', split='bfcl:live_simple', limit=100, measure='success')]
    """
    return [GeneralSet(name, SETS[name].env, name, limit) for name in names]


Measure = Callable[[GeneralSet, str, list[Task]], list[float]]
"""``(set, policy label, tasks) -> one value in [0, 1] per task, in order``."""


def check_general(
    general: GeneralSet,
    tasks: list[Task],
    candidates: list[str],
    measure: Measure,
    margin: float,
    alpha: float,
    batch: int,
    seed: int,
) -> GeneralOutcome:
    """Judge ``candidates`` against the start (``baseline``) on ``tasks`` (see the module
    docstring); ``batch`` = ``len(tasks)`` measures every task at once."""
    order = list(tasks)
    random.Random(f"general-{general.name}-{seed}").shuffle(order)
    step = max(1, batch)
    values: dict[str, list[float]] = {"baseline": measure(general, "baseline", order[:step])}
    used = len(values["baseline"])
    out = GeneralOutcome(name=general.name, measure=general.measure, margin=margin,
                         available=len(order))  # fmt: skip
    start = sum(values["baseline"]) / max(1, used)
    if start <= margin:
        out.skipped = (
            f"the start scores {start:.3f} ({_unit(general)}) on {used} tasks, within the "
            f"margin {margin} of the floor: nothing to lose"
        )
        if general.external:  # still the run's transfer figures, on the same tasks
            values |= {c: measure(general, c, order[:used]) for c in candidates}
        return _filled(out, values)
    active = list(candidates)
    values |= {c: [] for c in candidates}
    while True:
        for c in active:
            values[c] += measure(general, c, order[len(values[c]) : used])
            out.deltas[c] = paired(values[c], values["baseline"][: len(values[c])], alpha,
                                   mark=-margin)  # fmt: skip
        active = [c for c in active if not out.deltas[c].settled]
        if not active or used == len(order):
            return _filled(out, values)
        values["baseline"] += measure(general, "baseline", order[used : used + step])
        used = len(values["baseline"])


def _filled(out: GeneralOutcome, values: dict[str, list[float]]) -> GeneralOutcome:
    out.values = {k: sum(v) / len(v) for k, v in values.items() if v}
    out.n = {k: len(v) for k, v in values.items() if v}
    return out


def _unit(general: GeneralSet) -> str:
    return "gold-answer probability" if general.measure == "gold_probability" else "success"


class PolicyMeasures:
    """The two measures for :func:`check_general` on real policies: each policy loaded once,
    each set's environment served in process once; success episodes are stored under
    ``run_dir/eval/<set folder>-<label>/`` (the rollout layout), batch after batch. Success
    episodes generate on ``engine`` (:class:`~gymflow.eval.eval_engine.EvalEngine`; default:
    transformers, in this process); gold-answer probabilities are forward passes of the model
    in this process whatever the engine."""

    def __init__(
        self,
        policies: dict[str, str],
        gold_pairs: GoldPairs,
        seed: int,
        max_new_tokens: int,
        run_dir: Path,
        engine: EvalEngine | None = None,
    ):
        self.paths, self.gold_pairs = policies, gold_pairs
        self.seed, self.max_new_tokens, self.run_dir = seed, max_new_tokens, run_dir
        self.engine, self._owns_engine = engine or EvalEngine("transformers"), engine is None
        self._apps: dict[str, tuple] = {}
        self._started: set[str] = set()

    def __call__(self, general: GeneralSet, label: str, tasks: list[Task]) -> list[float]:
        if not tasks:
            return []
        env, path = get_env(general.env), self.paths[label]
        if general.measure == "gold_probability":
            model = self.engine.transformers(path)
            pairs = self.gold_pairs(env, model.tokenizer, tasks)
            return gold_probabilities(model.model, model.tokenizer, pairs)
        if general.env not in self._apps:
            self._apps[general.env] = (env, build_app(env))
        env, app = self._apps[general.env]
        folder = f"{general.folder}-{label}"
        lineage = Lineage(self.run_dir.name, 0, 0, self.engine.spec(path), env.name,
                          env.version, dataset_hash(tasks))  # fmt: skip
        rows, _ = evaluate_policy(
            env, app, self.engine.policy(path), tasks, greedy=True,
            max_new_tokens=self.max_new_tokens, seed=self.seed,
            out_dir=self.run_dir / "eval" / folder, lineage=lineage,
            append=folder in self._started,
        )  # fmt: skip
        self._started.add(folder)
        return [float(r["success"]) for r in rows]

    def close(self) -> None:
        for _, app in self._apps.values():
            app.state.verifier.shutdown()
        if self._owns_engine:
            self.engine.close()
