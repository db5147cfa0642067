"""The decode loop's KV cache: a prefilled cache moved once into preallocated room.

transformers' ``DynamicCache`` grows by ``torch.cat``, copying every layer's whole cache at
every generated token: ``aten::cat`` was ~40 % of the CPU time of GRPO's rollouts in one
profile of the embedded default (32 rows × up to 48 tokens on ~78-token prompts). What that
copying costs varies with the machine's memory traffic (``benchmarks/`` measures it; the figures
are in the Results log).
transformers' own ``StaticCache`` writes each token in place and attends over its preallocated
width, masked; what it lacks is a way in for a cache that was prefilled elsewhere (the
shared-prefix prefill of :mod:`gymflow.policy.transformers_backend`), which is the one function
here. Same math: the masked slots add nothing to the attention; only the summation's rounding
differs, which on a deep model can flip a close draw, as batch shape can
(``tests/test_decode_cache.py`` checks tokens and log-probs against the growing cache).
"""

from __future__ import annotations


def with_room(model, past, rows, room: int):
    """``(cache, width)``: ``past`` (a prefilled ``DynamicCache``) with its batch rows picked by
    ``rows`` (a tensor of row indices, or ``None`` for all), as a ``StaticCache`` that holds
    ``room`` more tokens, and its width (prefix + room): every later forward call's attention
    mask spans that width, unwritten slots 0.

    A cache with a layer that is not a plain growing one (a sliding window, linear attention)
    comes back as it is, rows picked, with width ``None`` (the mask grows with it):
    transformers keeps its own handling of those."""
    from transformers.cache_utils import DynamicLayer, StaticCache, StaticLayer

    if rows is not None:
        past.batch_select_indices(rows)
    if not past.layers or any(type(layer) is not DynamicLayer for layer in past.layers):
        return past, None
    width = past.get_seq_length() + room
    cache = StaticCache(config=model.config, max_cache_len=width)
    if len(cache.layers) != len(past.layers) or any(
        type(layer) is not StaticLayer for layer in cache.layers
    ):
        return past, None
    for mine, theirs in zip(cache.layers, past.layers, strict=True):
        mine.update(theirs.keys, theirs.values)  # allocates the room, writes the prefix
    return cache, width
