"""Is RL worth it here? Three arms from one start, for equal wall time: the SFT control, online RFT
and GRPO, on one environment and seed, without Prefect or MLflow.

From the run config's start (SFT to its sampled-validation target, as a run does), each arm
trains alone for ``--budget`` seconds of training wall time, all picking their checkpoint by the
one rule (greedy validation, step 0 included): the SFT control on the run's demonstrations
(:func:`gymflow.train.sft.run_sft`), online RFT on GRPO's pool with the verifier
(:func:`gymflow.train.rft.run_rft`), GRPO (:func:`gymflow.train.grpo.run_grpo`). Then, on the
first ``heldout_n`` held-out tasks: greedy pass@1 and pass@8 of the start and of each arm
(:func:`gymflow.eval.arm_passk.heldout_pass_at_k`); the arms at equal wall time and at equal
samples generated, from their validation histories (:func:`gymflow.eval.arms.at_equal`); and
the verdict from GRPO − each control's paired greedy successes
(:func:`gymflow.eval.verdict.rl_verdict`, at the gate's per-candidate level for three).

    python benchmarks/lifecycle/arms/arms.py --env tool_call --seed 40 --budget 240 \\
        --out benchmarks/arms/tool_call_seed40.json
    python benchmarks/lifecycle/arms/arms.py --smoke          # a tiny model, seconds per arm
    python benchmarks/lifecycle/arms/arms.py --join OUT.json... --out result.json  # figures

Prints one JSON object (the date, the machine with its CPU's vector unit, the command).
"""

from __future__ import annotations

import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import (  # noqa: E402
    across_seeds,
    arguments,
    as_result,
    emit,
    grpo_from,
    run_config,
    run_tasks,
    sft_to_start,
    start_model,
)

SMOKE = {
    "tiny_model": {"hidden_size": 32, "num_layers": 1, "intermediate_size": 64, "corpus_size": 300},
    "n_tasks": 400, "heldout_n": 12, "demos": 40, "val_eval_n": 8, "max_new_tokens": 24,
    "sft": {"max_steps": 6, "batch_size": 8, "eval_every": 3, "target_sampled_success": 1.01},
    "grpo": {"prompts_per_step": 2, "num_generations": 4, "validate_every": 2,
             "validate_tasks": 8, "preflight": None, "save_every": 1000, "max_steps": 1000},
}  # fmt: skip
"""What ``--smoke`` changes: a tiny model and task set, a few steps of each stage."""


def _rft(cfg, start: str, folder: Path, pool, val, budget: float) -> dict:
    from gymflow.lifecycle.training_inputs import candidate_choice, environment_servers
    from gymflow.train.rft import run_rft

    # the run's RFT settings, as the lifecycle's rft_control stage takes them
    settings = cfg.rft.model_copy(update={"time_budget_s": budget, "seed": cfg.seed})
    with environment_servers(cfg) as servers:
        env, app = servers[cfg.env]
        callbacks = candidate_choice(cfg, servers, val)
        return run_rft(Path(start), folder, env, app, pool, settings, log_to_mlflow=False,
                       callbacks=callbacks, arm="rft_control")  # fmt: skip


