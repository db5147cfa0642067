"""GRPO's loss forward and backward with each group's prompt run once, against TRL's own.

    python benchmarks/training/shared_prompt/shared_prompt.py [--json] [--out FILE] [--repeats N] [--threads T]

Same model, same batch, same process: the embedded default's model (its architecture and
tokenizer, built here; the weights do not change the time), TRL's ``GRPOTrainer`` as
``run_grpo`` configures it, and a rollout batch laid out as TRL lays it out — B distinct
``tool_call`` prompts rendered as the SFT stage renders them (left-padded), G completions each
(the gold answer cut or extended to a random length within ±40 %, right-padded). Timed: one
``_get_per_token_logps_and_entropies`` call (the loss forward, entropies included, as
``_compute_loss`` calls it) and the backward of a loss over its log-probs, TRL's method
(``share_prompts`` off) and :func:`gymflow.train.shared_prompt.with_shared_prompts` alternating,
``--repeats`` times each after two warm-ups; the figure is the median. The default's B × G is
4 × 8 (2 × 16 on 2026-11-26 only); 2 × 16 and 8 × 4 show how the saving follows the group size.

Prints one JSON object; ``--out`` also writes it to a file.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, tiny_model  # noqa: E402

SHAPES = [(4, 8), (2, 16), (8, 4)]


def _trainer(cls, model_dir: Path, out: Path, batch: int, group: int):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from datasets import Dataset
    from gymflow.train.grpo import GRPOSettings, trainer_config

    settings = GRPOSettings(prompts_per_step=batch // group, num_generations=group)
    return cls(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
        args=trainer_config(settings, out, log_to_mlflow=False),
        train_dataset=Dataset.from_list([{"prompt": "x"}] * batch),
        processing_class=AutoTokenizer.from_pretrained(model_dir, padding_side="left"),
    )


def _batch(model_dir: Path, prompts: int, group: int, seed: int = 0):
    """``(ids, mask, completion width, real prompt tokens, real completion tokens)``."""
    import torch
    from transformers import AutoTokenizer

    from gymflow.data.task_set import build_tasks
    from gymflow.env.registry import get_env
    from gymflow.train.sft import demonstrations

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    env = get_env("tool_call")
    tasks = build_tasks(env, 64, seed=seed, heldout_frac=0.0, val_frac=0.0)[:prompts]
    rng = random.Random(seed)
    rows = []
    for demo in demonstrations(env, tokenizer, tasks):
        prompt = tokenizer(demo["prompt"], add_special_tokens=False)["input_ids"]
        gold = tokenizer(demo["completion"], add_special_tokens=False)["input_ids"]
        for _ in range(group):
            n = max(2, round(len(gold) * rng.uniform(0.6, 1.4)))
            rows.append((prompt, [gold[i % len(gold)] for i in range(n)]))
    width_p = max(len(p) for p, _ in rows)
    width_c = max(len(c) for _, c in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(rows), width_p + width_c), pad)
    mask = torch.zeros_like(ids)
    for i, (p, c) in enumerate(rows):
        ids[i, width_p - len(p) : width_p], mask[i, width_p - len(p) : width_p] = torch.tensor(p), 1
        ids[i, width_p : width_p + len(c)], mask[i, width_p : width_p + len(c)] = torch.tensor(c), 1
    real_p = sum(len(p) for p, _ in rows)
    return ids, mask, width_c, real_p, sum(len(c) for _, c in rows)


def _time_once(trainer, ids, mask, keep) -> float:
    trainer.model.zero_grad()
    started = time.perf_counter()
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, ids, mask, keep, compute_entropy=True
    )
    (logps * mask[:, -keep:]).sum().backward()
    return time.perf_counter() - started


def measure(model_dir: Path, work: Path, batch_shape: tuple[int, int], repeats: int) -> dict:
    from trl import GRPOTrainer

    from gymflow.train.shared_prompt import with_shared_prompts

    prompts, group = batch_shape
    ids, mask, keep, real_p, real_c = _batch(model_dir, prompts, group)
    trl = _trainer(GRPOTrainer, model_dir, work / "trl", prompts * group, group)
    ours = _trainer(
        with_shared_prompts(GRPOTrainer), model_dir, work / "ours", prompts * group, group
    )
    times: dict[str, list[float]] = {"trl": [], "shared": []}
    for i in range(repeats + 2):
        for name, trainer in (("trl", trl), ("shared", ours)):
            took = _time_once(trainer, ids, mask, keep)
            if i >= 2:  # two warm-ups
                times[name].append(took)
    trl_s, shared_s = statistics.median(times["trl"]), statistics.median(times["shared"])
    return {
        "prompts": prompts,
        "group_size": group,
        "rows": prompts * group,
        "padded_row_tokens": int(ids.size(1)),
        "prompt_tokens_real": real_p,
        "completion_tokens_real": real_c,
        "loss_fwd_bwd_s_trl": round(trl_s, 4),
        "loss_fwd_bwd_s_shared": round(shared_s, 4),
        "speedup": round(trl_s / shared_s, 2),
    }


def main() -> None:
    import torch

    parser = arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a run's GRPO: 1)")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.repeats = 1
    torch.set_num_threads(args.threads)
    from gymflow.lifecycle.home import quiet_libraries

    quiet_libraries()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = tiny_model(work / "cache")
        shapes = [(2, 2)] if args.smoke else SHAPES
        rows = [measure(model_dir, work, shape, args.repeats) for shape in shapes]
    emit(
        {
            "benchmark": "shared_prompt",
            "date": time.strftime("%Y-%m-%d"),
            "model": "embedded default (untrained weights; the architecture and tokenizer of a run)",
            "threads": args.threads,
            "repeats": args.repeats,
            "statistic": "median of the timed repeats (forward with entropies + backward)",
            "shapes": rows,
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
