"""Byte-compile what a run imports, at install time: ``python -m gymflow.core.bytecode``.

``make setup`` installs without compiling and then runs this, so a first ``gymflow run`` starts
as fast as later ones without the install compiling every module of every package: most of
torch, transformers (hundreds of model families), MLflow and Prefect are never imported by a
run. Importing what a run imports, one process per core, writes those modules' bytecode in
less time than compiling the whole environment (the install's time is in the Results log).
The suite's setup (``make test``) still compiles everything: tests import far more.

Python writes a module's bytecode when it first imports it, so importing is compiling: the
groups below run in parallel processes (one per core), then the project's own stages, which
import from both. ``PYTHONDONTWRITEBYTECODE`` is dropped for them, or nothing would be written.
A group that fails to import is reported and skipped: a run then compiles it as it imports it.
"""

from __future__ import annotations

import os
import subprocess
import sys

TRAINING = (
    *("torch", "transformers", "trl.trainer.grpo_trainer", "trl.trainer.sft_trainer"),
    *("scipy.stats", "datasketch", "math_verify", "latex2sympy2_extended"),
)
TRACKING = (
    *("prefect.server.api.server", "uvicorn", "mlflow", "gymflow.cli.main", "git"),
    *("matplotlib.pyplot", "graphviz", "pandera.polars", "mako.template", "pygments.lexers"),
)
"""Imported side by side, one process each: the training stack with what the stages' data and
verifiers use, and the orchestration and tracking stack with the report's plots (the temporary
Prefect server imports its app in its own process)."""

MIGRATIONS = ("prefect/server/database/_migrations", "mlflow/store/db_migrations")
"""Loaded by file path, not imported: the database migrations a new Prefect home and a new
MLflow store run first (~180 modules; compiled in the tracking stack's process)."""

AFTER = ("gymflow.flows.lifecycle", "gymflow.lifecycle.launched", "gymflow.train.sft")
"""The lifecycle's own modules, which import from both groups."""


def _script(modules: tuple[str, ...], folders: tuple[str, ...] = ()) -> str:
    lines = [f"import {name}" for name in modules]
    if folders:
        lines += [
            "import compileall, sysconfig",
            "root = sysconfig.get_paths()['purelib']",
            *(f"compileall.compile_dir(root + '/{f}', quiet=1)" for f in folders),
        ]
    return "\n".join(lines)


def _start(script: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script], env=env)


def main() -> int:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    stacks = [
        (TRAINING, _start(_script(TRAINING), env)),
        (TRACKING, _start(_script(TRACKING, MIGRATIONS), env)),
    ]
    failed = [group for group, proc in stacks if proc.wait() != 0]
    if _start(_script(AFTER), env).wait() != 0:
        failed.append(AFTER)
    for group in failed:
        print(f"warning: could not import all of {', '.join(group)} to compile it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
