"""The answer format: the policy ends with ``<answer>…</answer>``; the last such block is scored.

The same rule as reasoning-gym's ``utils.extract_answer`` (last block, one optional whitespace
inside each tag, then stripped), written out here because importing that function imports the
whole library (~2 s, 100+ families); ``tests/`` checks the two agree. A reply without a block
has no answer (``None``): it is scored 0 with ``no_answer``, never handed to the scorer.

>>> extract_answer("Reasoning… <answer>12</answer> <answer> 292 </answer>")
'292'
>>> extract_answer("292") is None
True
"""

from __future__ import annotations

import re

_BLOCK = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.DOTALL)
INSTRUCTION = "Think it through, then give only your final answer inside <answer></answer> tags."


def extract_answer(text: str) -> str | None:
    matches = _BLOCK.findall(text)
    return matches[-1].strip() if matches else None


def answer_text(answer: str) -> str:
    """How a policy writes ``answer`` (what gold episodes say)."""
    return f"<answer>{answer}</answer>"
