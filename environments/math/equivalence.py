"""Is an answer equal to the gold? math-verify, called so that it is safe anywhere and bounded.

math-verify (``parse`` + ``verify``) decides equality up to form: ``0.5`` = ``\\frac{1}{2}``,
``x = 5`` = ``5``, ``\\left( 3, \\frac{\\pi}{2} \\right)`` = ``(3,\\pi/2)``, sets, intervals,
matrices, ``\\text{}`` and degree signs. Its own timeouts use ``signal.alarm``, which raises
off the main thread, would cancel pytest-timeout's alarm on it, and cannot stop a long C call
anyway; so they are off here and the work is bounded in three steps instead:

1. the caller passes an extracted answer of at most 200 characters
   (:mod:`gymflow.environments.math.extract`);
2. :mod:`gymflow.environments.math.guards` refuses costly commands before parsing and huge exact
   numbers after it (deterministic);
3. parse + compare run under a CPU-time limit of :data:`CPU_LIMIT_S` in the calling thread
   (:mod:`gymflow.environments.math.deadline`): sympy's ``simplify`` can take minutes on a short
   answer. The usual check takes milliseconds, so only answers built to be slow meet it.

2 and 3 raise :class:`Uncheckable` (scored 0 with ``answer_uncheckable``). Everything is a
pure function of its arguments and runs the same in a worker process and in any thread.
"""

from __future__ import annotations

import logging
from functools import lru_cache

import sympy
from math_verify import LatexExtractionConfig, parse, verify
from sympy.matrices import MatrixBase

from gymflow.environments.math.deadline import DeadlineExceeded, call_with_cpu_limit
from gymflow.environments.math.guards import Uncheckable, check_commands, check_size

CPU_LIMIT_S = 2.0
"""CPU seconds one comparison may use; gold-against-gold checks take at most ~0.2 s."""

# The signal timeouts are off on purpose (see above); math-verify's warning that the caller
# must then bound the work itself is answered by this module and is only noise in workers.
logging.getLogger("math_verify").setLevel(logging.ERROR)

_LATEX_ONLY = [LatexExtractionConfig()]

__all__ = ["CPU_LIMIT_S", "Uncheckable", "equivalent"]


def equivalent(gold: str, answer: str) -> bool:
    """True when ``answer`` (an extracted final answer) equals ``gold`` (LaTeX).

    Raises Uncheckable when the answer is refused or its check runs out of CPU time.

    >>> equivalent("\\\\frac{1}{2}", "0.5"), equivalent("18", "\\\\$18.00"), equivalent("4", "5")
    (True, True, False)
    """
    try:
        return call_with_cpu_limit(lambda: _compare(gold, answer), CPU_LIMIT_S)
    except DeadlineExceeded:
        raise Uncheckable(f"checking the answer took over {CPU_LIMIT_S} s of CPU") from None


def _compare(gold: str, answer: str) -> bool:
    check_commands(answer)
    target = parse(f"\\boxed{{{answer}}}", _LATEX_ONLY, parsing_timeout=None)
    if not target:
        return False
    for value in target:
        if isinstance(value, sympy.Basic | MatrixBase):
            check_size(value)
    return verify(list(parse_gold(gold)), target, timeout_seconds=None)


@lru_cache(maxsize=8192)
def parse_gold(gold: str) -> tuple:
    """The gold parsed once per process (all rollouts of a task share it); trusted input."""
    return tuple(parse(f"\\boxed{{{gold}}}", _LATEX_ONLY, parsing_timeout=None))
