"""The files ``gymflow env new NAME --kind text`` writes: a plain-text task, no tools.

The example task: "Write the word 'garden' backwards." The answer is one line of text, scored
exactly. It shows what a plain-text environment adds to the contract: its own format check
(:meth:`~gymflow.env.environment.Environment.well_formed` — here, one word of lower-case letters),
which decides whether the lifecycle trains the start by SFT before GRPO, fills evaluation's
well-formed column and guards the gate. The package files other than the environment, the
generator, the verifier, the tests and the README are the tool template's
(:mod:`gymflow.cli.env_template`).
"""

from __future__ import annotations

from gymflow.cli import env_template

GENERATOR = '''\
"""The task generator: seeded, so ``generate(n, seed)`` gives the same tasks every time.

A task is a prompt (chat messages) and a ground truth the verifier reads. Here the word is in
the prompt and its reversal is the ground truth. Words are made up (consonants and vowels in
turn, 4 to 7 letters, never a palindrome), so thousands of distinct tasks exist and none is
memorised from elsewhere. Edit ``make_word`` and ``prompt_for`` to make it yours.
"""

from __future__ import annotations

import random

from gymflow.env.environment import TaskDraft

CONSONANTS, VOWELS = "bcdfghklmnprstvz", "aeiou"


def make_word(rng: random.Random) -> str:
    """A made-up word that is not a palindrome (its reversal must differ from it)."""
    letters = [CONSONANTS, VOWELS]
    while True:
        word = "".join(rng.choice(letters[i % 2]) for i in range(rng.randint(4, 7)))
        if word != word[::-1]:
            return word


def prompt_for(word: str) -> list[dict]:
    text = f"Write the word '{word}' backwards. Answer with the reversed word only."
    return [{"role": "user", "content": text}]


def generate(n: int, seed: int) -> list[TaskDraft]:
    """``n`` tasks from ``seed``: a word and its reversal."""
    rng = random.Random(seed)
    drafts = []
    for _ in range(n):
        word = make_word(rng)
        drafts.append(TaskDraft(prompt_for(word), {"word": word, "answer": word[::-1]}, seed))
    return drafts
'''

VERIFIER = '''\
"""The verifier: a pure function of the task's ground truth and the episode's items.

No server, no I/O, deterministic. Reward 1.0 only for the exact reversed word; every other
answer is 0.0 with a failure kind saying what went wrong (a model's mistake is a scored
outcome, never an error). ``WORD`` is the answer's format, which the environment's
``well_formed`` checks apart from correctness.
"""

from __future__ import annotations

import re

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_text

WORD = re.compile(r"[a-z]+")
"""A well-formed answer: one word of lower-case letters, nothing else."""


def score(truth: dict, items: list[dict]) -> Score:
    answer = final_assistant_text(items).strip()
    if not answer:
        return Score(0.0, False, FailureKind.NO_ANSWER, {"exact": 0.0}, "no answer")
    if answer != truth["answer"]:
        return Score(0.0, False, FailureKind.WRONG_ANSWER, {"exact": 0.0}, f"expected {truth['answer']!r}")
    return Score(1.0, True, None, {"exact": 1.0}, "")
'''

ENVIRONMENT = '''\
"""$name: write a word backwards, as plain text.

The environment class ties the parts together for gymflow's resources server
(:mod:`gymflow.env.resources_server`): no tools, the generator (``generator.py``), the pure
verifier (``verifier.py``), a perfect answer (``gold_text``: what SFT imitates and ``gymflow
env check`` replays), probes (answers that must not score) and the answer's format
(``well_formed``).
"""

from __future__ import annotations

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.trajectory import final_assistant_message
from gymflow.env.environment import Environment, Probe, TaskDraft

from $name import generator, verifier


class $cls(Environment):
    name = "$name"
    version = "1"
    max_turns = 1  # one answer
    reward_range = (0.0, 1.0)

    def tools(self):
        return []

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        return generator.generate(n, seed)

    def verify(self, task: Task, items: list[dict]) -> Score:
        return verifier.score(task.ground_truth, items)

    def well_formed(self, score: dict, items: list[dict]) -> bool:
        """One word of lower-case letters, ended before the token budget (right or wrong).

        gymflow reads this to decide whether the start needs SFT before GRPO (the baseline's
        rate of well-formed answers under format_threshold), to report the well_formed column
        and to refuse a candidate whose rate falls.
        """
        message = final_assistant_message(items)
        text = str(message.get("content") or "").strip() if message else ""
        cut = score.get("failure_kind") == "truncated"
        return not cut and verifier.WORD.fullmatch(text) is not None

    def gold_text(self, task: Task) -> str:
        return task.ground_truth["answer"]

    def probes(self, task: Task) -> list[Probe]:
        truth = task.ground_truth
        return [
            Probe("the_word_itself", truth["word"], 0.0),
            Probe("empty", "", 0.0),
            Probe("answer_in_a_sentence", f"The answer is {truth['answer']}.", 0.0),
            Probe("upper_case", truth["answer"].upper(), 0.0),
        ]
'''

