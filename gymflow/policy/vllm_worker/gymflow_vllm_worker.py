"""Runs inside the vLLM engine process (its own environment), not in gymflow's: stdlib, torch,
safetensors and vLLM only.

:class:`WeightLoader` is the engine's ``--worker-extension-cls``
(:mod:`gymflow.policy.vllm_engine` puts this folder on the engine's ``PYTHONPATH``): its
methods become worker methods that vLLM's ``/collective_rpc`` route can call.

Why not vLLM's ``reload_weights`` alone: it re-creates each layer's tensors (and repacks them
for the CPU kernels), and a layer whose weights the folder lacks gets its old tensors back. A
model whose output layer shares the embedding's weights (SmolLM2, the embedded tiny model)
has no ``lm_head.weight`` in its folder, so after a reload the output layer keeps the *old*
embedding (and, on a CPU, its packed copy of it) while the input side has the new one
(measured: logprobs 0.4-0.9 nats off the trainer's). Tying the two again and re-packing the
output layer after the reload puts them back in step (then 1e-6).
"""

from __future__ import annotations

from pathlib import Path


class WeightLoader:
    """Worker methods for gymflow's weight sync (``self`` is vLLM's worker)."""

    def gymflow_load_weights(self, folder: str) -> int:
        """Reload every weight from the ``*.safetensors`` files in ``folder``, re-tie a shared
        embedding, and return how many tensors the folder held."""
        from safetensors import safe_open

        files = sorted(Path(folder).glob("*.safetensors"))
        count = 0
        for path in files:
            with safe_open(str(path), framework="pt") as f:
                count += len(list(f.keys()))
        if not count:
            return 0
        self.reload_weights(weights_path=folder)
        model = self.model_runner.get_model()
        config = self.model_runner.model_config.hf_text_config
        embed = getattr(getattr(model, "model", None), "embed_tokens", None)
        head = getattr(model, "lm_head", None)
        if getattr(config, "tie_word_embeddings", False) and embed is not None and head is not None:
            head.weight = embed.weight
            # the CPU kernels keep a packed copy of the output layer's weight (``cpu_linear``)
            # made from the old tensor; make it again from the new one
            head.quant_method.process_weights_after_loading(head)
        return count