def run(cfg, budget: float, work: Path) -> dict:
    """Every arm for one environment and seed; returns the result's rows."""
    from transformers import AutoTokenizer

    from gymflow.eval.arm_passk import heldout_pass_at_k
    from gymflow.eval.arms import ArmCompute, ArmRecord, at_equal
    from gymflow.eval.verdict import grpo_versus_controls, rl_verdict
    from gymflow.lifecycle.training_inputs import environment_servers, run_demonstrations
    from gymflow.policy.transformers_backend import TransformersPolicy
    from gymflow.train.arm_compute import grpo_compute, sft_compute
    from gymflow.train.grpo import GRPOSettings

    started = time.time()
    start = start_model(cfg, work / "cache")
    demo_tasks, pool, val, heldout = run_tasks(cfg)
    sft = sft_to_start(cfg, start, work / "sft", demo_tasks, val)
    _say(f"start: {sft['steps']} SFT steps ({time.time() - started:.0f} s)")

    control = sft_to_start(cfg, sft["path"], work / "sft_control", demo_tasks, val,
                   should_stop=lambda elapsed: elapsed > budget)  # fmt: skip
    _say(f"sft_control: {control['steps']} steps")
    rft = _rft(cfg, sft["path"], work / "rft_control", pool, val, budget)
    _say(f"rft_control: {rft['steps']} steps")
    grpo_cfg = cfg.overridden({"grpo": {"time_budget_s": budget}})
    grpo = grpo_from(grpo_cfg, sft["path"], work / "grpo", pool, val, demo_tasks, _say)
    _say(f"grpo: {grpo['steps']} steps")

    with environment_servers(cfg) as servers:
        env, app = servers[cfg.env]
        tokenizer = AutoTokenizer.from_pretrained(sft["path"])
        demos = run_demonstrations(servers, demo_tasks, tokenizer)
        computes = {
            "sft_control": sft_compute(control, cfg.sft.batch_size, demos, tokenizer),
            "rft_control": ArmCompute.model_validate(rft["compute"]),
            "grpo": grpo_compute(
                grpo, GRPOSettings(**grpo_cfg.grpo.model_dump()), work / "rollouts"
            ),  # fmt: skip
        }
        paths = {"start": sft["path"], "sft_control": control["path"],
                 "rft_control": rft["path"], "grpo": grpo["path"]}  # fmt: skip
        passk = {
            name: heldout_pass_at_k(env, app, TransformersPolicy.from_path(path), heldout,
                                    k=8, seed=cfg.seed, max_new_tokens=cfg.max_new_tokens)
            for name, path in paths.items()
        }  # fmt: skip
    arms = (("sft_control", control), ("rft_control", rft), ("grpo", grpo))
    records = [
        ArmRecord(compute=computes[name], history=(res["validation"] or {}).get("history", []))
        for name, res in arms
    ]
    success = {name: list(p.greedy_by_task.values()) for name, p in passk.items()}
    controls = ["sft_control", "rft_control"]
    verdict = rl_verdict(grpo_versus_controls(success, controls, cfg.gate.candidate_alpha(3)))
    equal_time, equal_samples = at_equal(records, "wall_s"), at_equal(records, "samples_generated")
    _say(equal_time.text())
    _say(equal_samples.text())
    _say(verdict.sentence)
    return {
        "env": cfg.env,
        "seed": cfg.seed,
        "budget_s": budget,
        "heldout_n": len(heldout),
        "sft_steps": sft["steps"],
        "compute": {name: c.model_dump(exclude={"curve"}) for name, c in computes.items()}
        | {"rft_ledger": rft["compute"]["rft"]},
        "chosen_step": {name: (res["validation"] or {}).get("chosen_step") for name, res in arms},
        "equal_wall_time": equal_time.model_dump(),
        "equal_samples": equal_samples.model_dump(),
        "pass_at_k": {name: p.model_dump(exclude={"greedy_by_task"}) for name, p in passk.items()},
        "verdict": verdict.model_dump(),
        "wall_s": round(time.time() - started, 1),
    }


ARMS = ("start", "sft_control", "rft_control", "grpo")
CONTROLS = ("sft_control", "rft_control")
MEASURES = (
    "Is RL worth it here? The SFT control, online RFT and GRPO trained from one start for equal "
    "wall time, on seeds never used to choose a setting: GRPO minus each control on held-out "
    "greedy success (paired per seed, mean with its 95 % t-interval across seeds), the arms at "
    "equal wall time and equal samples (validation), greedy pass@1 and sampled pass@8, and each "
    "seed's verdict."
)


