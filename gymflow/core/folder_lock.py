"""One writer per folder: an advisory ``flock`` that a second collector fails on at once.

Rollout ids make a collection resumable, but two collectors appending to one folder at the
same time would both collect the missing rollouts and write them twice. The lock is held for
the whole collection and released by the kernel if the process dies (no stale lock to clean);
the file names its holder's pid while it is held and is empty otherwise.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

LOCK_NAME = ".collect.lock"


@contextlib.contextmanager
def exclusive(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock; raise ``folder_busy`` naming the holder's pid if it is taken."""
    path = folder / LOCK_NAME
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise GymflowError(
                FailureKind.FOLDER_BUSY,
                f"another collector (pid {holder}) is writing {folder}; wait for it to finish or "
                "collect into another folder",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            # Emptied, not removed: a collector that opened the file meanwhile must lock the
            # same inode the next one creates, or two could hold "the" lock at once.
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)
