"""The default's learning on several seeds: start → GRPO, the SFT control, GRPO − control.

    python benchmarks/lifecycle/default_seeds/default_seeds.py --seeds 10-19 [--config F] [--set KEY=VALUE]...
                                       [--work DIR] [--out FILE]
                                       [--earlier FILE]... [--home SEED=DIR]...
                                       [--full-heldout]

Each seed is one ``gymflow run --seed S`` (the product's own command, the embedded default or
``--config``) in a fresh project home, one after another — never two at once: GRPO and its
control are bounded by wall time, so a second job on the CPU would change what they train.
Per seed it reads ``summary.json``: held-out greedy success of the start, GRPO and the control
with the paired 95 % CIs, what each arm got for the same wall time (GRPO's updates and sampled
completions, the control's updates and demonstrations seen), which limit ended each stage,
zero-variance groups and the run's wall time. Across seeds: the mean of GRPO − control with a
95 % CI from the spread between seeds (Student's t, seeds as the unit).

``--earlier FILE`` adds the rows of an earlier output of this script (seeds run in another
session, with the same settings) and ``--home SEED=DIR`` the run a finished home holds (e.g. a
fresh clone's ``make run ARGS="--seed S"``; its wall time is the run's own ``wall_s``), so the
across-seed figures cover them all; ``--seeds ""`` runs nothing new.

``--full-heldout`` adds, per seed, GRPO's chosen checkpoint against the start and against the
control on every held-out task (the three policies evaluated once each after the seed's run,
~25 s each on the embedded default), and the same across-seed figures for them: the gate's own
figures come from the 32–160 tasks its sequential test needed, so their intervals are wide.

Which seeds to pass is the point of the script: settings are chosen on seeds 0–4, and the
figures that report a default come from seeds 10–19, run once with the chosen settings and
never used to choose anything (docs/tuning.md keeps which seeds chose and which reported).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parents[2]))

from benchmarks.common import across_seeds, arguments, emit, heldout_rows  # noqa: E402


# Two-sided 95 % quantiles of Student's t for n - 1 degrees of freedom (n = 2..20 seeds).
def seeds_from(text: str) -> list[int]:
    """``"10-19"`` or ``"0,2,5"`` (or both, comma-separated) as a list of seeds.

    >>> seeds_from("10-12,15")
    [10, 11, 12, 15]
    """
    out: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        out += list(range(int(low), int(high or low) + 1))
    return out


def seed_row(seed: int, summary: dict, wall_s: float) -> dict:
    """One seed's figures from its ``summary.json`` (success in points, 0–100)."""
    held, control = summary["heldout"], summary.get("sft_control") or {}
    grpo, sft = summary["grpo"], summary.get("sft") or {}
    pool = grpo.get("dynamic_sampling", {})
    points = lambda x: None if x is None else round(100 * x, 1)  # noqa: E731
    return {
        "seed": seed,
        "start": held["baseline"]["success"],
        "grpo": held["candidate"]["success"],
        "delta": points(held["delta_success"]),
        "delta_ci95": [points(x) for x in held["ci95"]],
        "control": (control.get("heldout") or {}).get("success"),
        "grpo_minus_control": points(control.get("grpo_minus_control")),
        "grpo_minus_control_ci95": [points(x) for x in control.get("ci95") or []] or None,
        "grpo_steps": grpo["steps"],
        "grpo_samples": grpo.get("samples"),
        "grpo_stopped_by": grpo.get("stopped_by"),
        "control_steps": control.get("steps"),
        "control_samples": control.get("samples"),
        "sft_steps": sft.get("steps"),
        "sft_stopped_by": sft.get("stopped_by"),
        "zero_variance": round(
            pool.get("groups_zero_variance", 0) / max(1, pool.get("groups_generated", 0)), 3
        ),
        "chosen": summary["gate"].get("chosen"),
        "stages": summary["stages"],
        "run_wall_s": round(wall_s, 1),
    }


