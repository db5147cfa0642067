"""The SFT control hands the gate its step by GRPO's rule: greedy validation, step 0 included.

Real parts: TRL's ``SFTTrainer`` through :func:`gymflow.train.sft.run_sft` with
:func:`gymflow.train.checkpoint_choice.validation_callback` (what the lifecycle's
``sft_control`` stage passes it, as ``grpo`` does to GRPO), real greedy and sampled evaluations
through the one episode driver, a micro model and two planted environments
(``tests/planted_envs.py``): the control is trained on ``planted_words`` demonstrations (say
the secret word) and validated on ``planted_silence`` (say nothing), so its validation
success moves, steps apart, both ways. Its start leans towards silence (every input embedding
pushed along EOS's), so greedy it is silent while its samples are not.

The control's old rule — the best *sampled* success at T 1.0, step 0 left out, ties to the
later step — is recorded beside it at the same steps: on this run it picks a step that scores
0.0 greedy (what the gate scores), while the one rule hands on a step that scores 1.0, and the
policy the control leaves scores, greedy, what its chosen step scored.
``tests/test_grpo_checkpoint_choice.py`` shows the same rule in GRPO's trainer, with a resume.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planted_envs import PlantedSilence, PlantedWords, registered
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from gymflow.data.task_set import build_tasks
from gymflow.env.resources_server import build_app
from gymflow.eval.evaluation import evaluate_policy
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.train.checkpoint_choice import (
    CONTROL_VALIDATION_METRIC,
    VALIDATION_FILE,
    validation_callback,
)
from gymflow.train.sft import SFTSettings, demonstrations, run_sft

EVERY = 3
SETTINGS = SFTSettings(
    max_steps=15, batch_size=8, learning_rate=5e-2, warmup_steps=0, eval_every=EVERY,
    target_sampled_success=1.01, seed=0,
)  # fmt: skip


def _leaning_silent(base: Path, out: Path) -> Path:
    """``base`` with every input embedding pushed (8x) along EOS's own: greedy, it says
    nothing; sampled, it says something now and then."""
    import torch

    model = AutoModelForCausalLM.from_pretrained(base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    weights = model.get_input_embeddings().weight
    eos = tokenizer.eos_token_id
    with torch.no_grad():
        weights.add_(8.0 * weights[eos] / weights[eos].norm())
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _success(env, app, val, greedy: bool):
    def score(model, tokenizer) -> float:
        _, summary = evaluate_policy(
            env, app, TransformersPolicy(model, tokenizer), val, greedy=greedy, samples=4,
            temperature=1.0, max_new_tokens=8, seed=17,
        )  # fmt: skip
        return summary["success"]

    return score


class OldControlRule(TrainerCallback):
    """The control's rule before: sampled success at T 1.0 every ``EVERY`` steps and at the
    last, step 0 left out; the best, ties to the later step."""

    def __init__(self, score) -> None:
        self.score, self.history = score, []

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kw):
        if state.global_step % EVERY == 0 or control.should_training_stop:
            self.history.append((state.global_step, self.score(model, processing_class)))
        return control

    def pick(self) -> int:
        return max(self.history, key=lambda h: (h[1], h[0]))[0]


def test_the_control_hands_on_its_best_greedy_step_not_its_best_sampled_one(
    micro_tool_call_model, tmp_path
):
    import torch

    torch.set_num_threads(1)
    with registered(tmp_path / "planted"):
        start = _leaning_silent(micro_tool_call_model, tmp_path / "start")
        tokenizer = AutoTokenizer.from_pretrained(start)
        words, silence = PlantedWords(), PlantedSilence()
        demos = demonstrations(words, tokenizer, build_tasks(words, 64, 3, 0.0, 0.0))
        val = build_tasks(silence, 24, 9, 0.0, 0.0)
        app = build_app(silence)
        greedy, sampled = _success(silence, app, val, True), _success(silence, app, val, False)
        old = OldControlRule(sampled)
        rule = validation_callback(greedy, EVERY, False, CONTROL_VALIDATION_METRIC)
        result = run_sft(start, tmp_path / "control", demos, SETTINGS, evaluate=None,
                         log_to_mlflow=False, callbacks=[rule, old])  # fmt: skip

        record = json.loads((tmp_path / "control" / VALIDATION_FILE).read_text())
        assert record == result["validation"]
        history = record["history"]
        assert [h["step"] for h in history] == [0, 3, 6, 9, 12, 15], "0, every 3, the last"
        scores = {h["step"]: h["success"] for h in history}
        best = max(scores, key=lambda step: (scores[step], step))  # ties: the later step
        assert record["chosen_step"] == best and record["chosen_success"] == scores[best]
        assert len(set(scores.values())) > 1, scores  # the rule had something to choose from
        # the old rule's step: the best sampled one, and the gate (greedy) would see less
        print("greedy", scores, "sampled", old.history)
        assert old.pick() != best
        assert scores[old.pick()] < scores[best]

        # the policy the control leaves is the chosen step's: it scores what that step scored
        model = AutoModelForCausalLM.from_pretrained(result["path"])
        again = greedy(model, AutoTokenizer.from_pretrained(result["path"]))
        assert again == pytest.approx(scores[best])
