"""The ``vllm:`` policy on a real vLLM engine process (vLLM's CPU build, ``make setup-vllm``).

``load_policy("vllm:PATH")`` starts ``vllm serve`` from the vLLM environment, the backend keeps
the token-level contract (token ids in; token ids, EOS kept, and sampling logprobs out), the
logprobs are the model's own (equal to transformers' on the same weights), a seeded row
samples the same tokens again, an episode plays through the one driver, and ``close()`` ends
the process.
"""

from __future__ import annotations

import asyncio

import pytest
from vllm_model import needs_vllm, teacher_forced_logprobs, vllm_tiny_model

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.policy.spec import load_policy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling

ENV = get_env("tool_call")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return vllm_tiny_model(tmp_path_factory.mktemp("vllm-cache"))


@pytest.fixture(scope="module")
def served(model_path):
    policy = load_policy(f"vllm:{model_path}")
    yield policy
    policy.close()


def test_a_missing_vllm_environment_is_a_kinded_error(model_path, tmp_path, monkeypatch):
    monkeypatch.setenv("GYMFLOW_VLLM_ENV", str(tmp_path / "nowhere"))
    with pytest.raises(GymflowError) as err:
        load_policy(f"vllm:{model_path}")
    assert err.value.kind == FailureKind.BACKEND_UNAVAILABLE
    assert "make setup-vllm" in str(err.value)
    with pytest.raises(GymflowError) as err:
        load_policy(f"vllm:{tmp_path / 'no-model'}")
    assert err.value.kind == FailureKind.BAD_REQUEST


@needs_vllm
def test_token_ids_in_token_ids_and_the_models_logprobs_out(served, model_path):
    from transformers import AutoModelForCausalLM

    from gymflow.policy.transformers_backend import TransformersPolicy
    from gymflow.policy.vllm_served import VLLMServedPolicy

    assert isinstance(served, VLLMServedPolicy) and served.engine.process.poll() is None
    reference = TransformersPolicy.from_path(model_path)
    tasks = build_tasks(ENV, 4, seed=2, heldout_frac=0.0, val_frac=0.0)
    prompts = [served.encode_prompt(t.prompt, t.tools) for t in tasks]
    assert prompts == [reference.encode_prompt(t.prompt, t.tools) for t in tasks]
    rows = prompts * 4
    seeds = list(range(100, 100 + len(rows)))
    gens = served.generate(rows, 24, temperature=0.7, seed=seeds)
    again = served.generate(rows[::-1], 24, temperature=0.7, seed=seeds[::-1])[::-1]
    assert [g.token_ids for g in gens] == [g.token_ids for g in again]  # a row's own seed
    assert len({tuple(g.token_ids) for g in gens}) > len(prompts)  # a group's samples differ
    model = AutoModelForCausalLM.from_pretrained(model_path)
    worst = 0.0
    for prompt, gen in zip(rows, gens, strict=True):
        assert len(gen.token_ids) == len(gen.logprobs) > 0
        if gen.finished:
            assert gen.token_ids[-1] == served.eos_id
        mine = teacher_forced_logprobs(model, prompt, gen.token_ids, temperature=0.7)
        worst = max(worst, *(abs(a - b) for a, b in zip(gen.logprobs, mine, strict=True)))
    assert worst < 1e-3, f"vLLM's sampling logprobs are {worst:.2e} off the model's"
    greedy = served.generate(prompts[:2], 12, greedy=True)
    assert greedy == served.generate(prompts[:2], 12, greedy=True)


@needs_vllm
def test_an_episode_plays_through_the_engine(served):
    tasks = build_tasks(ENV, 3, seed=4, heldout_frac=0.0, val_frac=0.0)

    async def go():
        async with EnvClient(app=build_app(ENV)) as client:
            return await run_episodes(
                client, ENV, served, tasks, Sampling(max_new_tokens=16), [1, 2, 3]
            )

    for episode in asyncio.run(go()):
        assert episode.turns >= 1 and isinstance(episode.reward, float)
        assert len(episode.completion_ids) == len(episode.logprobs) == len(episode.env_mask)


@needs_vllm
def test_close_ends_the_engine_process(served):  # the module's engine: keep this test last
    process = served.engine.process
    assert process.poll() is None
    served.close()
    assert process.poll() is not None
