"""GRPO against the same wall time of more SFT, several seeds at once, without Prefect or MLflow.

The lifecycle asks this question on every run (its ``sft_control`` stage); this script asks it
where the lifecycle cannot run — a lent GPU machine with no Prefect server, no MLflow and no
network — for a checkpoint and a run config, with the lifecycle's own pieces: its task
assembly (`assemble_tasks`, dedup and leakage check included) and, from
:mod:`gymflow.lifecycle.training_inputs` as the stages take them, its seeded demonstration /
pool split, its environment servers, validation scorer, demonstrations and SFT settings.
SFT to the GRPO start with the config's sampled-validation target, then GRPO and the control
side by side (the control in a spawned process, stopped at GRPO's training wall
time by :mod:`gymflow.train.twin_clock`, as ``control_beside_grpo`` does), both picking their
checkpoint by the run's one rule (greedy validation every ``grpo.validate_every`` steps, step
0 included: :mod:`gymflow.train.checkpoint_choice`), and greedy success on the first ``heldout_n``
held-out tasks for the start, GRPO and the control (paired, per task), stored as a run's gate
stores them (``seed-S/eval/heldout-<label>.parquet``: ``benchmarks/lifecycle/gate/gate.py WORK/seed-*``
replays the sequential gate on them).

Every seed runs in its own process, all at once (a GPU has room for several 135 M models;
generation there is bound by the host, so the seeds share the GPU without queueing behind
one another). What it leaves out of a run: the profiling and baseline stages, the gate's
guardrail sets and the registry.

    python benchmarks/training/grpo_vs_control/grpo_vs_control.py --config datasets/smollm2.json --model M.gguf \\
        --set '{"grpo": {"task_sampling": "difficulty", "temperature": 1.0}}' \\
        --seeds 0,1,2 --grpo-budget 240 --work /tmp/gvc --out docs/results/data/2026-11-26-grpo_vs_control_gpu.json
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import (  # noqa: E402
    arguments,
    emit,
    grpo_from,
    run_config,
    run_tasks,
    sft_to_start,
    start_model,
)


def _control(
    cfg, start: str, out: Path, demo_tasks, val, threads: int, parent_pid: int, eval_every
) -> dict:
    """In a spawned process: the control, until its training wall time reaches GRPO's. It gets
    the seed's tasks from its parent."""
    import torch

    from gymflow.train import twin_clock

    torch.set_num_threads(threads)
    clock = twin_clock.TwinClock(out.parent / "grpo", cfg.digest(), parent_pid)
    result = sft_to_start(cfg, start, out, demo_tasks, val, clock, eval_every)
    validation = result["validation"] or {}
    return {
        "path": result["path"], "steps": result["steps"], "wall_s": result["wall_s"],
        "chosen_step": validation.get("chosen_step"),
    }  # fmt: skip


def one_seed(
    cfg_json: str, seed: int, work: Path, threads: int, control_eval_every: int | None
) -> dict:
    """Everything for one seed, in this (spawned) process; returns its row."""
    import torch

    from gymflow.eval.evaluation import evaluate_policy
    from gymflow.eval.stats import paired_delta
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.home import quiet_libraries
    from gymflow.lifecycle.training_inputs import environment_servers
    from gymflow.policy.transformers_backend import TransformersPolicy

    quiet_libraries()
    # SFT runs alone, so on the seed's whole share of the cores; GRPO and the control then
    # split it, ``threads`` each
    torch.set_num_threads(2 * threads)
    cfg = LifecycleConfig.model_validate_json(cfg_json).overridden({"seed": seed})
    out = work / f"seed-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    start = start_model(cfg, work / "cache")
    demo_tasks, pool, val, heldout = run_tasks(cfg)
    sft = sft_to_start(cfg, start, out / "sft", demo_tasks, val)
    t_sft = time.time()
    torch.set_num_threads(threads)
    _say(f"seed {seed}: GRPO start after {sft['steps']} SFT steps ({t_sft - t0:.0f} s)")
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as beside:
        control = beside.submit(
            _control, cfg, sft["path"], out / "sft_control", demo_tasks, val, threads,
            os.getpid(), control_eval_every,
        )  # fmt: skip
        grpo = grpo_from(cfg, sft["path"], out / "grpo", pool, val, demo_tasks)
        control = control.result()
    t_train = time.time()
    torch.set_num_threads(2 * threads)  # the held-out evaluation runs alone again
    _say(
        f"seed {seed}: GRPO {grpo['steps']} steps, control {control['steps']} ({t_train - t_sft:.0f} s)"
    )
    success = {}
    with environment_servers(cfg) as servers:
        env, app = servers[cfg.env]
        for name, label, path in (
            ("start", "baseline", sft["path"]),
            ("grpo", "candidate", grpo["path"]),
            ("control", "sft_control", control["path"]),
        ):
            rows, _ = evaluate_policy(
                env, app, TransformersPolicy.from_path(path), heldout, greedy=True,
                max_new_tokens=cfg.max_new_tokens, seed=cfg.seed,
            )  # fmt: skip
            success[name] = [float(r["success"]) for r in rows]
            _write_rows(out / "eval" / f"heldout-{label}.parquet", rows, label)
    stats = grpo["dynamic_sampling"]
    _say(
        f"seed {seed}: held-out "
        + ", ".join(f"{k} {sum(v) / len(v):.3f}" for k, v in success.items())
    )

    def rate(name: str) -> float:
        return round(sum(success[name]) / len(heldout), 4)

    def delta(a: str, b: str) -> dict:
        d = paired_delta(success[a], success[b])
        return {
            "points": round(100 * d["delta"], 1),
            "ci95": [round(100 * x, 1) for x in d["ci95"]],
        }

    validation = grpo["validation"] or {}
    return {
        "seed": seed,
        "heldout_n": len(heldout),
        "sft_steps": sft["steps"],
        "start": rate("start"),
        "grpo": rate("grpo"),
        "control": rate("control"),
        "grpo_minus_start": delta("grpo", "start"),
        "grpo_minus_control": delta("grpo", "control"),
        "control_minus_start": delta("control", "start"),
        "grpo_steps": grpo["steps"],
        "grpo_chosen_step": validation.get("chosen_step"),
        "grpo_wall_s": grpo["wall_s"],
        "control_steps": control["steps"],
        "control_chosen_step": control["chosen_step"],
        "control_wall_s": control["wall_s"],
        "preflight": grpo["preflight"],
        "groups": stats["groups_generated"],
        "groups_zero_variance": stats["groups_zero_variance"],
        "wall_s": {
            "start_and_sft": round(t_sft - t0, 1),
            "grpo_and_control": round(t_train - t_sft, 1),
            "heldout_eval": round(time.time() - t_train, 1),
        },
    }


