"""Progress for a person watching (``gymflow.core.progress``): plain lines with an ETA when
stdout is not a terminal, a line at least every interval while a job runs, nothing with
``--quiet`` or outside the command line; the lifecycle's stage hooks on top of it."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest

from gymflow.core import progress
from gymflow.lifecycle.stage_progress import stage_completed, stage_failed, stage_running

LINE = re.compile(r"^\[\s*\d+:\d\d\] ")


@pytest.fixture
def lines_mode(monkeypatch):
    monkeypatch.delenv(progress.MODE_VAR, raising=False)
    monkeypatch.setenv(progress.EVERY_VAR, "0.5")
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    assert progress.configure() == "lines"
    yield
    monkeypatch.setenv(progress.MODE_VAR, "off")


def _lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if line]


def test_a_tracker_reports_progress_rate_and_eta(lines_mode, capsys):
    with progress.track("sft", total=10, unit="step") as tracker:
        for step in range(1, 4):
            time.sleep(0.2)
            tracker.update(step, loss=0.5)
        time.sleep(0.6)
        tracker.update(4)
        assert 0 < tracker.eta_s() < 10
    shown = _lines(capsys)
    assert all(LINE.match(line) for line in shown), shown
    assert any(re.search(r"sft: step [1-4]/10 · loss 0.5 · eta 0:0\d", line) for line in shown)


def test_silence_is_filled_by_the_newest_open_tracker(lines_mode, capsys):
    with progress.track("grpo", total=3, unit="step") as tracker:
        tracker.update(1, reward=0.25, zero_variance_share=0.2)
        capsys.readouterr()
        time.sleep(2.2)  # no update: the heartbeat speaks every 0.5 s of silence
    shown = _lines(capsys)
    assert len(shown) >= 2, shown
    assert all("grpo: step 1/3 · reward 0.25 · zero-variance 20%" in line for line in shown)


def test_a_budget_caps_the_eta_and_shows_what_is_left(lines_mode):
    with progress.track("grpo", total=1000, budget_s=60, used_s=lambda: 50.0) as tracker:
        tracker.update(1)
        time.sleep(0.1)
        tracker.update(2)
        assert tracker.eta_s() <= 10.0
        assert "budget left 0:10" in tracker.status()


def test_evaluation_episodes_are_counted_into_the_innermost_counting_tracker(lines_mode):
    with progress.track("heldout_gate", unit="episode", counts_episodes=True) as gate:
        progress.episodes_planned(4)
        with progress.track("inner", total=2, unit="step"):  # does not count episodes
            progress.episode_done()
            progress.episode_done()
        progress.episodes_planned(4)
        progress.episode_done()
        assert (gate.done, gate.total) == (3, 8)
        assert gate.status().startswith("heldout_gate: episode 3/8")


@pytest.mark.parametrize("mode", ["quiet", "off"])
def test_quiet_and_library_use_print_nothing(monkeypatch, capsys, mode):
    monkeypatch.setenv(progress.MODE_VAR, mode)
    monkeypatch.setenv(progress.EVERY_VAR, "0.5")
    with progress.track("sft", total=3) as tracker:
        tracker.update(1)
        time.sleep(0.8)
        progress.note("sft: started")
    assert capsys.readouterr().out == ""


def test_stage_hooks_say_started_done_cached_and_failed(lines_mode, capsys):
    def hook_args(name: str, state: str, message: str | None = None):
        return SimpleNamespace(name=name), None, SimpleNamespace(name=state, message=message)

    with progress.track("run", unit="stage") as run:
        stage_running(*hook_args("baseline_eval", "Running"))
        assert progress.innermost().counts_episodes
        progress.episodes_planned(2)
        stage_completed(*hook_args("baseline_eval", "Completed"))
        stage_completed(*hook_args("generate_tasks", "Cached"))
        stage_running(*hook_args("sft", "Running"))
        stage_failed(*hook_args("sft", "Failed", "GymflowError: [timeout] the policy server"))
        assert run.done == 3 and progress.innermost() is run
    texts = [LINE.sub("", line) for line in _lines(capsys)]
    assert "baseline_eval: started" in texts
    assert any(re.fullmatch(r"baseline_eval: done in \d+\.\d s", t) for t in texts), texts
    assert "generate_tasks: cached: done by an earlier attempt" in texts
    assert any(t.startswith("sft: failed after") and "[timeout]" in t for t in texts), texts


def test_clock():
    assert [progress.clock(s) for s in (0, 65, 3723)] == ["0:00", "1:05", "1:02:03"]
