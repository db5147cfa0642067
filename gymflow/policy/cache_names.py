"""The KV cache's name in and out of a transformers forward, across the 5.x versions we allow.

transformers 5.24 renamed ``past_key_values`` to ``cache``, both as the forward's argument and
as the output's field; the old names still work there with a logged deprecation, and are due to
go in 5.40. ``pyproject.toml`` allows ``transformers>=5.2,<6``, so the project's own KV-cached
forwards (generation's decode loop, SFT's common prefix, GRPO's shared prompts) ask the model
which name it takes instead of pinning either.
"""

from __future__ import annotations


def cache_keyword(model) -> str:
    """The name the model's forward takes a KV cache by: ``cache`` from transformers 5.24 on
    (``past_key_values`` deprecated there), ``past_key_values`` before. An older forward takes
    ``cache`` into its ``**kwargs`` and ignores it, running the completions without the prompt
    (transformers 5.17 then failed on the mask's length, seen on a GPU machine)."""
    import inspect

    base = getattr(model, "module", model)  # DDP / Accelerate wrappers
    base = base.get_base_model() if hasattr(base, "get_base_model") else base  # PEFT
    inner = getattr(base, "model", None)  # the decoder under the LM head takes the cache too
    for candidate in (base, inner):
        if candidate is not None and hasattr(candidate, "forward"):
            params = inspect.signature(candidate.forward).parameters
            if "cache" in params:
                return "cache"
            if "past_key_values" in params:
                return "past_key_values"
    return "past_key_values"


def returned_cache(output):
    """The KV cache a forward returned (``None`` if it kept none), by the output's own field
    name: reading ``past_key_values`` on 5.24's outputs works but logs the deprecation."""
    if "cache" in getattr(type(output), "__dataclass_fields__", {}):
        return output.cache
    return output.past_key_values
