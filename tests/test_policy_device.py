"""Where the transformers policy runs: ``device`` picks it, generation follows the model's weights.

On a machine without a GPU the CUDA cases check the refusal; on one with a GPU (the lent device
machine) they check that CUDA generates what the CPU generates.
"""

from __future__ import annotations

import pytest
import torch

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.data.task_set import build_tasks
from gymflow.env.registry import get_env
from gymflow.policy.device import model_device, torch_device
from gymflow.policy.transformers_backend import TransformersPolicy

GPU = torch.cuda.is_available()


def test_auto_is_cuda_exactly_when_torch_sees_a_gpu():
    assert torch_device("auto").type == ("cuda" if GPU else "cpu")
    assert torch_device("cpu") == torch.device("cpu")


def test_an_unknown_device_is_a_bad_request_that_names_the_choices():
    with pytest.raises(GymflowError) as caught:
        torch_device("tpu")
    assert caught.value.kind == FailureKind.BAD_REQUEST
    assert "'tpu'" in str(caught.value) and "auto, cpu, cuda" in str(caught.value)


@pytest.mark.skipif(GPU, reason="checks the refusal on a machine without a GPU")
def test_cuda_without_a_gpu_is_refused_before_loading(tmp_path):
    with pytest.raises(GymflowError) as caught:  # the folder does not exist: not even looked at
        TransformersPolicy.from_path(tmp_path / "nothing", device="cuda")
    assert caught.value.kind == FailureKind.BAD_REQUEST
    assert "sees no CUDA GPU" in str(caught.value)


@pytest.fixture(scope="module")
def prompts(micro_tool_call_model):
    env = get_env("tool_call")
    policy = TransformersPolicy.from_path(micro_tool_call_model, device="cpu")
    tasks = build_tasks(env, 12, seed=4, heldout_frac=0.0, val_frac=0.0)
    # two copies of the first prompt: the shared-prefill path (KV rows selected) runs too
    return [policy.encode_prompt(t.prompt, t.tools) for t in [tasks[0], *tasks[:4]]]


def test_cpu_policy_keeps_its_model_and_generates_there(micro_tool_call_model, prompts):
    policy = TransformersPolicy.from_path(micro_tool_call_model, device="cpu")
    assert model_device(policy.model).type == "cpu"
    outs = policy.generate(prompts, 12, seed=[1, 2, 3, 4, 5])
    assert [len(o.token_ids) for o in outs] == [len(o.logprobs) for o in outs]
    assert all(0 < len(o.token_ids) <= 12 for o in outs)


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_cuda_generates_what_the_cpu_generates(micro_tool_call_model, prompts):
    cpu = TransformersPolicy.from_path(micro_tool_call_model, device="cpu")
    gpu = TransformersPolicy.from_path(micro_tool_call_model, device="cuda")
    assert model_device(gpu.model).type == "cuda"
    for kw in ({"greedy": True}, {"seed": [11, 12, 13, 14, 15]}):
        on_cpu, on_gpu = cpu.generate(prompts, 12, **kw), gpu.generate(prompts, 12, **kw)
        assert [o.token_ids for o in on_gpu] == [o.token_ids for o in on_cpu], kw
        pairs = zip(on_gpu, on_cpu, strict=True)
        diffs = [abs(a - b) for g, c in pairs for a, b in zip(g.logprobs, c.logprobs, strict=True)]
        assert max(diffs) < 1e-3, (kw, max(diffs))


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_a_policy_built_on_a_moved_model_follows_it(micro_tool_call_model, prompts):
    """What GRPO's rollout policy is: the trainer's model, moved to CUDA by accelerate."""
    loaded = TransformersPolicy.from_path(micro_tool_call_model, device="cpu")
    moved = TransformersPolicy(loaded.model.to("cuda"), loaded.tokenizer)
    outs = moved.generate(prompts, 8, greedy=True)
    assert len(outs) == len(prompts) and all(o.token_ids for o in outs)


def test_trainers_train_where_their_device_setting_says(tmp_path):
    """SFT's and GRPO's TRL configs: ``auto`` trains on CUDA exactly when torch sees a GPU,
    ``cpu`` always on the CPU; TRL's vLLM modes (GPU only) are refused with ``cpu``, the
    managed engine (vLLM's CPU build in its own process) is not."""
    from gymflow.train.grpo import GRPOSettings, trainer_config

    assert trainer_config(GRPOSettings(), tmp_path, False).use_cpu is not GPU
    assert trainer_config(GRPOSettings(device="cpu"), tmp_path, False).use_cpu is True
    for mode in ("colocate", "server"):
        with pytest.raises(ValueError, match='rollout engine "trl_vllm" needs the GPU'):
            GRPOSettings(rollout={"engine": "trl_vllm", "mode": mode}, device="cpu")
    assert GRPOSettings(rollout={"engine": "vllm"}, device="cpu").rollout.engine == "vllm"


@pytest.mark.skipif(GPU, reason="checks the refusal on a machine without a GPU")
def test_a_cuda_trainer_without_a_gpu_is_refused_before_any_stage():
    from gymflow.lifecycle.run_config import run_config

    for field in ("sft", "grpo"):
        with pytest.raises(GymflowError) as caught:
            run_config(overrides={field: {"device": "cuda"}}, smoke=True)
        assert caught.value.kind == FailureKind.BAD_CONFIG
        assert str(caught.value).count(f"{field}.device: device 'cuda'") == 1
