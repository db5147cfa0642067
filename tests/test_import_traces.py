"""``gymflow tasks import-traces``: logged trajectories (Responses items, chat messages, NeMo Gym
rollout rows) into held-out tasks, failures first, without repeats of existing tasks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.settings import TaskDataSettings
from gymflow.data.task_files import load_tasks
from gymflow.data.task_set import assemble_tasks, build_tasks
from gymflow.data.trace_import import import_traces
from gymflow.env.registry import get_env

GYMFLOW = Path(sys.executable).with_name("gymflow")
ROOT = Path(__file__).resolve().parents[1]


def gymflow(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(GYMFLOW), *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_traces_in_three_shapes_become_heldout_tasks_failures_first(tmp_path):
    env = get_env("tool_call")
    tasks = build_tasks(env, 40, 5, 0.0, 0.0)[:3]
    good, bad, chat = tasks
    rows = [
        {  # a success, as Responses items (gymflow's rollout rows keep them as a JSON string)
            "trajectory": json.dumps(prompt_items(good.prompt) + assistant_items(env.gold_text(good), 0)),
            "ground_truth": good.ground_truth, "reward": 1.0,
        },
        {  # a failure
            "items": prompt_items(bad.prompt) + assistant_items("I cannot help", 0),
            "ground_truth": bad.ground_truth, "success": False,
        },
        {  # chat messages, no outcome recorded
            "messages": [*chat.prompt, {"role": "assistant", "content": "hm"}],
            "ground_truth": chat.ground_truth,
        },
    ]  # fmt: skip
    result = import_traces(env, write_jsonl(tmp_path / "traces.jsonl", rows))
    assert [t.prompt for t in result.tasks] == [bad.prompt, chat.prompt, good.prompt]
    assert [t.ground_truth for t in result.tasks] == [bad.ground_truth, chat.ground_truth, good.ground_truth]  # fmt: skip
    assert {t.split for t in result.tasks} == {"heldout"}
    assert result.counts == {"rows": 3, "failure": 1, "unknown": 1, "success": 1, "kept": 3,
                             "near_existing": 0, "repeats": 0}  # fmt: skip
    # the same file against the tasks it came from: nothing new
    again = import_traces(env, tmp_path / "traces.jsonl", existing=tasks)
    assert again.tasks == [] and again.counts["near_existing"] == 3


def test_cli_reads_nemo_gym_rollouts_and_output_feeds_the_heldout_split(tmp_path):
    rollouts = ROOT / "environments/counter/examples/rollouts.jsonl"
    out = tmp_path / "imported.jsonl"
    done = gymflow("tasks", "import-traces", str(rollouts), "--env", "counter", "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    failed = [r for r in rows if not r["success"]]
    assert failed, "the example rollouts hold failures"
    imported = list(load_tasks(get_env("counter"), out).values())  # valid gymflow task rows
    distinct = {
        (r["responses_create_params"]["input"][0]["content"], r["initial_count"]) for r in rows
    }
    assert len(imported) == len(distinct)
    assert f"{len(imported)} tasks -> {out} ({len(failed)} failed" in done.stdout
    first = imported[0]
    assert (first.prompt[0]["content"], first.ground_truth["initial_count"]) in {
        (r["responses_create_params"]["input"][0]["content"], r["initial_count"]) for r in failed
    }
    # ready for the held-out set of a run: generated train tasks near them are dropped
    built = assemble_tasks(get_env("counter"), 300, 1, 0.1, 0.05,
                           TaskDataSettings(heldout_files=[str(out)]))  # fmt: skip
    heldout = {t.content_hash for t in built.tasks if t.split == "heldout"}
    assert {t.content_hash for t in imported} <= heldout
    assert built.counts["near_heldout_dropped"] > 0


def test_same_prompt_with_another_ground_truth_is_another_task(tmp_path):
    env = get_env("counter")
    task = build_tasks(env, 5, 1, 0.0, 0.0)[0]
    other = dict(task.ground_truth, initial_count=task.ground_truth["initial_count"] + 1)
    other["expected_count"] = task.ground_truth["expected_count"] + 1
    rows = [
        {"messages": task.prompt, "ground_truth": truth}
        for truth in (task.ground_truth, other, other)
    ]
    result = import_traces(env, write_jsonl(tmp_path / "t.jsonl", rows))
    assert [t.ground_truth for t in result.tasks] == [task.ground_truth, other]
    assert result.counts["repeats"] == 1


def test_a_row_without_ground_truth_is_one_line_naming_it(tmp_path):
    rows = [{"messages": [{"role": "user", "content": "hi"}], "ground_truth": {"tool": "x"}},
            {"messages": [{"role": "user", "content": "hello"}]}]  # fmt: skip
    path = write_jsonl(tmp_path / "bad.jsonl", rows[1:])
    done = gymflow("tasks", "import-traces", str(path), "--env", "tool_call", "--out", str(tmp_path / "o.jsonl"))  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert (
        f"[schema_violation] {path}:1: not a trace for tool_call: the row has no 'ground_truth'"
        in done.stderr
    )
    unusable = write_jsonl(tmp_path / "unusable.jsonl", rows[:1])
    done = gymflow("tasks", "import-traces", str(unusable), "--env", "tool_call", "--out", str(tmp_path / "o.jsonl"))  # fmt: skip
    assert done.returncode == 2 and "tool_call cannot use its ground truth" in done.stderr
    assert not (tmp_path / "o.jsonl").exists()
