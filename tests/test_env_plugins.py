"""Environments as plugins: a package installed with pip, found through its entry point.

A tiny environment package (``echo_env``: call the ``echo`` tool with a word, then say the word)
is written to a temporary folder with a ``gymflow.environments`` entry point and installed by
pip — offline, no build isolation — into a folder of its own that the CLI's subprocess gets on
``PYTHONPATH``. Discovery is the same as for a package installed into the venv (installed
distributions on ``sys.path``), and the venv is never changed, so tests running beside this
one never see the plugin and nothing is left behind if this run is killed. The real
``gymflow`` command then lists it and holds it to the environment contract.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GYMFLOW = Path(sys.executable).with_name("gymflow")

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "echo-env-plugin"
version = "0.1.0"
description = "A one-tool gymflow environment, for the plugin test."

[project.entry-points."gymflow.environments"]
echo_env = "echo_env_pkg:EchoEnvironment"

[tool.setuptools]
packages = ["echo_env_pkg"]
"""

PACKAGE = '''\
"""echo_env: call ``echo`` with the word the user gives, then say the word."""

import json
import random

from gymflow.core.failures import FailureKind
from gymflow.core.scoring import Score
from gymflow.core.tool_calls import render_call
from gymflow.core.trajectory import final_assistant_text
from gymflow.env.environment import Environment, Probe, TaskDraft

WORDS = ("amber", "birch", "cobalt", "dune", "ember", "fjord", "granite", "harbor")


def echo(text: str) -> dict:
    """Repeat a text back.

    Args:
        text: The text to repeat.
    """
    return {"echo": text}


class EchoEnvironment(Environment):
    name = "echo_env"
    max_turns = 2
    reward_range = (0.0, 1.0)

    def tools(self):
        return [echo]

    def generate(self, n, seed):
        rng = random.Random(seed)
        drafts = []
        for _ in range(n):
            word = rng.choice(WORDS) + str(rng.randint(0, 999))
            prompt = [{"role": "user", "content": f"Echo {word} with the tool, then say it."}]
            drafts.append(TaskDraft(prompt, {"word": word}, seed))
        return drafts

    def verify(self, task, items):
        word = task.ground_truth["word"]
        echoed = any(
            it.get("type") == "function_call"
            and it.get("name") == "echo"
            and _text(it.get("arguments")) == word
            for it in items
        )
        said = final_assistant_text(items).strip() == word
        comps = {"echoed": float(echoed), "said": float(said)}
        if not echoed:
            return Score(0.0, False, FailureKind.NO_TOOL_CALL, comps, "no echo of the word")
        if not said:
            return Score(0.0, False, FailureKind.WRONG_ANSWER, comps, "the word was not said")
        return Score(1.0, True, None, comps, "")

    def gold_text(self, task):
        return task.ground_truth["word"]

    def gold_turns(self, task):
        return [render_call("echo", {"text": task.ground_truth["word"]}), self.gold_text(task)]

    def probes(self, task):
        word = task.ground_truth["word"]
        return [
            Probe("said_without_echo", word, 0.0),
            Probe("empty", "", 0.0),
            Probe("echo_only", render_call("echo", {"text": word}), 0.0),
        ]


def _text(arguments):
    try:
        return json.loads(arguments or "{}").get("text")
    except (ValueError, AttributeError):
        return None
'''


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> str:
    """The folder pip installed the plugin into, for the subprocess's ``PYTHONPATH``."""
    root = tmp_path_factory.mktemp("plugin")
    source, target = root / "echo-env-plugin", root / "site"
    (source / "echo_env_pkg").mkdir(parents=True)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "echo_env_pkg" / "__init__.py").write_text(PACKAGE)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    pip += ["--no-index", "--no-deps", "--no-build-isolation", "--target", str(target)]
    done = subprocess.run([*pip, str(source)], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    assert list(target.glob("echo_env_plugin-0.1.0.dist-info/entry_points.txt"))
    return str(target)


def gymflow(*args: str, plugin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if plugin:
        env["PYTHONPATH"] = plugin
    return subprocess.run(
        [str(GYMFLOW), *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_an_installed_plugin_is_listed_with_its_entry_point(plugin_path):
    listed = gymflow("env", "list", plugin=plugin_path)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[0]: line.split("\t") for line in listed.stdout.splitlines()}
    assert rows["echo_env"][1:4] == ["v1", "1 tools", "max_turns=2"]
    assert rows["echo_env"][4].endswith(" (echo_env_pkg:EchoEnvironment)")
    assert rows["echo_env"][4].startswith("installed ")
    assert {"counter", "tool_call"} <= set(rows)  # the in-repo ones are still there
    assert "echo_env" not in gymflow("env", "list").stdout  # only where it is installed


def test_an_installed_plugin_passes_env_check(plugin_path):
    checked = gymflow("env", "check", "echo_env", "--n", "20", plugin=plugin_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    golds, probes = checked.stdout.split(" gold episodes, ")[0], checked.stdout.split(", ")[1]
    assert golds == "echo_env: 20" and probes == "60 probes", checked.stdout
    assert "0 problems" in checked.stdout


def test_an_unknown_environment_is_one_line_naming_the_known_ones(plugin_path):
    for command in ("check", "serve"):
        result = gymflow("env", command, "no_such_env", plugin=plugin_path)
        assert result.returncode == 2
        assert result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert line.startswith("error: [bad_request] unknown environment 'no_such_env'; known: ")
        assert {"counter", "echo_env", "tool_call"} <= set(line.split("known: ")[1].split(", "))
