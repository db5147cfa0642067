"""A GGUF round trip: the project's own tiny model written as GGUF by the ``gguf`` package (the
layout llama.cpp's converter writes: its tensor names, q/k rows permuted, the BPE vocabulary
and merges as metadata), then read back through the product's GGUF path
(:func:`gymflow.policy.gguf_checkpoint.materialize`) gives the same logits and token ids.

It needs no download, so it checks the conversion on every CI run, not only where the real
model was fetched.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gymflow.policy.gguf_checkpoint import SOURCE_FILE, materialize
from gymflow.policy.tiny_model import TinyModelConfig, build_tiny_model

gguf = pytest.importorskip("gguf")

TEXT = "<|im_start|>user\nbook a flight from Paris to Lisbon please<|im_end|>\n"


def _permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row order (what its converter writes and transformers undoes)."""
    dim = weights.shape[0] // n_head // 2
    return weights.reshape(n_head, 2, dim, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def _write_gguf(model, tokenizer, path) -> None:
    config = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)

    backend = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    vocab = sorted(backend["vocab"].items(), key=lambda item: item[1])
    assert [i for _, i in vocab] == list(range(len(vocab)))
    added = {t.content: t.special for t in tokenizer.added_tokens_decoder.values()}
    kinds = {True: gguf.TokenType.CONTROL, False: gguf.TokenType.USER_DEFINED}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list([token for token, _ in vocab])
    writer.add_token_types([kinds.get(added.get(t), gguf.TokenType.NORMAL) for t, _ in vocab])
    writer.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in backend["merges"]])
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_chat_template(tokenizer.chat_template)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue  # tied: the file has the embedding only
        array = tensor.float().numpy()
        if name.endswith("self_attn.q_proj.weight"):
            array = _permute(array, config.num_attention_heads)
        elif name.endswith("self_attn.k_proj.weight"):
            array = _permute(array, config.num_key_value_heads)
        mapped = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert mapped, f"no GGUF name for {name}"
        writer.add_tensor(mapped, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_tiny_model_written_as_gguf_comes_back_with_the_same_logits(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    corpus = [TEXT, "search flights weather hotels cheapest date city name"] * 50
    shape = TinyModelConfig(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128,
                            vocab_size=400, corpus_size=10, seed=3)  # fmt: skip
    folder = build_tiny_model(tmp_path / "tiny", corpus, shape)
    original = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():  # random init is near-uniform: widen it so a wrong mapping shows
        for p in original.parameters():
            p.mul_(8.0) if p.dim() > 1 else p.add_(torch.randn_like(p) * 0.2)
    path = tmp_path / "tiny.gguf"
    _write_gguf(original, tokenizer, path)

    converted = materialize(path, tmp_path / "cache")
    assert json.loads((converted / SOURCE_FILE).read_text())["gguf"] == str(path.resolve())
    back = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32)
    back_tokenizer = AutoTokenizer.from_pretrained(converted)

    assert back_tokenizer.get_vocab() == tokenizer.get_vocab()
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    assert back_tokenizer(TEXT, add_special_tokens=False)["input_ids"] == ids
    assert back_tokenizer.eos_token == tokenizer.eos_token
    with torch.no_grad():
        a = original(torch.tensor([ids])).logits
        b = back(torch.tensor([ids])).logits
    assert a.std() > 1.0  # the check below has something to compare
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4, rtol=1e-4)
    assert a[0, -1].argmax() == b[0, -1].argmax()
