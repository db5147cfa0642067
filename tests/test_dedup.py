"""Exact and near-duplicate prompts (gymflow.data.dedup): normalization, MinHash LSH, splits."""

from __future__ import annotations

import random

from gymflow.core.task_record import content_hash, split_of
from gymflow.data.dedup import (
    NearDupSettings,
    PromptIndex,
    jaccard,
    near_duplicates,
    normalized_prompt,
    normalized_text,
    prompt_key,
    shingles,
)
from gymflow.data.leakage import PromptRef, find_leaks
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env

SETTINGS = NearDupSettings()


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def similarity(a: str, b: str, settings: NearDupSettings = SETTINGS) -> float:
    return jaccard(shingles(normalized_text(a), settings), shingles(normalized_text(b), settings))


def test_normalization_ignores_form_and_the_system_message():
    a = [{"role": "system", "content": "Today is Monday."}] + user("How much is 1952 CAD in CHF?")
    b = user("  how MUCH is 1952 cad\nin chf ")
    assert normalized_prompt(a) == normalized_prompt(b) == "how much is 1952 cad in chf"
    assert prompt_key(a) == prompt_key(b)
    assert prompt_key(user("How much is 1953 CAD in CHF?")) != prompt_key(b)


HELD = "We are playing a memory game. The secret word is amber123. Reply with the secret word and nothing else."


def test_a_reworded_prompt_is_a_near_duplicate_and_a_template_mate_is_not():
    reworded = "Please: we are playing a memory game! The secret word is AMBER123. Reply with the secret word and nothing else"
    other_word = HELD.replace("amber123", "birch456")
    assert SETTINGS.threshold <= similarity(HELD, reworded) < 1.0
    # a template instance with other numbers is another task, however similar the words
    assert similarity(HELD, other_word) == 0.0
    words_only = NearDupSettings(numbers_must_match=False)
    assert similarity(HELD, other_word, words_only) > 0.6  # what the number rule protects
    # an inserted word inside a 19-word prompt changes 3 shingles: under the default threshold
    assert similarity(HELD, HELD.replace("a memory", "a little memory")) < SETTINGS.threshold


def test_index_finds_near_duplicates_among_thousands():
    rng = random.Random(3)
    vocabulary = [f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(500)]
    texts = [" ".join(rng.choices(vocabulary, k=40)) for _ in range(3000)]
    planted = {}
    for i in rng.sample(range(3000), 40):  # change one word of 40 texts: J = 35/41 = 0.85
        words = texts[i].split()
        words[15] = "changed"
        planted[len(texts)] = i
        texts.append(" ".join(words))
    pairs = near_duplicates(texts)
    found = {i: j for i, j, _ in pairs}
    assert {i: found.get(i) for i in planted} == planted
    assert len(pairs) == len(planted), "random texts must not be near-duplicates"
    assert all(s >= SETTINGS.threshold for *_, s in pairs)


def test_query_confirms_candidates_with_exact_jaccard():
    index = PromptIndex(NearDupSettings(threshold=0.9))
    base = "one two three four five six seven eight nine ten eleven twelve"
    index.insert([("a", base)])
    close = base.replace("twelve", "zwölf")  # J = 9/11 = 0.82 < 0.9
    assert index.query([base, close]) == [[index.query([base])[0][0]], []]
    assert index.query([base])[0][0].similarity == 1.0


def test_counter_prompt_with_two_ground_truths_lands_in_one_split():
    env = get_env("counter")
    tasks = build_tasks(env, 2000, seed=1, heldout_frac=0.1, val_frac=0.05)
    by_prompt: dict[str, list] = {}
    for task in tasks:
        by_prompt.setdefault(prompt_key(task.prompt), []).append(task)
    shared = [group for group in by_prompt.values() if len(group) > 1]
    assert len(shared) > 20, "counter asks the same prompt with several start values"
    assert all(len({t.split for t in group}) == 1 for group in shared)
    # what this replaced: a split by hash of prompt + ground truth cuts those groups in two
    old = [{split_of(content_hash(t.prompt, t.ground_truth), 0.1, 0.05) for t in group}
           for group in shared]  # fmt: skip
    assert sum(len(splits) > 1 for splits in old) > 5
    # and the leakage check the lifecycle test runs on its output fails on such a split
    refs = {split: [PromptRef(t.task_id, normalized_prompt(t.prompt), split) for t in tasks
                    if split_of(content_hash(t.prompt, t.ground_truth), 0.1, 0.05) == split]
            for split in ("train", "heldout")}  # fmt: skip
    assert find_leaks(refs["train"], refs["heldout"], SETTINGS)
