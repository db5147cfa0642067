"""SFT saves checkpoints and a re-run resumes from the last one (TRL's SFTTrainer, real micro
model, real demonstrations).

The failure is the lifecycle's own injection (``GYMFLOW_FAIL_AT=sft@step3``: fail once, right
after the first checkpoint at or after step 3), so what a failed ``sft`` stage leaves is what
these runs leave. Checkpoint picking is driven by a fixed score per step (the caller's
``evaluate``), so which checkpoint is "best" is known in advance.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.lifecycle.fault_injection import fail_after_checkpoint
from gymflow.train.resume import RESUME_FILE
from gymflow.train.sft import SFTSettings, demonstrations, run_sft

SCORES = {2: 0.5, 4: 0.2, 6: 0.1, 8: 0.3}
"""Sampled success by step: step 2's checkpoint stays the best."""
SETTINGS = SFTSettings(
    max_steps=8, batch_size=4, eval_every=2, warmup_steps=1, target_sampled_success=1.01
)


@pytest.fixture(scope="module")
def demos(micro_tool_call_model):
    from transformers import AutoTokenizer

    env = get_env("tool_call")
    tasks = build_tasks(env, 200, seed=4, heldout_frac=0.1, val_frac=0.0)
    return demonstrations(env, AutoTokenizer.from_pretrained(micro_tool_call_model), tasks[:32])


class Scores:
    """The ``evaluate`` callback: the score of the step it is called at (every 2 steps from
    ``after_step``), and the steps it was called at."""

    def __init__(self, after_step: int = 0) -> None:
        self.steps: list[int] = []
        self.next = after_step + SETTINGS.eval_every

    def __call__(self, model, tokenizer) -> float:
        self.steps.append(self.next)
        self.next += SETTINGS.eval_every
        return SCORES[self.steps[-1]]


def _sha(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def _weights(folder: Path):
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def test_sft_failed_after_a_checkpoint_resumes_from_it(
    micro_tool_call_model, demos, tmp_path, monkeypatch
):
    import torch

    straight = run_sft(micro_tool_call_model, tmp_path / "straight", demos, SETTINGS,
                       log_to_mlflow=False)  # fmt: skip

    out = tmp_path / "sft"
    monkeypatch.setenv("GYMFLOW_FAIL_AT", "sft@step3")
    first = Scores()
    with pytest.raises(GymflowError) as failed:
        run_sft(micro_tool_call_model, out, demos, SETTINGS, evaluate=first, log_to_mlflow=False,
                callbacks=fail_after_checkpoint(tmp_path, "sft"))  # fmt: skip
    assert failed.value.kind == FailureKind.INJECTED_FAILURE
    assert first.steps == [2, 4], "failed right after the step-4 checkpoint"
    saved = {p.name for p in (out / "trainer").glob("checkpoint-*")}
    assert saved == {"checkpoint-2", "checkpoint-4"}, saved
    left = json.loads((out / "trainer" / "checkpoint-4" / RESUME_FILE).read_text())
    assert left["best"] == 0.5 and [h["step"] for h in left["history"]] == [2, 4]
    best_after_failure = _sha(out / "best")

    again = Scores(after_step=4)
    result = run_sft(micro_tool_call_model, out, demos, SETTINGS, evaluate=again,
                     log_to_mlflow=False, callbacks=fail_after_checkpoint(tmp_path, "sft"))  # fmt: skip
    assert result["resumed_from"] == str(out / "trainer" / "checkpoint-4")
    assert again.steps == [6, 8], "the re-run trained steps 5-8 only"
    assert result["steps"] == 8
    assert [h["step"] for h in result["history"]] == [2, 4, 6, 8]
    # best 0.5 came back with the checkpoint: the worse steps 6 and 8 did not replace step 2's
    assert _sha(out / "best") == best_after_failure
    assert result["wall_s"] >= left["wall_s"], "the first attempt's training time is counted"
    # resumed on the same data order, optimizer and RNG: the weights of an unbroken run
    last = out / "trainer" / "checkpoint-8"
    unbroken, resumed = _weights(Path(straight["path"])), _weights(last)
    assert unbroken.keys() == resumed.keys()
    for name, tensor in unbroken.items():
        assert torch.allclose(tensor, resumed[name], atol=1e-6), name


def test_a_finished_sft_rerun_trains_no_further(micro_tool_call_model, demos, tmp_path):
    out = tmp_path / "sft"
    first = Scores()
    done = run_sft(micro_tool_call_model, out, demos, SETTINGS, evaluate=first,
                   log_to_mlflow=False)  # fmt: skip
    assert first.steps == [2, 4, 6, 8] and done["resumed_from"] is None
    again = Scores()
    rerun = run_sft(micro_tool_call_model, out, demos, SETTINGS, evaluate=again,
                    log_to_mlflow=False)  # fmt: skip
    assert again.steps == [], "nothing was trained or evaluated again"
    assert rerun["resumed_from"].endswith("checkpoint-8") and rerun["steps"] == 8
    assert rerun["history"] == done["history"] and rerun["path"] == done["path"]
