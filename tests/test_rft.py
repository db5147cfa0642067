"""Online RFT, measured: from a short SFT, it raises held-out success on tool_call over its start
with nothing but the verifier's verdicts on its own samples; and what it spends is counted right.

Real parts: TRL's SFTTrainer, the one episode driver against tool_call's in-process resources
server, a tiny transformers model built here, the checkpoint rule's validation callback. The
tasks are tool_call's ``set_timer`` requests (copy a number of minutes into one call), so a
tiny model learns them in seconds. One torch thread: on a busy 2-core machine a tiny model's
small matrix products run several times faster on one thread than on two.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.evaluation import evaluate_policy, per_task_success
from gymflow.eval.stats import paired_delta
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.train.checkpoint_choice import VALIDATION_FILE, validation_callback
from gymflow.train.rft import RFTSettings, run_rft
from gymflow.train.sft import SFTSettings, demonstrations, run_sft

SFT_TARGET = 0.2  # SFT hands over once sampled validation success reaches it, as in a run
RFT_STEPS = 60
MIN_GAIN = 0.1  # sampled held-out success, 4 samples of each of ~95 tasks


@pytest.fixture
def one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def timers(tmp_path_factory):
    """tool_call's set_timer tasks, split by content hash; the environment and its app."""
    env = get_env("tool_call")
    tasks = build_tasks(env, 6000, seed=1, heldout_frac=0.15, val_frac=0.0)
    tasks = [t for t in tasks if t.ground_truth["tool"] == "set_timer"]
    train = [t for t in tasks if t.split == "train"]
    random.Random(0).shuffle(train)
    heldout = [t for t in tasks if t.split == "heldout"][:100]
    return env, build_app(env), train, heldout


def _sampled(env, app, path, tasks) -> dict[str, float]:
    rows, _ = evaluate_policy(
        env, app, TransformersPolicy.from_path(path), tasks, greedy=False, samples=4, seed=3,
        max_new_tokens=28,
    )  # fmt: skip
    return per_task_success(rows)


def _loaded(path):
    policy = TransformersPolicy.from_path(path)
    return policy.model, policy.tokenizer


def test_rft_raises_heldout_success_over_its_start(timers, tmp_path, one_thread):
    env, app, train, heldout = timers
    cfg = TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=192, corpus_size=1000)
    base = ensure_tiny_model(
        tmp_path / "cache", "tool_call", lambda: tokenizer_corpus(env, cfg.corpus_size, 5), cfg
    )
    demos = demonstrations(env, TransformersPolicy.from_path(base).tokenizer, train[:100])
    val = train[100:148]  # SFT's sampled check and the checkpoint rule's greedy one score these

    def success(greedy: bool):
        def score(model, tokenizer) -> float:
            policy = TransformersPolicy(model, tokenizer)
            _, summary = evaluate_policy(env, app, policy, val, greedy=greedy, seed=17,
                                         max_new_tokens=28)  # fmt: skip
            return summary["success"]

        return score

    sft = run_sft(
        base, tmp_path / "sft", demos,
        SFTSettings(max_steps=600, batch_size=16, learning_rate=3e-3, warmup_steps=10,
                    eval_every=25, target_sampled_success=SFT_TARGET, time_budget_s=None),
        evaluate=success(greedy=False), log_to_mlflow=False,
    )  # fmt: skip
    assert sft["stopped_by"] == "target_sampled_success", sft["history"]
    start = Path(sft["path"])

    settings = RFTSettings(
        max_steps=RFT_STEPS, prompts_per_step=4, samples_per_prompt=8, temperature=1.0,
        max_new_tokens=28, learning_rate=1e-3, save_every=1000, time_budget_s=None,
    )  # fmt: skip
    out = tmp_path / "rft"
    result = run_rft(
        start, out, env, app, train[148:], settings, log_to_mlflow=False,
        callbacks=[validation_callback(success(greedy=True), 20, log_to_mlflow=False)],
    )  # fmt: skip

    # what RFT trained to: its last step (saved when training stops, as SFT's), on held-out
    # tasks it never drew, sampled as its training samples
    last = out / "trainer" / f"checkpoint-{RFT_STEPS}"
    before = _sampled(env, app, start, heldout)
    after = _sampled(env, app, last, heldout)
    ids = sorted(before)
    delta = paired_delta([after[i] for i in ids], [before[i] for i in ids])
    assert delta["delta"] >= MIN_GAIN and delta["ci95"][0] > 0, delta

    # the checkpoint rule ran as for the SFT control: step 0 (the start), every 20, the last;
    # the saved policy is its chosen step
    record = json.loads((out / VALIDATION_FILE).read_text())
    assert record == result["validation"]
    assert [h["step"] for h in record["history"]] == [0, 20, 40, 60]
    scores = [h["success"] for h in record["history"]]
    best = max(range(len(scores)), key=lambda i: (scores[i], i))
    assert record["chosen_step"] == record["history"][best]["step"]
    chosen = (
        start
        if record["chosen_step"] == 0
        else out / "trainer" / f"checkpoint-{record['chosen_step']}"
    )
    assert success(greedy=True)(*_loaded(result["path"])) == success(greedy=True)(*_loaded(chosen))

    spent = result["compute"]
    assert spent["steps"] == RFT_STEPS == result["steps"]
    assert spent["samples_generated"] == spent["rft"]["prompts_drawn"] * 8
    assert (
        spent["examples_trained"] <= spent["rft"]["successes_found"] <= spent["samples_generated"]
    )
    assert 0 < spent["tokens_trained"] < spent["tokens_generated"]
    assert [p["step"] for p in spent["curve"]] == list(range(1, RFT_STEPS + 1))


