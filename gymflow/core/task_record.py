"""Typed task rows: what every environment generates and every stage consumes."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

Split = Literal["train", "val", "heldout"]


class Task(BaseModel):
    """One task. ``prompt`` is chat messages; ``ground_truth`` is whatever the verifier needs."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    env: str
    split: Split
    prompt: list[dict]
    tools: list[dict]
    ground_truth: dict
    generator: str
    seed: int
    content_hash: str


def content_hash(prompt: list[dict], ground_truth: dict) -> str:
    """Stable hash of what a task asks and expects (ids and seeds excluded)."""
    blob = json.dumps([prompt, ground_truth], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def split_of(hash_hex: str, heldout_frac: float, val_frac: float) -> Split:
    """Assign a split from the content hash alone, so a request never crosses splits."""
    bucket = int(hash_hex[:8], 16) / 0xFFFFFFFF
    if bucket < heldout_frac:
        return "heldout"
    if bucket < heldout_frac + val_frac:
        return "val"
    return "train"
