"""math: answer extraction rules and caps (pure, no math-verify)."""

from __future__ import annotations

import doctest

import pytest

from gymflow.environments.math import extract
from gymflow.environments.math.extract import MAX_ANSWER_CHARS, MAX_RESPONSE_CHARS, extract_answer


@pytest.mark.parametrize(
    ("text", "answer", "source"),
    [
        ("so \\boxed{\\frac{1}{2}}", "\\frac{1}{2}", "boxed"),
        ("\\boxed{3} then \\boxed{ 5 }", "5", "boxed"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}", "boxed"),
        ("\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}", None, "boxed"),
        ("Total: 3 + 4 = 7\n#### 7", "7", "hashes"),
        ("#### 1,250.", "1250", "hashes"),
        ("#### (1, 2)", "(1, 2)", "hashes"),
        ("#### 4\nlater 9", "4", "hashes"),
        ("It costs $1,250 in total.", "1250", "last_number"),
        ("1 2 3 ... 99 -4", "-4", "last_number"),
        ("half is 3/4 of it", "3/4", "last_number"),
        ("roughly 2.5 km", "2.5", "last_number"),
    ],
)
def test_rules_in_order(text, answer, source):
    found = extract_answer(text)
    if answer is None:
        answer = text[len("\\boxed{") : -1]
    assert (found.text, found.source, found.problem) == (answer, source, None)


def test_a_box_wins_over_hashes_and_numbers():
    assert extract_answer("#### 3\n\\boxed{4} 5").text == "4"


@pytest.mark.parametrize(
    "text",
    ["", "no digits here", "\\boxed{}", "\\boxed{ }", "#### ", "\\boxed{4} and \\boxed{5"],
)
def test_nothing_to_extract_is_no_answer(text):
    found = extract_answer(text)
    assert found.text is None and found.problem == "no_answer" and found.detail


def test_caps():
    assert extract_answer("x" * MAX_RESPONSE_CHARS + "\\boxed{1}").problem == "too_long"
    assert extract_answer("x" * (MAX_RESPONSE_CHARS - 9) + "\\boxed{1}").text == "1"
    long_answer = "1+" * MAX_ANSWER_CHARS + "1"
    assert extract_answer(f"\\boxed{{{long_answer}}}").problem == "too_long"
    assert extract_answer(f"#### {long_answer}").problem == "too_long"


def test_extraction_is_linear_on_adversarial_text():
    """Deep braces and long digit runs stay cheap (no regex backtracking, no recursion)."""
    import time

    nasty = "\\boxed{" + "{" * 14_000 + "}" * 13_999 + "1," * 1000
    start = time.process_time()
    assert extract_answer(nasty).problem == "no_answer"
    assert extract_answer("9" * 31_000).text is None  # an answer over the cap
    assert time.process_time() - start < 0.5


def test_doctests():
    assert doctest.testmod(extract).failed == 0