def test_compute_is_counted_and_a_step_without_success_changes_nothing(
    micro_tool_call_model, tmp_path, one_thread
):
    """An untrained model solves nothing: every prompt is dropped (and refilled once), no
    update changes a weight, and every sample is counted."""
    import torch
    from transformers import AutoModelForCausalLM

    env = get_env("tool_call")
    app = build_app(env)
    pool = build_tasks(env, 60, seed=2, heldout_frac=0.0, val_frac=0.0)
    steps, prompts, k = 3, 2, 3
    common = dict(
        max_steps=steps, prompts_per_step=prompts, samples_per_prompt=k, max_new_tokens=6,
        save_every=1000, time_budget_s=None, task_sampling="uniform", max_resample_rounds=1,
    )  # fmt: skip

    kept = run_rft(
        micro_tool_call_model, tmp_path / "drop", env, app, pool,
        RFTSettings(**common, drop_all_failed=True), log_to_mlflow=False,
    )  # fmt: skip
    spent = kept["compute"]
    # each step: its 2 prompts all failed, then 2 x 2 fresh ones (GRPO's refill), all failed
    assert spent["rft"]["prompts_drawn"] == steps * (prompts + 2 * prompts)
    assert spent["rft"]["prompts_dropped"] == spent["rft"]["prompts_drawn"]
    assert spent["samples_generated"] == steps * 3 * prompts * k
    assert spent["updates"] == spent["examples_trained"] == spent["tokens_trained"] == 0
    assert 0 < spent["tokens_generated"] <= spent["samples_generated"] * 6
    assert (
        spent["wall_s"] > 0
        and spent["curve"][-1]["samples_generated"] == spent["samples_generated"]
    )
    start = AutoModelForCausalLM.from_pretrained(micro_tool_call_model).state_dict()
    end = AutoModelForCausalLM.from_pretrained(kept["path"]).state_dict()
    assert all(torch.equal(start[name], end[name]) for name in start)

    plain = run_rft(
        micro_tool_call_model, tmp_path / "plain", env, app, pool,
        RFTSettings(**common, drop_all_failed=False), log_to_mlflow=False,
    )  # fmt: skip
    assert plain["compute"]["samples_generated"] == steps * prompts * k  # no refill
    assert plain["stopped_by"] == "max_steps"
