"""The keybox environment: open boxes until you find the key, then say which box held it.

A task lists three boxes by colour, in a shuffled order; one of them, chosen at random and not
said, holds the key. The tool ``open_box(label)`` shows what a box holds (per session: the key's
box comes from the task's ground truth). The verifier (:mod:`.verifier`) rewards an episode that
opened the key's box and answered its colour.

**Why it is here.** Demonstrations cannot carry this skill and only the verifier can. The gold
episodes an SFT stage imitates are an oracle's: it knows where the key is, so each opens the
right box at once and answers (:meth:`KeyboxEnvironment.gold_turns`). Imitating them teaches
"open a box, answer its colour" — right one time in three — and never shows what to do after
an empty box, because no gold episode meets one. A policy that opens another box when the
first is empty, and answers with the box whose output said key, succeeds every time; it is
learnable only from the verifier's reward on the policy's own episodes (online RFT, GRPO).
"""

from __future__ import annotations

import random

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.env.environment import Environment, Probe, TaskDraft
from gymflow.environments.keybox.verifier import score

COLOURS = (
    "red", "blue", "green", "yellow", "black", "white", "orange", "purple", "pink", "brown",
)  # fmt: skip
BOXES = 3
KEY = "the key"
EMPTY = "nothing"


class Boxes:
    """One session's boxes: which label holds the key."""

    def __init__(self, labels: list[str], key: str) -> None:
        self.labels, self.key = labels, key


def open_box(session: Boxes, label: str) -> dict:
    """Open a box and see what it holds.

    Args:
        label: The colour of the box to open.
    """
    if label not in session.labels:
        raise ValueError(f"there is no {label} box; the boxes are {', '.join(session.labels)}")
    return {"box": label, "holds": KEY if label == session.key else EMPTY}


class KeyboxEnvironment(Environment):
    name = "keybox"
    version = "1"
    max_turns = BOXES + 1  # every box opened, one a turn, then the answer
    reward_range = (0.0, 1.0)

    def tools(self):
        return [open_box]

    def new_state(self, task: Task) -> Boxes:
        return Boxes(list(task.ground_truth["boxes"]), task.ground_truth["key"])

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        rng = random.Random(seed)
        drafts = []
        for _ in range(n):
            boxes = rng.sample(COLOURS, BOXES)
            key = rng.choice(boxes)
            request = (
                f"There are three boxes: {', '.join(boxes)}. One of them holds the key. "
                "Open boxes until you find it, then answer with the colour of its box."
            )
            truth = {"boxes": boxes, "key": key}
            drafts.append(TaskDraft([{"role": "user", "content": request}], truth, seed))
        return drafts

    def verify(self, task: Task, items: list[dict]) -> Score:
        return score(task.ground_truth, items)

    def gold_text(self, task: Task) -> str:
        return task.ground_truth["key"]

    def gold_turns(self, task: Task) -> list[str]:
        """The oracle's episode: it knows the key's box, opens it, and answers."""
        key = task.ground_truth["key"]
        return [render_call("open_box", {"label": key}), key]

    def check_task(self, task: Task) -> None:
        truth = task.ground_truth
        if truth["key"] not in truth["boxes"]:
            raise ValueError(f"the key's box {truth['key']!r} is not among {truth['boxes']}")

    def probes(self, task: Task) -> list[Probe]:
        boxes, key = task.ground_truth["boxes"], task.ground_truth["key"]
        wrong = next(b for b in boxes if b != key)
        return [
            Probe("answer_without_opening", key, 0.0),
            Probe("empty", "", 0.0),
            Probe("every_colour", " ".join(boxes), 0.0),
            Probe("wrong_colour", wrong, 0.0),
            Probe("open_without_answering", render_call("open_box", {"label": key}), 0.0),
            Probe(
                "open_every_box_at_once",
                "".join(render_call("open_box", {"label": b}) for b in boxes),
                0.0,
            ),
            Probe("unknown_box", render_call("open_box", {"label": "gold"}), 0.0),
        ]
