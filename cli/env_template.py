"""The files ``gymflow env new NAME`` writes: a small working environment to edit.

The example task is a shop: "How much do 3 units of pear cost? Look up the unit price, then
answer with the total." The unit price is in the session (the task's ground truth), not in the prompt, so the
policy has to call the ``unit_price`` tool and multiply. Each file shows one part of the
contract (:mod:`gymflow.env.environment`): tools with session state, a seeded generator, a pure
verifier, probes, examples, tests. ``$name``, ``$cls``, ``$dist`` and ``$gymflow`` are filled in
by :func:`gymflow.cli.env_scaffold.render`.
"""

from __future__ import annotations

PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "A gymflow environment: $name."
requires-python = ">=3.11"
dependencies = ["gymflow>=$gymflow"]

# How gymflow finds the environment once the package is installed (gymflow env list).
[project.entry-points."gymflow.environments"]
$name = "$name:$cls"

[tool.setuptools]
packages = ["$name"]

[tool.setuptools.package-data]
$name = ["examples/*.jsonl"]
"""

INIT = '''\
"""$name: a gymflow environment (see README.md)."""

from $name.environment import $cls

__all__ = ["$cls"]
'''

GENERATOR = '''\
"""The task generator: seeded, so ``generate(n, seed)`` gives the same tasks every time.

A task is a prompt (chat messages) and a ground truth the verifier and the tools read. Here
the unit price lives in the ground truth only: the prompt names the item and the quantity, so
a policy must look the price up. Edit ``ITEMS`` and ``prompt_for`` to make it yours.
"""

from __future__ import annotations

import random

from gymflow.env.environment import TaskDraft

ITEMS = (
    "apple", "pear", "plum", "lemon", "melon", "peach", "mango", "kiwi", "onion", "carrot",
    "potato", "tomato", "pepper", "garlic", "bread", "cheese", "butter", "coffee", "tea", "rice",
)  # fmt: skip


def prompt_for(item: str, quantity: int) -> list[dict]:
    text = f"How much do {quantity} units of {item} cost? Look up the unit price, then answer with the total."
    return [{"role": "user", "content": text}]


def generate(n: int, seed: int) -> list[TaskDraft]:
    """``n`` tasks from ``seed``: an item, a quantity and the item's unit price."""
    rng = random.Random(seed)
    drafts = []
    for _ in range(n):
        item, quantity, price = rng.choice(ITEMS), rng.randint(2, 12), rng.randint(1, 9)
        truth = {"item": item, "quantity": quantity, "unit_price": price, "total": quantity * price}
        drafts.append(TaskDraft(prompt_for(item, quantity), truth, seed))
    return drafts
'''

VERIFIER = '''\
"""The verifier: a pure function of the task's ground truth and the episode's items.

No server, no I/O, deterministic: the resources server only wraps it, and the tests call it
directly. Reward 1.0 only when the policy looked up the right item's price and answered with
the right total; every other outcome is 0.0 with a failure kind saying what went wrong (a
model's mistake is a scored outcome, never an error).
"""

from __future__ import annotations

import json

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_message, final_assistant_text


def score(truth: dict, items: list[dict]) -> Score:
    looked_up = any(
        item.get("type") == "function_call"
        and item.get("name") == "unit_price"
        and _arguments(item) == {"item": truth["item"]}
        for item in items
    )
    message = final_assistant_message(items)
    answered = final_assistant_text(items).strip() == str(truth["total"])
    parts = {"looked_up": float(looked_up), "answered": float(answered)}
    if message is not None and message.get("parse_error"):
        return Score(0.0, False, FailureKind.INVALID_JSON, parts, message["parse_error"])
    if not looked_up:
        return Score(0.0, False, FailureKind.NO_TOOL_CALL, parts, f"no unit_price({truth['item']!r})")
    if not answered:
        return Score(0.0, False, FailureKind.WRONG_ANSWER, parts, f"the total is {truth['total']}")
    return Score(1.0, True, None, parts, "")


