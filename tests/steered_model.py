"""A checkpoint steered to one token, for tests that need policies with known, different outputs
(the gate's champion tests, the evaluations on vLLM)."""

from __future__ import annotations

from pathlib import Path


def steered(base: Path, token: int, out: Path) -> str:
    """``base`` with every input embedding pushed far along ``token``'s own: the last hidden
    state points at ``token`` wherever it is, and the tied output layer writes it every step."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base)
    embeddings = model.get_input_embeddings().weight
    with torch.no_grad():
        embeddings.add_(50.0 * embeddings[token] / embeddings[token].norm())
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)
    return str(out)
