"""Run the SFT control beside GRPO: the same wall time, half the CPU each.

The lifecycle compares GRPO with what the same wall time of more SFT gives. Run one after
the other, the control doubles the cost of every GRPO second. Run side by side (GRPO in the
flow's process, the control in a spawned process, one torch thread each) the pair costs one
GRPO wall time, and on a 2-core machine GRPO with one thread next to a busy neighbour is only
~1.4× slower per step than alone with two (measured in docs/tuning.md): more GRPO steps in the
same run.

The two processes meet through marker files in the GRPO stage's folder. GRPO clears them when
it starts and, when it ends, writes its training wall time (with the config digest, so a
marker from another configuration is never trusted); the control trains until
its own training wall time reaches GRPO's. If GRPO fails the control stops with an error (so
a re-run does not find a finished control with the wrong budget), and it stops too if the
process that started it is gone. On a re-run where GRPO's result is cached the marker is
already there and the control simply trains for that long.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

FINISHED = "finished.json"
FAILED = "failed.json"


@contextlib.contextmanager
def grpo_markers(folder: Path) -> Iterator[None]:
    """Around the GRPO stage: clear old markers, and leave a failure marker if it raises."""
    for name in (FINISHED, FAILED):
        (folder / name).unlink(missing_ok=True)
    try:
        yield
    except BaseException as exc:
        mark_failed(folder, f"{type(exc).__name__}: {exc}")
        raise


def forget_failure(folder: Path) -> None:
    """A new attempt is starting: an earlier GRPO failure must not stop the new control."""
    (folder / FAILED).unlink(missing_ok=True)


def mark_finished(folder: Path, wall_s: float, digest: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (FINISHED + ".tmp")
    tmp.write_text(json.dumps({"wall_s": wall_s, "digest": digest}))
    tmp.replace(folder / FINISHED)


def mark_failed(folder: Path, reason: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FAILED).write_text(json.dumps({"reason": reason}))


def finished(folder: Path, digest: str) -> dict | None:
    """GRPO's ``{"wall_s", "digest"}`` if it finished under this configuration, else None."""
    try:
        info = json.loads((folder / FINISHED).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return info if info.get("digest") == digest else None


class TwinClock:
    """``should_stop(elapsed_s)`` for the control: stop once GRPO's wall time is reached.

    Raises ``GymflowError`` when GRPO failed or the parent process died: the control's result
    must not be cached with a budget it never matched.
    """

    def __init__(self, folder: Path, digest: str, parent_pid: int) -> None:
        self.folder, self.digest, self.parent_pid = folder, digest, parent_pid
        self.budget_s: float | None = None

    def __call__(self, elapsed_s: float) -> bool:
        if (self.folder / FAILED).exists():
            reason = json.loads((self.folder / FAILED).read_text()).get("reason", "")
            raise GymflowError(
                FailureKind.STAGE_ABANDONED,
                f"the SFT control stopped because GRPO failed beside it: {reason}",
            )
        if os.getppid() != self.parent_pid:
            raise GymflowError(
                FailureKind.STAGE_ABANDONED, "the SFT control stopped: its parent process is gone"
            )
        if self.budget_s is None:
            info = finished(self.folder, self.digest)
            self.budget_s = None if info is None else float(info["wall_s"])
        return self.budget_s is not None and elapsed_s >= self.budget_s