TESTS = '''\
"""$name: the verifier and the format check on their own, the generator's seed, and the whole
contract through the real resources server (what ``gymflow env check $name`` runs)."""

from __future__ import annotations

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.rollout.env_check import check_environment

from $name.environment import $cls
from $name.generator import generate
from $name.verifier import score

TRUTH = {"word": "garden", "answer": "nedrag"}


def _answer(text: str) -> list[dict]:
    return assistant_items(text, 0)


def test_the_reversed_word_scores_one():
    result = score(TRUTH, _answer("nedrag"))
    assert (result.reward, result.success) == (1.0, True)


def test_mistakes_score_zero_with_their_kind():
    for text, kind in (("garden", "wrong_answer"), ("", "no_answer"), ("nedrag!", "wrong_answer")):
        result = score(TRUTH, _answer(text))
        assert (result.reward, result.success, result.failure_kind) == (0.0, False, kind)


def test_a_wrong_word_is_well_formed_and_babble_is_not():
    env = $cls()
    verdict = {"failure_kind": "wrong_answer", "components": {}}
    assert env.well_formed(verdict, _answer("nedarg"))
    assert not env.well_formed(verdict, _answer("the answer is nedrag"))
    assert not env.well_formed({"failure_kind": "truncated", "components": {}}, _answer("ne"))


def test_generator_is_seeded():
    assert generate(20, 3) == generate(20, 3)
    assert generate(20, 3) != generate(20, 4)


def test_gold_scores_one_and_probes_stay_at_their_ceiling():
    env = $cls()
    for task in build_tasks(env, 30, seed=1, heldout_frac=0.0, val_frac=0.0):
        gold = prompt_items(task.prompt) + _answer(env.gold_text(task))
        assert env.verify(task, gold).reward == 1.0
        for probe in env.probes(task):
            items = prompt_items(task.prompt) + _answer(probe.text)
            assert env.verify(task, items).reward <= probe.max_reward, probe.name


def test_the_contract_holds_through_the_server():
    golds, probes, problems = check_environment($cls(), 50)
    assert golds > 40 and probes == 4 * golds and problems == []  # exact repeats are dropped
'''

README = """\
# $name

A gymflow environment made by `gymflow env new $name --kind text`: edit it into your own (the
walkthrough is gymflow's `docs/how-to/new-environment.md`).

**What it trains:** a plain-text answer, no tools. "Write the word 'bakesu' backwards." →
`usekab`.

**Reward** (`$name/verifier.py`, pure): 1.0 for the exact reversed word; else 0.0 with a
failure kind (`wrong_answer`, `no_answer`). Probes (`environment.py`): the word itself, an
empty answer, the answer inside a sentence, the answer in capitals; each must score 0.

**Format** (`environment.py`, `well_formed`): one word of lower-case letters, not cut by the
token budget — right or wrong. gymflow trains the start by SFT first when the baseline's
answers are mostly not in this format (`sft.run = "auto"`), reports the rate, and refuses a
candidate that loses it.

**Files:** `environment.py` (the environment class and its format check), `generator.py`
(seeded tasks), `verifier.py` (the reward), `make_examples.py` (writes `examples/`), `tests/`
(pytest), `pyproject.toml` (the `gymflow.environments` entry point that makes gymflow find it:
from this folder in gymflow's home, from `GYMFLOW_ENV_PATH`, or installed).

**Data and license:** generated by the code in this folder; no external data.

```bash
gymflow env list                     # shows it, found in this folder
gymflow env check $name              # gold answers score 1.0, probes stay at their ceiling
pytest tests                         # the verifier, the format, the generator, the server
python -m $name.make_examples        # rewrite examples/ after changing the environment
gymflow run --smoke --set env=$name  # the whole lifecycle on it, reduced budget
```
"""

FILES = {
    **env_template.FILES,
    "README.md": README,
    "$name/environment.py": ENVIRONMENT,
    "$name/generator.py": GENERATOR,
    "$name/verifier.py": VERIFIER,
    "tests/test_$name.py": TESTS,
}
"""Relative path (itself a template) -> file text (a ``string.Template``)."""
