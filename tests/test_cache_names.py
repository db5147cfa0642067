"""The KV cache goes in and comes out by the name the installed transformers uses.

Real parts: the embedded tool_call Llama and the project's decode loop
(``TransformersPolicy``), SFT's common-prefix forward and GRPO's shared-prompt forward are the
callers; ``tests/test_shared_prompt.py`` checks the argument's name on an older forward's
signature. Here: the project's own generation logs none of transformers' cache-name
deprecations (due to become errors in 5.40), and an output from before the rename is read by
its old field.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import transformers
from log_records import LogRecords  # tests/ is on the path

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.policy.cache_names import returned_cache
from gymflow.policy.transformers_backend import TransformersPolicy


def test_generation_uses_the_installed_cache_name(micro_tool_call_model):
    policy = TransformersPolicy.from_path(micro_tool_call_model)
    tasks = build_tasks(get_env("tool_call"), 4, seed=1, heldout_frac=0.0, val_frac=0.0)
    prompts = [policy.encode_prompt(t.prompt, t.tools) for t in tasks]
    prompts = [p for p in prompts for _ in range(2)]  # shared rows: the prefill is picked from
    root = logging.getLogger("transformers")
    records, level = LogRecords(), transformers.logging.get_verbosity()
    logging.Logger.warning_once.cache_clear()  # a notice seen earlier in this process counts
    transformers.logging.set_verbosity_warning()
    root.addHandler(records)
    try:
        gens = policy.generate(prompts, max_new_tokens=6, temperature=1.0, seed=list(range(8)))
    finally:
        root.removeHandler(records)
        transformers.logging.set_verbosity(level)
    assert len(gens) == len(prompts) and all(g.token_ids for g in gens)
    assert not [m for m in records.messages if "deprecated" in m], records.messages


def test_an_output_from_before_the_rename_is_read_by_its_old_field():
    @dataclass
    class Older:
        logits: object = None
        past_key_values: object = None

    @dataclass
    class Newer:
        logits: object = None
        cache: object = None

    assert returned_cache(Older(past_key_values="kv")) == "kv"
    assert returned_cache(Newer(cache="kv")) == "kv"
    assert returned_cache(Newer()) is None
