"""GRPO's settings nested by concern: ``grpo.rollout`` (one engine of five, each with its own
settings) and ``grpo.loss``. The flat keys they replaced are refused naming what to write, and a
run saved with them resumes with the same meaning."""

from __future__ import annotations

import json

import pytest

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.run_config import migrate_saved, parse_sets, run_config
from gymflow.train.grpo_settings import GRPOSettings, nested_grpo

# what an earlier version saved in config.json (every flat field, defaults included)
FLAT_DEFAULTS = {
    "engine": "local", "ray_workers": 2, "ray_address": None, "vllm": "off",
    "vllm_server_url": None, "vllm_gpu_memory_utilization": 0.3, "agents": None,
}  # fmt: skip

AGENTS = {"programs": ["examples/agents/langgraph_agent.py:run"], "concurrency": 4}

MIGRATED = [
    ({}, {"engine": "local"}),
    ({"engine": "ray", "ray_workers": 3, "ray_address": "10.0.0.2:6379"},
     {"engine": "ray", "workers": 3, "address": "10.0.0.2:6379"}),
    ({"vllm": "managed"}, {"engine": "vllm"}),
    ({"vllm": "colocate", "vllm_gpu_memory_utilization": 0.5},
     {"engine": "trl_vllm", "mode": "colocate", "gpu_memory_utilization": 0.5}),
    ({"vllm": "server", "vllm_server_url": "http://10.0.0.5:8000"},
     {"engine": "trl_vllm", "mode": "server", "server_url": "http://10.0.0.5:8000",
      "gpu_memory_utilization": 0.3}),
    ({"agents": AGENTS}, {"engine": "agents", **AGENTS}),
]  # fmt: skip


@pytest.mark.parametrize(("flat", "rollout"), MIGRATED)
def test_a_run_saved_with_the_flat_keys_resumes_with_the_same_engine(flat, rollout):
    saved = LifecycleConfig.smoke().model_dump(mode="json")
    saved["grpo"].pop("rollout")
    saved["grpo"] |= FLAT_DEFAULTS | flat
    loss = saved["grpo"].pop("loss")
    saved["grpo"] |= {"loss_type" if key == "type" else key: v for key, v in loss.items()}
    resumed = LifecycleConfig.model_validate(migrate_saved(saved))  # what run_config reads
    assert resumed.grpo.rollout.model_dump(exclude_unset=False) == (
        type(resumed.grpo.rollout).model_validate(rollout).model_dump()
    )
    assert resumed.grpo.model_dump(exclude={"rollout"}) == (
        LifecycleConfig.smoke().grpo.model_dump(exclude={"rollout"})
    )  # the loss's keys found their place, nothing else moved


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["grpo.engine=ray", "grpo.ray_workers=4"],
         'grpo: engine, ray_workers: moved into grpo.rollout; write "rollout": '
         '{"engine": "ray", "workers": 4}'),
        (["grpo.vllm=managed"], 'write "rollout": {"engine": "vllm"}'),
        (["grpo.beta=0.04", "grpo.loss_type=grpo"],
         'grpo: loss_type, beta: moved into grpo.loss; write "loss": {"type": "grpo", "beta": 0.04}'),
        (["grpo.engine=ray", "grpo.vllm=managed"], "one rollout engine at a time, not ray and vllm"),
        (["grpo.rollout.address=10.0.0.2:6379"],
         'grpo.rollout.address: not a setting of rollout engine "local"'),
        (["grpo.rollout.engine=rayy"], "does not match any of the expected tags: 'local', 'ray'"),
        (["grpo.rollout.engine=trl_vllm", "grpo.device=cpu"],
         'rollout engine "trl_vllm" needs the GPU'),
        (["grpo.rollout.engine=ray", 'grpo.lora={"r": 8}'], 'rollout engine "ray" rolls out full'),
    ],  # fmt: skip
)
def test_a_wrong_engine_setting_is_one_line_naming_what_to_write(sets, message):
    with pytest.raises(GymflowError) as caught:
        run_config(sets=parse_sets(sets))
    assert caught.value.kind is FailureKind.BAD_CONFIG
    assert message in caught.value.detail and "\n" not in caught.value.detail


def test_a_run_saved_with_the_flat_loss_keys_resumes_with_the_same_loss():
    saved = LifecycleConfig.smoke().model_dump(mode="json")
    saved["grpo"].pop("loss"), saved["grpo"].pop("rollout")
    saved["grpo"] |= FLAT_DEFAULTS | {
        "loss_type": "grpo", "beta": 0.04, "importance_sampling_level": "sequence",
        "scale_rewards": "none", "epsilon_high": 0.2,
    }  # fmt: skip
    loss = LifecycleConfig.model_validate(migrate_saved(saved)).grpo.loss
    assert loss.model_dump() == {
        "type": "grpo", "beta": 0.04, "importance_sampling_level": "sequence",
        "scale_rewards": "none", "epsilon_high": 0.2,
    }  # fmt: skip


def test_another_engine_set_on_top_starts_from_its_own_defaults():
    ray = run_config(sets=parse_sets(["grpo.rollout.engine=ray", "grpo.rollout.workers=4"]))
    assert (ray.grpo.rollout.engine, ray.grpo.rollout.workers) == ("ray", 4)
    more = ray.overridden(parse_sets(["grpo.rollout.workers=6"]))  # same engine: merged
    assert (more.grpo.rollout.engine, more.grpo.rollout.workers) == ("ray", 6)
    local = ray.overridden({"grpo": {"rollout": {"engine": "local"}}})  # workers not carried
    assert local.grpo.rollout.model_dump() == {"engine": "local"}


def test_the_new_keys_round_trip_through_a_saved_config(tmp_path):
    cfg = LifecycleConfig.smoke().overridden(
        {"grpo": {"rollout": {"engine": "ray", "workers": 3, "address": "10.0.0.2:6379"}}}
    )
    path = tmp_path / "config.json"
    path.write_text(cfg.model_dump_json())
    assert run_config(path) == cfg
    assert nested_grpo(cfg.model_dump()["grpo"]) == cfg.model_dump()["grpo"]


def test_the_shipped_agents_dataset_names_its_programs_in_the_agents_engine():
    from pathlib import Path

    raw = json.loads((Path(__file__).parents[1] / "datasets/external-agent.json").read_text())
    engine = GRPOSettings.model_validate(raw["grpo"]).rollout
    assert engine.engine == "agents" and len(engine.programs) == 2
