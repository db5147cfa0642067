"""``gymflow eval`` wall time: 500 held-out tool_call tasks greedy, and pass@8 on 200, as JSON.

    python benchmarks/eval/eval/eval.py [--home DIR] [--policy SPEC] [--repeats 3] [--out FILE]

Each measurement runs the real command (``gymflow eval ... --no-mlflow``) as a subprocess and
times it from its start to the moment its table is printed (``to_table_s``: Python start,
imports, registry lookup, model load, tasks, every episode, the measures) and to its exit
(``exit_s``: plus the report files and plots). MLflow logging comes after the table and is left
out unless ``--with-mlflow``.

* Tasks: the first 500 (greedy) / 200 (pass@8) tool_call tasks that the split rule holds out
  (``heldout_frac`` 0.1, ``val_frac`` 0.05, seed 1, as a default run), drafted from 9,000 so
  that there are 500 (a default run's 6,000 drafts hold out ~390), written to a task table and
  given with ``--split FILE``. A held-out task is held out in every run with those fractions
  (the split is a hash of the prompt), so no default run trained on them.
* Policy: ``--policy`` if given; else the home's registered ``models:/gymflow-tool_call@champion``
  (what ``make run`` promotes: the realistic case, short answers that end with EOS); else the
  embedded tiny model untrained (every answer runs to the 48-token cap: the slow end). The JSON
  says which.
* The first run of a registry version downloads it into the home's cache; ``repeats`` runs
  follow, and the median of those is the figure (the first is reported apart).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit  # noqa: E402

GYMFLOW = Path(sys.executable).with_name("gymflow")
CHAMPION = "models:/gymflow-tool_call@champion"
TARGETS = {"greedy": (500, 1, 10.0), "pass_at_8": (200, 8, 30.0)}
"""name -> (tasks, samples, target seconds to the table)."""


def heldout_tasks(n: int, folder: Path) -> Path:
    from gymflow.data.task_set import build_tasks
    from gymflow.data.task_table import write_tasks
    from gymflow.env.registry import get_env

    tasks = [
        t for t in build_tasks(get_env("tool_call"), 9000, 1, 0.1, 0.05) if t.split == "heldout"
    ]
    if len(tasks) < n:
        raise SystemExit(f"only {len(tasks)} held-out tasks drafted, {n} needed")
    return write_tasks(tasks[:n], folder / f"tool_call-heldout-{n}.parquet")


def pick_policy(home: Path, given: str | None) -> tuple[str, str]:
    """``(spec, what it is)``."""
    if given:
        return given, "given"
    from gymflow.core.failures import GymflowError
    from gymflow.policy.registered import resolve

    try:
        found = resolve("/gymflow-tool_call@champion", home)
        return CHAMPION, f"registry champion (gymflow-tool_call v{found.version})"
    except GymflowError:
        from gymflow.env.registry import get_env
        from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus

        env, cfg = get_env("tool_call"), TinyModelConfig()
        path = ensure_tiny_model(
            home / ".cache", "tool_call", lambda: tokenizer_corpus(env, cfg.corpus_size, 5), cfg
        )
        return f"transformers:{path}", "embedded tiny model, untrained (no champion in the home)"


def run_once(home: Path, spec: str, tasks: Path, samples: int, out: Path, mlflow: bool) -> dict:
    command = [
        str(GYMFLOW), "eval", "--env", "tool_call", "--policy", spec, "--split", str(tasks),
        "--samples", str(samples), "--out", str(out), "--mlflow" if mlflow else "--no-mlflow",
    ]  # fmt: skip
    errors = out.with_name(out.name + ".stderr")
    started = time.perf_counter()
    with errors.open("w") as stderr:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True,
            env={**os.environ, "GYMFLOW_HOME": str(home)},
        )  # fmt: skip
        to_table = None
        for line in proc.stdout:
            if to_table is None and line.startswith("table after"):
                to_table = time.perf_counter() - started
    err = errors.read_text()
    if proc.wait() != 0 or to_table is None:
        raise SystemExit(f"gymflow eval failed ({proc.returncode}): {err.strip()[-500:]}")
    summary = json.loads((out / "report" / "summary.json").read_text())
    overall = summary["policies"][0]["overall"]
    return {
        "to_table_s": round(to_table, 2),
        "exit_s": round(time.perf_counter() - started, 2),
        "episodes": overall["n"],
        "success": round(overall["success"], 4),
        f"pass_at_{samples}": round(overall["pass_at"][str(samples)]["value"], 4),
        "eval_wall_s": round(overall["wall_s"], 2),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("GYMFLOW_HOME", ".")))
    parser.add_argument("--policy", help="policy spec (default: the champion, else untrained)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement")
    parser.add_argument("--with-mlflow", action="store_true", help="also log each run to MLflow")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.repeats = 1
    home = args.home.resolve()
    spec, what = pick_policy(home, args.policy)
    load_before = os.getloadavg()
    result: dict = {"policy": spec, "policy_is": what, "home": str(home)}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for name, (n, samples, target) in TARGETS.items():
            tasks = heldout_tasks(n, folder)
            first = run_once(home, spec, tasks, samples, folder / f"{name}-0", args.with_mlflow)
            runs = [
                run_once(home, spec, tasks, samples, folder / f"{name}-{i}", args.with_mlflow)
                for i in range(1, args.repeats + 1)
            ]
            median = statistics.median(r["to_table_s"] for r in runs)
            result[name] = {
                "tasks": n, "samples": samples, "target_to_table_s": target,
                "to_table_s_median": median, "met": median <= target,
                "first_run": first, "runs": runs,
            }  # fmt: skip
    result |= {
        "machine": f"{os.cpu_count()} CPU cores",
        "load_average_1_5_15_before": [round(x, 1) for x in load_before],
        "load_average_1_5_15_after": [round(x, 1) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d"),
    }
    emit(result, args.out, compact=args.json)


if __name__ == "__main__":
    main()
