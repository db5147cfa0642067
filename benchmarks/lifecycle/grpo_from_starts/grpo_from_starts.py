"""Screen GRPO settings from saved SFT starts, at a fixed step count, arms side by side.

    python benchmarks/lifecycle/grpo_from_starts/grpo_from_starts.py --runs RUN [RUN ...] --arm NAME=JSON [--arm ...]
        [--steps 150] [--seconds S] [--json] [--out FILE]

A lifecycle screen (``benchmarks/lifecycle/default_seeds/default_seeds.py``) runs SFT again for every arm, and two runs
of one seed hand GRPO starts up to ten held-out points apart (2026-11-28: seed 2, 0.588 and
0.684), which is as large as the effects screened. This takes the start out: every arm trains
GRPO from the same saved start of each run (``RUN/sft/best``, a finished ``gymflow run``'s
folder), on that run's pool, demonstrations and settings (``RUN/config.json``), with the arm's
GRPO fields merged on top. Each run's arms train at once, one process and one torch thread
each, so two arms load the two cores as GRPO and its SFT control do in a run.

The step count is fixed (``--steps``, no time budget; the cosine schedule spans those steps)
so that a machine's speed does not pick the winner; 150 is what the default's 300 s hold on the
AVX2 machine kind (142–165 steps). ``--seconds S`` instead gives every arm a wall-time budget
of ``S`` as the lifecycle gives GRPO (``--steps`` is then only the cap, and the schedule follows
the further along of the two, as in a run): the comparison for arms whose steps cost different
time (fewer rollouts a step, more steps). What is not the lifecycle's: no preflight (the pool starts
as the difficulty pool's own), and the last step is the policy (no checkpoint rule).

Each arm's policy is scored greedy on all of the run's held-out tasks, paired by task: its
gain over the start and its difference from the first arm, with 95 % intervals
(:func:`gymflow.eval.compare.paired_differences`). Prints one JSON object; ``--out`` also
writes it.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, heldout_rows  # noqa: E402


def train_arm(run: Path, out: Path, steps: int, seconds: float | None, fields: dict) -> dict:
    """One arm's GRPO from ``run``'s start, in this process (one torch thread)."""
    import torch

    torch.set_num_threads(1)
    from transformers import AutoTokenizer

    from gymflow.data.task_table import read_tasks
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.home import quiet_libraries
    from gymflow.lifecycle.training_inputs import (
        environment_servers,
        run_demonstrations,
        split_demos_and_pool,
    )
    from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo

    quiet_libraries()
    cfg = LifecycleConfig.model_validate_json((run / "config.json").read_text())
    fixed = {"seed": cfg.seed, "max_steps": steps, "time_budget_s": seconds}
    fixed |= {"preflight": None, "validate_every": None}
    settings = GRPOSettings.model_validate(cfg.grpo.model_dump() | fields | fixed)
    demo_tasks, pool = split_demos_and_pool(cfg, read_tasks(run / "data/tasks-train.parquet"))
    start = run / "sft/best"
    with environment_servers(cfg) as servers:
        demos = run_demonstrations(servers, demo_tasks, AutoTokenizer.from_pretrained(start))
        env, app = servers[cfg.env]
        source = RolloutSource(env, app, pool, settings, out_dir=out)
        result = run_grpo(start, out, source, settings, False, resume=False, demos=demos)
    return {"steps": result["steps"], "wall_s": result["wall_s"], "path": result["path"],
            "dynamic_sampling": result["dynamic_sampling"]}  # fmt: skip


def one_run(
    run: Path, arms: dict[str, dict], steps: int, seconds: float | None, work: Path
) -> dict:
    """Every arm from ``run``'s start at once (a process each), then scored."""
    from gymflow.eval.compare import paired_differences
    from gymflow.train.grpo_metrics import zero_variance_share

    procs = {}
    for name, fields in arms.items():
        out = work / f"{run.parent.parent.name}-{name}"
        cmd = [sys.executable, __file__, "--train", str(run), str(out), str(steps)]
        cmd += [json.dumps(seconds), json.dumps(fields)]
        log = (work / f"{out.name}.log").open("w")
        procs[name] = (out, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log)
    trained = {}
    for name, (out, proc, log) in procs.items():
        if proc.wait() != 0:
            raise SystemExit(f"arm {name} of {run} failed: see {log.name}")
        trained[name] = json.loads((out / "arm.json").read_text())
    rows = heldout_rows(run, {"(start)": run / "sft/best"} | {
        name: Path(t["path"]) for name, t in trained.items()
    })  # fmt: skip
    start_rows = rows.pop("(start)")
    first = next(iter(arms))
    row: dict = {"run": str(run), "start": _success(start_rows), "arms": {}}
    for name, t in trained.items():
        gain = paired_differences(rows[name], start_rows)["success"]
        versus = paired_differences(rows[name], rows[first])["success"] if name != first else None
        row["arms"][name] = {
            "steps": t["steps"], "wall_s": t["wall_s"], "success": _success(rows[name]),
            "over_start": _points(gain), "minus_first_arm": _points(versus) if versus else None,
            "zero_variance": _rounded(zero_variance_share(t["dynamic_sampling"])),
        }  # fmt: skip
        print(json.dumps({"run": run.name, "arm": name, **row["arms"][name]}), flush=True)
    return row


def _success(rows: list[dict]) -> float:
    return round(statistics.fmean(float(r["success"]) for r in rows), 4)


def _rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 3)


def _points(d: dict) -> dict:
    return {"delta": round(100 * d["delta"], 1), "ci95": [round(100 * x, 1) for x in d["ci95"]]}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--train":  # one arm, in its own process
        run, out, steps, seconds, fields = sys.argv[2:7]
        out = Path(out)
        result = train_arm(Path(run), out, int(steps), json.loads(seconds), json.loads(fields))
        (out / "arm.json").write_text(json.dumps(result))
        return
    parser = arguments(__doc__)
    parser.add_argument("--runs", nargs="+", type=Path, required=True, help="run folders (RUN)")
    parser.add_argument("--arm", action="append", required=True, help="NAME=JSON GRPO fields")
    parser.add_argument("--steps", type=int, default=150, help="GRPO steps of every arm")
    parser.add_argument("--seconds", type=float, default=None, help="a wall-time budget instead")
    parser.add_argument("--work", type=Path, default=Path("/tmp/grpo-from-starts"))
    args = parser.parse_args()
    arms = {}
    for spec in args.arm:
        name, _, fields = spec.partition("=")
        arms[name] = json.loads(fields or "{}")
    args.work.mkdir(parents=True, exist_ok=True)
    began = time.time()
    rows = [one_run(run.resolve(), arms, args.steps, args.seconds, args.work) for run in args.runs]
    summary = {}
    for name in list(arms)[1:]:
        diffs = [r["arms"][name]["minus_first_arm"]["delta"] for r in rows]
        summary[name] = {"minus_first_arm_mean": round(statistics.fmean(diffs), 1),
                         "wins": sum(d > 0 for d in diffs), "of": len(diffs)}  # fmt: skip
    emit(
        {
            "benchmark": "grpo_from_starts",
            "date": time.strftime("%Y-%m-%d"),
            "command": "python benchmarks/lifecycle/grpo_from_starts/grpo_from_starts.py "
            + " ".join(sys.argv[1:]),
            "steps": args.steps,
            "seconds": args.seconds,
            "arms": arms,
            "threads_per_arm": 1,
            "runs": rows,
            "summary": summary,
            "wall_s": round(time.time() - began, 1),
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
