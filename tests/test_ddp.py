"""Training on two processes (DDP over gloo, ``accelerate launch``) equals one process.

On the tiny counter model: 3 SFT steps, then 2 GRPO steps from SFT's result, once in this
process and once as a 2-process launch (:func:`gymflow.train.launch.launch`) on the same
global batch. The final weights agree within 1e-4 (float sums in another order), the GRPO
rollout rows are the same rows, each stored once (one writer, every rank's episodes in it),
and one checkpoint folder is written per save.

The verifier is counter's graded one (reward = share of digits, success over half), which a
random policy varies on, so both GRPO steps move the weights and the comparison means
something; it is loaded as ``graded_counter:PassingCounter`` from this folder.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import torch

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.data.task_set import build_tasks
from gymflow.data.task_table import write_tasks
from gymflow.train.launch import LaunchJob, launch, run_job

HERE = Path(__file__).resolve().parent
ENV = "graded_counter:PassingCounter"


@pytest.fixture()
def inputs(tmp_path, counter_model, monkeypatch):
    import sys

    from transformers import AutoTokenizer

    monkeypatch.syspath_prepend(str(HERE))  # this process: graded_counter importable
    monkeypatch.setenv("PYTHONPATH", str(HERE))  # the launched ones
    from graded_counter import PassingCounter

    from gymflow.train.sft import demonstrations

    assert "graded_counter" in sys.modules
    env = PassingCounter()
    tasks = build_tasks(env, 48, seed=5, heldout_frac=0.0, val_frac=0.0)
    tokenizer = AutoTokenizer.from_pretrained(counter_model)
    write_jsonl_atomic(tmp_path / "demos.jsonl", demonstrations(env, tokenizer, tasks[:32]))
    write_tasks(tasks, tmp_path / "tasks.parquet")
    return tmp_path


def jobs(base: Path, model: Path, out: Path) -> tuple[LaunchJob, dict]:
    sft = LaunchJob(
        stage="sft", model_path=str(model), out_dir=str(out / "sft"),
        demos=str(base / "demos.jsonl"),
        settings={"max_steps": 3, "batch_size": 8, "learning_rate": 1e-3, "warmup_steps": 0,
                  "eval_every": 1000, "device": "cpu"},
    )  # fmt: skip
    grpo = {
        "stage": "grpo", "out_dir": str(out / "grpo"), "env": ENV,
        "tasks": str(base / "tasks.parquet"),
        "settings": {"max_steps": 2, "prompts_per_step": 2, "num_generations": 4,
                     "max_new_tokens": 12, "learning_rate": 1e-2, "temperature": 1.0,
                     "save_every": 1, "time_budget_s": None, "demo_loss": None, "device": "cpu"},
    }  # fmt: skip
    return sft, grpo


def weights(folder: str) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).state_dict()


def rows(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "grpo" / "rollouts" / "*.parquet").sort("rollout_id")


def test_two_processes_train_like_one_on_the_same_global_batch(inputs, counter_model):
    one_sft, one_grpo = jobs(inputs, counter_model, inputs / "one")
    two_sft, two_grpo = jobs(inputs, counter_model, inputs / "two")
    alone = run_job(one_sft)
    pair = launch(two_sft, processes=2, timeout_s=600)
    assert alone["steps"] == pair["steps"] == 3
    a, b = weights(alone["path"]), weights(pair["path"])
    sft_gap = max((a[k] - b[k]).abs().max().item() for k in a)
    assert max((a[k] - weights(str(counter_model))[k]).abs().max().item() for k in a) > 0
    assert sft_gap < 1e-4, f"SFT on 2 processes is {sft_gap:.2e} off 1 process"

    alone = run_job(LaunchJob(model_path=alone["path"], **one_grpo))
    pair = launch(LaunchJob(model_path=pair["path"], **two_grpo), processes=2, timeout_s=600)
    assert alone["steps"] == pair["steps"] == 2
    first, second = rows(inputs / "one"), rows(inputs / "two")
    assert second["rollout_id"].is_unique().all() and len(second) >= 16  # once each
    assert first["rollout_id"].to_list() == second["rollout_id"].to_list()
    assert first["completion_ids"].to_list() == second["completion_ids"].to_list()
    assert first["reward"].n_unique() > 1  # the steps had something to learn from
    a, b = weights(alone["path"]), weights(pair["path"])
    start = weights(str(inputs / "one" / "sft" / "best"))
    one = torch.cat([(a[k] - start[k]).flatten() for k in a])
    two = torch.cat([(b[k] - start[k]).flatten() for k in a])
    assert one.abs().max() > 1e-3  # GRPO moved them
    # Adam divides each gradient by its own size: where a gradient is ~1e-9, float sums in
    # another order move that weight's step visibly; the update as a whole must agree
    relative = ((one - two).norm() / one.norm()).item()
    gap = (one - two).abs().max().item()
    assert relative < 1e-3 and gap < 1e-3, f"GRPO on 2 processes: {relative=:.2e}, {gap=:.2e}"
    saved = sorted(p.name for p in (inputs / "two" / "grpo" / "trainer").glob("checkpoint-*"))
    assert saved == ["checkpoint-1", "checkpoint-2"]
    assert all(
        (inputs / "two" / "grpo" / "trainer" / c / "gymflow_resume.json").is_file() for c in saved
    )


def test_a_failed_launch_keeps_every_process_output_and_names_it(tmp_path):
    """The launcher's summary ends the output and hides the failing rank's own lines: the
    whole output is kept beside the job, and the one-line error names the file."""
    job = LaunchJob(
        stage="sft", model_path=str(tmp_path / "no-such-model"), out_dir=str(tmp_path / "sft"),
        demos=str(tmp_path / "demos.jsonl"), settings={"max_steps": 1, "batch_size": 2},
    )  # fmt: skip
    with pytest.raises(GymflowError) as failed:
        launch(job, processes=1, timeout_s=300)
    log = tmp_path / "sft" / "launch_output.log"
    assert failed.value.kind == FailureKind.INTERNAL_ERROR
    assert f"every process's output: {log}" in str(failed.value)
    # the process's own error (no demonstrations file), which the summary's tail leaves out
    assert "demos.jsonl: cannot read" in log.read_text()
