"""A candidate that forgets another environment is refused on the default lifecycle's gate.

The default run (``tool_call``) is also checked on math and games (``gate.general_envs``), by
the per-token probability of their held-out gold answers (``gate.general_measure``): a measure
the start has something to lose on even when it solves none of their tasks. This plants the
loss and lets the real ``heldout_gate`` stage, with every gate setting at its default, find it:

* the start: a tiny embedded model taught math's gold answers (SFT on math's train split): it
  gives them real probability, and solves no tool_call task;
* the candidate: the start, then taught the gate's own held-out tool_call tasks (SFT, many
  epochs: planted to beat the start there, as the steered models of ``test_gate_champion``
  are), which drives math's gold answers out of a model this small.

The candidate beats the start on held-out, significantly, with every held-out guardrail kept;
it is refused for math alone, named, with the margin; games — where the start is at the floor
too — is skipped, and the reason says why. Real parts throughout: TRL's SFT, the one episode
driver, the in-process environments, a real MLflow store.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.stage_results import Checkpoint

MODEL = {"hidden_size": 128, "num_layers": 2, "intermediate_size": 384, "corpus_size": 1500}


def _sft(start: Path, out: Path, demos: list[dict], steps: int) -> Path:
    from gymflow.train.sft import SFTSettings, run_sft

    unlimited = {"time_budget_s": None} if "time_budget_s" in SFTSettings.model_fields else {}
    # share_prefix off: 500 steps at lr 5e-3 are chaotic, so the planted candidate is pinned to
    # the float path it was calibrated on. Measured on the AVX2 machine (2026-11-28): the start
    # moved by 1e-6 gives a candidate 0.9 away in weights and 17 instead of 26 of the 64 gold
    # answers, as the shared prefix's rounding did (14); its own losses match TRL's to 4
    # decimals for 500 steps from the base model (tests/test_shared_prefix.py checks the math).
    settings = SFTSettings(
        max_steps=steps, batch_size=16, learning_rate=5e-3, warmup_steps=5, eval_every=10**6,
        target_sampled_success=1.01, seed=0, share_prefix=False, **unlimited,
    )  # fmt: skip
    return Path(run_sft(start, out, demos, settings, log_to_mlflow=False)["path"])


def test_a_candidate_that_forgets_math_is_refused_naming_it(gym_home, tmp_path):
    import torch
    from transformers import AutoTokenizer

    from gymflow.data.task_set import build_tasks
    from gymflow.data.task_table import read_tasks
    from gymflow.env.registry import get_env
    from gymflow.lifecycle.run_context import open_run
    from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus
    from gymflow.tasks.gate import heldout_gate
    from gymflow.tasks.generate import generate_tasks
    from gymflow.train.sft import demonstrations

    torch.set_num_threads(1)
    tool_call, math = get_env("tool_call"), get_env("math")
    cfg = LifecycleConfig(env="tool_call", n_tasks=800, heldout_n=64,
                          registered_model="gymflow-forgetting-test")  # fmt: skip
    assert cfg.gate == LifecycleConfig().gate, "the default gate"
    run = open_run(gym_home, tmp_path / "runs" / "forgetting", cfg)
    data = generate_tasks.fn(run, cfg)

    base = ensure_tiny_model(tmp_path / "cache", "tool_call", lambda: tokenizer_corpus(tool_call, 1500, 5), TinyModelConfig(**MODEL))  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(base)
    math_train = [t for t in build_tasks(math, 800, 1, 0.1, 0.05) if t.split == "train"][:300]
    start = _sft(base, tmp_path / "start", demonstrations(math, tokenizer, math_train), 40)
    gate_tasks = read_tasks(data.paths["heldout"])[:64]
    candidate = _sft(start, tmp_path / "candidate", demonstrations(tool_call, tokenizer, gate_tasks), 500)  # fmt: skip

    report = heldout_gate.fn(run, cfg, data, Checkpoint(path=str(start)),
                             Checkpoint(path=str(candidate)), None)  # fmt: skip
    gate, math_check = report.gate, report.general_checks["math"]
    print(gate.reason)
    assert report.baseline["success"] == 0.0 and report.candidate["success"] > 0.15
    assert report.cs[0] > 0, "a significant gain over the start on held-out tool_call"
    assert math_check["skipped"] is None and math_check["values"]["baseline"] > 0.1
    assert math_check["values"]["grpo"] < math_check["values"]["baseline"] - 0.05
    assert not gate.passed
    # its one failure, named: math, lost by more than the margin
    reason = gate.verdicts[0].reason
    assert reason.startswith("general capability on math: -")
    assert reason.endswith("against the start, below the start by more than the margin 0.05")
    assert "general sets skipped: games (the start scores 0.0" in gate.reason
    assert "(gold-answer probability)" in gate.reason
