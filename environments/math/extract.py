"""Find the final answer in a model's text: the last ``\\boxed{}``, else ``#### N``, else a number.

The rules, in order (the first that applies decides; later ones are never consulted):

1. ``\\boxed{...}`` — the **last** one, braces matched (``\\boxed{\\frac{1}{2}}``). Only the last
   box counts, so writing several boxes can never raise the reward: a model that boxes ``3``
   then ``5`` is judged on ``5`` alone. A last ``\\boxed{`` that never closes is a truncated
   answer: no answer, even if an earlier box closed.
2. ``#### N`` — GSM8K's own answer line: the text after the last ``####`` up to the line end
   (thousands commas and a final full stop dropped).
3. The last number in the text (``-1,234.5``, ``3/4``; thousands commas dropped). A text that
   lists many numbers is judged on its last one only.

Size caps bound everything downstream (math-verify and sympy are far slower than this scan):
a response over :data:`MAX_RESPONSE_CHARS` or an extracted answer over
:data:`MAX_ANSWER_CHARS` is refused before any parsing. The gold answers are at most 53
characters long; real chains of thought stay well under the response cap.

>>> extract_answer("so x = 4, and \\\\boxed{\\\\frac{1}{2}} or \\\\boxed{7}").text
'7'
>>> extract_answer("She pays 3 * 4 = 12 dollars.\\n#### 12").text
'12'
>>> extract_answer("It costs $1,250 in total.").text
'1250'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

MAX_RESPONSE_CHARS = 32_000
"""About 8k tokens: longer responses are refused (``answer_too_long``) without being read."""
MAX_ANSWER_CHARS = 200
"""An extracted answer longer than this is refused (``answer_too_long``); golds are <= 53."""

BOX_OPEN = "\\boxed{"
_HASHES = re.compile(r"####[ \t]*([^\n]*)")
# A number: thousands groups (1,234,567) first so "1,234" is one number, then plain digits,
# with an optional decimal part or a /denominator (3/4).
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+|/\d+)?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
"""A comma between digit groups (1,250 -> 1250); a comma in a tuple (1, 2) stays."""

Source = Literal["boxed", "hashes", "last_number"]


@dataclass(frozen=True)
class Extraction:
    """What was found: ``text`` (None when nothing), where it came from, or why it was refused."""

    text: str | None
    source: Source | None = None
    problem: Literal["no_answer", "too_long"] | None = None
    detail: str = ""


def extract_answer(response: str) -> Extraction:
    """The final answer in ``response`` (see the module docstring for the rules)."""
    if len(response) > MAX_RESPONSE_CHARS:
        return Extraction(
            None, None, "too_long", f"response of {len(response)} chars > {MAX_RESPONSE_CHARS}"
        )
    if BOX_OPEN in response:
        found = last_boxed(response)
        if found is None:
            return Extraction(None, None, "no_answer", "the last \\boxed{ is never closed")
        return _checked(found.strip(), "boxed")
    hashes = _HASHES.findall(response)
    if hashes:
        return _checked(_THOUSANDS.sub("", hashes[-1].strip().rstrip(".")), "hashes")
    numbers = _NUMBER.findall(response)
    if numbers:
        return _checked(_THOUSANDS.sub("", numbers[-1]), "last_number")
    return Extraction(None, None, "no_answer", "no \\boxed{}, no #### line and no number")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text``, or None if it does not close.

    Hand-written because a regex cannot match nested braces; escaped braces (``\\{``, as in
    ``\\boxed{\\{1,2\\}}``) do not count towards the nesting.

    >>> last_boxed("\\\\boxed{1} then \\\\boxed{\\\\frac{a}{b}}")
    '\\\\frac{a}{b}'
    >>> last_boxed("\\\\boxed{\\\\{1, 2\\\\}}")
    '\\\\{1, 2\\\\}'
    >>> last_boxed("\\\\boxed{1} \\\\boxed{2") is None
    True
    """
    start = text.rfind(BOX_OPEN)
    if start < 0:
        return None
    depth, i = 1, start + len(BOX_OPEN)
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2  # an escaped character (\{, \}, \\) never opens or closes a group
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + len(BOX_OPEN) : i]
        i += 1
    return None


def _checked(answer: str, source: Source) -> Extraction:
    if not answer:
        return Extraction(None, None, "no_answer", f"the {source} answer is empty")
    if len(answer) > MAX_ANSWER_CHARS:
        return Extraction(
            None, None, "too_long", f"{source} answer of {len(answer)} chars > {MAX_ANSWER_CHARS}"
        )
    return Extraction(answer, source)
