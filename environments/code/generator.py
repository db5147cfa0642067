"""Seeded small programming tasks with tests, in the HumanEval shape, for a tiny model to learn.

Each task is one short function from a family (``add_7``, ``count_a``, ``first_3``, ...): the
prompt gives the signature and a one-line docstring; the gold answer is one ``return`` line.
The family's parameter is in the function's name and its docstring, so a model must read the
prompt. Tests are five asserts whose inputs come from a generator seeded by the function's
name, and whose expected values come from a reference implementation here (trusted code):
the same prompt always gets the same tests, so two draws of one function are one task (and one
split: splits go by content hash).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

INSTRUCTION = (
    "Write the Python function below. Answer with the complete function in a ```python code block."
)
GENERATED_CPU_S = 1
"""CPU seconds for a generated task's run: its tests take milliseconds."""


@dataclass(frozen=True)
class Spec:
    """One function: its signature, docstring, one-line body and a reference to test it with."""

    name: str
    params: str
    returns: str
    doc: str
    body: str
    reference: Callable
    inputs: Callable[[random.Random], tuple]


def _ints(rng: random.Random) -> tuple:
    return (rng.randint(-50, 50),)


def _int_list(rng: random.Random, low: int = 0) -> tuple:
    return ([rng.randint(-20, 20) for _ in range(rng.randint(low, 6))],)


def _word(rng: random.Random, letters: str = "abcdefgh") -> tuple:
    return ("".join(rng.choice(letters) for _ in range(rng.randint(0, 9))),)


def _families(rng: random.Random) -> list[Spec]:
    """One spec per family, its parameter drawn from ``rng``."""
    k = rng.randint(1, 30)
    m = rng.randint(2, 12)
    c = rng.choice("abcdefgh")
    n = rng.randint(1, 5)

    def multiple_input(r: random.Random) -> tuple:
        return (m * r.randint(-9, 9) + r.choice((0, 0, 1, m - 1)),)

    return [
        Spec(f"add_{k}", "x: int", "int", f"Return x plus {k}.", f"return x + {k}",
             lambda x: x + k, _ints),
        Spec(f"subtract_{k}", "x: int", "int", f"Return x minus {k}.", f"return x - {k}",
             lambda x: x - k, _ints),
        Spec(f"times_{m}", "x: int", "int", f"Return x times {m}.", f"return x * {m}",
             lambda x: x * m, _ints),
        Spec(f"square_plus_{k}", "x: int", "int", f"Return x squared plus {k}.",
             f"return x * x + {k}", lambda x: x * x + k, _ints),
        Spec(f"at_most_{k}", "x: int", "int", f"Return x, but never more than {k}.",
             f"return min(x, {k})", lambda x: min(x, k), _ints),
        Spec(f"is_multiple_of_{m}", "x: int", "bool", f"Return True if x is a multiple of {m}.",
             f"return x % {m} == 0", lambda x: x % m == 0, multiple_input),
        Spec(f"count_{c}", "s: str", "int", f"Count how many times '{c}' appears in s.",
             f"return s.count('{c}')", lambda s: s.count(c), _word),
        Spec(f"starts_with_{c}", "s: str", "bool", f"Return True if s starts with '{c}'.",
             f"return s.startswith('{c}')", lambda s: s.startswith(c), _word),
        Spec(f"repeat_{n}", "s: str", "str", f"Return s repeated {n} times.",
             f"return s * {n}", lambda s: s * n, _word),
        Spec(f"first_{n}", "xs: list", "list", f"Return the first {n} items of xs.",
             f"return xs[:{n}]", lambda xs: xs[:n], _int_list),
        Spec(f"above_{k}", "xs: list", "list", f"Return the items of xs greater than {k}.",
             f"return [x for x in xs if x > {k}]", lambda xs: [x for x in xs if x > k],
             lambda r: ([r.randint(0, 30) for _ in range(r.randint(0, 6))],)),
        Spec("sum_list", "xs: list", "int", "Return the sum of xs.", "return sum(xs)",
             sum, _int_list),
        Spec("max_list", "xs: list", "int", "Return the largest item of xs.", "return max(xs)",
             max, lambda r: _int_list(r, low=1)),
        Spec("reverse_string", "s: str", "str", "Return s reversed.", "return s[::-1]",
             lambda s: s[::-1], _word),
    ]  # fmt: skip


def task_fields(spec: Spec) -> dict:
    """The HumanEval fields of ``spec`` (``prompt``, ``canonical_solution``, ``test``, ...)."""
    signature = f"def {spec.name}({spec.params}) -> {spec.returns}:\n"
    rng = random.Random(spec.name)  # a str seed is stable across runs and processes
    cases: list[tuple] = []
    for _ in range(50):  # five different inputs (fewer when the family has fewer)
        args = spec.inputs(rng)
        if args not in cases:
            cases.append(args)
        if len(cases) == 5:
            break
    asserts = [
        f"    assert candidate({', '.join(map(repr, args))}) == {spec.reference(*args)!r}\n"
        for args in cases
    ]
    return {
        "prompt": f'{signature}    """{spec.doc}"""\n',
        "canonical_solution": f"    {spec.body}\n",
        "test": "def check(candidate):\n" + "".join(asserts),
        "entry_point": spec.name,
        "gold_code": f"{signature}    {spec.body}\n",
        "cpu_s": GENERATED_CPU_S,
    }


def user_message(prompt_code: str) -> str:
    """The chat message that asks for the function (the same for every task source)."""
    return f"{INSTRUCTION}\n\n```python\n{prompt_code}```"


def generate(n: int, seed: int) -> list[dict]:
    """``n`` task field dicts (families in turn, parameters drawn from ``seed``)."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        for spec in _families(rng):
            if len(out) < n:
                out.append(task_fields(spec))
    return out
