"""``gymflow runs list`` and ``gymflow rerun``'s refusal of an unknown run, on run folders."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.lifecycle.config import LifecycleConfig


def _folder(runs, run_id: str, summary: dict | None = None) -> None:
    (runs / run_id).mkdir(parents=True)
    (runs / run_id / "config.json").write_text(LifecycleConfig.smoke().model_dump_json())
    if summary is not None:
        (runs / run_id / "summary.json").write_text(json.dumps(summary))


def test_runs_list_says_which_runs_finished(tmp_path):
    runs = tmp_path / "runs"
    _folder(runs, "failed-one")
    _folder(runs, "done-one", {
        "wall_s": 81.4, "heldout": {"candidate": {"success": 0.75}},
        "registry": {"version": "3", "candidate": "sft_control", "champion_alias_moved": True},
    })  # fmt: skip
    (runs / "not-a-run").mkdir()
    result = CliRunner().invoke(app, ["runs", "list", "--out", str(runs)])
    assert result.exit_code == 0, result.output
    lines = dict(line.split("\t") for line in result.output.strip().splitlines())
    assert set(lines) == {"failed-one", "done-one"}
    assert lines["failed-one"] == "unfinished (gymflow rerun resumes it)"
    assert lines["done-one"] == ("done in 81 s; held-out success 0.750; v3 (sft_control) champion")


def test_rerun_of_an_unknown_run_is_one_line(tmp_path):
    runs = tmp_path / "runs"
    _folder(runs, "real-run")
    result = CliRunner().invoke(app, ["rerun", "no-such-run", "--out", str(runs)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: [bad_request] no run 'no-such-run' in {runs} (latest: real-run; see gymflow "
        "runs list)"
    )
