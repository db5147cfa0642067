"""SFT demonstrations of a multi-step environment, and the token stream the model sees at run time.

The demonstrations of ``workplace`` (gold calls one per turn, then an answer) are one pair per
assistant turn, with the real tool outputs in the later prompts. What the SFT stage trains on
must be what the rollout code feeds the model: each pair's prompt tokenizes to the ids the
agent loop builds turn by turn (prompt, assistant turns, observations), also when one turn
makes several calls.
"""

from __future__ import annotations

import json

import pytest

from gymflow.core.conversation import messages_from_items
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.policy.openai_server import encode_conversation
from gymflow.policy.tiny_model import build_tokenizer, tokenizer_corpus
from gymflow.policy.transformers_backend import TokenizerEncoding
from gymflow.rollout.examples import play
from gymflow.train.sft import demonstrations


class Encoding(TokenizerEncoding):
    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.eos_id = tokenizer, tokenizer.eos_token_id


@pytest.fixture(scope="module")
def workplace():
    env = get_env("workplace")
    tasks = build_tasks(env, 300, 1, 0.0, 0.0)
    tokenizer = build_tokenizer(tokenizer_corpus(env, 200, 5), 512)
    return env, tasks, tokenizer


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_multi_step_gold_gives_one_pair_per_turn_with_real_outputs(workplace):
    env, tasks, tok = workplace
    two = next(t for t in tasks if len(t.ground_truth["calls"]) == 2)
    none = next(t for t in tasks if not t.ground_truth["calls"])
    pairs = demonstrations(env, tok, [two, none])
    turns = env.gold_turns(two)
    assert len(turns) == 3 and len(env.gold_turns(none)) == 1
    assert len(pairs) == 4, "three turns of the two-call task, one of the change-nothing task"

    # The change-nothing task is one pair: its prompt and the answer.
    none_prompt = tok.apply_chat_template(
        none.prompt, tools=none.tools, add_generation_prompt=True, tokenize=False
    )
    assert {"prompt": none_prompt, "completion": env.gold_turns(none)[0] + tok.eos_token} in pairs

    # The two-call task: each completion is the gold turn ending at EOS; each later prompt is
    # the run-time token stream after the earlier turns and their real outputs.
    enc = Encoding(tok)
    (episode,) = play(env, [(two, turns)])
    outputs = [it["output"] for it in episode.items if it["type"] == "function_call_output"]
    assert len(outputs) == 2 and all(outputs)
    start = tok.apply_chat_template(
        two.prompt, tools=two.tools, add_generation_prompt=True, tokenize=False
    )
    mine = [p for p in pairs if p["prompt"].startswith(start)]
    assert [p["completion"] for p in mine] == [t + tok.eos_token for t in turns]
    stream = enc.encode_prompt(two.prompt, two.tools)
    for k, pair in enumerate(mine):
        assert _ids(tok, pair["prompt"]) == stream, f"turn {k}: demo prompt != run-time ids"
        if k < 2:
            stream = stream + enc.encode_assistant(turns[k]) + enc.encode_observation(outputs[k])


def test_several_calls_in_one_turn_encode_as_the_template_renders(workplace):
    env, tasks, tok = workplace
    task = next(t for t in tasks if len(t.ground_truth["calls"]) == 2)
    # One turn with both gold calls: the outputs follow each other, one assistant header after.
    (episode,) = play(env, [(task, [env.gold_text(task), "Done."])])
    messages = messages_from_items(episode.items[len(task.prompt) :])
    assert [m["role"] for m in messages] == ["assistant", "tool", "tool", "assistant"]
    history = [*task.prompt, *messages[:3]]
    rendered = tok.apply_chat_template(
        history, tools=task.tools, add_generation_prompt=True, tokenize=False
    )
    enc = Encoding(tok)
    outputs = [m["content"] for m in messages[1:3]]
    runtime = (
        enc.encode_prompt(task.prompt, task.tools)
        + enc.encode_assistant(env.gold_text(task))
        + enc.encode_observation(outputs[0], last=False)
        + enc.encode_observation(outputs[1])
    )
    assert runtime == _ids(tok, rendered)
    # The OpenAI-compatible server encodes the same conversation to the same ids.
    served = [
        *task.prompt,
        {"role": "assistant", "content": None, "tool_calls": messages[0]["tool_calls"]},
        *messages[1:3],
    ]
    assert encode_conversation(enc, served, task.tools) == runtime
    assert json.loads(messages[0]["tool_calls"][1]["function"]["arguments"])


def test_config_overrides_merge_nested_settings():
    """``gymflow run --config`` files change only the fields they name, nested ones included,
    so ``datasets/workplace.json`` on top of ``--smoke`` keeps the smoke budget elsewhere."""
    from pathlib import Path

    from gymflow.lifecycle.config import LifecycleConfig

    smoke = LifecycleConfig.smoke()
    cfg = smoke.overridden({"env": "workplace", "grpo": {"max_new_tokens": 96}})
    assert cfg.env == "workplace" and cfg.grpo.max_new_tokens == 96
    assert cfg.grpo.max_steps == smoke.grpo.max_steps == 3  # not reset to the default
    assert cfg.tiny_model == smoke.tiny_model
    spec = json.loads((Path(__file__).parents[1] / "datasets" / "workplace.json").read_text())
    full = LifecycleConfig().overridden(spec)
    assert full.env == "workplace" and full.tiny_model.max_positions == 1024
    assert full.tiny_model.hidden_size == LifecycleConfig().tiny_model.hidden_size
    with pytest.raises(ValueError):
        smoke.overridden({"grpo": {"no_such_setting": 1}})


def test_demonstrations_longer_than_the_context_fail_with_a_kind(tmp_path):
    """A prompt that fills the model's context leaves TRL nothing to learn from; SFT says so
    (bad_request, naming the context) instead of crashing in the data loader."""
    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model
    from gymflow.train.sft import SFTSettings, run_sft

    env = get_env("tool_call")
    cfg = TinyModelConfig(
        hidden_size=32, num_layers=1, intermediate_size=64, corpus_size=200, max_positions=24
    )
    model = ensure_tiny_model(tmp_path, "tool_call", lambda: tokenizer_corpus(env, 200, 5), cfg)
    from transformers import AutoTokenizer

    tasks = build_tasks(env, 20, 1, 0.0, 0.0)
    demos = demonstrations(env, AutoTokenizer.from_pretrained(model), tasks)
    with pytest.raises(GymflowError) as err:
        run_sft(model, tmp_path / "sft", demos, SFTSettings(max_steps=2), log_to_mlflow=False)
    assert err.value.kind == FailureKind.BAD_REQUEST and "24-token context" in str(err.value)