def _arguments(item: dict) -> dict | None:
    try:
        value = json.loads(item.get("arguments") or "{}")
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
'''

ENVIRONMENT = '''\
"""$name: look up a unit price with a tool, then answer with the total.

The environment class ties the parts together for gymflow's resources server
(:mod:`gymflow.env.resources_server`): the tools (typed functions; one that takes ``session``
gets the session's state, made by ``new_state`` from the task), the generator
(``generator.py``), the pure verifier (``verifier.py``), a perfect episode (``gold_turns``:
what SFT imitates and ``gymflow env check`` replays) and probes (answers that must not score).
"""

from __future__ import annotations

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.tool_calls import render_call
from gymflow.env.environment import Environment, Probe, TaskDraft

from $name import generator, verifier


class Shelf:
    """One session's state: the price of the task's item."""

    def __init__(self, item: str, unit_price: int) -> None:
        self.prices = {item: unit_price}


def unit_price(session: Shelf, item: str) -> dict:
    """Look up the unit price of an item.

    Args:
        item: The item's name, as the user wrote it.
    """
    if item not in session.prices:
        return {"error": f"no item {item!r} on the shelf"}
    return {"item": item, "unit_price": session.prices[item]}


class $cls(Environment):
    name = "$name"
    version = "1"
    max_turns = 2  # the lookup, then the answer
    reward_range = (0.0, 1.0)

    def tools(self):
        return [unit_price]

    def new_state(self, task: Task) -> Shelf:
        return Shelf(task.ground_truth["item"], task.ground_truth["unit_price"])

    def generate(self, n: int, seed: int) -> list[TaskDraft]:
        return generator.generate(n, seed)

    def verify(self, task: Task, items: list[dict]) -> Score:
        return verifier.score(task.ground_truth, items)

    def gold_text(self, task: Task) -> str:
        return str(task.ground_truth["total"])

    def gold_turns(self, task: Task) -> list[str]:
        return [render_call("unit_price", {"item": task.ground_truth["item"]}), self.gold_text(task)]

    def probes(self, task: Task) -> list[Probe]:
        truth = task.ground_truth
        return [
            Probe("total_without_lookup", str(truth["total"]), 0.0),
            Probe("empty", "", 0.0),
            Probe("lookup_only", render_call("unit_price", {"item": truth["item"]}), 0.0),
            Probe("unit_price_as_total", str(truth["unit_price"]), 0.0),
        ]
'''

MAKE_EXAMPLES = '''\
"""Write ``examples/tasks.jsonl`` (five generated tasks) and ``examples/rollouts.jsonl`` (their
gold episodes and every probe of the first, played through the in-process server):

    python -m $name.make_examples
"""

from __future__ import annotations

from gymflow.data.task_set import build_tasks
from gymflow.rollout.examples import adversarial, gold, write_examples

from $name.environment import $cls


def main() -> None:
    env = $cls()
    tasks = build_tasks(env, 5, seed=0, heldout_frac=0.0, val_frac=0.0)
    scripts = [gold(env, t) for t in tasks] + [adversarial(tasks[0], p) for p in env.probes(tasks[0])]
    write_examples(env, tasks, scripts)


if __name__ == "__main__":
    main()
'''

TESTS = '''\
"""$name: the verifier on its own, the generator's seed, and the whole contract through the
real resources server (what ``gymflow env check $name`` runs)."""

from __future__ import annotations

from gymflow.core.tool_calls import render_call
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.rollout.env_check import check_environment

from $name.environment import $cls
from $name.generator import generate
from $name.verifier import score

TRUTH = {"item": "pear", "quantity": 3, "unit_price": 4, "total": 12}


def _turns(*texts: str) -> list[dict]:
    return [item for turn, text in enumerate(texts) for item in assistant_items(text, turn)]


def test_lookup_and_right_total_score_one():
    result = score(TRUTH, _turns(render_call("unit_price", {"item": "pear"}), "12"))
    assert (result.reward, result.success) == (1.0, True)


