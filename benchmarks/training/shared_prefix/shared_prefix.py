"""SFT's loss forward and backward with the batch's common prefix run once, against TRL's own.

    python benchmarks/training/shared_prefix/shared_prefix.py [--json] [--out FILE] [--repeats N] [--threads T]
        [--model catalog:smollm2-135m-instruct --env toolbox --batches 8 --checkpointing]
        [--peak-memory]

Same model, same batch, same process: the embedded default's model (its architecture and
tokenizer, built here; the weights do not change the time), TRL's ``SFTTrainer`` and the first
batches its own data loader makes of ``tool_call`` gold demonstrations rendered as the SFT stage
renders them (the default's batch of 32; GRPO's demo loss takes 16). Timed: one
``compute_loss`` (the forward with TRL's metrics) and its backward, TRL's (``sft.share_prefix``
off) and :func:`gymflow.train.shared_prefix.with_shared_prefix` alternating, ``--repeats`` times
each after two warm-ups; the figure is the median. The default's SFT runs on 2 threads, GRPO
and the control beside it on 1 each.

``--model`` times a real checkpoint instead (``catalog:NAME``, a folder or a ``.gguf``, as a run
config's ``model_path``), ``--env`` another environment's demonstrations, ``--batches`` other
batch sizes; ``--checkpointing`` also times TRL's step with gradient checkpointing (the
real-model presets' SFT setting until 2026-11-28; the shared prefix steps aside under it).
``--peak-memory`` measures each variant's peak resident memory instead of its time: one step
alone in a fresh process.

Prints one JSON object; ``--out`` also writes it to a file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402
from benchmarks.common import tiny_model as _model  # noqa: E402


def _trainer(cls, model_dir: Path, out: Path, demos: list[dict], batch: int, ckpt=False):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig

    from datasets import Dataset

    args = SFTConfig(
        output_dir=str(out), use_cpu=True, per_device_train_batch_size=batch, report_to="none",
        bf16=False, max_length=4096, seed=0, gradient_checkpointing=ckpt,
    )  # fmt: skip
    return cls(
        model=AutoModelForCausalLM.from_pretrained(model_dir), args=args,
        train_dataset=Dataset.from_list(demos),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )  # fmt: skip


def _time_once(trainer, batch) -> float:
    trainer.model.zero_grad()
    started = time.perf_counter()
    trainer.compute_loss(trainer.model, dict(batch)).backward()
    return time.perf_counter() - started


def _demos(model_dir: Path, env_name: str, batch: int) -> list[dict]:
    from transformers import AutoTokenizer

    from gymflow.data.task_set import build_tasks
    from gymflow.env.registry import get_env
    from gymflow.train.sft import demonstrations

    env = get_env(env_name)
    tasks = build_tasks(env, 4 * batch, seed=0, heldout_frac=0.0, val_frac=0.0)
    return demonstrations(env, AutoTokenizer.from_pretrained(model_dir), tasks)


def one_step_peak(model_dir: Path, work: Path, batch: int, env_name: str, variant: str) -> dict:
    """One step of ``variant`` (``trl``, ``shared``, ``trl_checkpointing``) in this process:
    its peak resident memory (the process's, the model and data included)."""
    from trl import SFTTrainer

    from gymflow.train.shared_prefix import with_shared_prefix

    cls = with_shared_prefix(SFTTrainer) if variant == "shared" else SFTTrainer
    ckpt = variant == "trl_checkpointing"
    trainer = _trainer(
        cls, model_dir, work / variant, _demos(model_dir, env_name, batch), batch, ckpt
    )
    _time_once(trainer, next(iter(trainer.get_train_dataloader())))
    # VmHWM, not getrusage's ru_maxrss: that one is kept across fork and exec (a child would
    # report its parent's peak)
    status = Path("/proc/self/status").read_text().splitlines()
    kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return {variant: round(kib / 2**20, 2)}


def peak_memory(args, batch: int) -> dict:
    """Each variant's one step in a fresh process (a peak is per process): GiB."""
    import subprocess

    variants = ["trl", "shared"] + (["trl_checkpointing"] if args.checkpointing else [])
    peaks: dict = {}
    for variant in variants:
        cmd = [sys.executable, __file__, "--one-step", variant, "--env", args.env,
               "--batches", str(batch), "--threads", str(args.threads)]  # fmt: skip
        cmd += ["--model", args.model] if args.model else []
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        peaks |= json.loads(out.strip().splitlines()[-1])
    return {"peak_rss_gib": peaks}


def measure(
    model_dir: Path, work: Path, batch: int, repeats: int, env_name: str = "tool_call",
    checkpointing: bool = False,
) -> dict:  # fmt: skip
    from trl import SFTTrainer

    from gymflow.train.shared_prefix import prefix_cut, with_shared_prefix

    demos = _demos(model_dir, env_name, batch)
    trl = _trainer(SFTTrainer, model_dir, work / "trl", demos, batch)
    ours = _trainer(with_shared_prefix(SFTTrainer), model_dir, work / "ours", demos, batch)
    trainers = {"trl": trl, "shared": ours}
    if checkpointing:
        trainers["trl_checkpointing"] = _trainer(
            SFTTrainer, model_dir, work / "ckpt", demos, batch, ckpt=True
        )
    batches = list(trl.get_train_dataloader())[:2]
    times: dict[str, list[float]] = {name: [] for name in trainers}
    for i in range(repeats + 2):
        for name, trainer in trainers.items():
            took = _time_once(trainer, batches[i % len(batches)])
            if i >= 2:  # two warm-ups
                times[name].append(took)
    trl_s, shared_s = statistics.median(times["trl"]), statistics.median(times["shared"])
    first = batches[0]
    extra = {}
    if checkpointing:
        ckpt_s = statistics.median(times["trl_checkpointing"])
        extra = {
            "loss_fwd_bwd_s_trl_checkpointing": round(ckpt_s, 4),
            "speedup_over_checkpointing": round(ckpt_s / shared_s, 2),
        }
    return {
        "env": env_name,
        "rows": batch,
        "padded_row_tokens": int(first["input_ids"].size(1)),
        "real_tokens": int(first["attention_mask"].sum()),
        "common_prefix_tokens": prefix_cut(
            first["input_ids"], first["attention_mask"], first["labels"]
        ),
        "loss_fwd_bwd_s_trl": round(trl_s, 4),
        "loss_fwd_bwd_s_shared": round(shared_s, 4),
        "speedup": round(trl_s / shared_s, 2),
        **extra,
    }


def main() -> None:
    import torch

    parser = arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (a run's SFT: 2)")
    parser.add_argument("--model", default=None, help="a checkpoint (default: the embedded one)")
    parser.add_argument("--env", default="tool_call", help="whose demonstrations")
    parser.add_argument("--batches", default="32,16", help="batch sizes, comma-separated")
    parser.add_argument("--checkpointing", action="store_true", help="also TRL's with it on")
    parser.add_argument(
        "--peak-memory",
        action="store_true",
        help="each variant's peak memory (one step alone) instead of the times",
    )
    parser.add_argument("--one-step", help=argparse.SUPPRESS)  # --peak-memory's child
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.repeats, args.batches = 1, "4"
    torch.set_num_threads(args.threads)
    from gymflow.lifecycle.home import quiet_libraries

    quiet_libraries()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.model:
            from gymflow.policy.checkpoints import checkpoint_folder

            model_dir = checkpoint_folder(args.model)
        else:
            model_dir = _model(work / "cache")
        batches = [int(b) for b in args.batches.split(",")]
        if args.one_step:
            print(json.dumps(one_step_peak(model_dir, work, batches[0], args.env, args.one_step)))
            return
        rows = [
            peak_memory(args, b)
            if args.peak_memory
            else measure(model_dir, work, b, args.repeats, args.env, args.checkpointing)
            for b in batches
        ]
    emit(
        {
            "benchmark": "shared_prefix",
            "date": time.strftime("%Y-%m-%d"),
            "model": args.model
            or "embedded default (untrained weights; the architecture and tokenizer of a run)",
            "threads": args.threads,
            "repeats": args.repeats,
            "statistic": "peak resident memory of one step in a fresh process (VmHWM)"
            if args.peak_memory
            else "median of the timed repeats (compute_loss with TRL's metrics + backward)",
            "batches": rows,
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
