"""Step time of SFT and GRPO on 1 and on 2 processes (DDP over gloo), the same global batch.

    python benchmarks/training/ddp/ddp.py [--json] [--out FILE] [--steps N]

Both runs go through :func:`gymflow.train.launch.launch` (``accelerate launch`` with N
processes, each process given ``cores / N`` torch threads), on the embedded default's model
shape for counter (untrained), from the same start: SFT on gold demonstrations with a global
batch of 32, GRPO with 4 tasks x 8 samples of up to 24 tokens. Figures: training wall time per
step (``wall_s / steps`` of rank 0's result, model loading and process start-up excluded),
and the launch's whole wall time. On a 2-core machine two processes share the same two cores,
so expect little: the point of several processes is several GPUs or machines, and the test
(tests/test_ddp.py) is what shows they train as one.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, machine  # noqa: E402
from gymflow.core.jsonl import write_jsonl_atomic  # noqa: E402
from gymflow.data.task_set import build_tasks  # noqa: E402
from gymflow.data.task_table import write_tasks  # noqa: E402
from gymflow.env.registry import get_env  # noqa: E402
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus  # noqa: E402
from gymflow.train.launch import LaunchJob, launch  # noqa: E402
from gymflow.train.sft import demonstrations  # noqa: E402


def stage_jobs(base: Path, model: Path, out: Path, steps: int) -> list[LaunchJob]:
    sft = LaunchJob(
        stage="sft", model_path=str(model), out_dir=str(out / "sft"),
        demos=str(base / "demos.jsonl"), resume=False,
        settings={"max_steps": steps, "batch_size": 32, "warmup_steps": 0,
                  "eval_every": 10**6, "device": "cpu"},
    )  # fmt: skip
    grpo = LaunchJob(
        stage="grpo", model_path=str(model), out_dir=str(out / "grpo"), env="counter",
        tasks=str(base / "tasks.parquet"), resume=False,
        settings={"max_steps": steps, "prompts_per_step": 4, "num_generations": 8,
                  "max_new_tokens": 24, "save_every": 10**6, "time_budget_s": None,
                  "demo_loss": None, "dynamic_sampling": False, "task_sampling": "uniform",
                  "device": "cpu"},
    )  # fmt: skip
    return [sft, grpo]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per run")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.steps = 2
    load_before = os.getloadavg()
    env = get_env("counter")
    result = {"benchmark": "ddp", "steps": args.steps, "backend": "gloo (CPU)"}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        model = ensure_tiny_model(
            base / "cache", "counter", lambda: tokenizer_corpus(env, 2000, 5), TinyModelConfig()
        )
        from transformers import AutoTokenizer

        tasks = build_tasks(env, 256, seed=1, heldout_frac=0.0, val_frac=0.0)
        demos = demonstrations(env, AutoTokenizer.from_pretrained(model), tasks)
        write_jsonl_atomic(base / "demos.jsonl", demos)
        write_tasks(tasks, base / "tasks.parquet")
        for processes in (1, 2):
            for job in stage_jobs(base, model, base / f"p{processes}", args.steps):
                started = time.perf_counter()
                out = launch(job, processes, timeout_s=1800)
                whole = time.perf_counter() - started
                key = f"{job.stage}_p{processes}"
                result[f"{key}_step_s"] = round(out["wall_s"] / max(out["steps"], 1), 3)
                result[f"{key}_launch_s"] = round(whole, 1)
    for stage in ("sft", "grpo"):
        one, two = result[f"{stage}_p1_step_s"], result[f"{stage}_p2_step_s"]
        result[f"{stage}_speedup_2_over_1"] = round(one / two, 2)
    result.update(machine(load_before))
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
