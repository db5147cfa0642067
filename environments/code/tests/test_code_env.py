"""The code environment: answer extraction, generated tasks, failure kinds, probes, server."""

from __future__ import annotations

import doctest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gymflow.core.scoring import Score
from gymflow.core.task_record import Task
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.nemo_gym import read_rollout_rows
from gymflow.data.task_files import load_tasks as load_task_file
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.environments.code import CodeEnvironment
from gymflow.environments.code import answer as answer_module
from gymflow.environments.code.answer import assemble, extract_code
from gymflow.environments.code.generator import user_message
from gymflow.environments.code.humaneval import load_tasks
from gymflow.environments.code.probes import OUTSIDE_FILE, all_probes
from gymflow.environments.code.sandbox import Limits
from gymflow.rollout.env_check import check_environment

ENV = CodeEnvironment(limits=Limits(cpu_s=1))
EXAMPLES = Path(__file__).parents[1] / "examples"
ADD_7_TRUTH = {
    "prompt": 'def add_7(x: int) -> int:\n    """Return x plus 7."""\n',
    "canonical_solution": "    return x + 7\n",
    "test": "def check(candidate):\n    assert candidate(1) == 8\n    assert candidate(-7) == 0\n",
    "entry_point": "add_7",
}
ADD_7 = Task(
    task_id="add_7",
    env="code",
    split="train",
    prompt=[{"role": "user", "content": user_message(ADD_7_TRUTH["prompt"])}],
    tools=[],
    ground_truth=ADD_7_TRUTH,
    generator="test",
    seed=0,
    content_hash="0" * 64,
)


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return build_tasks(ENV, 150, seed=5, heldout_frac=0.1, val_frac=0.1)


def grade(task: Task, text: str) -> Score:
    return ENV.verify(task, prompt_items(task.prompt) + assistant_items(text, 0))


# --- extraction and assembly ------------------------------------------------------------------


def test_the_last_python_block_is_the_answer():
    text = "First try:\n```python\nx = 1\n```\nBetter:\n```py\nx = 2\n```\n```\nnot python\n```"
    assert extract_code(text) == "x = 2\n"
    assert extract_code("def f():\n    return 1") == "def f():\n    return 1"
    assert extract_code("```python\r\nx = 3\r\n```") == "x = 3\r\n"


def test_the_module_examples_hold():
    assert doctest.testmod(answer_module).failed == 0


def test_a_whole_function_follows_the_prompt_and_a_body_continues_it():
    prompt = "import math\n\ndef f(x):\n    '''doc'''\n"
    whole = assemble(prompt, "def f(x):\n    return math.floor(x)\n", "f")
    assert whole.startswith(prompt) and whole.endswith("def f(x):\n    return math.floor(x)\n")
    assert assemble(prompt, "    return 1\n", "f") == prompt + "    return 1\n"
    assert assemble(prompt, "y = 1\n    return y", "f") == prompt + "    y = 1\n    return y"
    assert assemble(prompt, "return 1", "f") == prompt + "    return 1\n"


# --- generated tasks --------------------------------------------------------------------------


def test_generated_tasks_are_deterministic_varied_and_split(tasks):
    again = build_tasks(ENV, 150, seed=5, heldout_frac=0.1, val_frac=0.1)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in tasks]
    names = {t.ground_truth["entry_point"] for t in tasks}
    assert len(tasks) == len(names) > 70  # one task per function: the same prompt, one split
    families = {name.rstrip("0123456789").rstrip("_") for name in names}
    assert len(families) >= 14
    assert {t.split for t in tasks} == {"train", "val", "heldout"}
    assert all(t.tools == [] and t.ground_truth["test"].count("assert") == 5 for t in tasks[:50])


def test_every_generated_gold_answer_scores_one(tasks):
    with ThreadPoolExecutor(2) as pool:
        scores = list(pool.map(lambda t: grade(t, ENV.gold_text(t)), tasks))
    bad = [(t.task_id, s) for t, s in zip(tasks, scores, strict=True) if s.reward != 1.0]
    assert bad == []
    assert all(s.success and s.failure_kind is None for s in scores)


# --- failure kinds ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ("", "missing_entry_point"),
        ("I think you should add seven.", "syntax_error"),
        ("```python\ndef add_7(x):\n    return x +\n```", "syntax_error"),
        ("```python\ndef plus_7(x):\n    return x + 7\n```", "test_failed"),  # stub stays
        ("```python\ndef add_7(x):\n    return x + 6\n```", "test_failed"),
        ("```python\ndef add_7(x):\n    return x / 0\n```", "runtime_error"),
        ("```python\ndef add_7(x):\n    return add_7(x)\n```", "runtime_error"),
        ("```python\nimport sys\nsys.exit(0)\n```", "runtime_error"),
        (
            "```python\nclass E(int):\n    pass\ndef add_7(x):\n    return E(x + 7)\n```",
            "runtime_error",
        ),
        ("```python\ndef add_7(x):\n    return [0] * (1 << 34)\n```", "memory_limit"),
        ("```python\ndef add_7(x):\n    while True:\n        pass\n```", "timeout"),
        ("```python\nimport os\nos.getcwd()\nos.listdir('/')\n```", "sandbox_violation"),
    ],
)
def test_failures_score_zero_with_their_kind(answer, kind):
    score = grade(ADD_7, answer)
    assert (score.reward, score.success, str(score.failure_kind)) == (0.0, False, kind), score
    assert score.components == {"tests": 0.0}


def test_a_body_completion_scores_like_a_whole_function():
    task = load_tasks()[2]  # truncate_number: return number % 1.0
    assert grade(task, task.ground_truth["canonical_solution"]).reward == 1.0
    assert grade(task, "    return number\n").failure_kind == "test_failed"


# --- probes -----------------------------------------------------------------------------------


def test_every_probe_scores_zero_and_leaves_the_host_alone(tasks):
    Path(OUTSIDE_FILE).unlink(missing_ok=True)
    chosen = [tasks[0], load_tasks()[0]]
    runs = [(t, p) for t in chosen for p in all_probes(t.ground_truth)]
    with ThreadPoolExecutor(2) as pool:
        scores = list(pool.map(lambda run: grade(run[0], run[1].text), runs))
    results = {(t.task_id, p.name): (s.reward, str(s.failure_kind)) for (t, p), s in zip(runs, scores, strict=True)}  # fmt: skip
    assert all(reward == 0.0 for reward, _ in results.values()), results
    kinds = {name: kind for (_, name), (_, kind) in results.items()}
    for attack in ("os_system", "read_passwd", "read_project", "write_outside", "fork_bomb"):
        assert kinds[attack] == "sandbox_violation", attack
    assert kinds["socket_localhost"] == "sandbox_violation"
    assert kinds["memory_bomb"] == "memory_limit" and kinds["infinite_loop"] == "timeout"
    assert not Path(OUTSIDE_FILE).exists()


def test_env_check_passes_through_the_real_server():
    golds, probes, problems = check_environment(get_env("code"), 8, seed=3)
    assert golds >= 6 and probes == 4 * golds and problems == []


# --- examples ---------------------------------------------------------------------------------


def test_example_tasks_and_rollouts_score_as_recorded():
    tasks = load_task_file(ENV, EXAMPLES / "tasks.jsonl")
    assert len(tasks) == 5 and "HumanEval/0" in tasks
    for row in read_rollout_rows(EXAMPLES / "rollouts.jsonl"):
        task = tasks[row.task_id]
        assert ENV.verify(task, prompt_items(task.prompt) + row.items).reward == row.reward
