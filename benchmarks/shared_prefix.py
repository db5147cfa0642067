"""SFT's loss forward and backward with the batch's common prefix run once, against TRL's own.

    python benchmarks/shared_prefix.py [--json] [--out FILE] [--repeats N] [--threads T]

Same model, same batch, same process: the embedded default's model (its architecture and
tokenizer, built here; the weights do not change the time), TRL's ``SFTTrainer`` and the first
batches its own data loader makes of ``tool_call`` gold demonstrations rendered as the SFT stage
renders them (the default's batch of 32; GRPO's demo loss takes 16). Timed: one
``compute_loss`` (the forward with TRL's metrics) and its backward, TRL's (``sft.share_prefix``
off) and :func:`gymflow.train.shared_prefix.with_shared_prefix` alternating, ``--repeats`` times
each after two warm-ups; the figure is the median. The default's SFT runs on 2 threads, GRPO
and the control beside it on 1 each.

Prints one JSON object; ``--out`` also writes it to a file.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import arguments, emit  # noqa: E402
from benchmarks.shared_prompt import _model  # noqa: E402

BATCHES = [32, 16]


def _trainer(cls, model_dir: Path, out: Path, demos: list[dict], batch: int):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig

    from datasets import Dataset

    args = SFTConfig(
        output_dir=str(out), use_cpu=True, per_device_train_batch_size=batch, report_to="none",
        bf16=False, max_length=384, seed=0,
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


def measure(model_dir: Path, work: Path, batch: int, repeats: int) -> dict:
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from gymflow.data.task_set import build_tasks
    from gymflow.env.registry import get_env
    from gymflow.train.sft import demonstrations
    from gymflow.train.shared_prefix import prefix_cut, with_shared_prefix

    env = get_env("tool_call")
    tasks = build_tasks(env, 4 * batch, seed=0, heldout_frac=0.0, val_frac=0.0)
    demos = demonstrations(env, AutoTokenizer.from_pretrained(model_dir), tasks)
    trl = _trainer(SFTTrainer, model_dir, work / "trl", demos, batch)
    ours = _trainer(with_shared_prefix(SFTTrainer), model_dir, work / "ours", demos, batch)
    batches = list(trl.get_train_dataloader())[:2]
    times: dict[str, list[float]] = {"trl": [], "shared": []}
    for i in range(repeats + 2):
        for name, trainer in (("trl", trl), ("shared", ours)):
            took = _time_once(trainer, batches[i % len(batches)])
            if i >= 2:  # two warm-ups
                times[name].append(took)
    trl_s, shared_s = statistics.median(times["trl"]), statistics.median(times["shared"])
    first = batches[0]
    return {
        "rows": batch,
        "padded_row_tokens": int(first["input_ids"].size(1)),
        "real_tokens": int(first["attention_mask"].sum()),
        "common_prefix_tokens": prefix_cut(
            first["input_ids"], first["attention_mask"], first["labels"]
        ),
        "loss_fwd_bwd_s_trl": round(trl_s, 4),
        "loss_fwd_bwd_s_shared": round(shared_s, 4),
        "speedup": round(trl_s / shared_s, 2),
    }


def main() -> None:
    import torch

    parser = arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (a run's SFT: 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from gymflow.lifecycle.home import quiet_libraries

    quiet_libraries()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = _model(work / "cache")
        rows = [measure(model_dir, work, batch, args.repeats) for batch in BATCHES]
    emit(
        {
            "benchmark": "shared_prefix",
            "date": time.strftime("%Y-%m-%d"),
            "model": "embedded default (untrained weights; the architecture and tokenizer of a run)",
            "threads": args.threads,
            "repeats": args.repeats,
            "statistic": "median of the timed repeats (compute_loss with TRL's metrics + backward)",
            "batches": rows,
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
