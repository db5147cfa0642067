"""``gymflow env new demo_env --kind text && gymflow env check demo_env && gymflow run --smoke
--set env=demo_env``, typed as a user would in an empty folder, passes as generated — a
plain-text environment, which gets SFT because its own format check says the untrained model
does not answer in its format (the reason is in ``summary.json``).

The commands run in a Python environment of their own (a venv that sees gymflow's installed
packages through a ``.pth`` line, with its own ``gymflow`` script), so the test also shows that
nothing is installed anywhere: gymflow finds the project in its home folder. The run's output
is the transcript a CI log gets (stdout is a pipe): progress lines at least every 15 s through
SFT and GRPO; then ``gymflow rerun RUN --quiet`` prints the table and nothing else.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sysconfig
from pathlib import Path

import pytest
import user_venv as venvs  # tests/ is on the path: the user_venv fixture

COMMANDS = (
    "gymflow env new demo_env --kind text && gymflow env check demo_env && gymflow env list && "
    "gymflow run --smoke --set env=demo_env"
)
STAMP = re.compile(r"^\[\s*(?:(\d+):)?(\d+):(\d\d)\] (.*)$")

user_venv = venvs.user_venv


def _timeline(stdout: str) -> list[tuple[int, str]]:
    """``(seconds since start, text)`` of every progress line."""
    out = []
    for line in stdout.splitlines():
        if m := STAMP.match(line):
            hours, minutes, seconds, text = m.groups()
            out.append((int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds), text))
    return out


@pytest.mark.slow
def test_a_new_environment_checks_and_runs_as_generated(tmp_path, user_venv):
    work = tmp_path / "work"
    work.mkdir()
    env = os.environ | {
        "PATH": f"{user_venv / 'bin'}:{os.environ['PATH']}",
        "GYMFLOW_HOME": str(work),
    }
    for name in [n for n in env if n.startswith(("PREFECT_", "MLFLOW_", "GYMFLOW_PROGRESS"))]:
        del env[name]  # settings this pytest process may hold for another home
    done = subprocess.run(
        ["bash", "-c", COMMANDS], cwd=work, env=env, capture_output=True, text=True, timeout=2400
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "demo_env: 10 files in" in out
    assert f"demo_env: found in the home ({work / 'demo_env'})" in out
    assert re.search(r"demo_env: \d+ gold episodes, \d+ probes, 0 problems", out), out
    assert f"project {work / 'demo_env'} (demo_env:DemoEnvEnvironment)" in out  # env list
    for site in (user_venv / "lib", Path(sysconfig.get_paths()["purelib"])):
        assert not list(site.rglob("*demo_env*")), "nothing is installed"

    (run_dir,) = (work / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "demo_env" and summary["registry"]["version"]
    assert summary["sft_ran"] and summary["sft_decision"]["ran"]
    assert re.fullmatch(
        r"the baseline answered in the format of demo_env \d+ % of the time, under "
        r"format_threshold 80 %",
        summary["sft_decision"]["reason"],
    ), summary["sft_decision"]
    assert summary["format_check"] == {
        "demo_env": "One word of lower-case letters, ended before the token budget (right or wrong)."
    }
    assert "SFT ran: the baseline answered in the format of demo_env" in out

    timeline = _timeline(out)
    texts = [text for _, text in timeline]
    start = texts.index("sft: started")
    end = next(i for i, text in enumerate(texts) if text.startswith("grpo: done"))
    training = [t for t, _ in timeline[start : end + 1]]
    gaps = [b - a for a, b in zip(training, training[1:], strict=False)]
    assert max(gaps) <= 15, f"silent for {max(gaps)} s during training:\n" + "\n".join(texts)
    sft = [t for t, text in timeline if text.startswith("sft: ")]
    if sft[-1] - sft[0] > 12:  # SFT outlasted a line's interval (10 s): a line said its ETA
        assert any(text.startswith("sft: step ") and "eta" in text for text in texts), texts
    assert any(
        text.startswith("grpo: trained to step 3/3 in ") and "zero-variance" in text
        for text in texts
    ), texts
    assert "gymflow run" in out.split(texts[-1], 1)[1], "the table comes after the progress"

    quiet = subprocess.run(
        ["gymflow", "rerun", run_dir.name, "--quiet"], cwd=work, env=env, capture_output=True,
        text=True, timeout=1200,
    )  # fmt: skip
    assert quiet.returncode == 0, quiet.stdout[-3000:] + quiet.stderr[-3000:]
    assert not _timeline(quiet.stdout), quiet.stdout
    assert f"gymflow run {run_dir.name}" in quiet.stdout.splitlines()[0]
    assert "summary:" not in quiet.stdout and "Prefect flow run" not in quiet.stdout
