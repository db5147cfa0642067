"""The sequential gate against the full gate on stored evaluations, and its false-promotion rate.

    python benchmarks/lifecycle/gate/gate.py RUN_DIR...          # run folders whose held-out evaluations cover
                                                  # every task (gate.sequential false)
    python benchmarks/lifecycle/gate/gate.py --sims 10000 --json --out benchmarks/lifecycle/gate/result.json RUN_DIR...

**Stored evaluations.** For each run folder, the start's, GRPO's, the control's (and the
champion's) held-out rows (``eval/heldout-<label>.parquet``) are replayed through the gate's
own held-out phase (:func:`gymflow.eval.sequential_gate.run_heldout`): once sequentially (the
default settings: batches of 32 tasks in the gate's seeded order, stopping once every verdict
is settled), once more with ``settle_choice`` (when both candidates pass, it goes on until
GRPO − control is settled), once on every task (``sequential`` false: the full gate, the same
rule), and the full set is also judged by a fixed-n exact one-sided sign test at each
candidate's level (McNemar's, the usual fixed-n choice), for reference. Per run: the decision
of each, the tasks and the share of episodes the sequential gate used. The guardrail sets (general capability)
are not stored per task, so they are not replayed here.

**Simulation.** Gates on synthetic paired outcomes with known true differences — zero among
them — run the same decision rule vectorised (:func:`gymflow.eval.sequential.first_crossings`:
each candidate's confidence sequence at alpha / 2, looked at every 32 tasks; a candidate
passes once its lower bound passes 0, is refused once its upper bound falls under the futility
gain (0.05) first, and is no longer evaluated then, a passed one once no candidate is open;
of two passing candidates GRPO is promoted only once GRPO − control's lower bound passed 0 on
their common tasks, else the control) on 396 held-out tasks. A *false promotion* is promoting
a candidate whose true success difference with the start is at most 0; a *false credit to RL*
is promoting GRPO over a passing control that is truly as good (counted where GRPO's true
success is at most the control's). The vectorised rule is checked against the real
``run_heldout`` on the first simulated gates of each scenario.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, machine  # noqa: E402
from gymflow.eval.gate import GateSettings  # noqa: E402
from gymflow.eval.sequential import first_crossings  # noqa: E402
from gymflow.eval.sequential_gate import gate_order, run_heldout  # noqa: E402
from gymflow.eval.stats import wilson  # noqa: E402

LABELS = {"baseline": "baseline", "grpo": "candidate", "sft_control": "sft_control"}
N, BATCH, ALPHA = 396, 32, 0.05
SCENARIOS = {
    # name: (start success, per-candidate (success, share of tasks copied from the start))
    "both null (start 0.60)": (0.60, [(0.60, 0.7), (0.60, 0.7)]),
    "both null (start 0.85)": (0.85, [(0.85, 0.5), (0.85, 0.5)]),
    "both slightly worse (-0.02)": (0.60, [(0.58, 0.7), (0.58, 0.7)]),
    "GRPO +0.05, control null": (0.60, [(0.65, 0.6), (0.60, 0.6)]),
    "GRPO null, control -0.10": (0.60, [(0.60, 0.6), (0.50, 0.6)]),
    "GRPO +0.20, control +0.15 (the default's size)": (0.62, [(0.82, 0.4), (0.77, 0.4)]),
    "both +0.15 (GRPO no better than its control)": (0.62, [(0.77, 0.4), (0.77, 0.4)]),
}


# ---------------------------------------------------------------- stored evaluations


def _rows(run: Path) -> dict[str, list[dict]]:
    out = {}
    for name, label in LABELS.items():
        path = run / "eval" / f"heldout-{label}.parquet"
        if path.is_file():
            out[name] = _read(path)
    champions = sorted((run / "eval").glob("heldout-champion-v*.parquet"))
    if champions:
        out["champion"] = _read(champions[-1])
    return out


def _read(path: Path) -> list[dict]:
    """A stored run's held-out rows; a run stored before the column was renamed names its
    well-formed flag ``valid_json``."""
    frame = pl.read_parquet(path)
    if "valid_json" in frame.columns:
        frame = frame.rename({"valid_json": "well_formed"})
    return frame.to_dicts()


def _sign_test(a: list[int], b: list[int]) -> float:
    """One-sided exact sign test of a > b on paired 0/1 outcomes (McNemar's, exact)."""
    plus = sum(x > y for x, y in zip(a, b, strict=True))
    minus = sum(x < y for x, y in zip(a, b, strict=True))
    n = plus + minus
    return sum(math.comb(n, k) for k in range(plus, n + 1)) / 2**n if n else 1.0


def replay(run: Path, seed: int) -> dict:
    """One stored run through the sequential gate, the full gate and the fixed-n sign test."""
    rows = _rows(run)
    names = [n for n in ("grpo", "sft_control") if n in rows]
    common = set.intersection(*(set(r["task_id"] for r in rows[k]) for k in rows))
    by_id = {k: {r["task_id"]: r for r in rows[k]} for k in rows}
    order = gate_order(sorted(common), seed)

    def evaluate(label: str, ids: list[str]) -> list[dict]:
        return [by_id[label][i] for i in ids]

    champion = "champion v?" if "champion" in rows else None
    out = {"run": run.name, "tasks": len(order)}
    rules = {
        "sequential": GateSettings(),
        "sequential_settle_choice": GateSettings(settle_choice=True),
        "full": GateSettings(sequential=False),
    }
    for rule, settings in rules.items():
        held = run_heldout(order, names, evaluate, settings, None, champion)
        r = held.result
        out[rule] = {
            "passed": r.passed, "chosen": r.chosen if r.passed else None,
            "verdicts": {v.candidate: v.passed for v in r.verdicts},
            "tasks_used": r.tasks_used, "episodes_used": r.episodes_used,
            "episodes_full": r.episodes_full,
            "episode_share": round(r.episodes_used / r.episodes_full, 3),
            "looks": len(held.looks),
        }  # fmt: skip
    level = ALPHA / len(names)
    start = [int(by_id["baseline"][i]["success"]) for i in order]
    exact = {}
    for name in names:
        mine = [int(by_id[name][i]["success"]) for i in order]
        exact[name] = _sign_test(mine, start) < level
    out["fixed_n_sign_test"] = {"verdicts_on_start": exact}
    for rule in ("sequential", "sequential_settle_choice"):
        key = rule.removeprefix("sequential")
        same = {k: out[rule][k] == out["full"][k] for k in ("passed", "chosen", "verdicts")}
        out["same_decision" + key] = all(same.values())
        out["same_verdicts" + key] = same["passed"] and same["verdicts"]
    return out


# ---------------------------------------------------------------- simulation


def _outcomes(rng, sims: int, start_p: float, cands) -> tuple[np.ndarray, list[np.ndarray]]:
    start = (rng.random((sims, N)) < start_p).astype(float)
    out = []
    for p, copied in cands:
        # copied from the start with prob. `copied`, else drawn anew with the probability that
        # keeps the candidate's marginal success at p
        fresh_p = (p - copied * start_p) / (1 - copied)
        if not 0 <= fresh_p <= 1:
            raise ValueError(f"candidate success {p} not reachable with copy share {copied}")
        fresh = (rng.random((sims, N)) < fresh_p).astype(float)
        out.append(np.where(rng.random((sims, N)) < copied, start, fresh))
    return start, out


def _looks(first: np.ndarray) -> np.ndarray:
    """The look (tasks seen) at which a crossing after ``first`` tasks is seen; N if never."""
    return np.where(first > 0, np.minimum(N, np.ceil(first / BATCH) * BATCH), N).astype(int)


def simulate(rng, sims: int, start_p: float, cands) -> dict:
    """The sequential gate's decision on ``sims`` gates (see the module docstring)."""
    start, outs = _outcomes(rng, sims, start_p, cands)
    level = ALPHA / len(cands)
    passed, stop = [], []
    futility = GateSettings().futility_gain
    for c in outs:
        d = c - start
        # the lower bound passing 0 first passes it; the upper bound falling under the
        # futility gain first (a loss included) refuses it; the look after either settles it
        up, short = first_crossings(d, 0.0, level, +1), first_crossings(d, futility, level, -1)
        ok = (up > 0) & ((short == 0) | (up <= short))
        passed.append(ok)
        stop.append(np.where(ok, _looks(up), _looks(short)))
    true = [p - start_p for p, _ in cands]  # each candidate's true difference with the start
    both = passed[0] & passed[1]
    used = np.maximum(stop[0], stop[1])
    # a candidate that passed goes on while the other is open; a refused one stops
    length = [np.where(ok, used, st) for ok, st in zip(passed, stop, strict=True)]
    common = np.minimum(length[0], length[1])
    # of two passing candidates GRPO only once shown above its control on their common tasks
    above = first_crossings(outs[0] - outs[1], 0.0, level, +1)
    shown = (above > 0) & (above <= common)
    chosen = np.where(
        both, np.where(shown, 0, 1), np.where(passed[0], 0, np.where(passed[1], 1, -1))
    )
    false = np.zeros(sims, bool)
    for k, t in enumerate(true):
        if t <= 0:
            false |= chosen == k
    # RL credited falsely: GRPO promoted over a passing control that is truly as good
    n_credit = int((both & (chosen == 0)).sum()) if true[0] <= true[1] else 0
    episodes = used + length[0] + length[1]  # the start up to the stop, each candidate its own
    n_false = int(false.sum())
    return {
        "gates": sims,
        "true_differences": [round(t, 4) for t in true],
        "promoted": round(float((chosen >= 0).mean()), 4),
        "grpo_promoted": round(float((chosen == 0).mean()), 4),
        "false_promotions": n_false,
        "false_promotion_rate": round(n_false / sims, 5),
        "false_promotion_rate_ci95": [round(x, 5) for x in wilson(n_false, sims)],
        "grpo_over_control_false": n_credit,
        "grpo_over_control_false_rate": round(n_credit / sims, 5),
        "mean_tasks_used": round(float(used.mean()), 1),
        "mean_episode_share": round(float(episodes.mean() / (3 * N)), 3),
        "_arrays": (start, outs, chosen),
    }


def check_against_gate(
    start: np.ndarray, outs: list[np.ndarray], chosen: np.ndarray, k: int
) -> int:
    """How many of the first ``k`` simulated gates the real ``run_heldout`` decides alike."""
    names = ["grpo", "sft_control"]
    agree = 0
    ids = [f"t{i:03d}" for i in range(N)]
    for s in range(k):
        table = {"baseline": start[s], "grpo": outs[0][s], "sft_control": outs[1][s]}

        def evaluate(label, got, table=table):
            return [_row(i, table[label][int(i[1:])]) for i in got]

        result = run_heldout(ids, names, evaluate, GateSettings()).result
        real = names.index(result.chosen) if result.passed else -1
        agree += real == chosen[s]
    return agree


def _row(task_id: str, success: float) -> dict:
    return {"task_id": task_id, "env": "sim", "success": bool(success), "well_formed": True,
            "unsafe": False, "reward": float(success), "failure_kind": None,
            "completion_tokens": 10, "latency_s": 0.01}  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("runs", nargs="*", type=Path, help="run folders with full held-out rows")
    parser.add_argument("--sims", type=int, default=10_000, help="simulated gates per scenario")
    parser.add_argument("--check", type=int, default=200, help="of them, checked with run_heldout")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.sims, args.check = 200, 4
    load = os.getloadavg()
    started = time.time()
    runs = [replay(run, args.seed) for run in args.runs]
    for r in runs:
        print(f"{r['run']}: " + "; ".join(
            f"{rule} {r[rule]['chosen'] or 'nothing'} ({100 * r[rule]['episode_share']:.0f} %)"
            for rule in ("sequential", "sequential_settle_choice", "full")))  # fmt: skip
    rng = np.random.default_rng(args.seed)
    scenarios = {}
    for name, (start_p, cands) in SCENARIOS.items():
        sim = simulate(rng, args.sims, start_p, cands)
        start, outs, chosen = sim.pop("_arrays")
        sim["checked_with_run_heldout"] = (
            f"{check_against_gate(start, outs, chosen, args.check)} of {args.check} alike"
        )
        scenarios[name] = sim
        print(f"{name}: {sim['false_promotions']} false promotions in {sim['gates']} gates "
              f"({sim['false_promotion_rate']:.4f}), {sim['grpo_over_control_false']} false "
              f"credits to RL; mean {sim['mean_tasks_used']} tasks, "
              f"{100 * sim['mean_episode_share']:.0f} % of the episodes")  # fmt: skip

    def share(rule: str) -> float | None:
        shares = [r[rule]["episode_share"] for r in runs]
        return round(sum(shares) / len(shares), 3) if shares else None

    result = {
        "benchmark": "gate",
        "alpha": ALPHA,
        "settings": GateSettings().model_dump(include={"alpha", "batch", "min_n", "sequential"}),
        "stored_runs": runs,
        "stored_summary": {
            "runs": len(runs),
            "same_decision": sum(r["same_decision"] for r in runs),
            "same_verdicts": sum(r["same_verdicts"] for r in runs),
            "mean_episode_share": share("sequential"),
            "settle_choice": {
                "same_decision": sum(r["same_decision_settle_choice"] for r in runs),
                "mean_episode_share": share("sequential_settle_choice"),
            },
        },
        "simulation": {"tasks": N, "batch": BATCH, "scenarios": scenarios},
        "wall_s": round(time.time() - started, 1),
        **machine(load),
    }
    emit(result, args.out, args.json)


if __name__ == "__main__":
    main()
