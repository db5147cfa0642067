"""What benchmarks share: their options, how they report, and the pieces of a run they rebuild.

Every benchmark ends with :func:`emit` (its one JSON object, printed, and written to ``--out``)
and takes the options of :func:`arguments` (``--json``, ``--out``, ``--smoke``). The current
result of each benchmark is ``result.json`` beside its script, in one schema
(:func:`as_result`: benchmark, what it measures, command, date, commit, machine with its CPU
flags, figures, and the raw output), which the docs read their figures from
(``docs/hooks/figures.py``).

The rest are the pieces of a lifecycle run that several benchmarks rebuild without Prefect or
MLflow — a run's config with overrides, its start model, its task splits, SFT to the GRPO
start, a resources server in its own process. They sit here, not in one benchmark that others
import, until the library offers them.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from gymflow.core.machine import machine_info

ROOT = Path(__file__).resolve().parents[1]
"""The repository root."""

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))
"""The installed ``gymflow`` script beside this Python."""

VECTOR_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "asimd", "neon")
"""The CPU flags that decide which kernels PyTorch runs: recorded with every result."""


def cpu_flags() -> list[str]:
    """The vector flags of this machine's CPU (``/proc/cpuinfo``), in :data:`VECTOR_FLAGS`."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            present = set(value.split())
            return [flag for flag in VECTOR_FLAGS if flag in present]
    return []


def emit(result: dict, out: Path | None, compact: bool = False) -> None:
    """Print ``result`` as JSON (one line if ``compact``); also write it to ``out``. The
    machine it ran on (:func:`gymflow.core.machine.machine_info` and its CPU flags) is added as
    ``host``."""
    result = result | {"host": result.get("host") or machine_info() | {"flags": cpu_flags()}}
    text = json.dumps(result, indent=None if compact else 2)
    print(text)
    if out:
        out.write_text(text + "\n", encoding="utf-8")


def as_result(benchmark: str, output: dict, figures: dict, command: str, measures: str) -> dict:
    """``output`` in the one schema of a benchmark's ``result.json``; ``figures`` maps names to
    ``{"value": ..., "unit": ...}`` (see ``docs/hooks/figures.py`` for the units)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    host = output.get("host") or machine_info() | {"flags": cpu_flags()}
    return {
        "benchmark": benchmark,
        "measures": measures,
        "command": command,
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit or None,
        "machine": host,
        "figures": figures,
        "output": output,
    }


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """The options every benchmark takes: ``--json`` (one line), ``--out FILE`` and ``--smoke``
    (the smallest sizes that still run every code path: for tests, never a figure)."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    parser.add_argument("--json", action="store_true", help="print the JSON object on one line")
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    parser.add_argument(
        "--smoke", action="store_true", help="the smallest sizes that run every code path"
    )
    return parser


def machine(load_before: tuple[float, ...]) -> dict:
    """Where and when a benchmark ran: cores, load average before and after, date."""
    return {
        "machine": f"{os.cpu_count()} CPU cores (shared)",
        "load_average_1_5_15_before": [round(x, 2) for x in load_before],
        "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d"),
    }


# --- a resources server in its own process ----------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env: str, workers: int = 1) -> tuple[subprocess.Popen, str, float]:
    port = free_port()
    started = time.perf_counter()
    serve = [GYMFLOW, "env", "serve", env, "--port", str(port), "--workers", str(workers)]
    # --trust-client-tasks: each phase seeds tasks it generates (a throughput benchmark)
    proc = subprocess.Popen([*serve, "--trust-client-tasks"], stderr=subprocess.DEVNULL)
    urls = [f"http://127.0.0.1:{port + k}" for k in range(workers)]
    for url in urls:  # ready = every worker answers
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise RuntimeError("server exited during start-up") from None
                time.sleep(0.01)
    return proc, urls[0], time.perf_counter() - started


