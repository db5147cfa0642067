"""Training on several processes: what every rank must agree on, and who writes.

SFT and GRPO run under ``accelerate launch`` (:mod:`gymflow.train.launch`) as N copies of one
program, one per process (rank), each holding the whole model; DDP averages their gradients
(gloo on CPUs, NCCL on GPUs). The copies must take the same decisions at the same step, or one
waits forever for the others in the next collective: whether to stop (a time budget, the
control's twin clock, a validation target), which tasks a step trains on, which groups dynamic
sampling keeps. Decisions that read a clock, a file or a sampled evaluation are therefore made
once, on rank 0, and handed to the others (:func:`agreed`); data every rank produced is
gathered in rank order (:func:`gather`), so each rank sees what one process would have seen.
Files are written once, by rank 0 (:func:`is_main`).

With one process (no ``torch.distributed`` group) every function here is the identity. Before
the trainer has made the group, :func:`rank` and :func:`world_size` read the variables the
launcher (``torchrun``, which ``accelerate launch`` runs) sets, so objects built before
training (the rollout store's writer) already know whether they are rank 0.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from gymflow.core.failures import FailureKind, GymflowError

T = TypeVar("T")


def _group_ready() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    """Processes training together (the launcher's ``WORLD_SIZE`` before the group exists)."""
    if not _group_ready():
        return int(os.environ.get("WORLD_SIZE", "1"))
    import torch.distributed as dist

    return dist.get_world_size()


def rank() -> int:
    """This process's rank (the launcher's ``RANK`` before the group exists)."""
    if not _group_ready():
        return int(os.environ.get("RANK", "0"))
    import torch.distributed as dist

    return dist.get_rank()


def is_main() -> bool:
    """True on the process that writes files (rank 0), and always with one process."""
    return rank() == 0


def gather(value: T) -> list[T]:
    """Every rank's ``value`` (picklable), in rank order, on every rank."""
    if not _group_ready():
        return [value]
    import torch.distributed as dist

    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def shard(items: list[T]) -> list[T]:
    """This rank's contiguous share of ``items`` (the first ranks take one more if uneven)."""
    n, r = world_size(), rank()
    size, extra = divmod(len(items), n)
    start = r * size + min(r, extra)
    return items[start : start + size + (r < extra)]


def agreed(decide: Callable[[], T]) -> T:
    """``decide()`` run on rank 0 only; every rank gets its answer (or its error, raised).

    For decisions that read a clock, a file or a sampled evaluation: run on each rank they
    could differ, and the ranks would part ways at the next collective.
    """
    if not _group_ready():
        return decide()
    import torch.distributed as dist

    box: list = [None]
    if dist.get_rank() == 0:
        try:
            box[0] = ("ok", decide())
        except GymflowError as exc:
            box[0] = ("error", (exc.kind, exc.detail))
        except Exception as exc:
            box[0] = ("error", (FailureKind.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))
    dist.broadcast_object_list(box, src=0)
    status, value = box[0]
    if status == "error":
        raise GymflowError(*value)
    return value
