"""Leakage: a held-out prompt, or a near-duplicate of one, in the data a policy learns from.

:func:`find_leaks` compares training prompts with held-out prompts through a
:class:`~gymflow.data.dedup.PromptIndex` (exact-after-normalization and near-duplicate alike);
:func:`refuse_leaks` turns what it found into one ``data_leakage`` error naming the pairs, so a
run stops before any training instead of reporting a held-out score it did not earn. Held-out
prompts can come from this run's split, from task files added as held-out, or from the held-out
sets earlier runs recorded (:mod:`gymflow.data.heldout_record`); ``origin`` says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.data.dedup import NearDupSettings, PromptIndex, normalized_prompt

SHOWN_PAIRS = 5
"""Pairs an error message names; the rest are counted."""


@dataclass(frozen=True)
class PromptRef:
    """A prompt to compare: an id (task id), its normalized text and where it comes from."""

    id: str
    text: str
    origin: str

    @classmethod
    def of(cls, task: Task, origin: str) -> PromptRef:
        return cls(task.task_id, normalized_prompt(task.prompt), origin)


@dataclass(frozen=True)
class Leak:
    """A training prompt and the held-out prompt it repeats or nearly repeats."""

    train: PromptRef
    heldout: PromptRef
    similarity: float

    def describe(self) -> str:
        same = "the same prompt as" if self.similarity >= 1.0 else f"{self.similarity:.2f} like"
        return (
            f"{self.train.id} ({self.train.origin}) is {same} held-out "
            f"{self.heldout.id} ({self.heldout.origin})"
        )


def find_leaks(
    train: Sequence[PromptRef], heldout: Sequence[PromptRef], settings: NearDupSettings
) -> list[Leak]:
    """Each training prompt with a held-out near-duplicate, paired with its closest one."""
    if not train or not heldout:
        return []
    refs = {str(i): ref for i, ref in enumerate(heldout)}
    index = PromptIndex(settings)
    index.insert((key, ref.text) for key, ref in refs.items())
    leaks = []
    for ref, matches in zip(train, index.query([r.text for r in train]), strict=True):
        if matches:
            leaks.append(Leak(ref, refs[matches[0].key], matches[0].similarity))
    return leaks


def refuse_leaks(leaks: Sequence[Leak], where: str) -> None:
    """Raise ``data_leakage`` naming the first pairs; nothing if there are none."""
    if not leaks:
        return
    shown = "; ".join(leak.describe() for leak in leaks[:SHOWN_PAIRS])
    more = f" (+{len(leaks) - SHOWN_PAIRS} more)" if len(leaks) > SHOWN_PAIRS else ""
    raise GymflowError(
        FailureKind.DATA_LEAKAGE,
        f"{len(leaks)} {where} tasks are held-out tasks or near-duplicates of them: "
        f"{shown}{more}. Remove them from the training data (or the held-out task from the "
        "held-out set) and run again; nothing was trained.",
    )
