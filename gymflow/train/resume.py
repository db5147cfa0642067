"""Resume a TRL trainer where an earlier attempt stopped: its last whole checkpoint, and the
training wall time of the attempts before.

SFT and GRPO keep their newest :data:`KEEP_CHECKPOINTS` checkpoints under ``<out>/trainer/``
(transformers' ``Trainer`` writes weights, optimizer, scheduler, RNG and trainer state). After
the ``Trainer`` has written one, :meth:`Progress.save` adds ``gymflow_resume.json`` to it: the
training wall time up to it, summed over attempts (a retry must not get a fresh time budget),
and what the caller carries across attempts (SFT: its best validation score and history). A
checkpoint without that file is one a killed process was still writing, and is passed over;
keeping two means the one before it is still there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RESUME_FILE = "gymflow_resume.json"
KEEP_CHECKPOINTS = 2
"""``save_total_limit`` of both trainers: the newest checkpoint and the one before it."""


@dataclass
class Progress:
    """Where training resumes (``checkpoint``, ``None`` = from the start) and its clock."""

    checkpoint: Path | None = None
    steps: int = 0
    wall_before_s: float = 0.0
    """Training wall time of the earlier attempts, up to ``checkpoint``."""
    state: dict = field(default_factory=dict)
    """What the caller saved with ``checkpoint`` (``wall_s`` left out)."""
    started: float = field(default_factory=time.time)

    @classmethod
    def find(cls, trainer_dir: Path, resume: bool = True) -> Progress:
        """The newest whole checkpoint under ``trainer_dir`` (none when ``resume`` is False)."""
        checkpoint = last_checkpoint(trainer_dir) if resume else None
        if checkpoint is None:
            return cls()
        state = json.loads((checkpoint / RESUME_FILE).read_text())
        wall = float(state.pop("wall_s"))
        return cls(checkpoint, _step_of(checkpoint), wall, state)

    @property
    def resumed_from(self) -> str | None:
        return str(self.checkpoint) if self.checkpoint else None

    def start_clock(self) -> None:
        """Training (not model loading) starts now."""
        self.started = time.time()

    def trained_s(self) -> float:
        """Training wall time so far, earlier attempts included."""
        return self.wall_before_s + time.time() - self.started

    def save(self, checkpoint: Path, **state) -> None:
        """Mark ``checkpoint`` whole: the wall time up to it and ``state`` (JSON values).
        Several processes training together: rank 0 writes it (the Trainer's own files too)."""
        from gymflow.train.distributed import is_main

        if not is_main():
            return
        tmp = checkpoint / (RESUME_FILE + ".tmp")
        tmp.write_text(json.dumps({"wall_s": round(self.trained_s(), 3), **state}))
        tmp.replace(checkpoint / RESUME_FILE)

    def recorder(self, carry: Callable[[], dict] | None = None):
        """A ``TrainerCallback`` that saves progress (and ``carry()``) into every checkpoint
        the ``Trainer`` writes; put it before any callback that may stop the run on save."""
        from transformers import TrainerCallback

        progress = self

        class RecordProgress(TrainerCallback):
            def on_save(self, args, state, control, **kw):
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                progress.save(folder, **(carry() if carry is not None else {}))
                return control

        return RecordProgress()


def last_checkpoint(trainer_dir: Path) -> Path | None:
    """The highest-step ``checkpoint-<step>`` holding :data:`RESUME_FILE`, or ``None``."""
    if not trainer_dir.is_dir():
        return None
    whole = [p for p in trainer_dir.glob("checkpoint-*") if (p / RESUME_FILE).is_file()]
    return max(whole, key=_step_of, default=None)


def _step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[1])