# --- the pieces of a run, without Prefect or MLflow -------------------------------------------


def tiny_model(cache: Path) -> Path:
    """The embedded default model (built once into ``cache``), untrained."""
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.embedded_corpus import corpus_key, embedded_corpus
    from gymflow.policy.tiny_model import ensure_tiny_model

    cfg = LifecycleConfig()
    return ensure_tiny_model(cache, corpus_key(cfg), lambda: embedded_corpus(cfg), cfg.tiny_model)


def run_config(path: Path | None, overrides: dict, model: str | None, budget: float | None):
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.lifecycle.run_config import read_overrides

    cfg = LifecycleConfig()
    if path is not None:
        cfg = cfg.overridden(read_overrides(path))
    cfg = cfg.overridden(overrides)
    if model is not None:
        cfg = cfg.overridden({"model_path": model})
    if budget is not None:
        cfg = cfg.overridden({"grpo": {"time_budget_s": budget}})
    return cfg


def start_model(cfg, cache: Path) -> str:
    """The run's starting checkpoint: ``model_path`` (a folder, .gguf or catalog name) or the
    embedded tiny model, as the lifecycle's ``resolve_policy`` finds them."""
    if cfg.model_path:
        from gymflow.policy.checkpoints import checkpoint_folder

        return str(checkpoint_folder(cfg.model_path, cache))
    from gymflow.lifecycle.embedded_corpus import corpus_key, embedded_corpus
    from gymflow.policy.tiny_model import ensure_tiny_model

    return str(
        ensure_tiny_model(cache, corpus_key(cfg), lambda: embedded_corpus(cfg), cfg.tiny_model)
    )


def run_tasks(cfg):
    """``(demos, pool, val, heldout)``: the run's tasks, split as the lifecycle splits them."""
    from gymflow.data.task_set import assemble_tasks
    from gymflow.env.registry import get_env
    from gymflow.lifecycle.training_inputs import split_demos_and_pool

    built = assemble_tasks(
        get_env(cfg.env), cfg.n_tasks, cfg.task_seed, cfg.heldout_frac, cfg.val_frac,
        cfg.task_data,
    )  # fmt: skip
    split = {name: [t for t in built.tasks if t.split == name] for name in ("train", "val")}
    heldout = [t for t in built.tasks if t.split == "heldout"][: cfg.heldout_n]
    demos, pool = split_demos_and_pool(cfg, split["train"])
    return demos, pool, split["val"], heldout


def sft_to_start(
    cfg, start: str, out: Path, demo_tasks, val, should_stop=None, control_eval_every=None
) -> dict:
    """SFT from ``start`` on the run's demonstrations as the lifecycle's ``sft`` stage trains
    it (sampled-validation hand-over); with ``should_stop``, the SFT control instead (stopped by
    that callable, its checkpoint chosen by the one greedy rule)."""
    from transformers import AutoTokenizer

    from gymflow.lifecycle.training_inputs import (
        candidate_choice,
        environment_servers,
        run_demonstrations,
        sft_settings,
        validation_success,
    )
    from gymflow.train.sft import run_sft

    control = should_stop is not None
    settings = sft_settings(cfg, control=control)
    with environment_servers(cfg) as servers:
        demos = run_demonstrations(servers, demo_tasks, AutoTokenizer.from_pretrained(start))
        # SFT hands over at the sampled-validation target; the control, a candidate, is chosen
        # by the one checkpoint rule GRPO's is (greedy, step 0 included), as in a run
        evaluate, callbacks = None, []
        if not control:
            evaluate = validation_success(cfg, servers, val, greedy=False)
        else:
            callbacks = candidate_choice(cfg, servers, val, every=control_eval_every)
        return run_sft(
            Path(start), out, demos, settings, evaluate=evaluate, log_to_mlflow=False,
            should_stop=should_stop, callbacks=callbacks,
        )  # fmt: skip


