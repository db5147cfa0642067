"""Seeded open-ended questions, each with a reference answer and the key points it must cover.

Small and hand-written (this project's own text, Apache-2.0): explanatory questions whose good
answers vary in wording, which is what a judge is for. Every key point appears verbatim in the
reference answer (so a reference answer earns the top score) and in neither the question nor the
rubric (so echoing those earns nothing); ``tests/test_judge.py`` checks both. A draft is a
(question, phrasing) pair drawn by the seed, so ``n`` drafts hold at most
``len(QUESTIONS) * len(PHRASINGS)`` distinct tasks after deduplication.
"""

from __future__ import annotations

import random

from gymflow.env.environment import TaskDraft
from gymflow.environments.judge.rubric import DEFAULT_RUBRIC, Rubric

# (question, reference answer, key points)
QUESTIONS: list[tuple[str, str, list[str]]] = [
    (
        "Why does ice float on liquid water?",
        "Ice is less dense than liquid water: when water freezes, hydrogen bonds lock the "
        "molecules into an open hexagonal lattice, so the same mass takes up more volume.",
        ["less dense", "hydrogen bonds", "lattice"],
    ),
    (
        "Why is the daytime sky blue?",
        "Sunlight is scattered by the gas molecules of the atmosphere, and Rayleigh scattering "
        "is much stronger for short wavelengths, so blue light reaches the eye from all "
        "directions of the sky.",
        ["scatter", "rayleigh", "short wavelength"],
    ),
    (
        "What does a hash table do, and why are lookups fast on average?",
        "A hash table stores key-value pairs in an array of buckets; a hash function maps each "
        "key to a bucket, so a lookup inspects one bucket and takes constant time on average, "
        "as long as collisions stay rare.",
        ["hash function", "bucket", "constant time", "collision"],
    ),
    (
        "Why do we have seasons on Earth?",
        "Earth's axis is tilted about 23.4 degrees relative to its orbit, so through the year "
        "each hemisphere alternately leans toward the Sun and receives more direct sunlight and "
        "longer days; the distance to the Sun matters little.",
        ["tilt", "direct sunlight", "longer days"],
    ),
    (
        "What is overfitting in machine learning, and how can it be reduced?",
        "Overfitting is when a model memorizes noise in its training data, so it scores well "
        "on the training set but generalizes poorly to unseen data; regularization, more data "
        "and early stopping on a validation set reduce it.",
        ["memoriz", "generaliz", "regularization", "validation"],
    ),
    (
        "Why do vaccines protect against disease?",
        "A vaccine exposes the immune system to a harmless form or part of a pathogen, so it "
        "makes antibodies and memory cells; on a later infection the response is faster and "
        "stronger.",
        ["immune system", "antibodies", "memory cells"],
    ),
    (
        "What is the difference between a process and a thread?",
        "A process has its own address space and resources, isolated from other processes; "
        "threads run inside a process and share its memory, which makes them cheaper to create "
        "but needs synchronization.",
        ["address space", "share its memory", "synchronization"],
    ),
    (
        "Why does a metal spoon feel colder than a wooden one at the same temperature?",
        "Metal has a much higher thermal conductivity than wood, so it draws heat away from the "
        "skin faster; the nerves sense that rate of heat flow, not the temperature itself.",
        ["thermal conductivity", "heat away", "rate of heat flow"],
    ),
]

PHRASINGS = [
    "{q}",
    "{q} Answer in two or three sentences.",
]


def generate_drafts(n: int, seed: int, rubric: Rubric = DEFAULT_RUBRIC) -> list[TaskDraft]:
    """``n`` drafts drawn with ``random.Random(seed)``; the same arguments give the same drafts."""
    rng = random.Random(seed)
    drafts = []
    for _ in range(n):
        question, reference, points = rng.choice(QUESTIONS)
        phrasing = rng.choice(PHRASINGS)
        asked = phrasing.format(q=question)
        truth = {
            "question": asked,
            "reference": reference,
            "key_points": list(points),
            "rubric": rubric.model_dump(),
        }
        drafts.append(TaskDraft([{"role": "user", "content": asked}], truth, seed))
    return drafts
