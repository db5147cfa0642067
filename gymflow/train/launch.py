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
on rank 0 and obeyed by all. SFT's sampled-success evaluation and GRPO's validation, which are
closures of the lifecycle, are not part of a job: a launched SFT keeps its last step.

Rollouts run on the local engine (the training model generates); Ray workers and a vLLM
engine process are one-process features and refused here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-12:])
        raise GymflowError(
            FailureKind.INTERNAL_ERROR,
            f"the {processes}-process {job.stage} launch exited with {done.returncode}: {tail}",
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
        if grpo.engine != "local" or grpo.vllm != "off":
            raise GymflowError(
                FailureKind.BAD_CONFIG,
                "several training processes roll out on the local engine: "
                'set grpo.engine "local" and grpo.vllm "off"',
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
    if job.stage == "sft":
        from gymflow.train.sft import SFTSettings, run_sft

        stop = sft_stop(job)
        return run_sft(
            model, out, demos or [], SFTSettings(**settings), log_to_mlflow=False,
            should_stop=stop, resume=job.resume,
        )  # fmt: skip
    from gymflow.data.task_table import read_tasks
    from gymflow.env.resources_server import build_app
    from gymflow.train.grpo import GRPOSettings, RolloutSource, run_grpo

    env = load_env(job.env)
    grpo = GRPOSettings(**settings)
    source = RolloutSource(
        env, build_app(env), read_tasks(Path(job.tasks)), grpo, out_dir=out,
        pool_file=out / "task_pool.json",
    )  # fmt: skip
    return run_grpo(model, out, source, grpo, log_to_mlflow=False, resume=job.resume, demos=demos)


def load_env(spec: str):
    """An environment by registry name, or by ``module:Class`` (importable in every process)."""
    if ":" not in spec:
        from gymflow.env.registry import get_env

        return get_env(spec)
    import importlib

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
    if is_main():
        path = Path(job.out_dir) / "launch_result.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, default=str))
        tmp.replace(path)


if __name__ == "__main__":
    main()
