"""GRPO's vLLM path (TRL colocate / server mode), as far as it runs without a GPU.

TRL syncs the trainer's weights into its vLLM engine before every ``rollout_func`` call; our
part is to configure that (``trainer_config``), to roll out with that engine
(``rollout_policy``) and to map the server client's answers (``VLLMServerPolicy``). The engine
and the client need vLLM and a CUDA GPU, so they are stand-ins here shaped like TRL's
(``VLLMGeneration.mode/.llm/.vllm_client``; ``VLLMClient.generate``'s documented return).
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.policy.vllm_backend import VLLMPolicy, VLLMServerPolicy
from gymflow.train.grpo import GRPOSettings, rollout_policy, trainer_config


@pytest.fixture(scope="module")
def tokenizer(micro_tool_call_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(micro_tool_call_model)


def test_trainer_config_turns_trl_vllm_on_only_when_asked(tmp_path):
    off = trainer_config(GRPOSettings(), tmp_path, log_to_mlflow=False)
    assert off.use_vllm is False and off.use_cpu is True
    served = GRPOSettings(
        rollout={"engine": "trl_vllm", "mode": "server", "server_url": "http://10.0.0.5:8000"}
    )
    cfg = trainer_config(served, tmp_path, log_to_mlflow=False)
    assert (cfg.use_vllm, cfg.vllm_mode, cfg.vllm_server_base_url) == (
        True, "server", "http://10.0.0.5:8000",
    )  # fmt: skip
    assert cfg.use_cpu is False and cfg.vllm_importance_sampling_correction is True
    colocated = trainer_config(
        GRPOSettings(rollout={"engine": "trl_vllm"}), tmp_path, log_to_mlflow=False
    )
    assert colocated.vllm_mode == "colocate" and colocated.vllm_gpu_memory_utilization == 0.3
    with pytest.raises(ValueError, match="does not match any of the expected tags"):
        GRPOSettings(rollout={"engine": "remote"})
    with pytest.raises(ValueError, match='server_url is for mode "server"'):
        GRPOSettings(rollout={"engine": "trl_vllm", "server_url": "http://10.0.0.5:8000"})


def test_rollouts_sample_from_the_engine_trl_just_synced(micro_tool_call_model, tokenizer):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(micro_tool_call_model)

    def trainer(**engine):  # the attributes of GRPOTrainer that rollout_policy reads
        generation = SimpleNamespace(**engine) if engine else None
        return SimpleNamespace(
            use_vllm=bool(engine), model=model, processing_class=tokenizer,
            vllm_generation=generation,
        )  # fmt: skip

    assert isinstance(rollout_policy(trainer()), TransformersPolicy)
    llm, client = object(), object()
    policy = rollout_policy(trainer(mode="colocate", llm=llm))
    assert isinstance(policy, VLLMPolicy) and policy.llm is llm
    policy = rollout_policy(trainer(mode="server", vllm_client=client))
    assert isinstance(policy, VLLMServerPolicy) and policy.client is client


class RecordingClient:
    """Answers like TRL's ``VLLMClient.generate``: ids per prompt, logprobs [seq][token][k]."""

    def __init__(self, completions: list[list[int]], logprobs: list[list[list[float]]]):
        self.completions, self.logprobs, self.calls = completions, logprobs, []

    def generate(self, **kwargs):
        self.calls.append(kwargs)
        return {
            "prompt_ids": kwargs["prompts"],
            "completion_ids": self.completions,
            "logprobs": self.logprobs,
            "logprob_token_ids": [[[t] for t in ids] for ids in self.completions],
        }


def test_server_answers_map_to_generations(tokenizer):
    eos = tokenizer.eos_token_id
    a, b = tokenizer("<tool_call>7", add_special_tokens=False)["input_ids"][:2]
    client = RecordingClient([[a, b, eos], [a, b]], [[[-0.1], [-0.2], [-0.3]], [[-0.4], [-0.5]]])
    policy = VLLMServerPolicy(client, tokenizer)
    done, cut = policy.generate([[5, 6], [5, 6]], 16, temperature=0.7, seed=[1, 2])
    assert done.token_ids == [a, b, eos] and done.logprobs == [-0.1, -0.2, -0.3]
    assert done.finished and done.text == "<tool_call>7"  # special tokens kept, EOS not in text
    assert not cut.finished and cut.token_ids == [a, b]
    (call,) = client.calls
    assert call["prompts"] == [[5, 6], [5, 6]] and call["n"] == 1 and call["logprobs"] == 0
    assert call["temperature"] == 0.7 and call["max_tokens"] == 16
    assert "seed" not in call["generation_kwargs"]  # one seed would make a group's samples equal
    greedy = RecordingClient([[a]], [[[-0.1]]])
    VLLMServerPolicy(greedy, tokenizer).generate([[5]], 4, greedy=True)
    assert greedy.calls[-1]["temperature"] == 0.0


def test_a_short_server_answer_is_a_kinded_error(tokenizer):
    client = RecordingClient([[1, 2]], [[[-0.1]]])  # one logprob for two tokens
    with pytest.raises(GymflowError) as err:
        VLLMServerPolicy(client, tokenizer).generate([[5]], 4)
    assert err.value.kind == FailureKind.BACKEND_UNAVAILABLE
    with pytest.raises(GymflowError, match="1 completions"):
        VLLMServerPolicy(RecordingClient([[1]], [[[-0.1]]]), tokenizer).generate([[5], [6]], 4)


HAS_GPU = importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


@pytest.mark.skipif(not HAS_GPU, reason="needs vLLM (pip install 'gymflow[gpu]') and a CUDA GPU")
def test_grpo_steps_with_colocated_vllm(micro_tool_call_model, tmp_path):
    """Where a GPU is lent: two real GRPO steps, rollouts sampled by TRL's colocated vLLM."""
    from gymflow.data.task_set import build_tasks
    from gymflow.env.resources_server import build_app
    from gymflow.environments.counter.environment import CounterEnvironment
    from gymflow.train.grpo import RolloutSource, run_grpo

    env = CounterEnvironment()
    pool = build_tasks(env, 16, seed=3, heldout_frac=0.0, val_frac=0.0)
    batches = []
    settings = GRPOSettings(
        max_steps=2, prompts_per_step=2, num_generations=4, max_new_tokens=12, save_every=1000,
        time_budget_s=None, dynamic_sampling=False, rollout={"engine": "trl_vllm"},
    )  # fmt: skip
    source = RolloutSource(
        env, build_app(env), pool, settings, on_batch=lambda eps, *_: batches.append(eps)
    )
    result = run_grpo(micro_tool_call_model, tmp_path, source, settings, log_to_mlflow=False)
    assert result["steps"] == 2 and len(batches) == 2
    assert all(len(e.logprobs) == len(e.completion_ids) for b in batches for e in b)
