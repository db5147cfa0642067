"""Keep a gymflow-started vLLM engine serving the trainer's current weights (GRPO's rollouts).

GRPO's ``"vllm"`` rollout engine (:class:`gymflow.train.grpo.GRPOSettings`) rolls out with a
``vllm serve`` process (:mod:`gymflow.policy.vllm_engine`) instead of the training model.
Before every rollout batch whose optimizer step differs from the one the engine last got,
:meth:`SyncedEngine.policy` pushes the trainer's weights into it:

* full weights: the model's state is saved as safetensors into a folder in shared memory
  (``/dev/shm`` where it exists) and the engine reloads every tensor from it in place
  (:meth:`~gymflow.policy.vllm_engine.VLLMEngine.reload_weights`);
* LoRA (a PEFT model): only the adapter is saved, and vLLM's runtime LoRA loading replaces
  the served adapter in place; requests then name it (the base weights never change).

So the tokens and logprobs a step trains on come from the weights the step starts from, as
with the training model generating. TRL's importance-sampling correction for engine/trainer
mismatch is TRL's own vLLM path's and is not applied here: both run fp32, and
``tests/test_vllm_grpo.py`` measures the two agree within 1e-3 nats per token.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from gymflow.policy.vllm_engine import EngineOptions, options_for
from gymflow.policy.vllm_served import VLLMServedPolicy

ADAPTER = "policy-lora"
"""The name the trained LoRA adapter is served under."""


def is_peft(model) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def model_folder(model) -> str:
    """The folder the (base) model was loaded from."""
    base = model.get_base_model() if is_peft(model) else model
    return base.config._name_or_path


def shared_memory_dir() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


class SyncedEngine:
    """A vLLM engine started on the trainer's model at the first batch and synced per step."""

    def __init__(self, options: EngineOptions | None = None) -> None:
        """``options``: how to start the engine (default: :func:`options_for` the model)."""
        self.options = options
        self.served: VLLMServedPolicy | None = None
        self.synced_step: int | None = None
        self.folder = Path(
            tempfile.mkdtemp(prefix="gymflow-vllm-weights-", dir=shared_memory_dir())
        )
        self.sync_s = 0.0
        """Seconds spent saving and loading weights, summed over the run."""
        self.syncs = 0

    def policy(self, trainer) -> VLLMServedPolicy:
        """The engine as a policy, holding the weights of ``trainer``'s current step."""
        model = trainer.model
        if self.served is None:
            folder = model_folder(model)
            options = self.options or options_for(folder)
            if is_peft(model) and options.lora_rank is None:
                rank = max(c.r for c in model.peft_config.values())
                options = replace(options, lora_rank=rank)
            self.served = VLLMServedPolicy.start(folder, options)
        step = trainer.state.global_step
        if self.synced_step != step:
            self.push(model)
            self.synced_step = step
        return self.served

    def push(self, model) -> None:
        """Put ``model``'s weights (or its LoRA adapter) into the engine."""
        started = time.perf_counter()
        target = self.folder / f"sync-{self.syncs % 2}"  # never overwrite what is loading
        shutil.rmtree(target, ignore_errors=True)
        if is_peft(model):
            model.save_pretrained(target)  # the adapter alone
            self.served.engine.load_lora(ADAPTER, target)
            self.served.adapter = ADAPTER
        else:
            model.save_pretrained(target, safe_serialization=True)
            self.served.engine.reload_weights(target)
        self.syncs += 1
        self.sync_s += time.perf_counter() - started

    def close(self) -> None:
        if self.served is not None:
            self.served.close()
            self.served = None
        shutil.rmtree(self.folder, ignore_errors=True)
