"""External task files evaluate as shipped: ``gymflow eval --split FILE --format NAME``.

MATH-500, HumanEval (its ``.jsonl.gz``), BFCL (question file with ``possible_answer/`` beside
it), WorkBench and NeMo Gym's workplace_assistant rows are read without conversion, each a
small slice (``--limit``). The gold-replay policy (``scripted:ENV``) must score every task 1,
which proves the rows were read with their answers and checked by the environment's verifier;
the rows keep the file's ids. GSM8K and NeMo Gym counter rows are in ``tests/test_eval_cli.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.jsonl import read_jsonl
from gymflow.rollout.store import read_rollouts

REPO = Path(__file__).resolve().parents[1]
NEMO_GYM = REPO / "tests/data/nemo_gym"  # NeMo Gym's own rows (PROVENANCE.md there)
BFCL = REPO / "environments/tool_call/tests/data/bfcl"
runner = CliRunner()

FILES = {
    "math500": ("math", REPO / "environments/math/data/math500_test.jsonl", "id", 6),
    "humaneval": ("code", REPO / "environments/code/data/HumanEval.jsonl.gz", "task_id", 3),
    "bfcl": ("tool_call", BFCL / "BFCL_v4_simple_python.json", "id", 6),
    "bfcl_parallel": ("tool_call", BFCL / "BFCL_v4_parallel.json", "id", 4),
    "workbench": ("workplace", REPO / "environments/workplace/data/workbench_tasks.jsonl", "id", 4),
}  # fmt: skip
"""Case -> (environment, the file as shipped, its id field, tasks evaluated)."""


def evaluate(env: str, split: Path, fmt: str, out: Path, *extra) -> dict:
    result = runner.invoke(
        app,
        ["eval", "--env", env, "--policy", f"scripted:{env}", "--split", str(split),
         "--format", fmt, "--out", str(out), "--no-mlflow", *map(str, extra)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads((out / "report" / "summary.json").read_text())


def first_ids(path: Path, key: str, n: int) -> list[str]:
    return [row[key] for _, row in list(read_jsonl(path))[:n]]


@pytest.mark.parametrize("case", list(FILES))
def test_a_shipped_file_evaluates_without_conversion(gym_home, tmp_path, case):
    env, path, key, n = FILES[case]
    fmt = case.split("_")[0]
    summary = evaluate(env, path, fmt, tmp_path / case, "--limit", n)
    gold = summary["policies"][0]["overall"]
    assert gold["n"] == n and gold["scored"] == n
    assert gold["success"] == 1.0, gold["failure_buckets"]
    assert sorted(read_rollouts(tmp_path / case)["task_id"]) == sorted(first_ids(path, key, n))


def test_a_model_is_scored_on_bfcl_rows_against_their_gold(
    gym_home, micro_tool_call_model, tmp_path
):
    """The untrained model on the same BFCL rows: evaluated, paired with the gold, scored 0."""
    out = tmp_path / "bfcl-model"
    summary = evaluate(
        "tool_call", BFCL / "BFCL_v4_multiple.json", "bfcl", out, "--limit", 6,
        "--against", f"transformers:{micro_tool_call_model}",
    )  # fmt: skip
    gold, model = (p["overall"] for p in summary["policies"])
    assert gold["success"] == 1.0 and model["n"] == 6 and model["success"] == 0.0
    assert summary["comparison"]["overall"]["success"]["delta"] == 1.0


def test_nemo_gym_workplace_assistant_rows_evaluate_as_shipped(gym_home, tmp_path):
    path = NEMO_GYM / "workplace_assistant_tasks.example.jsonl"
    summary = evaluate("workplace", path, "nemo_gym", tmp_path / "wa")
    gold = summary["policies"][0]["overall"]
    assert gold["n"] == len(list(read_jsonl(path))) == 5
    assert gold["success"] == 1.0 and gold["tool_calls"] > 0
