"""SFT and GRPO on several processes, started with ``accelerate launch`` (TRL's launcher).

    launch(job, processes=2)                  # what the product calls: starts the processes
    python -m gymflow.train.launch JOB.json   # what each process runs (one JSON job file)

:func:`launch` runs ``accelerate launch --multi_gpu --num_processes N -m gymflow.train.launch``:
PyTorch's ``torchrun`` starts N copies, each holding the whole model and training on its share
of the batch, with DDP averaging the gradients: gloo on CPUs (the settings' ``device: "cpu"``,
or no GPU), NCCL with one GPU per process. The *global* batch stays what the settings say:
SFT's ``batch_size`` and GRPO's ``prompts_per_step`` are split across the processes (each
must divide by N), so N processes train on the same batches as one process would.

What N processes need and get (:mod:`gymflow.train.distributed`): GRPO's rollout function
runs each process's share of the step's episodes and hands every result to every process, so
the task pool, dynamic sampling and the advantages see the whole batch; rank 0 alone writes
the rollout rows (from every rank), the task pool's ledger, checkpoints and the final model.
Stops that read a clock or a file (the time budget, the SFT control's twin clock) are decided
on rank 0 and obeyed by all.

A caller with closures of its own (the lifecycle: SFT's sampled-success evaluation, the one
checkpoint rule's greedy validation, GRPO's curriculum and rollout lineage) names a *hooks*
factory in the job (``"module:function"``, importable in every process): each process enters
it as a context manager and gets a :class:`JobHooks`. Evaluations run on rank 0 alone, while
the other ranks wait for its answer (:func:`~gymflow.train.distributed.agreed`), so every rank
stops, scores and saves at the same step.

Rollouts run on the local engine (the training model generates); Ray workers and a vLLM
engine process are one-process features and refused here.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.train.distributed import agreed, is_main, world_size


class TwinClockJob(BaseModel):
    """The SFT control's stop (:class:`gymflow.train.twin_clock.TwinClock`)."""

    folder: str
    digest: str


class LaunchJob(BaseModel):
    """One stage for N processes; paths are absolute or relative to the launching directory."""

    model_config = {"extra": "forbid"}

    stage: Literal["sft", "grpo"]
    model_path: str
    out_dir: str
    settings: dict = Field(default_factory=dict, description="SFTSettings / GRPOSettings fields.")
    demos: str | None = Field(None, description='JSONL of {"prompt", "completion"} pairs.')
    env: str | None = Field(
        None, description='GRPO: the environment, a registry name or "module:Class".'
    )
    tasks: str | None = Field(None, description="GRPO: the task pool (a tasks Parquet file).")
    time_budget_s: float | None = Field(None, description="SFT: stop after this training time.")
    twin_clock: TwinClockJob | None = Field(None, description="SFT control: GRPO's wall time.")
    resume: bool = True
    hooks: str | None = Field(
        None,
        description='"module:function": a context manager factory called with the job in '
        "every process, yielding its JobHooks (closures a JSON job cannot carry).",
    )
    hooks_args: dict = Field(default_factory=dict, description="What the hooks factory reads.")


@dataclass
class JobHooks:
    """A caller's closures for one launched stage (every field optional)."""

    evaluate: Callable[[object, object], float] | None = None
    """SFT: ``evaluate(model, tokenizer) -> sampled success`` (its target and its pick)."""
    choose: Callable[[object, object], float] | None = None
    """The checkpoint rule's score (:func:`~gymflow.train.checkpoint_choice.validation_callback`)."""
    choose_every: int = 1
    source: dict = field(default_factory=dict)
    """GRPO: further :class:`~gymflow.train.grpo.RolloutSource` arguments (lineage, the
    curriculum's task pool, where rollout rows go)."""


