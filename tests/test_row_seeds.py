"""Per-prompt seeds: a sampled row depends on its prompt and seed only, not on its batch-mates.

The collector's sliding window batches whichever episodes wait for the model at that moment,
so without this a collection could not be reproduced from the seeds in its rows.
"""

from __future__ import annotations

import pytest

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.policy.transformers_backend import TransformersPolicy


@pytest.fixture(scope="module")
def policy_and_prompts(micro_tool_call_model):
    env = get_env("tool_call")
    path = micro_tool_call_model
    policy = TransformersPolicy.from_path(path)
    tasks = build_tasks(env, 12, seed=4, heldout_frac=0.0, val_frac=0.0)
    return policy, [policy.encode_prompt(t.prompt, t.tools) for t in tasks[:6]]


def test_a_row_samples_the_same_alone_or_in_any_batch(policy_and_prompts):
    policy, prompts = policy_and_prompts
    seeds = [101, 102, 103, 104, 105, 106]
    together = policy.generate(prompts, 16, temperature=1.0, seed=seeds)
    reordered = policy.generate(prompts[::-1], 16, temperature=1.0, seed=seeds[::-1])[::-1]
    alone = [
        policy.generate([p], 16, temperature=1.0, seed=[s])[0]
        for p, s in zip(prompts, seeds, strict=True)
    ]
    ids = [g.token_ids for g in together]
    assert ids == [g.token_ids for g in reordered] == [g.token_ids for g in alone]
    assert len({tuple(i) for i in ids}) > 1  # a random-init model at T=1: rows do differ


def test_same_prompt_different_seeds_differ_and_a_seed_repeats(policy_and_prompts):
    policy, prompts = policy_and_prompts
    group = policy.generate([prompts[0]] * 4, 16, temperature=1.0, seed=[7, 8, 9, 7])
    assert group[0].token_ids == group[3].token_ids  # same prompt + seed: same sample
    assert len({tuple(g.token_ids) for g in group[:3]}) > 1  # the group still varies


def test_seed_list_must_match_the_prompts(policy_and_prompts):
    policy, prompts = policy_and_prompts
    with pytest.raises(ValueError, match="2 seeds for 3 prompts"):
        policy.generate(prompts[:3], 4, seed=[1, 2])
