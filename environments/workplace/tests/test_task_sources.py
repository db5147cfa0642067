"""workplace task sources: the bundled WorkBench data, the two importers, the generator, and
``gymflow verify --format nemo_gym`` on NeMo Gym's own example rows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.task_record import content_hash, split_of
from gymflow.core.trajectory import prompt_items
from gymflow.data.task_set import build_tasks
from gymflow.environments.workplace import WorkplaceEnvironment
from gymflow.environments.workplace.sandbox import SANDBOX_FILE
from gymflow.environments.workplace.workbench import (
    TASKS_FILE,
    import_nemo_gym,
    import_workbench,
    workbench_rows,
    workbench_tasks,
)

NEMO_GYM = Path(__file__).resolve().parents[3] / "tests/data/nemo_gym"  # NeMo Gym's own rows
NEMO_TASKS = NEMO_GYM / "workplace_assistant_tasks.example.jsonl"
NEMO_ROLLOUTS = NEMO_GYM / "workplace_assistant_rollouts.example.jsonl"
ENV = WorkplaceEnvironment()


def test_bundled_data_is_the_data_its_provenance_names():
    provenance = (SANDBOX_FILE.parent / "PROVENANCE.md").read_text(encoding="utf-8")
    for path in (SANDBOX_FILE, TASKS_FILE):
        assert hashlib.sha256(path.read_bytes()).hexdigest() in provenance, path.name


def test_real_tasks_keep_their_ids_and_split_by_content_hash():
    tasks = workbench_tasks()
    assert [t.task_id for t in tasks] == [r["id"] for r in workbench_rows()]
    assert {t.split for t in tasks} == {"train", "val", "heldout"}
    for task in tasks[::50]:
        assert task.content_hash == content_hash(task.prompt, task.ground_truth)
        assert task.split == split_of(task.content_hash, 0.1, 0.05)
        assert task.prompt[0]["role"] == "system" and "2023-11-30" in task.prompt[0]["content"]
    assert tasks[0].ground_truth == {
        "calls": [{"name": "email_delete_email", "arguments": {"email_id": "00000479"}}]
    }


def test_workbench_importer_reads_rows_as_they_are_and_refuses_broken_ones():
    row = workbench_rows()[3]
    assert ENV.importers()["workbench"](row) == workbench_tasks()[3]
    for broken in ({**row, "query": ""}, {k: v for k, v in row.items() if k != "answer_calls"}):
        with pytest.raises((ValueError, KeyError, TypeError)):
            import_workbench(broken)


def test_generate_interleaves_real_and_synthetic_deterministically():
    drafts = ENV.generate(40, seed=3)
    assert drafts == ENV.generate(40, seed=3) and drafts != ENV.generate(40, seed=4)
    queries = {r["query"] for r in workbench_rows()}
    real = [d.prompt[1]["content"] in queries for d in drafts]
    assert real[::2] == [True] * 20 and not any(real[1::2])
    many = ENV.generate(1500, seed=1)
    assert sum(d.prompt[1]["content"] in queries for d in many) == 690
    tasks = build_tasks(ENV, 300, seed=2, heldout_frac=0.1, val_frac=0.05)
    assert any(not t.ground_truth["calls"] for t in tasks if t.generator == "workplace/1")


def test_nemo_gym_importer_reads_the_five_examples():
    rows = [json.loads(line) for line in NEMO_TASKS.read_text().splitlines()]
    tasks = [import_nemo_gym(row) for row in rows]
    assert [t.task_id for t in tasks] == ["0", "1", "2", "3", "4"]
    assert {len(t.tools) for t in tasks} == {27} and {t.split for t in tasks} == {"heldout"}
    assert tasks[2].ground_truth["calls"][0] == {
        "name": "customer_relationship_manager_update_customer",
        "arguments": {
            "customer_id": "00000095",
            "field": "assigned_to_email",
            "new_value": "raj.patel@atlas.com",
        },
    }
    for task in tasks:  # NeMo Gym's tools are ours, schema for schema
        ours = {s["function"]["name"]: s["function"]["parameters"] for s in ENV.tool_schemas}
        for tool in task.tools:
            theirs = tool["function"]["parameters"]
            assert set(theirs["properties"]) == set(ours[tool["function"]["name"]]["properties"])
    with pytest.raises(ValueError, match="tools the workplace has not"):
        bad = json.loads(json.dumps(rows[0]))
        bad["responses_create_params"]["tools"][0]["name"] = "shell_exec"
        import_nemo_gym(bad)


def test_gymflow_verify_scores_nemo_gym_rows_unchanged(tmp_path):
    rows = [json.loads(line) for line in NEMO_TASKS.read_text().splitlines()]
    responses = []
    for row in rows:
        output = [
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": c["name"],
                "arguments": c["arguments"],
            }
            for i, c in enumerate(row["ground_truth"])
        ]
        responses.append({"task_id": str(row["id"]), "output": output})
    responses.append({"task_id": "3", "output": responses[3]["output"][:1]})  # 1 of 4 deletions
    responses.append({"task_id": "1", "response": "I renamed it."})
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in responses))
    args = ["verify", "--env", "workplace", "--format", "nemo_gym", "--tasks", str(NEMO_TASKS)]
    args += ["--responses", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "s.jsonl")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    scores = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [s["reward"] for s in scores] == [1.0] * 5 + [0.0, 0.0]
    assert [s["failure_kind"] for s in scores[5:]] == ["bad_arguments", "no_tool_call"]


def test_agrees_with_nemo_gym_on_its_rollout_of_a_workbench_task():
    """NeMo Gym's example rollout "Delete my last email from kofi" (its reward 1.0) is WorkBench
    task workbench_email_7; re-scored here from its own items, it gets the same reward."""
    by_query = {t.prompt[1]["content"]: t for t in workbench_tasks()}
    matched = 0
    for line in NEMO_ROLLOUTS.read_text().splitlines():
        row = json.loads(line)
        task = by_query.get(row["responses_create_params"]["input"][-1]["content"])
        if task is None:
            continue
        matched += 1
        items = prompt_items(task.prompt) + [_item(it) for it in row["response"]["output"]]
        assert ENV.verify(task, items).reward == row["reward"]
        # and the same rollout without its deletion is wrong
        kept = [it for it in items if it.get("name") != "email_delete_email"]
        assert ENV.verify(task, kept).reward == 0.0
    assert matched == 1


def _item(item: dict) -> dict:
    """A NeMo Gym output item as a gymflow trajectory item."""
    if item["type"] == "function_call":
        return {k: item[k] for k in ("type", "call_id", "name", "arguments")}
    if item["type"] == "function_call_output":
        return {
            "type": item["type"],
            "call_id": item["call_id"],
            "output": json.dumps(item["output"]),
        }
    text = "".join(part.get("text", "") for part in item["content"])
    return {"type": "message", "role": item["role"], "content": text}
