"""``gymflow deploy --systemd DIR``: the two long-running processes as systemd user units.

``gymflow-ui.service`` runs ``gymflow ui`` (the Prefect server and the MLflow UI) and
``gymflow-deploy.service`` runs ``gymflow deploy`` with the options given (after the UI's
unit; it waits for the server itself), both for this project home, restarted on failure, and
started at boot once lingering is enabled (``loginctl enable-linger``). The units call this
Python (``python -m gymflow.cli.main``), so they need no PATH or shell activation.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

UNIT = """\
[Unit]
Description={description}
{after}
[Service]
Type=simple
WorkingDirectory={home}
Environment=GYMFLOW_HOME={home}
ExecStart={command}
Restart=on-failure
RestartSec=10
KillSignal=SIGTERM
TimeoutStopSec=45

[Install]
WantedBy=default.target
"""


def units(home: Path, ui_args: list[str], deploy_args: list[str]) -> dict[str, str]:
    """``{file name: unit text}`` for the UI's and the deployments' services."""
    python = [sys.executable, "-m", "gymflow.cli.main"]
    return {
        "gymflow-ui.service": UNIT.format(
            description=f"gymflow: Prefect server and MLflow UI of {home}",
            after="", home=home, command=shlex.join([*python, "ui", *ui_args]),
        ),
        "gymflow-deploy.service": UNIT.format(
            description=f"gymflow: scheduled flows of {home}",
            after="After=gymflow-ui.service\nWants=gymflow-ui.service\n",
            home=home, command=shlex.join([*python, "deploy", *deploy_args]),
        ),
    }  # fmt: skip


def write_units(folder: Path, home: Path, ui_args: list[str], deploy_args: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in units(home, ui_args, deploy_args).items():
        (folder / name).write_text(text)
        written.append(folder / name)
    return written
