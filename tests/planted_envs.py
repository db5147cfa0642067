"""Environments planted by tests: a sound one and two broken verifiers, registered for a test.

* ``planted_words`` — say back the word the user names; gold scores 1.0, probes 0.
* ``planted_any`` — the same tasks, but its verifier rewards any non-empty answer (a lenient
  verifier a policy would hack: every non-empty probe is rewarded above its ceiling).
* ``planted_silence`` — the same tasks, but an empty answer is the right one (with
  ``planted_any``: two sets on which the same policy is right on one and wrong on the other).
* ``planted_process`` — the same tasks, but a wrong answer's reward depends on a value drawn
  once per process (state kept in a module): two scorings in one process agree, two in two
  processes do not.
* ``planted_other_words``, ``planted_other_any`` — ``planted_words`` and ``planted_any`` on
  other words, to be mixed with the others in one run.

:func:`registered` makes them findable by name (``get_env``) the way an installed plugin is:
an entry-point ``dist-info`` on ``sys.path``, which spawned worker processes inherit.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_text
from gymflow.env import registry
from gymflow.env.environment import Environment, Probe, TaskDraft

WORDS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "granite", "harbor", "indigo")
PROCESS_SALT = secrets.randbits(32)
"""Drawn when this module is imported: a new value in every process."""


class PlantedWords(Environment):
    name = "planted_words"
    reward_range = (0.0, 1.0)

    def tools(self):
        return []

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        rng = random.Random(seed)
        drafts = []
        for _ in range(n):
            word = f"{rng.choice(WORDS)}{rng.randint(0, 99_999)}"
            text = (
                f"We are playing a memory game. The secret word is {word}. "
                "Reply with the secret word and nothing else."
            )
            drafts.append(TaskDraft([{"role": "user", "content": text}], {"word": word}, seed))
        return drafts

    def verify(self, task, items) -> Score:
        said = final_assistant_text(items).strip()
        if said == task.ground_truth["word"]:
            return Score(1.0, True, None, {"said": 1.0}, "")
        return Score(0.0, False, FailureKind.WRONG_ANSWER, {"said": 0.0}, "not the word")

    def gold_text(self, task) -> str:
        return task.ground_truth["word"]

    def probes(self, task) -> list[Probe]:
        word = task.ground_truth["word"]
        return [
            Probe("empty", "", 0.0),
            Probe("every_word", " ".join(WORDS), 0.0),
            Probe("word_stuffed", f"{word} {word} maybe {WORDS[0]}", 0.0),
        ]


class PlantedAnyAnswer(PlantedWords):
    name = "planted_any"

    def verify(self, task, items) -> Score:
        if final_assistant_text(items).strip():
            return Score(1.0, True, None, {}, "any answer will do")
        return Score(0.0, False, FailureKind.NO_ANSWER, {}, "empty")


class PlantedSilence(PlantedWords):
    name = "planted_silence"

    def verify(self, task, items) -> Score:
        if not final_assistant_text(items).strip():
            return Score(1.0, True, None, {}, "silence was asked for")
        return Score(0.0, False, FailureKind.WRONG_ANSWER, {}, "said something")

    def gold_text(self, task) -> str:
        return ""


class PlantedPerProcess(PlantedWords):
    name = "planted_process"

    def verify(self, task, items) -> Score:
        score = super().verify(task, items)
        if score.success:
            return score
        partial = (PROCESS_SALT % 1000) / 10_000  # 0 to 0.0999, fixed within one process
        return Score(partial, False, FailureKind.WRONG_ANSWER, {"said": partial}, "partial")


class PlantedOtherWords(PlantedWords):
    """``planted_words`` drawing other words: its tasks are not ``planted_silence``'s, so the
    two can be mixed in one run (a split file holds each task once)."""

    name = "planted_other_words"

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        return super().generate(n, seed + 1_000_003)


class PlantedOtherAny(PlantedAnyAnswer):
    """``planted_any`` drawing other words (see :class:`PlantedOtherWords`)."""

    name = "planted_other_any"

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        return super().generate(n, seed + 1_000_003)


PLANTED = {
    cls.name: cls
    for cls in (
        PlantedWords, PlantedAnyAnswer, PlantedSilence, PlantedPerProcess, PlantedOtherWords,
        PlantedOtherAny,
    )
}  # fmt: skip


@contextlib.contextmanager
def registered(folder: Path) -> Iterator[None]:
    """The planted environments as installed plugins while the block runs."""
    info = folder / "planted_envs-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: planted-envs\nVersion: 0.0.0\n")
    lines = [f"{name} = planted_envs:{cls.__name__}" for name, cls in PLANTED.items()]
    (info / "entry_points.txt").write_text("[gymflow.environments]\n" + "\n".join(lines) + "\n")
    here = str(Path(__file__).parent)
    added = [p for p in (str(folder), here) if p not in sys.path]
    sys.path[:0] = added
    registry.clear_cache()
    try:
        yield
    finally:
        for path in added:
            sys.path.remove(path)
        registry.clear_cache()