def test_mistakes_score_zero_with_their_kind():
    cases = {
        "no_tool_call": _turns("12"),
        "wrong_answer": _turns(render_call("unit_price", {"item": "pear"}), "4"),
        "invalid_json": _turns('<tool_call>{"name": "unit_price"'),
    }
    for kind, items in cases.items():
        result = score(TRUTH, items)
        assert (result.reward, result.success, result.failure_kind) == (0.0, False, kind)
    wrong_item = score(TRUTH, _turns(render_call("unit_price", {"item": "plum"}), "12"))
    assert wrong_item.reward == 0.0


def test_generator_is_seeded():
    assert generate(20, 3) == generate(20, 3)
    assert generate(20, 3) != generate(20, 4)


def test_gold_scores_one_and_probes_stay_at_their_ceiling():
    env = $cls()
    for task in build_tasks(env, 30, seed=1, heldout_frac=0.0, val_frac=0.0):
        gold = prompt_items(task.prompt) + _turns(*env.gold_turns(task))
        assert env.verify(task, gold).reward == 1.0
        for probe in env.probes(task):
            items = prompt_items(task.prompt) + _turns(probe.text)
            assert env.verify(task, items).reward <= probe.max_reward, probe.name


def test_the_contract_holds_through_the_server():
    golds, probes, problems = check_environment($cls(), 50)
    assert golds > 40 and probes == 4 * golds and problems == []  # exact repeats are dropped
'''

README = """\
# $name

A gymflow environment made by `gymflow env new $name`: edit it into your own (the walkthrough
is gymflow's `docs/how-to/new-environment.md`).

**What it trains:** tool use with session state. "How much do 3 units of pear cost? Look up
the unit price, then answer with the total." The unit price is only in the session, so the policy
calls `unit_price(item="pear")`, reads `{"unit_price": 4}` and answers `12`.

**Reward** (`$name/verifier.py`, pure): 1.0 when the episode looked up the task's item and the
final answer is the total; else 0.0 with a failure kind (`no_tool_call`, `wrong_answer`,
`invalid_json`). Probes (`environment.py`): the total without a lookup, an empty answer, the
lookup without an answer, the unit price as the answer; each must score 0.

**Format:** gymflow's default check (`Environment.well_formed`): an answer is well formed
unless it is broken tool-call markup (`invalid_json`), calls no tool (`no_tool_call`) or was cut
by the token budget. gymflow trains the start by SFT first when the baseline's answers are
mostly not well formed, reports the rate, and refuses a candidate that loses it; override
`well_formed` in `environment.py` to say what a well-formed answer is for your task.

**Files:** `environment.py` (tools, session state, the environment class), `generator.py`
(seeded tasks), `verifier.py` (the reward), `make_examples.py` (writes `examples/`),
`tests/` (pytest), `pyproject.toml` (the `gymflow.environments` entry point that makes
gymflow find it: from this folder in gymflow's home, from `GYMFLOW_ENV_PATH`, or installed).

**Data and license:** generated by the code in this folder; no external data.

```bash
gymflow env list                     # shows it, found in this folder
gymflow env check $name              # gold episodes score 1.0, probes stay at their ceiling
pytest tests                         # the verifier, the generator, the server contract
python -m $name.make_examples        # rewrite examples/ after changing the environment
gymflow run --smoke --set env=$name  # the whole lifecycle on it, reduced budget
gymflow run --set env=$name          # the embedded default, trained on it
```
"""

FILES = {
    "pyproject.toml": PYPROJECT,
    "README.md": README,
    "$name/__init__.py": INIT,
    "$name/environment.py": ENVIRONMENT,
    "$name/generator.py": GENERATOR,
    "$name/verifier.py": VERIFIER,
    "$name/make_examples.py": MAKE_EXAMPLES,
    "tests/test_$name.py": TESTS,
}
"""Relative path (itself a template) -> file text (a ``string.Template``)."""
