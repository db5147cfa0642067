"""The embedded tiny model's tokenizer corpus for a run: every environment of its mix.

The tokenizer is trained on conversations rendered from the environments' own generators
(:func:`gymflow.policy.tiny_model.tokenizer_corpus`); a mix shares ``tiny_model.corpus_size``
by weight, each environment getting at least a quarter of an equal share, so the vocabulary
covers every environment the run trains and is evaluated on.
"""

from __future__ import annotations

from gymflow.data.env_mix import apportion
from gymflow.env.registry import get_env
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.policy.tiny_model import tokenizer_corpus


def corpus_key(cfg: LifecycleConfig) -> str:
    """What the cached model is built for: the environment, or the mix with its weights."""
    if cfg.envs is None:
        return cfg.env
    return "mix-" + "+".join(f"{name}{weight:.3g}" for name, weight in cfg.env_weights.items())


def embedded_corpus(cfg: LifecycleConfig) -> list[str]:
    """Rendered conversations (prompt + gold answer) of every environment of the run."""
    tm, weights = cfg.tiny_model, cfg.env_weights
    shares = apportion(tm.corpus_size, weights, minimum=tm.corpus_size // (4 * len(weights)))
    corpus: list[str] = []
    for name, n in shares.items():
        corpus += tokenizer_corpus(get_env(name), n, tm.seed + 12345)
    return corpus