def grpo_from(cfg, start: str, folder: Path, pool, val, demo_tasks, say=print) -> dict:
    """GRPO from ``start`` as the lifecycle's ``grpo`` stage trains it (the preflight and its
    curriculum, the task pool, the checkpoint rule), without MLflow: its rollouts in
    ``folder.parent``; ``say`` hears the preflight's line."""
    from transformers import AutoTokenizer

    from gymflow.lifecycle.training_inputs import (
        candidate_choice,
        environment_servers,
        run_demonstrations,
    )
    from gymflow.rollout.store import Lineage
    from gymflow.train import readiness, twin_clock
    from gymflow.train.grpo import RolloutSource, run_grpo
    from gymflow.train.task_pool import TASK_POOL_FILE

    settings = cfg.grpo.model_copy(update={"seed": cfg.seed})
    with twin_clock.grpo_markers(folder), environment_servers(cfg) as servers:
        env, app = servers[cfg.env]
        ready, task_pool = None, None
        if settings.preflight is not None:  # as the GRPO stage: the preflight, the curriculum
            ready, pool, task_pool = readiness.before_grpo(
                servers, start, pool, settings, folder,
                lambda r, _: say(f"seed {cfg.seed}: {r.message}"),
            )  # fmt: skip
        lineage = Lineage("bench", 0, 0, "grpo", env.name, env.version, "bench")
        source = RolloutSource(
            env, app, pool, settings, folder.parent, lineage, pool_file=folder / TASK_POOL_FILE,
            task_pool=task_pool,
        )  # fmt: skip
        callbacks = candidate_choice(cfg, servers, val)
        demos = None
        if settings.demo_loss is not None:
            demos = run_demonstrations(servers, demo_tasks, AutoTokenizer.from_pretrained(start))
        result = run_grpo(
            Path(start), folder, source, settings, log_to_mlflow=False, callbacks=callbacks,
            demos=demos,
        )  # fmt: skip
        twin_clock.mark_finished(folder, result["wall_s"], cfg.digest())
    result["preflight"] = ready.model_dump() if ready is not None else None
    return result


# --- figures across seeds and runs ------------------------------------------------------------

T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093]  # fmt: skip


def across_seeds(values: list[float]) -> dict:
    """Mean over seeds with its 95 % t-interval (seeds are the unit, so the spread between
    runs is what the interval measures).

    >>> across_seeds([1.0, 3.0])
    {'mean': 2.0, 'ci95': [-10.71, 14.71], 'n': 2}
    """
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return {"mean": round(mean, 2), "ci95": None, "n": n}
    half = T95[min(n, len(T95) + 1) - 2] * statistics.stdev(values) / n**0.5
    return {"mean": round(mean, 2), "ci95": [round(mean - half, 2), round(mean + half, 2)], "n": n}


def heldout_rows(run: Path, policies: dict[str, Path]) -> dict[str, list[dict]]:
    """Greedy rows of each of ``policies`` (name: checkpoint) on every held-out task of
    ``run``: the tasks are read and the environment's app built once for all of them."""
    from gymflow.data.task_table import read_tasks
    from gymflow.env.registry import get_env
    from gymflow.env.resources_server import build_app
    from gymflow.eval.evaluation import evaluate_policy
    from gymflow.lifecycle.config import LifecycleConfig
    from gymflow.policy.transformers_backend import TransformersPolicy

    cfg = LifecycleConfig.model_validate_json((run / "config.json").read_text())
    env = get_env(cfg.env)
    app = build_app(env)
    rows = {}
    try:
        tasks = read_tasks(run / "data/tasks-heldout.parquet")
        for name, path in policies.items():
            policy = TransformersPolicy.from_path(path)
            rows[name], _ = evaluate_policy(
                env, app, policy, tasks, max_new_tokens=cfg.max_new_tokens
            )
    finally:
        app.state.verifier.shutdown(kill=True)
    return rows
