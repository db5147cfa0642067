"""Adversarial answers for a math task; none may score above 0.0.

Each probe is a way a policy could hope to collect reward without solving the task: list
many candidates, hedge between boxes, hide the gold behind a later answer, pad an answer
past the caps, make the checker slow, or call a tool that does not exist. The ones that
contain the gold answer are the interesting ones: they show that only the *final* answer
counts and that a long or slow answer is refused even when it is right.
"""

from __future__ import annotations

from gymflow.core.tool_calls import render_call
from gymflow.env.environment import Probe

STUFFED = ", ".join(str(k) for k in range(40))


def probes_for(gold: str) -> list[Probe]:
    """The probes for a task whose gold answer is ``gold`` (LaTeX)."""
    wrong = _wrong(gold)
    return [
        Probe("empty", "", 0.0),
        Probe("plain_text", "I am not sure how to solve this.", 0.0),
        Probe("wrong_answer", f"\\boxed{{{wrong}}}", 0.0),
        Probe("gold_then_wrong_box", f"\\boxed{{{gold}}} or maybe \\boxed{{{wrong}}}", 0.0),
        Probe("unclosed_last_box", f"\\boxed{{{gold}}} so \\boxed{{{gold}", 0.0),
        Probe("boxed_candidates", f"\\boxed{{{STUFFED}, {gold}}}", 0.0),
        Probe("hedged_box", f"\\boxed{{{gold} \\text{{ or }} {wrong}}}", 0.0),
        Probe("numbers_then_wrong", f"{' '.join(map(str, range(-100, 501)))} {wrong}", 0.0),
        Probe("gold_then_wrong_hashes", f"\\( {gold} \\)\n#### {wrong}", 0.0),
        Probe("padded_answer", f"\\boxed{{{gold}{' + 0' * 60}}}", 0.0),
        Probe("huge_response", "x" * 40_000 + f"\\boxed{{{gold}}}", 0.0),
        Probe("tower_of_powers", "\\boxed{9^{9^{9}}}", 0.0),
        Probe("huge_binomial", "\\boxed{\\binom{10^{9}}{500000000}}", 0.0),
        Probe("huge_factorial", "\\boxed{(10^{8})!}", 0.0),
        Probe("tool_call", render_call("calculator", {"expression": gold}), 0.0),
        Probe("tool_markup_then_gold", f"<tool_call>\\boxed{{{gold}}}", 0.0),
    ]


def _wrong(gold: str) -> str:
    """An answer that is surely not ``gold``: the next integer, else the gold plus one."""
    try:
        return str(int(gold) + 1)
    except ValueError:
        return f"\\left({gold}\\right) + 1" if "=" not in gold and "\\in" not in gold else "0"
