"""GRPO's RL-readiness preflight on a run config, without a whole run (no Prefect, no MLflow).

The lifecycle runs the preflight (:mod:`gymflow.train.readiness`) at the start of its GRPO
stage, on the checkpoint SFT hands over. This script asks the same question where a whole run
costs too much to ask it: the config's tasks, split as a run splits them
(``benchmarks/training/grpo_vs_control/grpo_vs_control.py``'s helpers), the GRPO start — ``--policy`` (a checkpoint), or
the config's start trained by the config's SFT stage (``--sft``, up to its sampled-validation
target or ``sft.time_budget_s``), or the config's start as it is — and the preflight with the
config's ``grpo`` settings (group size, temperature, token budget, ``grpo.preflight``).

    python benchmarks/tools/readiness.py --config datasets/smollm2-toolbox.json --sft \\
        --work scratch/readiness-toolbox --out benchmarks/readiness_smollm2_toolbox.json

Prints the preflight's line, the SFT steps and the wall times as one JSON object.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import arguments, emit  # noqa: E402
from benchmarks.common import run_config as _config  # noqa: E402
from benchmarks.common import run_tasks as _tasks  # noqa: E402
from benchmarks.common import sft_to_start as _sft  # noqa: E402
from benchmarks.common import start_model as _start_model  # noqa: E402


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--config", type=Path, help="a run config (JSON); default: the default")
    parser.add_argument("--set", default="{}", help="JSON overrides on top of --config")
    parser.add_argument("--policy", help="the GRPO start: a checkpoint folder, .gguf or catalog:")
    parser.add_argument("--sft", action="store_true", help="train the start by the config's SFT")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("scratch/readiness"))
    args = parser.parse_args()

    from gymflow.lifecycle.home import quiet_libraries
    from gymflow.lifecycle.training_inputs import environment_servers
    from gymflow.train.readiness import PreflightSettings, preflight

    quiet_libraries()
    cfg = _config(args.config, json.loads(args.set), None, None).overridden({"seed": args.seed})
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    start = args.policy or _start_model(cfg, args.work / "cache")
    demo_tasks, pool, val, _ = _tasks(cfg)
    sft = None
    if args.sft:
        sft = _sft(cfg, start, args.work / "sft", demo_tasks, val)
        start = sft["path"]
        print(f"SFT: {sft['steps']} steps, {sft['stopped_by']}", file=sys.stderr, flush=True)
    sft_s = time.time() - started
    settings = cfg.grpo.preflight or PreflightSettings()
    with environment_servers(cfg) as servers:
        ready = preflight(
            servers, start, pool, cfg.grpo.num_generations, cfg.grpo.temperature,
            cfg.grpo.max_new_tokens, settings, cfg.seed,
        )  # fmt: skip
    print(ready.message, file=sys.stderr, flush=True)
    emit(
        {
            "benchmark": "readiness",
            "date": time.strftime("%Y-%m-%d"),
            "config": str(args.config) if args.config else "default",
            "overrides": json.loads(args.set),
            "seed": args.seed,
            "start": args.policy or ("the config's start after its SFT" if args.sft else start),
            "pool": len(pool),
            "sft": {k: sft[k] for k in ("steps", "stopped_by", "history")} if sft else None,
            "readiness": ready.model_dump(),
            "wall_s": {"start_and_sft": round(sft_s, 1), "preflight": ready.wall_s},
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
