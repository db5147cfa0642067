"""Where GRPO's rollouts run: ``grpo.rollout``, one engine of five, each with its own settings.

The engine is a tagged union on ``engine``, so settings that belong to another engine cannot be
written (a Ray address on the local engine, a vLLM server URL with agent programs); what is left
to check across settings (no LoRA on Ray workers, TRL's vLLM modes only on a GPU) is checked by
:class:`gymflow.train.grpo_settings.GRPOSettings`.

>>> from pydantic import TypeAdapter
>>> TypeAdapter(RolloutEngine).validate_python({"engine": "ray", "workers": 4}).address is None
True
>>> flat_to_nested({"engine": "ray", "ray_workers": 4, "learning_rate": 1e-4})
{'learning_rate': 0.0001, 'rollout': {'engine': 'ray', 'workers': 4}}
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gymflow.agent.settings import ExternalAgentSettings


class LocalEngine(BaseModel):
    """The trainer's own model generates, in the trainer's process (the CPU path)."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["local"] = "local"


class RayEngine(BaseModel):
    """Ray rollout workers given the trainer's weights through the object store before each
    step (gymflow.train.ray_rollouts); the rows are stored here the same way."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["ray"]
    workers: int = Field(2, ge=1, description="Rollout workers (Ray actors).")
    address: str | None = Field(
        None, description="A running cluster (default: a local one, started and stopped)."
    )


class ManagedVLLMEngine(BaseModel):
    """A `vllm serve` process gymflow starts from the vLLM environment (`make setup-vllm`; CPU
    or GPU) and gives the weights, full or the LoRA adapter, before each batch
    (gymflow.policy.vllm_sync)."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["vllm"]


class TRLVLLMEngine(BaseModel):
    """TRL's own vLLM engine (GPU, the `gpu` extra): in the trainer's process ("colocate") or a
    `trl vllm-serve` server ("server"); TRL syncs the weights before each batch."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["trl_vllm"]
    mode: Literal["colocate", "server"] = Field("colocate", description="TRL's `vllm_mode`.")
    server_url: str | None = Field(None, description='"server": the server\'s URL.')
    gpu_memory_utilization: float = Field(
        0.3, gt=0.0, le=1.0, description='"colocate": the GPU share vLLM may take.'
    )

    @model_validator(mode="after")
    def _url_for_server(self) -> TRLVLLMEngine:
        if self.server_url and self.mode != "server":
            raise ValueError('server_url is for mode "server"')
        return self


class AgentsEngine(ExternalAgentSettings):
    """External agent programs (LangGraph, the OpenAI Agents SDK, any code with an OpenAI
    client) play the episodes: the policy being trained is served behind gymflow's capturing
    proxy and each program is pointed at it (gymflow.agent.training)."""

    engine: Literal["agents"]


RolloutEngine = Annotated[
    LocalEngine | RayEngine | ManagedVLLMEngine | TRLVLLMEngine | AgentsEngine,
    Field(discriminator="engine"),
]
"""GRPO's rollout engine, chosen by its ``engine`` key."""

FLAT_KEYS = (
    "engine", "ray_workers", "ray_address", "vllm", "vllm_server_url",
    "vllm_gpu_memory_utilization", "agents",
)  # fmt: skip
"""The flat ``grpo.*`` keys that ``grpo.rollout`` replaced."""


def flat_to_nested(grpo: dict) -> dict:
    """``grpo`` settings written with the flat engine keys, with ``rollout`` in their place and
    the same meaning (the chosen engine's own settings kept, the others' dropped, as the flat
    settings ignored them); a ``ValueError`` for flat keys that name two engines at once."""
    flat = {key: grpo[key] for key in FLAT_KEYS if key in grpo}
    out = {key: value for key, value in grpo.items() if key not in FLAT_KEYS}
    if not flat:
        return out
    if "rollout" in grpo:
        raise ValueError(f"write the engine once: {', '.join(flat)} and rollout both given")
    vllm = flat.get("vllm", "off")
    ray = flat.get("engine", "local") == "ray"
    agents = flat.get("agents")
    chosen = [name for name, on in (("ray", ray), ("vllm", vllm != "off"), ("agents", agents))
              if on]  # fmt: skip
    if len(chosen) > 1:
        raise ValueError(f"one rollout engine at a time, not {' and '.join(chosen)}")
    ray_keys = {"ray_workers": "workers", "ray_address": "address"}
    vllm_keys = {"vllm_gpu_memory_utilization": "gpu_memory_utilization"}
    if vllm == "server":
        vllm_keys["vllm_server_url"] = "server_url"
    if ray:
        rollout = {"engine": "ray"}
        rollout |= {new: flat[old] for old, new in ray_keys.items() if flat.get(old) is not None}
    elif vllm == "managed":
        rollout = {"engine": "vllm"}
    elif vllm in ("colocate", "server"):
        rollout = {"engine": "trl_vllm", "mode": vllm}
        rollout |= {new: flat[old] for old, new in vllm_keys.items() if flat.get(old) is not None}
    elif agents:
        rollout = {"engine": "agents", **agents}
    else:
        rollout = {"engine": "local"}
    return out | {"rollout": rollout}


def moved_keys_error(grpo: dict) -> str | None:
    """What to write instead of the flat engine keys in ``grpo`` (None when there are none)."""
    flat = [key for key in FLAT_KEYS if key in grpo]
    if not flat:
        return None
    flat_only = {key: value for key, value in grpo.items() if key != "rollout"}  # a base's
    try:
        rollout = json.dumps(flat_to_nested(flat_only)["rollout"])
    except ValueError as exc:
        return f"{', '.join(flat)}: moved into grpo.rollout ({exc})"
    return f"{', '.join(flat)}: moved into grpo.rollout; write \"rollout\": {rollout}"
