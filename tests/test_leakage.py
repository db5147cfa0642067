"""Leakage: a held-out task, or a reworded copy of one, in training data stops the run.

The planted copy comes in through ``task_data.train_files`` (tasks added to the train split as
they are, never dropped silently); held-out sets come from the run itself and, across runs,
from what earlier runs of the environment recorded in MLflow. Real Prefect engine and MLflow
store; the planted environment is installed as a plugin for the test (``planted_envs``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planted_envs import registered

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.dedup import NearDupSettings, jaccard, normalized_prompt, shingles
from gymflow.data.leakage import PromptRef, find_leaks, refuse_leaks
from gymflow.data.settings import TaskDataSettings
from gymflow.data.task_set import assemble_tasks, build_tasks
from gymflow.env.registry import get_env
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_context import RunContext

ENV = "planted_words"


@pytest.fixture(scope="module", autouse=True)
def planted(tmp_path_factory):
    with registered(tmp_path_factory.mktemp("planted")):
        yield


def reworded(task) -> dict:
    """A training task whose prompt is ``task``'s, reworded (case, punctuation, one word)."""
    text = task.prompt[-1]["content"]
    new = "Please: " + text.replace("game.", "game!").upper().rstrip(".")
    row = task.model_dump() | {"task_id": f"{task.task_id}-reworded", "split": "train"}
    row["prompt"] = [{"role": "user", "content": new}]
    settings = NearDupSettings()
    a, b = (shingles(normalized_prompt(p), settings) for p in (task.prompt, row["prompt"]))
    assert settings.threshold <= jaccard(a, b) < 1.0, "a near, not an exact, duplicate"
    return row


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def config(**task_data) -> LifecycleConfig:
    return LifecycleConfig(env=ENV, n_tasks=400, task_data=TaskDataSettings(**task_data))


def test_refusal_names_the_pairs():
    train = [PromptRef("t1", "a b c d e f g", "train"), PromptRef("t2", "x y z", "train")]
    held = [PromptRef("h1", "a b c d e f g h", "held out")]
    leaks = find_leaks(train, held, NearDupSettings(threshold=0.8))
    assert [(leak.train.id, leak.heldout.id) for leak in leaks] == [("t1", "h1")]
    with pytest.raises(GymflowError) as caught:
        refuse_leaks(leaks, "training")
    assert caught.value.kind == FailureKind.DATA_LEAKAGE
    assert "t1 (train) is 0.83 like held-out h1 (held out)" in str(caught.value)


def test_a_reworded_heldout_prompt_in_added_training_data_is_refused(tmp_path):
    env = get_env(ENV)
    heldout = [t for t in build_tasks(env, 400, 1, 0.1, 0.05) if t.split == "heldout"]
    planted = write_jsonl(tmp_path / "extra.jsonl", [reworded(heldout[0])])
    settings = TaskDataSettings(train_files=[planted])
    with pytest.raises(GymflowError) as caught:
        assemble_tasks(env, 400, 1, 0.1, 0.05, settings)
    assert caught.value.kind == FailureKind.DATA_LEAKAGE
    assert f"{heldout[0].task_id}-reworded (added train)" in str(caught.value)
    assert f"held-out {heldout[0].task_id} (held out)" in str(caught.value)
    clean = write_jsonl(tmp_path / "clean.jsonl", [])
    built = assemble_tasks(env, 400, 1, 0.1, 0.05, TaskDataSettings(train_files=[clean]))
    assert built.counts["near_heldout_dropped"] == 0


def _context(run_id: str, tmp_path: Path, home: Path) -> RunContext:
    from gymflow.lifecycle.tracking import parent_run_id

    return RunContext(
        run_id=run_id,
        run_dir=str(tmp_path / run_id),
        home=str(home),
        mlflow_parent_id=parent_run_id(run_id),
    )


def _stages_run(parent_id: str) -> set[str]:
    from gymflow.lifecycle.tracking import stage_runs

    return set(stage_runs(parent_id))


def test_the_flow_stops_before_training(gym_home, prefect_engine, tmp_path):
    from gymflow.flows.lifecycle import lifecycle

    env = get_env(ENV)
    heldout = [t for t in build_tasks(env, 400, 1, 0.1, 0.05) if t.split == "heldout"]
    planted = write_jsonl(tmp_path / "extra.jsonl", [reworded(heldout[3])])
    ctx = _context("leak-in-flow", tmp_path, gym_home)
    with pytest.raises(GymflowError, match=r"\[data_leakage\] 1 training tasks"):
        lifecycle(ctx, config(train_files=[planted], recorded_heldout=False))
    assert _stages_run(ctx.mlflow_parent_id) == {"generate_tasks"}
    assert not (Path(ctx.run_dir) / "data").exists(), "nothing written for a refused task set"


def test_a_heldout_set_recorded_by_an_earlier_run_is_refused(gym_home, prefect_engine, tmp_path):
    from gymflow.tasks.generate import generate_tasks

    first = _context("leak-recorder", tmp_path, gym_home)
    data = generate_tasks.fn(first, config())
    assert Path(data.paths["heldout"]).exists()
    from gymflow.data.task_table import read_tasks

    held = read_tasks(data.paths["heldout"])[0]
    planted = write_jsonl(tmp_path / "extra.jsonl", [reworded(held)])
    second = _context("leak-second", tmp_path, gym_home)
    other_seed = config(train_files=[planted]).model_copy(update={"task_seed": 2})
    assert held.content_hash not in {
        t.content_hash for t in build_tasks(get_env(ENV), 400, 2, 0.1, 0.05)
    }
    with pytest.raises(GymflowError) as caught:
        generate_tasks.fn(second, other_seed)
    assert caught.value.kind == FailureKind.DATA_LEAKAGE
    assert f"{held.task_id} (held out by run leak-recorder)" in str(caught.value)
    # the same data without the recorded sets passes: the refusal came from the earlier run
    blind = other_seed.model_copy(
        update={"task_data": TaskDataSettings(train_files=[planted], recorded_heldout=False)}
    )
    third = _context("leak-third", tmp_path, gym_home)
    assert generate_tasks.fn(third, blind).counts["train"] > 0
    # a rerun of the recording run does not meet its own record
    assert generate_tasks.fn(first, config()).dataset_hash == data.dataset_hash
