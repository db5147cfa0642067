"""Near-duplicate detection benchmark: 100,000 prompts, wall seconds and recall, as JSON.

    python benchmarks/env/dedup/dedup.py [--n 100000] [--planted 1000] [--out FILE]

Two sets of ``--n`` prompts, each with ``--planted`` rewordings of its own prompts mixed in
(one word without a digit of a 40-word prompt replaced: Jaccard 35/41 = 0.85 with the
default 3-word shingles), through the default :class:`~gymflow.data.dedup.NearDupSettings`:

* ``generated`` — what the environments generate (tool_call, math, workplace, reasoning_gym
  in equal parts; templated, so many repeat exactly);
* ``distinct`` — random 40-word prompts over a 5,000-word vocabulary (no repeats: every
  prompt is hashed and indexed, the costly case).

Timed: normalizing (``normalize_s``), then :func:`~gymflow.data.dedup.near_duplicates`
(``detect_s``: MinHash of every distinct prompt, LSH insert, query, exact Jaccard of each
candidate), and a leakage check of the first 90 % against the last 10 % (``leakage_s``).
``recall`` is the share of planted rewordings found. Target: ``normalize_s + detect_s`` <= 60.
"""

from __future__ import annotations

import os
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402

TARGET_S = 60.0
ENVS = ("tool_call", "math", "workplace", "reasoning_gym")


def generated_prompts(n: int) -> list[list[dict]]:
    from gymflow.env.registry import get_env

    prompts: list[list[dict]] = []
    for i, name in enumerate(ENVS):
        count = n // len(ENVS) + (1 if i < n % len(ENVS) else 0)
        prompts += [d.prompt for d in get_env(name).generate(count, seed=11)]
    random.Random(11).shuffle(prompts)
    return prompts


def distinct_prompts(n: int, rng: random.Random) -> list[list[dict]]:
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=6)) for _ in range(5000)]
    return [
        [{"role": "user", "content": " ".join(rng.choices(vocabulary, k=40))}] for _ in range(n)
    ]


def plant(prompts: list[list[dict]], planted: int, rng: random.Random) -> list[int]:
    """Cut ``planted`` prompts of the first half to 40 words and put a rewording of each (from
    word 20 on, the first word without a digit replaced) in the second half; returns the
    rewordings' positions. A prompt with no such word is not a source."""
    long_enough = [
        i for i, p in enumerate(prompts[: len(prompts) // 2])
        if len(words := p[-1]["content"].split()) >= 40
        and any(not any(c.isdigit() for c in w) for w in words[20:40])
    ]  # fmt: skip
    sources = rng.sample(long_enough, planted)
    targets = rng.sample(range(len(prompts) // 2, len(prompts)), planted)
    for source, target in zip(sources, targets, strict=True):
        words = prompts[source][-1]["content"].split()[:40]
        prompts[source] = [{"role": "user", "content": " ".join(words)}]
        k = next(i for i in range(20, 40) if not any(c.isdigit() for c in words[i]))
        reworded = words[:k] + ["reworded"] + words[k + 1 :]
        prompts[target] = [{"role": "user", "content": " ".join(reworded)}]
    return targets


def measure(prompts: list[list[dict]], planted: list[int]) -> dict:
    from gymflow.data.dedup import NearDupSettings, near_duplicates, normalized_prompt
    from gymflow.data.leakage import PromptRef, find_leaks

    settings = NearDupSettings()
    started = time.perf_counter()
    texts = [normalized_prompt(p) for p in prompts]
    normalized = time.perf_counter()
    found = near_duplicates(texts, settings)
    detected = time.perf_counter()
    cut = len(texts) * 9 // 10
    train = [PromptRef(str(i), texts[i], "train") for i in range(cut)]
    held = [PromptRef(str(i), texts[i], "heldout") for i in range(cut, len(texts))]
    leaks = find_leaks(train, held, settings)
    checked = time.perf_counter()
    earlier = {i for i, _, _ in found}
    return {
        "prompts": len(texts),
        "distinct": len(set(texts)),
        "normalize_s": round(normalized - started, 2),
        "detect_s": round(detected - normalized, 2),
        "near_duplicates": len(found),
        "recall": round(sum(t in earlier for t in planted) / len(planted), 4),
        "leakage_s": round(checked - detected, 2),
        "leaks_found": len(leaks),
        "within_target": (detected - started) <= TARGET_S,
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--n", type=int, default=100_000, help="prompts per set")
    parser.add_argument("--planted", type=int, default=1000, help="rewordings planted per set")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.n, args.planted = 400, 10
    rng = random.Random(7)
    result = {}
    for name, make in (
        ("generated", generated_prompts),
        ("distinct", lambda n: distinct_prompts(n, rng)),
    ):
        started = time.perf_counter()
        prompts = make(args.n)
        made = round(time.perf_counter() - started, 1)
        planted = plant(prompts, args.planted, rng)
        result[name] = {"generate_s": made, **measure(prompts, planted)}
    result.update(
        target_s=TARGET_S,
        machine=f"{os.cpu_count()} CPU cores (shared), {platform.python_implementation()} "
        f"{platform.python_version()}",
        date=time.strftime("%Y-%m-%d"),
    )
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
