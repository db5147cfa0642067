"""Shared pieces of the GRPO step benchmark (:mod:`benchmarks.grpo_step`).

* :class:`SlowTools` — the ``counter`` resources server with every tool call taking ``delay_s``
  (an ASGI wrapper: the wait is awaited, like a tool that calls a remote API; the server itself
  runs tools inline on its event loop, so a ``time.sleep`` inside a tool would stall every
  session of the server, which is not what a slow remote tool does);
* :class:`CounterToolEnv` — the same counter logic wrapped the way TRL's ``environment_factory``
  expects (``reset(**row)``, public methods = tools), with the same 50 ms wait per tool call
  (``async def`` tools: TRL's fastest path, it gathers one rollout's calls concurrently);
* :func:`counter_policy` — the embedded tiny model, SFT'd briefly on whole gold ``counter``
  episodes (calls, tool results, answer) so that sampled rollouts make real tool calls in both
  paths; cached by settings, so only the first benchmark run pays for it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gymflow.core.tool_calls import render_call
from gymflow.data.task_set import build_tasks
from gymflow.environments.counter.environment import Counter, CounterEnvironment
from gymflow.environments.counter.environment import get_counter_value as _get
from gymflow.environments.counter.environment import increment_counter as _inc
from gymflow.policy.tiny_model import TinyModelConfig, ensure_tiny_model, tokenizer_corpus

TINY = TinyModelConfig(hidden_size=96, num_layers=2, intermediate_size=288, corpus_size=2000)
SFT_STEPS = 150


class SlowTools:
    """ASGI wrapper: ``POST /tools/*`` answers after ``delay_s`` (awaited, not blocking)."""

    def __init__(self, app, delay_s: float) -> None:
        self.app, self.delay_s = app, delay_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/tools/"):
            await asyncio.sleep(self.delay_s)
        await self.app(scope, receive, send)


class OneTurnCounter(CounterEnvironment):
    """counter cut to one model turn: the instant, single-turn case of the benchmark."""

    max_turns = 1


class CounterToolEnv:
    """``counter`` for TRL's ``environment_factory``: one instance per concurrent rollout."""

    delay_s = 0.05
    calls = 0  # class-wide: tool calls TRL made, to check both paths do the same work

    def __init__(self) -> None:
        self.counter = Counter(0)
        self.expected = 0

    def reset(self, initial_count: int, expected_count: int, **kwargs) -> None:
        self.counter = Counter(int(initial_count))
        self.expected = int(expected_count)

    async def increment_counter(self, count: int) -> str:
        """Add to the counter.

        Args:
            count: The amount to add.
        """
        await asyncio.sleep(self.delay_s)
        type(self).calls += 1
        return json.dumps(_inc(self.counter, count))

    async def get_counter_value(self) -> str:
        """Read the counter."""
        await asyncio.sleep(self.delay_s)
        type(self).calls += 1
        return json.dumps(_get(self.counter))


def counter_reward(completions, environments, **kwargs) -> list[float]:
    """TRL side's verifier: counter at the expected value and the last answer states it."""
    rewards = []
    for messages, env in zip(completions, environments, strict=True):
        answer = messages[-1].get("content", "") if messages[-1]["role"] == "assistant" else ""
        ok = env.counter.value == env.expected and answer.strip() == str(env.expected)
        rewards.append(float(ok))
    return rewards


def gold_episode(env: CounterEnvironment, task, eos: str) -> str:
    """A perfect episode's completion text: each call, its tool result, the answer."""
    value = int(task.ground_truth["initial_count"])
    text = ""
    for count in task.ground_truth["increments"]:
        value += count
        text += render_call("increment_counter", {"count": count}) + eos
        text += _observation({"count": value})
    text += render_call("get_counter_value", {}) + eos + _observation({"count": value})
    return text + env.gold_text(task) + eos


def _observation(output: dict) -> str:
    # The same text as gymflow.policy.base.TokenizerEncoding.encode_observation.
    return "\n<|im_start|>tool\n" + json.dumps(output) + "<|im_end|>\n<|im_start|>assistant\n"


def counter_policy(cache: Path) -> Path:
    """The embedded tiny model after a short SFT on whole gold counter episodes (cached)."""
    from gymflow.train.sft import SFTSettings, run_sft

    env = CounterEnvironment()
    base = ensure_tiny_model(cache, "counter", lambda: tokenizer_corpus(env, 2000, 5), TINY)
    out = cache / "models" / f"{base.name}-sft{SFT_STEPS}"
    if (out / "best" / "config.json").exists():
        return out / "best"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    tasks = build_tasks(env, 3000, seed=11, heldout_frac=0.0, val_frac=0.0)
    demos = [
        {
            "prompt": tok.apply_chat_template(
                t.prompt, tools=t.tools, add_generation_prompt=True, tokenize=False
            ),
            "completion": gold_episode(env, t, tok.eos_token),
        }
        for t in tasks
    ]
    settings = SFTSettings(
        max_steps=SFT_STEPS, batch_size=32, learning_rate=3e-3, warmup_steps=10, eval_every=10**6
    )
    return Path(run_sft(base, out, demos, settings, log_to_mlflow=False)["path"])
