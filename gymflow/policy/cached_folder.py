"""A folder built once in a cache: written beside its final name, then renamed into place.

Converted GGUF checkpoints (:mod:`gymflow.policy.gguf_checkpoint`) and adapted checkpoints
(:mod:`gymflow.policy.checkpoints`) are made this way, so an interrupted build leaves nothing
half-made, and of two processes building the same folder at once the first rename wins.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path


def build_once(folder: Path, marker: str, fill: Callable[[Path], dict]) -> Path:
    """``folder``, made by ``fill(staging)`` unless it is there already; what ``fill`` returns
    is written into it as the JSON file ``marker``, whose presence means "complete"."""
    if (folder / marker).exists():
        return folder
    staging = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.tmp")
    try:
        record = fill(staging)
        (staging / marker).write_text(json.dumps(record, indent=2) + "\n")
        if folder.exists():  # another process finished first: keep its copy
            return folder
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