def joined(outputs: list[dict]) -> tuple[dict, dict]:
    """Per-seed outputs of one or more environments → (figures, the joined output)."""
    figures: dict[str, dict] = {}
    by_env: dict[str, list[dict]] = {}
    for out in sorted(outputs, key=lambda o: (o["env"], o["seed"])):
        by_env.setdefault(out["env"], []).append(out)
    table = {}
    for env, runs in by_env.items():
        greedy = {a: [100 * r["pass_at_k"][a]["greedy"]["value"] for r in runs] for a in ARMS}
        pass8 = {a: [100 * r["pass_at_k"][a]["pass_at"]["8"]["value"] for r in runs] for a in ARMS}
        row: dict = {"seeds": [r["seed"] for r in runs]}
        figures[f"{env}_seeds"] = {"value": len(runs), "unit": "count"}
        for control in CONTROLS:
            held = across_seeds(
                [g - c for g, c in zip(greedy["grpo"], greedy[control], strict=True)]
            )
            row[f"grpo_minus_{control}"] = held
            figures[f"{env}_grpo_minus_{control}"] = _points(held, "held-out greedy success")
            for axis in ("equal_wall_time", "equal_samples"):
                gaps = [100 * (_success(r[axis], "grpo") - _success(r[axis], control))
                        for r in runs]  # fmt: skip
                row[f"{axis}_grpo_minus_{control}"] = across_seeds(gaps)
        for arm in ARMS:
            row[f"{arm}_greedy"] = across_seeds(greedy[arm])
            row[f"{arm}_pass8"] = across_seeds(pass8[arm])
            for name, what, values in (("pass1", "greedy pass@1", greedy[arm]),
                                       ("pass8", "sampled pass@8", pass8[arm])):  # fmt: skip
                figures[f"{env}_{arm}_{name}"] = {  # a level: its mean (the pairs carry the CIs)
                    "value": round(statistics.fmean(values), 2), "unit": "points",
                    "note": f"{what}, mean across {len(values)} seeds",
                }  # fmt: skip
        verdicts = [r["verdict"]["verdict"] for r in runs]
        row["verdicts"] = {v: verdicts.count(v) for v in sorted(set(verdicts))}
        for verdict, count in row["verdicts"].items():
            figures[f"{env}_{verdict}"] = {"value": count, "unit": "count", "note": "seeds"}
        table[env] = row
    verdicts = [o["verdict"]["verdict"] for o in outputs]
    figures["runs"] = {"value": len(outputs), "unit": "count", "note": "environment × seed"}
    for verdict in sorted(set(verdicts)):
        figures[f"{verdict}_runs"] = {"value": verdicts.count(verdict), "unit": "count"}
    return figures, {"by_env": table, "runs": outputs}


def _success(comparison: dict, arm: str) -> float:
    return next(a["success"] for a in comparison["arms"] if a["arm"] == arm)


def _points(stat: dict, what: str) -> dict:
    """``across_seeds`` as a figure in points: ``[mean, low, high]`` (the mean alone for one)."""
    value = [stat["mean"], *stat["ci95"]] if stat["ci95"] else stat["mean"]
    return {"value": value, "unit": "points", "note": f"{what}, mean across {stat['n']} seeds"}


def join(paths: list[Path], out: Path | None) -> None:
    """The per-seed outputs at ``paths`` as the benchmark's ``result.json``."""
    outputs = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    figures, output = joined(outputs)
    budgets = "/".join(f"{b:g}" for b in sorted({o["budget_s"] for o in outputs}))
    heldout = "/".join(str(n) for n in sorted({o["heldout_n"] for o in outputs}))
    seeds = {env: row["seeds"] for env, row in output["by_env"].items()}
    command = (
        f"python benchmarks/lifecycle/arms/arms.py --env ENV --seed SEED --budget {budgets} "
        f"--set '{{\"heldout_n\": {heldout}}}' --out ENV-SEED.json for {seeds}; then "
        "arms.py --join ENV-SEED.json... --out benchmarks/lifecycle/arms/result.json"
    )
    result = as_result("arms", output, figures, command, MEASURES)
    text = json.dumps(result, indent=1)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=1))


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # progress; the JSON result goes to stdout


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--config", type=Path, help="a run config (JSON); default: the default")
    parser.add_argument("--set", default="{}", help="JSON overrides on top of --config")
    parser.add_argument("--env", help="the environment (else the config's)")
    parser.add_argument(
        "--seed", type=int, default=40, help="the run's seed (40-49: never tuned on)"
    )
    parser.add_argument("--budget", type=float, default=240.0, help="training seconds per arm")
    parser.add_argument(
        "--work", type=Path, help="where the arms' checkpoints go (default: a temporary folder)"
    )
    parser.add_argument("--join", type=Path, nargs="+", help="per-seed outputs to join (no run)")
    args = parser.parse_args()
    if args.join:
        return join(args.join, args.out)
    overrides = json.loads(args.set) | ({"env": args.env} if args.env else {})
    cfg = run_config(args.config, overrides, None, None)
    budget = args.budget
    if args.smoke:
        cfg, budget = cfg.overridden(SMOKE), min(budget, 6.0)
    cfg = cfg.overridden({"seed": args.seed})
    with tempfile.TemporaryDirectory(prefix="gymflow-arms-") as scratch:
        work = (args.work or Path(scratch)) / f"{cfg.env}-seed-{args.seed}"
        work.mkdir(parents=True, exist_ok=True)
        result = run(cfg, budget, work)
    emit(
        {
            "benchmark": "arms",
            "date": time.strftime("%Y-%m-%d"),
            "command": shlex.join(["python", *sys.argv]),
            "smoke": args.smoke,
            **result,
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
