"""``gymflow eval`` end to end with real parts: the command itself (in-process), a real tiny
transformers model, the scripted gold policy, in-process resources servers, real Parquet, the
home's real MLflow sqlite store. External task formats are read as shipped."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.eval.stats import pass_at_k
from gymflow.rollout.store import read_rollouts

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def gymflow(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def summary_of(out: Path) -> dict:
    return json.loads((out / "report" / "summary.json").read_text())


@pytest.fixture(scope="module")
def gold_vs_model(gym_home, micro_tool_call_model, tmp_path_factory):
    """Gold replay against the untrained micro model on 24 held-out tool_call tasks."""
    out = tmp_path_factory.mktemp("eval") / "gold-vs-model"
    result = gymflow(
        "eval", "--env", "tool_call", "--policy", "scripted:tool_call",
        "--against", f"transformers:{micro_tool_call_model}", "--split", "heldout",
        "--limit", 24, "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result, out


def test_table_has_a_line_per_env_and_overall_for_each_policy(gold_vs_model):
    result, _ = gold_vs_model
    lines = result.stdout.splitlines()
    assert sum(line.startswith("│ tool_call") for line in lines) == 3  # A, B, paired
    assert sum(line.startswith("│ overall") for line in lines) == 3
    assert "paired: scripted:tool_call minus transformers:" in " ".join(result.stdout.split())


def test_rows_are_the_rollout_store_and_the_measures_come_from_them(gold_vs_model):
    _, out = gold_vs_model
    summary = summary_of(out)
    a_rows, b_rows = read_rollouts(out), read_rollouts(out / "against")
    assert a_rows.height == b_rows.height == 24
    assert set(a_rows["policy"]) == {"scripted:tool_call"}
    # paired: the same tasks with the same sampling seeds, whichever policy
    pair = a_rows.select("task_id", "seed").sort("task_id")
    assert pair.equals(b_rows.select("task_id", "seed").sort("task_id"))
    a, b = (p["overall"] for p in summary["policies"])
    assert a["success"] == 1.0 and a["n"] == 24, "the gold answers score 1"
    assert b["success"] == b_rows["success"].mean()
    assert b["reward"] == pytest.approx(b_rows["reward"].mean())
    kinds = b_rows.group_by("failure_kind").len().filter(pl.col("failure_kind").is_not_null())
    assert {r["failure_kind"]: r["len"] for r in kinds.iter_rows(named=True)} == b["failures"]
    delta = summary["comparison"]["overall"]["success"]
    assert delta["delta"] == pytest.approx(1.0 - b["success"]) and delta["n_tasks"] == 24


def test_failures_are_bucketed_with_two_examples_and_the_report_has_plots(gold_vs_model):
    _, out = gold_vs_model
    b = summary_of(out)["policies"][1]["per_env"]["tool_call"]
    assert b["failure_buckets"], "the untrained model fails"
    for bucket in b["failure_buckets"]:
        assert len(bucket["examples"]) == min(2, bucket["count"])
        for ex in bucket["examples"]:
            assert ex["rollout_id"] and ex["task_id"]
    report = (out / "report" / "report.md").read_text()
    assert "## Paired differences" in report and b["failure_buckets"][0]["kind"] in report
    for name in ("success", "rewards", "failures"):
        assert (out / "report" / "plots" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_the_evaluation_is_an_mlflow_run_and_its_episodes_export(gold_vs_model, tmp_path):
    from mlflow import MlflowClient

    result, out = gold_vs_model
    run_id = result.stdout.split("MLflow run ")[1].split()[0]
    run = MlflowClient().get_run(run_id)
    assert run.data.tags["gymflow.kind"] == "evaluation"
    assert run.data.metrics["policy/tool_call/success"] == 1.0
    b = summary_of(out)["policies"][1]["overall"]
    assert run.data.metrics["against/overall/success"] == pytest.approx(b["success"])
    logged = {a.path for a in MlflowClient().list_artifacts(run_id, "report")}
    assert {"report/report.md", "report/summary.json", "report/plots"} <= logged
    exported = gymflow("rollouts", "export", "--in", out, "--format", "nemo_gym", "--out",
                       tmp_path / "ng.jsonl")  # fmt: skip
    assert exported.exit_code == 0, exported.output
    assert len((tmp_path / "ng.jsonl").read_text().splitlines()) == 24


def test_samples_give_pass_at_k_from_the_stored_rows(gym_home, micro_tool_call_model, tmp_path):
    out = tmp_path / "k4"
    result = gymflow(
        "eval", "--env", "tool_call", "--policy", f"transformers:{micro_tool_call_model}",
        "--split", "val", "--limit", 6, "--samples", 4, "--temperature", 1.5,
        "--out", out, "--no-mlflow",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = read_rollouts(out)
    assert rows.height == 24 and sorted(set(rows["sample_idx"])) == [0, 1, 2, 3]
    m = summary_of(out)["policies"][0]["overall"]
    per_task = rows.group_by("task_id").agg(pl.col("success").sum().alias("c"))
    for k in (1, 2, 4):
        expected = sum(pass_at_k(4, c, k) for c in per_task["c"]) / 6
        assert m["pass_at"][str(k)]["value"] == pytest.approx(expected)


def test_gsm8k_rows_evaluate_as_shipped(gym_home, micro_tool_call_model, tmp_path):
    lines = (REPO / "environments/math/data/gsm8k_test.jsonl").read_text().splitlines()[:10]
    rows_file = tmp_path / "gsm8k.jsonl"
    rows_file.write_text("\n".join(lines) + "\n")
    out = tmp_path / "gsm8k"
    result = gymflow(
        "eval", "--env", "math", "--policy", "scripted:math", "--split", rows_file,
        "--format", "gsm8k", "--against", f"transformers:{micro_tool_call_model}",
        "--out", out, "--no-mlflow",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = summary_of(out)
    gold, model = (p["overall"] for p in summary["policies"])
    assert gold["success"] == 1.0 and gold["n"] == 10, "gold answers from final_answer score 1"
    assert model["success"] == 0.0
    ids = {json.loads(line)["id"] for line in lines}
    assert set(read_rollouts(out)["task_id"]) == ids, "the rows keep the file's ids"


def test_nemo_gym_rows_evaluate_as_shipped(gym_home, tmp_path):
    out = tmp_path / "counter"
    result = gymflow(
        "eval", "--env", "counter", "--policy", "scripted:counter", "--split",
        REPO / "environments/counter/examples/nemo_gym_tasks.jsonl", "--format", "nemo_gym",
        "--out", out, "--no-mlflow",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    m = summary_of(out)["policies"][0]["overall"]
    assert m["success"] == 1.0 and m["n"] == 5
    assert m["tool_execution"]["value"] == 1.0 and m["tool_calls"] > 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--env", "no_such_env", "--policy", "scripted:tool_call"], "no_such_env"),
        (["--env", "tool_call", "--policy", "foo:bar"], "unknown policy backend 'foo'"),
        (["--env", "tool_call", "--policy", "models:/only-a-name"], "not a registry spec"),
        (["--env", "tool_call", "--policy", "transformers:/no/such/model"], "no model folder"),
        (["--env", "tool_call", "--policy", "scripted:tool_call", "--split", "/no/such.jsonl"],
         "no such file"),
        (["--env", "tool_call", "--policy", "scripted:tool_call", "--run", "no-such-run"],
         "--run no-such-run"),
        (["--env", "tool_call", "--policy", "scripted:tool_call", "--samples", "0"], "--samples"),
        (["--env", "tool_call", "--policy", "scripted:math"], "--env math alone"),
        (["--env", "tool_call,counter", "--policy", "scripted:tool_call"], "knows no other"),
        (["--env", "counter", "--policy", "scripted:counter", "--format", "bfcl", "--split",
          str(REPO / "environments/counter/examples/tasks.jsonl")], "unknown task format"),
        (["--env", "tool_call,math", "--policy", "openai:http://127.0.0.1:9/v1?model=m", "--split",
          str(REPO / "environments/tool_call/examples/tasks.jsonl")], "one environment's"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_with_a_kind(gym_home, tmp_path, args, expected):
    result = gymflow("eval", *args, "--out", tmp_path / "x", "--no-mlflow")
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in result.output, result.output
    assert err.startswith("error: [bad_request]") or err.startswith("error: [schema_violation]")
    assert expected in err
    assert not (tmp_path / "x").exists(), "nothing is written before the input is checked"


def test_run_splits_are_used_and_other_envs_regenerated(gym_home, micro_tool_call_model, tmp_path):
    from gymflow.data.task_set import build_tasks
    from gymflow.data.task_table import write_tasks
    from gymflow.env.registry import get_env

    run = tmp_path / "runs" / "r1"
    picked = [
        t for t in build_tasks(get_env("tool_call"), 300, 9, 0.3, 0.0) if t.split == "heldout"
    ]
    write_tasks(picked[:7], run / "data" / "tasks-heldout.parquet")
    out = tmp_path / "mixed"
    result = gymflow(
        "eval", "--env", "tool_call,counter", "--policy", f"transformers:{micro_tool_call_model}",
        "--run", run,
        "--limit", 5, "--out", out, "--no-mlflow",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = summary_of(out)
    assert summary["sources"]["tool_call"] == "heldout of run r1"
    assert summary["sources"]["counter"].endswith("run r1 has no counter tasks")
    rows = read_rollouts(out)
    assert set(rows.filter(pl.col("env") == "tool_call")["task_id"]) == {
        t.task_id for t in picked[:5]
    }
    per_env = summary["policies"][0]["per_env"]
    assert per_env["tool_call"]["n"] == per_env["counter"]["n"] == 5