def _write_rows(path: Path, rows: list[dict], label: str) -> None:
    """The held-out rows in the gate's layout (``<seed>/eval/heldout-<label>.parquet``), so
    ``benchmarks/lifecycle/gate/gate.py SEED_DIR...`` replays the sequential gate on them."""
    import polars as pl

    from gymflow.data.schemas import EVAL_ROWS, write_table

    labelled = [{**r, "policy": label} for r in rows]  # as the gate labels its rows
    frame = pl.DataFrame(labelled, schema_overrides={"failure_kind": pl.String})
    write_table(frame.select(list(EVAL_ROWS.columns)), EVAL_ROWS, path)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # progress; the JSON result goes to stdout


def _gpu() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument(
        "--config", type=Path, help="a run config (JSON), e.g. datasets/smollm2.json"
    )
    parser.add_argument("--set", default="{}", help="JSON overrides on top of --config")
    parser.add_argument(
        "--model", help="checkpoint: folder, .gguf or catalog:NAME (else the config's)"
    )
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument(
        "--grpo-budget", type=float, help="GRPO's time_budget_s (else the config's)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="torch threads of GRPO and of the control each (default: cores / 2 / seeds); "
        "SFT and the held-out evaluation, alone, get twice as many",
    )
    parser.add_argument(
        "--control-eval-every",
        type=int,
        help="the control's validation interval for the one checkpoint rule (else the config's "
        "grpo.validate_every, as in a run; a GPU's SFT step is so cheap that a CPU-sized "
        "interval spends the control's time scoring)",
    )
    parser.add_argument("--work", type=Path, default=Path("scratch/grpo_vs_control"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    cfg = run_config(args.config, json.loads(args.set), args.model, args.grpo_budget)
    threads = args.threads or max(1, (os.cpu_count() or 2) // (2 * len(seeds)))
    args.work.mkdir(parents=True, exist_ok=True)
    start_model(cfg, args.work / "cache")  # convert / build once, before the seeds share it
    started = time.time()
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(seeds), mp_context=spawn) as pool:
        futures = [
            pool.submit(
                one_seed, cfg.model_dump_json(), s, args.work, threads, args.control_eval_every
            )
            for s in seeds
        ]
        rows = [f.result() for f in futures]
    mean = {
        key: round(sum(r[key]["points"] for r in rows) / len(rows), 1)
        for key in ("grpo_minus_start", "grpo_minus_control", "control_minus_start")
    }
    groups = sum(r["groups"] for r in rows)
    emit(
        {
            "benchmark": "grpo_vs_control",
            "date": time.strftime("%Y-%m-%d"),
            "config": str(args.config) if args.config else "default",
            "overrides": json.loads(args.set),
            "model": cfg.model_path or "embedded tiny model",
            "grpo": cfg.grpo.model_dump(
                include={
                    "learning_rate",
                    "temperature",
                    "task_sampling",
                    "prompts_per_step",
                    "num_generations",
                    "time_budget_s",
                    "max_steps",
                }
            ),
            "gpu": _gpu(),
            "threads_per_process": threads,
            "control_eval_every": args.control_eval_every or cfg.grpo.validate_every,
            "seeds": rows,
            "mean_points": mean,
            "zero_variance_share": round(
                sum(r["groups_zero_variance"] for r in rows) / max(1, groups), 3
            ),
            "wall_s": round(time.time() - started, 1),
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
