"""The embedded default policy: a tiny Llama-shaped causal LM and a BPE tokenizer built here.

Nothing is downloaded. The tokenizer is trained with ``tokenizers`` on conversations rendered
from the environment's own generator (digits one per token, so numbers are copied digit by
digit); the model is a random init from a ``LlamaConfig``. Both are saved with
``save_pretrained`` under a cache folder keyed by their settings, and everything downstream
loads them through ``from_pretrained(path)``, so a real local checkpoint drops in by path.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field, model_validator

from gymflow.data.task_set import build_tasks
from gymflow.env.environment import Environment
from gymflow.policy.chat_template import CHAT_TEMPLATE, EOS_TOKEN, PAD_TOKEN, SPECIAL_TOKENS

BUILDER_VERSION = 1


class TinyModelConfig(BaseModel):
    """Shape of the embedded model and its tokenizer."""

    model_config = {"extra": "forbid"}

    hidden_size: int = Field(192, ge=8, description="Width of the residual stream.")
    num_layers: int = Field(4, ge=1, description="Transformer blocks.")
    num_heads: int = Field(4, ge=1, description="Attention heads (key/value heads equal).")
    intermediate_size: int = Field(576, ge=1, description="MLP width.")
    max_positions: int = Field(384, ge=16, description="Longest sequence (prompt + completion).")
    vocab_size: int = Field(
        1024, ge=300, description="BPE vocabulary target, special tokens included."
    )
    corpus_size: int = Field(
        6000, ge=10, description="Conversations rendered to train the tokenizer."
    )
    isolate_whitespace: bool = Field(
        False,
        description="Split whitespace off as its own token (see build_tokenizer); off by default: "
        "over 3 seeds it gave smaller GRPO gains in the 10-minute budget (docs/tuning.md).",
    )
    seed: int = Field(0, description="Seed for the corpus and the weight init.")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> TinyModelConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} must be a multiple of num_heads {self.num_heads}"
            )
        return self

    def cache_key(self, env_name: str) -> str:
        blob = json.dumps([BUILDER_VERSION, env_name, self.model_dump()], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_tokenizer(
    corpus: Iterable[str],
    vocab_size: int,
    isolate_whitespace: bool = False,
    *,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    eos_token: str | None = EOS_TOKEN,
    pad_token: str | None = PAD_TOKEN,
    bos_token: str | None = None,
    chat_template: str | None = CHAT_TEMPLATE,
):
    """Train a byte-level BPE with single-digit tokens and wrap it for transformers.

    ``isolate_whitespace`` splits whitespace off as its own token before the byte-level step.
    GPT-2-style pre-tokenizers glue the leading space to a word, so ``" Miami"`` in a request
    and ``"Miami"`` inside a JSON string get different ids and copying a value becomes a learned
    per-word mapping; with the space isolated both are the same id. It costs ~16 % more tokens
    and slower SFT here, and did not raise the 3-seed GRPO gain in the time budget.

    The keyword arguments default to the embedded model's ChatML tokens and template; other
    values make tokenizers shaped like the checkpoints users bring (their special tokens, no
    pad token, no chat template), as ``tests/test_checkpoint_shapes.py`` does.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    steps = [
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ]
    if isolate_whitespace:
        steps.insert(0, pre_tokenizers.Split(Regex(r"\s"), behavior="isolated"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=eos_token,
        pad_token=pad_token,
        bos_token=bos_token,
        unk_token=None,
        padding_side="left",
        chat_template=chat_template,
        extra_special_tokens={},
    )


def build_tiny_model(out_dir: Path, corpus: Iterable[str], config: TinyModelConfig) -> Path:
    """Build tokenizer + random-init model into ``out_dir`` (``save_pretrained`` layout)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(corpus, config.vocab_size, config.isolate_whitespace)
    torch.manual_seed(config.seed)
    model_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(model_config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    # A folder of its own per build: two runs sharing a home may build the same model at once.
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp-", dir=out_dir.parent))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "gymflow_build.json").write_text(json.dumps(config.model_dump(), indent=2))
    try:
        tmp.rename(out_dir)  # atomic: a half-built folder is never mistaken for a cached model
    except OSError:
        if not (out_dir / "config.json").exists():
            raise
        shutil.rmtree(tmp)  # another process finished the same build first: use its copy
    return out_dir


def ensure_tiny_model(cache_dir: Path, env_name: str, corpus_fn, config: TinyModelConfig) -> Path:
    """Return the cached model folder for ``config``, building it on first use."""
    out = cache_dir / "models" / f"tiny-{env_name}-{config.cache_key(env_name)}"
    if (out / "config.json").exists():
        return out
    return build_tiny_model(out, corpus_fn(), config)


def tokenizer_corpus(env: Environment, n: int, seed: int) -> list[str]:
    """Rendered conversations (prompt + gold answer) to train the embedded tokenizer on."""
    from jinja2 import Environment as Jinja

    from gymflow.policy.chat_template import CHAT_TEMPLATE

    template = Jinja().from_string(CHAT_TEMPLATE.replace("| tojson", "| tojson_"))
    import json

    template.environment.filters["tojson_"] = lambda x: json.dumps(x, ensure_ascii=False)
    texts = []
    for task in build_tasks(env, n, seed, 0.0, 0.0):
        rendered = template.render(
            messages=task.prompt, tools=task.tools, add_generation_prompt=True
        )
        texts.append(rendered + env.gold_text(task) + "<|im_end|>\n")
    return texts
