"""Team stack benchmark: the smoke lifecycle on the home's store vs on a team's servers.

    python benchmarks/scale/team_stack/team_stack.py [--json] [--out FILE] [--set KEY=VALUE ...]

Two ``gymflow run --smoke`` in fresh homes, one after the other, each in its own process:

* ``local`` — the default: MLflow in ``<home>/mlruns/`` (SQLite + artifact folder), a temporary
  Prefect server of the home;
* ``stack`` — ``gymflow stack up``'s stack (PostgreSQL, ``mlflow server --serve-artifacts``,
  ``prefect server``) on loopback ports of this machine, the run pointed at it with
  ``MLFLOW_TRACKING_URI`` and ``PREFECT_API_URL``.

For each: the run's wall time (the command's, start to exit) and its stages' (summary), the
tracking requests the MLflow server answered (its access log: ``stack`` only) and the bytes of
artifacts stored (the artifact folder either store wrote). ``slowdown`` = stack wall / local
wall − 1 (target ≤ 0.10). The stack's start-up is reported apart (``stack_up_s``), not counted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, cpu_flags, emit, machine  # noqa: E402

REQUEST = re.compile(r'"(GET|POST|PATCH|DELETE|PUT) (/api/2\.0/mlflow|/api/3\.0/mlflow|/ajax-api)')


def run(home: Path, env: dict[str, str], sets: list[str]) -> dict:
    """One smoke lifecycle in ``home``; its wall time and summary's stage times."""
    import json

    args = [sys.executable, "-m", "gymflow.cli.main", "run", "--smoke", "--quiet", "--run", "b"]
    args += [a for s in sets for a in ("--set", s)]
    started = time.perf_counter()
    done = subprocess.run(args, env=env | {"GYMFLOW_HOME": str(home)}, cwd=home,
                          capture_output=True, text=True, timeout=3600)  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"run failed in {home}: {done.stderr[-2000:]}")
    summary = json.loads((home / "runs" / "b" / "summary.json").read_text())
    return {"wall_s": round(wall, 1), "run_wall_s": summary["wall_s"], "stages": summary["stages"]}


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    from gymflow.stack.control import Stack, down, up
    from gymflow.stack.settings import StackSettings

    load = os.getloadavg()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PREFECT_"))}
    base |= {"GYMFLOW_PROGRESS": "quiet"}
    base.pop("GYMFLOW_HOME_TRACKING_URI", None)
    with tempfile.TemporaryDirectory(prefix="team-bench-") as tmp:
        root = Path(tmp)
        (root / "local").mkdir()
        local = run(root / "local", base, args.sets)
        local["artifact_bytes"] = folder_bytes(root / "local" / "mlruns" / "artifacts")
        settings = StackSettings(folder=str(root / "stack"), workers=0, postgres_port=25433,
                                 prefect_port=24201, mlflow_port=25001)  # fmt: skip
        stack = Stack(root / "stack-home", settings)
        (root / "stack-home").mkdir()
        started = time.perf_counter()
        up(stack)
        stack_up_s = time.perf_counter() - started
        try:
            (root / "remote").mkdir()
            client = base | {"MLFLOW_TRACKING_URI": settings.mlflow_uri,
                             "PREFECT_API_URL": settings.prefect_api}  # fmt: skip
            log = stack.log("mlflow")
            before = len(REQUEST.findall(log.read_text(errors="replace")))
            remote = run(root / "remote", client, args.sets)
            remote["tracking_requests"] = (
                len(REQUEST.findall(log.read_text(errors="replace"))) - before
            )
            remote["artifact_bytes"] = folder_bytes(root / "stack" / "artifacts")
        finally:
            down(stack, grace_s=10)
            import shutil

            shutil.rmtree(stack.pg.data, ignore_errors=True)
    emit(
        {
            "benchmark": "team_stack",
            "command": "python benchmarks/scale/team_stack/team_stack.py " + " ".join(sys.argv[1:]),
            "local": local,
            "stack": remote,
            "stack_up_s": round(stack_up_s, 1),
            "slowdown": round(remote["wall_s"] / local["wall_s"] - 1, 3),
            "target_slowdown": 0.10,
            "cpu_flags": cpu_flags(),
            **machine(load),
        },
        args.out,
        args.json,
    )


if __name__ == "__main__":
    main()
