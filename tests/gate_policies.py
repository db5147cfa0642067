"""The gate tests' planted environments and steered policies (module fixtures), shared by the
test modules that gate them: ``silent`` answers nothing (its first token is EOS), ``chatty``
writes "aaaa…" to its token budget; ``planted_silence`` rewards an empty answer,
``planted_any`` any non-empty one (``tests/planted_envs.py``)."""

from __future__ import annotations

import shutil

import pytest
from planted_envs import registered
from steered_model import steered

TOKENS = 16  # max_new_tokens: chatty's answer length


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    with registered(tmp_path_factory.mktemp("planted")):
        yield


@pytest.fixture(scope="module")
def policies(micro_tool_call_model, tmp_path_factory) -> dict[str, str]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(micro_tool_call_model)
    folder = tmp_path_factory.mktemp("policies")
    a = tokenizer("a", add_special_tokens=False)["input_ids"][0]
    silent = steered(micro_tool_call_model, tokenizer.eos_token_id, folder / "silent")
    chatty = steered(micro_tool_call_model, a, folder / "chatty")
    shutil.copytree(silent, folder / "silent_again")  # a later run's candidate, same weights
    return {"silent": silent, "chatty": chatty, "silent_again": str(folder / "silent_again")}