def run_seed(
    seed: int, config: Path | None, work: Path, sets: list[str] = (), full: bool = False
) -> dict:
    """``gymflow run --seed S`` in a fresh home under ``work`` (``sets``: ``--set`` overrides,
    e.g. ``gate.sequential=false`` for the gate itself on every task); its row, with
    :func:`full_heldout` when ``full``."""
    home = Path(tempfile.mkdtemp(prefix=f"seed{seed}-", dir=work))
    gymflow = str(Path(sys.executable).parent / "gymflow")
    cmd = [gymflow, "run", "--seed", str(seed), *(["--config", str(config)] if config else [])]
    cmd += ["--smoke"] if "__smoke__" in sets else []
    cmd += [arg for kv in sets if kv != "__smoke__" for arg in ("--set", kv)]
    started = time.monotonic()
    with (home / "run.log").open("w") as log:
        done = subprocess.run(cmd, env=os.environ | {"GYMFLOW_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT, cwd=home)  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        tail = (home / "run.log").read_text().splitlines()[-5:]
        raise SystemExit(f"seed {seed}: gymflow run exited {done.returncode}: {' | '.join(tail)}")
    summary = json.loads(next((home / "runs").glob("*/summary.json")).read_text())
    row = seed_row(seed, summary, wall) | {"home": str(home)}
    return row | ({"full_heldout": full_heldout(summary)} if full else {})


def full_heldout(summary: dict) -> dict:
    """GRPO's chosen checkpoint against the start and against the control on *every* held-out
    task (greedy, paired), in points: the run's gate decides on the first 32–160 tasks its
    sequential test needs, so its Δ over the start is wide. Each of the three policies is
    evaluated once (:func:`benchmarks.common.heldout_rows`) and paired twice."""

    from gymflow.eval.compare import paired_differences

    run = Path(summary["run_dir"])
    rows = heldout_rows(run, {"grpo": run / "grpo/final", "start": run / "sft/best",
                              "control": run / "sft_control/best"})  # fmt: skip
    out = {"n": None}
    for name, other in (("delta", "start"), ("grpo_minus_control", "control")):
        success = paired_differences(rows["grpo"], rows[other])["success"]
        out[name] = round(100 * success["delta"], 1)
        out[f"{name}_ci95"] = [round(100 * x, 1) for x in success["ci95"]]
        out["n"] = success["n_tasks"]
    return out


def full_heldout_figures(full: list[dict]) -> dict:
    """The across-seed figures of the rows measured on every held-out task (none: ``{}``)."""
    if not full:
        return {}
    return {
        "full_heldout": {
            "seeds": len(full),
            "delta_over_start": across_seeds([f["delta"] for f in full]),
            "grpo_minus_control": across_seeds([f["grpo_minus_control"] for f in full]),
            "every_seed_15_over_start_ci_above_0": all(
                f["delta"] >= 15 and f["delta_ci95"][0] > 0 for f in full
            ),
        }
    }


def home_row(arg: str, full: bool = False) -> dict:
    """``SEED=DIR``: the row of the finished run in the home ``DIR`` (one run in it)."""
    seed, _, home = arg.partition("=")
    summary = json.loads(next(Path(home).glob("runs/*/summary.json")).read_text())
    row = seed_row(int(seed), summary, summary["wall_s"]) | {"home": str(Path(home).resolve())}
    return row | ({"full_heldout": full_heldout(summary)} if full else {})


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seeds", default="10-19", help='e.g. "10-19" or "0,1,2"')
    parser.add_argument("--config", type=Path, help="a LifecycleConfig JSON (default: none)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for every seed's run (gymflow run --set)")  # fmt: skip
    parser.add_argument("--work", type=Path, help="where the seeds' homes go (default: a temp dir)")
    parser.add_argument("--earlier", type=Path, action="append", default=[], metavar="FILE",
                        help="an earlier output of this script: its rows join the table")  # fmt: skip
    parser.add_argument("--home", dest="homes", action="append", default=[], metavar="SEED=DIR",
                        help="a finished home's run (e.g. a fresh clone's make run) as a row")  # fmt: skip
    parser.add_argument("--full-heldout", action="store_true",
                        help="also GRPO against the start and the control on every held-out task")  # fmt: skip
    args = parser.parse_args()
    if args.smoke:  # one seed on the lifecycle's reduced budget: every code path, minutes
        args.seeds, args.sets = "0", [*args.sets, "__smoke__"]
    work = args.work or Path(tempfile.mkdtemp(prefix="default-seeds-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = [row for f in args.earlier for row in json.loads(f.read_text())["seeds"]]
    rows += [home_row(arg, args.full_heldout) for arg in args.homes]
    for seed in seeds_from(args.seeds):
        rows.append(run_seed(seed, args.config, work, args.sets, args.full_heldout))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # progress, one line a seed
    gaps = [r["grpo_minus_control"] for r in rows if r["grpo_minus_control"] is not None]
    emit(
        {
            "benchmark": "default_seeds",
            "command": " ".join(
                ["python benchmarks/lifecycle/default_seeds/default_seeds.py", *sys.argv[1:]]
            ),
            "date": time.strftime("%Y-%m-%d"),
            "settings": args.sets,
            "seeds": sorted(rows, key=lambda r: r["seed"]),
            "delta_over_start": across_seeds([r["delta"] for r in rows]),
            "grpo_minus_control": across_seeds(gaps) if gaps else None,
            "every_seed_15_over_start_ci_above_0": all(
                r["delta"] >= 15 and r["delta_ci95"][0] > 0 for r in rows
            ),
            **full_heldout_figures([r["full_heldout"] for r in rows if "full_heldout" in r]),
        },
        args.out,
        compact=args.json,
    )


if __name__ == "__main__":
    main()
