"""Seeded arithmetic and simple algebra tasks in five levels, from one-digit sums up.

Level 1 is small enough for the embedded 3.6 M model to learn (one-digit ``a + b`` /
``a - b``); each level adds one idea:

1. one-digit addition and subtraction (``7 - 3``), never negative;
2. two-digit addition and subtraction, one-digit multiplication (``47 + 38``, ``6 * 7``);
3. three numbers with precedence and brackets (``4 + 3 * 5``, ``(9 - 2) * 3``);
4. a linear equation with an integer solution (``3x - 5 = 16``);
5. adding or subtracting two fractions, answered in lowest terms (``1/2 + 2/3``).

Each task carries its answer in the LaTeX a policy should box (``7``, ``-4``,
``\\frac{7}{6}``) and a short worked solution ending in ``\\boxed{}`` (the gold text).
The same ``(n, seed)`` always gives the same tasks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from math import lcm

LEVELS = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Problem:
    question: str
    answer: str
    solution: str
    level: int


def generate(n: int, seed: int, levels: tuple[int, ...] = LEVELS) -> list[Problem]:
    """``n`` problems cycling through ``levels`` (so any prefix mixes them); deterministic."""
    rng = random.Random(seed)
    return [MAKERS[levels[i % len(levels)]](rng) for i in range(n)]


def _one_digit(rng: random.Random) -> Problem:
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    if rng.random() < 0.5:
        return _arithmetic(f"{a} + {b}", a + b, 1)
    a, b = max(a, b), min(a, b)
    return _arithmetic(f"{a} - {b}", a - b, 1)


def _two_digit(rng: random.Random) -> Problem:
    kind = rng.choice(("+", "-", "*"))
    if kind == "*":
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        return _arithmetic(f"{a} * {b}", a * b, 2)
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return _arithmetic(f"{a} {kind} {b}", a + b if kind == "+" else a - b, 2)


def _precedence(rng: random.Random) -> Problem:
    a, b, c = rng.randint(1, 12), rng.randint(1, 12), rng.randint(2, 9)
    form, value = rng.choice(
        (
            ("{a} + {b} * {c}", a + b * c),
            ("({a} + {b}) * {c}", (a + b) * c),
            ("{a} * {c} - {b}", a * c - b),
            ("({a} - {b}) * {c}", (a - b) * c),
        )
    )
    return _arithmetic(form.format(a=a, b=b, c=c), value, 3)


def _linear_equation(rng: random.Random) -> Problem:
    x, a, b = rng.randint(-10, 10), rng.randint(2, 9), rng.choice([*range(-20, 0), *range(1, 21)])
    c = a * x + b
    sign = "+" if b > 0 else "-"
    question = f"Solve for x: {a}x {sign} {abs(b)} = {c}."
    undo = f"{c} - {b}" if b > 0 else f"{c} + {abs(b)}"
    solution = f"{a}x = {undo} = {c - b}, so x = {c - b} / {a} = \\boxed{{{x}}}."
    return Problem(question, str(x), solution, 4)


def _fractions(rng: random.Random) -> Problem:
    p, q = _proper_fraction(rng)
    r, s = _proper_fraction(rng)
    kind = rng.choice(("+", "-"))
    value = Fraction(p, q) + Fraction(r, s) if kind == "+" else Fraction(p, q) - Fraction(r, s)
    common = lcm(q, s)
    left, right = p * common // q, r * common // s
    question = f"What is {p}/{q} {kind} {r}/{s}? Give the answer as a fraction in lowest terms."
    answer = latex_fraction(value)
    solution = (
        f"\\frac{{{p}}}{{{q}}} {kind} \\frac{{{r}}}{{{s}}} = "
        f"\\frac{{{left}}}{{{common}}} {kind} \\frac{{{right}}}{{{common}}} = \\boxed{{{answer}}}"
    )
    return Problem(question, answer, solution, 5)


def _arithmetic(expression: str, value: int, level: int) -> Problem:
    return Problem(
        f"What is {expression}?", str(value), f"{expression} = \\boxed{{{value}}}", level
    )


def _proper_fraction(rng: random.Random) -> tuple[int, int]:
    q = rng.randint(2, 9)
    return rng.randint(1, q - 1), q


def latex_fraction(value: Fraction) -> str:
    """``Fraction(-7, 6)`` -> ``-\\frac{7}{6}``; whole numbers stay plain (``2``)."""
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


MAKERS = {1: _one_digit, 2: _two_digit, 3: _precedence, 4: _linear_equation, 5: _fractions}
