"""What the math checker refuses to evaluate: costly LaTeX commands and huge exact numbers.

math-verify hands an answer to latex2sympy and sympy, which evaluate some things *exactly*
in C, where no timeout can stop them: ``\\binom{10^{9}}{500000000}`` never returns from
parsing, ``9^{9^{9}}`` is one big-integer power with 370 million digits, ``100000!`` is a
factorial. These checks run before (commands) and after (sizes) parsing and are pure and
deterministic; :mod:`gymflow.environments.math.deadline` bounds the pure-Python work that is left.

>>> check_commands("\\\\frac{1}{2}")
>>> try:
...     check_commands("\\\\binom{10}{3}")
... except Uncheckable as exc:
...     print(exc)
\\binom is not allowed in a final answer
"""

from __future__ import annotations

import math
import re

import sympy
from sympy.matrices import MatrixBase

ALLOWED_COMMANDS = frozenset(
    """frac dfrac tfrac sqrt cdot times div pm mp
    pi infty circ degree
    text textbf textrm textit mathrm mathbf mathit mbox
    left right big Big bigl bigr Bigl Bigr begin end pmatrix bmatrix matrix
    le leq ge geq lt gt ne neq in notin cup cap setminus emptyset varnothing mathbb
    sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln exp
    lfloor rfloor lceil rceil vert lvert rvert mid
    displaystyle textstyle dots ldots cdots quad qquad
    alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu
    nu xi rho sigma tau upsilon phi varphi chi psi omega Delta Theta Lambda Pi Sigma Phi Omega
    """.split()  # noqa: SIM905 (one line per family of commands reads better)
)
"""Commands (and ``\\begin{}`` environments) a final answer may use: every one in the 500
MATH-500 answers and the usual answer notation. Left out on purpose: ``binom``, ``choose``,
``gcd``, ``lcm``, ``det``, ``Gamma``, ``operatorname`` (latex2sympy evaluates them while
parsing: ``\\operatorname{zeros}(10^{9})`` builds a matrix) and ``sum``, ``prod``, ``int``,
``lim``, ``partial`` (evaluated when compared): an unevaluated operation is not an answer."""

MAX_DIGITS = 2_000
"""Bound on the decimal digits of any exact sub-value (gold answers have at most 11)."""
MAX_SYMBOLIC_EXPONENT = 64
"""Largest power of an expression with variables (golds reach x^8): expansion grows with it."""
MAX_FACTORIAL = 1_000
MAX_NODES = 400
"""Largest expression tree; a 200-character answer rarely exceeds 100 nodes."""

_COMMAND = re.compile(r"\\([A-Za-z]+)")
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\s*\{([^{}]*)\}")


class Uncheckable(ValueError):
    """The answer uses something the checker refuses to evaluate; the message says what."""


def check_commands(answer: str) -> None:
    """Raise Uncheckable if ``answer`` uses a LaTeX command or environment not allowed."""
    for name in _COMMAND.findall(answer):
        if name not in ALLOWED_COMMANDS:
            raise Uncheckable(f"\\{name} is not allowed in a final answer")
    for name in _ENVIRONMENT.findall(answer):
        if name.strip() not in ALLOWED_COMMANDS:
            raise Uncheckable(f"environment {name.strip()!r} is not allowed in a final answer")


def check_size(expr: sympy.Basic | MatrixBase) -> None:
    """Raise Uncheckable if evaluating the parsed ``expr`` exactly could build a huge number.

    >>> try:
    ...     check_size(sympy.sympify("2**(2**30)", evaluate=False))
    ... except Uncheckable as exc:
    ...     print(exc)
    an exponent with about 18 digits
    """
    nodes = _count_nodes(expr)
    if nodes > MAX_NODES:
        raise Uncheckable(f"an expression of {nodes} nodes > {MAX_NODES}")
    _bounded(_digits(expr))


def _count_nodes(expr: object) -> int:
    return 1 + sum(_count_nodes(c) for c in _children(expr))


def _children(expr: object) -> tuple:
    if isinstance(expr, MatrixBase):
        return tuple(expr)
    return tuple(getattr(expr, "args", ()))


def _digits(expr: object) -> float:
    """An upper bound on log10 of the largest exact number evaluating ``expr`` may build.

    Variables and constants (x, pi, e, oo) count as one digit. Raises Uncheckable as soon as
    a sub-value is too large, so nothing big is ever computed here.
    """
    if isinstance(expr, sympy.Rational):  # Integer included
        return max(_int_digits(expr.p), _int_digits(expr.q))
    if isinstance(expr, sympy.Float):
        value = abs(float(expr))
        return math.log10(value + 1.0) if math.isfinite(value) else math.inf
    if isinstance(expr, sympy.Pow):
        base, exponent = expr.args
        if isinstance(exponent, sympy.Rational):  # a root (p/q) grows the base p-fold only
            times = float(max(abs(exponent.p), 1))
        else:
            exp_digits = _digits(exponent)
            if exp_digits > math.log10(MAX_DIGITS) + 2:  # |exponent| over ~200,000
                raise Uncheckable(f"an exponent with about {exp_digits:.0f} digits")
            times = 10**exp_digits
        if base.free_symbols and times > MAX_SYMBOLIC_EXPONENT:
            raise Uncheckable(f"a power of a variable with exponent {exponent}")
        return _bounded(_digits(base) * times)
    if isinstance(expr, sympy.factorial):
        (arg,) = expr.args
        if arg.free_symbols:
            return _digits(arg)
        n_digits = _digits(arg)
        if n_digits > math.log10(MAX_FACTORIAL):
            raise Uncheckable(f"a factorial of a number with about {n_digits:.0f} digits")
        n = 10**n_digits
        return _bounded(n * math.log10(n + 1))
    children = _children(expr)
    if not children:
        return 1.0  # a symbol, pi, E, oo, I: no exact digits to build
    parts = [_digits(c) for c in children]
    if isinstance(expr, sympy.Mul):
        return _bounded(sum(parts))
    return _bounded(max(parts) + math.log10(len(parts)))  # sums, tuples, sets, functions


def _int_digits(n: int) -> float:
    return abs(n).bit_length() * math.log10(2)


def _bounded(digits: float) -> float:
    if digits > MAX_DIGITS:
        raise Uncheckable(f"a number with about {digits:.0f} digits")
    return digits