def launch(job: LaunchJob, processes: int, timeout_s: float | None = None) -> dict:
    """Run ``job`` on ``processes`` processes; returns rank 0's result (``run_sft``'s or
    ``run_grpo``'s dict). A failed process fails the launch with the output's last lines."""
    check(job, processes)
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    job_file = out / "launch_job.json"
    job_file.write_text(job.model_dump_json(indent=1))
    result_file = out / "launch_result.json"
    result_file.unlink(missing_ok=True)
    from gymflow.policy.vllm_engine import free_port

    cmd = [
        sys.executable, "-m", "accelerate.commands.launch",
        *(["--multi_gpu"] if processes > 1 else []),  # accelerate refuses it for one
        "--num_processes", str(processes), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(free_port()),
        "-m", "gymflow.train.launch", str(job_file),
    ]  # fmt: skip
    env = dict(os.environ)
    threads = max(1, (os.cpu_count() or 1) // processes)  # the cores shared, not oversubscribed
    env.setdefault("OMP_NUM_THREADS", str(threads))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0 or not result_file.exists():
        # the launcher's summary ends the output; the failing rank's own lines come before it,
        # so the whole output is kept beside the job and the error names it
        output, log = done.stdout + done.stderr, out / "launch_output.log"
        log.write_text(output)
        tail = " | ".join(output.strip().splitlines()[-12:])
        raise GymflowError(
            FailureKind.INTERNAL_ERROR,
            f"the {processes}-process {job.stage} launch exited with {done.returncode} "
            f"(every process's output: {log}): {tail}",
        )
    return json.loads(result_file.read_text())


def check(job: LaunchJob, processes: int) -> None:
    """Refuse, before any process starts, what N processes cannot train."""
    if processes < 1:
        raise GymflowError(FailureKind.BAD_CONFIG, f"processes must be 1 or more, not {processes}")
    settings = job.settings
    if job.stage == "sft":
        from gymflow.train.sft import SFTSettings

        batch = SFTSettings(**settings).batch_size
        what = f"sft.batch_size {batch}"
    else:
        from gymflow.train.grpo import GRPOSettings

        grpo = GRPOSettings(**settings)
        if grpo.rollout.engine != "local":
            raise GymflowError(
                FailureKind.BAD_CONFIG,
                "several training processes roll out on the local engine: "
                'set grpo.rollout {"engine": "local"}',
            )
        if not (job.env and job.tasks):
            raise GymflowError(FailureKind.BAD_CONFIG, "a GRPO launch needs env and tasks")
        batch = grpo.prompts_per_step
        what = f"grpo.prompts_per_step {batch}"
    if batch % processes:
        raise GymflowError(
            FailureKind.BAD_CONFIG,
            f"{what} does not split over {processes} processes: make it a multiple of {processes}",
        )


def per_process(job: LaunchJob, processes: int) -> dict:
    """The stage's settings for one of ``processes`` processes: the global batch split."""
    settings = dict(job.settings)
    key = "batch_size" if job.stage == "sft" else "prompts_per_step"
    if job.stage == "sft":
        from gymflow.train.sft import SFTSettings

        settings[key] = SFTSettings(**settings).batch_size // processes
        # SFT's own budget check is per process; the agreed stop below replaces it
        if "time_budget_s" in SFTSettings.model_fields:
            settings["time_budget_s"] = None
    else:
        from gymflow.train.grpo import GRPOSettings

        settings[key] = GRPOSettings(**settings).prompts_per_step // processes
    return settings


def run_job(job: LaunchJob) -> dict:
    """The stage, in this process (one of the launched ones, or alone)."""
    from gymflow.core.jsonl import read_jsonl

    processes = world_size()
    check(job, processes)
    settings = per_process(job, processes)
    model, out = Path(job.model_path), Path(job.out_dir)
    demos = [row for _, row in read_jsonl(Path(job.demos))] if job.demos else None
    with _hooks(job) as hooks:
        callbacks = []
        if hooks.choose is not None:
            from gymflow.train.checkpoint_choice import validation_callback

            choose = on_rank_0(hooks.choose)
            callbacks = [validation_callback(choose, hooks.choose_every, log_to_mlflow=False)]
        if job.stage == "sft":
            from gymflow.train.sft import SFTSettings, run_sft

            evaluate = on_rank_0(hooks.evaluate) if hooks.evaluate is not None else None
            return run_sft(
                model, out, demos or [], SFTSettings(**settings), evaluate=evaluate,
                log_to_mlflow=False, should_stop=sft_stop(job), resume=job.resume,
                callbacks=callbacks,
            )  # fmt: skip
        from gymflow.data.task_table import read_tasks
        from gymflow.env.resources_server import build_app
        from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo
        from gymflow.train.task_pool import TASK_POOL_FILE

        env = load_env(job.env)
        grpo = GRPOSettings(**settings)
        where = {"out_dir": out, "pool_file": out / TASK_POOL_FILE} | hooks.source
        source = RolloutSource(env, build_app(env), read_tasks(Path(job.tasks)), grpo, **where)
        return run_grpo(
            model, out, source, grpo, log_to_mlflow=False, resume=job.resume, demos=demos,
            callbacks=callbacks,
        )  # fmt: skip


def on_rank_0(evaluate: Callable[[object, object], float]) -> Callable[[object, object], float]:
    """``evaluate`` run by rank 0 alone (generation on its own copy of the model: no collective
    inside), its answer handed to every rank, which wait for it (:func:`agreed`)."""
    return lambda model, tokenizer: agreed(lambda: evaluate(model, tokenizer))


def _hooks(job: LaunchJob):
    """The job's hooks factory entered (a context manager), or no hooks."""
    if job.hooks is None:
        return contextlib.nullcontext(JobHooks())
    module, _, name = job.hooks.partition(":")
    return getattr(importlib.import_module(module), name)(job)


def load_env(spec: str):
    """An environment by registry name, or by ``module:Class`` (importable in every process)."""
    if ":" not in spec:
        from gymflow.env.registry import get_env

        return get_env(spec)
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)()


def sft_stop(job: LaunchJob):
    """SFT's ``should_stop``: the time budget and the twin clock, decided on rank 0."""
    clock = None
    if job.twin_clock is not None:
        from gymflow.train.twin_clock import TwinClock

        # the launcher (torchrun) is each process's parent; if it dies, so do they
        clock = TwinClock(Path(job.twin_clock.folder), job.twin_clock.digest, os.getppid())
    budget = job.time_budget_s

    def decide(elapsed_s: float) -> bool:
        over = budget is not None and elapsed_s > budget
        return over or (clock is not None and clock(elapsed_s))

    return lambda elapsed_s: agreed(lambda: decide(elapsed_s))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m gymflow.train.launch JOB.json")
    job = LaunchJob.model_validate_json(Path(args[0]).read_text())
    result = run_job(job)
    result["processes"] = world_size()  # what trained: the launcher's count, seen from inside
    if is_main():
        path = Path(job.out_dir) / "launch_result.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, default=str))
        tmp.replace(path)


if __name__ == "__main__":
    main()
