"""A rollout's generation with the decode loop's KV cache preallocated, against the growing one.

    python benchmarks/training/decode_cache/decode_cache.py [--json] [--out FILE] [--model M] [--prompts 4]
        [--group 8] [--max-new 48] [--threads 1] [--repeats 12]

Same model, same prompts, same seeds, same process: ``TransformersPolicy.generate`` as GRPO's
rollouts call it (``--prompts`` distinct ``tool_call`` prompts × ``--group`` samples each, one
seed per row, the default's temperature 1.1), with :func:`gymflow.policy.decode_cache.with_room`
(each token's keys and values written in place) and with it stepped aside (transformers'
``DynamicCache``, which concatenates every layer's whole cache at every token), alternating,
``--repeats`` times each after one warm-up; a new set of prompts and seeds each repeat. The
figures are medians of process CPU time (steadier than wall time on a shared machine) and of
wall time. ``rows_sampled_alike``: the rows whose tokens both sampled alike — all of them on
the embedded model (``tests/test_decode_cache.py`` asserts it); on a deep model float rounding
(attention summed over the preallocated width) can flip a close draw, as batch shape can.

``--model`` takes a checkpoint as a run config's ``model_path`` does (a run's
``RUN/sft/best``: completions as long as a GRPO step's; ``catalog:smollm2-135m-instruct``);
the default builds the embedded default's architecture and tokenizer untrained, whose rows run
to ``--max-new`` (no EOS): the longest a generation gets. GRPO and the control run beside each
other on one thread each, so ``--threads 1`` is a run's.

Prints one JSON object; ``--out`` also writes it to a file.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402
from benchmarks.common import tiny_model as _model  # noqa: E402


def growing(model, past, rows, room):
    """``with_room`` stepped aside: the prefilled cache as it is (rows picked), width None."""
    if rows is not None:
        past.batch_select_indices(rows)
    return past, None


def measure(policy, prompt_sets, group: int, max_new: int) -> dict:
    import gymflow.policy.transformers_backend as backend

    roomy = backend.with_room
    times: dict[str, list[tuple[float, float]]] = {"preallocated": [], "growing": []}
    lengths: list[float] = []
    same = 0  # rows sampled alike by both (float rounding can flip a close draw on deep models)
    for i, prompts in enumerate(prompt_sets):
        rows = [p for p in prompts for _ in range(group)]
        seeds = [1000 * i + r for r in range(len(rows))]
        got = {}
        order = ("preallocated", "growing") if i % 2 else ("growing", "preallocated")
        for name in order:
            backend.with_room = roomy if name == "preallocated" else growing
            try:
                cpu, wall = time.process_time(), time.perf_counter()
                got[name] = policy.generate(rows, max_new, temperature=1.1, seed=seeds)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            finally:
                backend.with_room = roomy
            if i:  # the first set warms up
                times[name].append((cpu, wall))
        a, b = ([g.token_ids for g in got[k]] for k in ("preallocated", "growing"))
        same += sum(x == y for x, y in zip(a, b, strict=True))
        lengths.append(statistics.fmean(len(t) for t in a))
    out = {}
    for name, pairs in times.items():
        out[f"{name}_cpu_s"] = round(statistics.median(c for c, _ in pairs), 4)
        out[f"{name}_wall_s"] = round(statistics.median(w for _, w in pairs), 4)
    out["cpu_ratio"] = round(out["preallocated_cpu_s"] / out["growing_cpu_s"], 3)
    out["mean_completion_tokens"] = round(statistics.fmean(lengths), 1)
    out["rows_sampled_alike"] = f"{same} of {group * sum(map(len, prompt_sets))}"
    return out


def main() -> None:
    import torch

    parser = arguments(__doc__)
    parser.add_argument("--model", default=None, help="a checkpoint (default: the embedded one)")
    parser.add_argument("--prompts", type=int, default=4, help="distinct prompts a call")
    parser.add_argument("--group", type=int, default=8, help="samples of each prompt")
    parser.add_argument("--max-new", type=int, default=48, help="tokens a turn at most")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (GRPO's: 1)")
    parser.add_argument("--repeats", type=int, default=12)
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.prompts, args.group, args.max_new, args.repeats = 1, 2, 4, 1
    torch.set_num_threads(args.threads)
    from gymflow.data.task_set import build_tasks
    from gymflow.env.registry import get_env
    from gymflow.lifecycle.home import quiet_libraries
    from gymflow.policy.transformers_backend import TransformersPolicy

    quiet_libraries()
    with tempfile.TemporaryDirectory() as tmp:
        policy = TransformersPolicy.from_path(args.model or _model(Path(tmp) / "cache"))
    n = args.prompts * (args.repeats + 1)
    tasks = build_tasks(get_env("tool_call"), n, seed=0, heldout_frac=0.0, val_frac=0.0)
    prompts = [policy.encode_prompt(t.prompt, t.tools) for t in tasks]
    sets = [prompts[i : i + args.prompts] for i in range(0, n, args.prompts)]
    emit(
        {
            "benchmark": "decode_cache",
            "date": time.strftime("%Y-%m-%d"),
            "model": args.model or "embedded default (untrained: rows run to --max-new)",
            "rows": args.prompts * args.group,
            "prompts": args.prompts,
            "group": args.group,
            "max_new_tokens": args.max_new,
            "mean_prompt_tokens": round(statistics.fmean(map(len, prompts)), 1),
            "threads": args.threads,
            "repeats": args.repeats,
            "statistic": "median over the repeats of one generate call (after one warm-up)",
            **measure(policy, sets, args.group, args.max_new),
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
