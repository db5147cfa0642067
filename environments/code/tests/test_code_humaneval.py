"""HumanEval in the code environment: the bundled data, the importer, and gold on all 164."""

from __future__ import annotations

import gzip
import hashlib
import json
from concurrent.futures import ThreadPoolExecutor

from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.data.task_files import load_tasks as load_task_file
from gymflow.environments.code import CodeEnvironment
from gymflow.environments.code.humaneval import BUNDLED, load_tasks, read_rows
from gymflow.eval.verify_files import verify_files

ENV = CodeEnvironment()


def test_the_bundled_file_is_the_one_provenance_names():
    digest = hashlib.sha256(BUNDLED.read_bytes()).hexdigest()
    assert digest in (BUNDLED.parent / "PROVENANCE.md").read_text()
    rows = read_rows()
    assert [r["task_id"] for r in rows] == [f"HumanEval/{i}" for i in range(164)]
    assert set(rows[0]) == {"task_id", "prompt", "canonical_solution", "test", "entry_point"}


def test_importer_keeps_ids_reads_plain_and_gzipped_files(tmp_path):
    rows = read_rows()[:3]
    plain = tmp_path / "he.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in rows))
    packed = tmp_path / "he.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_rows(packed) == read_rows(plain) == rows
    tasks = load_task_file(ENV, plain, fmt="humaneval")  # the importer `gymflow verify` uses
    assert list(tasks) == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    task = tasks["HumanEval/1"]
    assert task.split == "heldout" and task.env == "code" and task.tools == []
    assert task.ground_truth["entry_point"] == rows[1]["entry_point"]
    assert rows[1]["prompt"] in task.prompt[0]["content"]


def test_gymflow_verify_scores_humaneval_responses(tmp_path):
    rows = read_rows()[:2]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    responses = tmp_path / "responses.jsonl"
    answers = [
        {"task_id": "HumanEval/0", "response": rows[0]["prompt"] + rows[0]["canonical_solution"]},
        {"task_id": "HumanEval/1", "response": "```python\ndef separate_paren_groups(s):\n    return []\n```"},
    ]  # fmt: skip
    responses.write_text("".join(json.dumps(a) + "\n" for a in answers))
    scored = verify_files(ENV, tasks_file, responses, tmp_path / "scores.jsonl", "humaneval")
    assert [(s["reward"], s["failure_kind"]) for s in scored] == [(1.0, None), (0.0, "test_failed")]


def test_every_canonical_solution_scores_one():
    tasks = load_tasks()

    def gold(task):
        items = prompt_items(task.prompt) + assistant_items(ENV.gold_text(task), 0)
        return task.task_id, ENV.verify(task, items)

    with ThreadPoolExecutor(2) as pool:
        failed = [
            (tid, s) for tid, s in pool.map(gold, tasks) if not (s.success and s.reward == 1.0)
        ]
    assert failed == []
