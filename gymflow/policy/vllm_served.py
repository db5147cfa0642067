"""The ``vllm`` backend over a gymflow-started ``vllm serve`` process (:mod:`.vllm_engine`).

The token-level contract of :class:`~gymflow.policy.base.Policy`: prompt token ids in, the
completion's token ids (EOS kept) and each sampled token's logprob out, through vLLM's
``/v1/completions`` (token-id prompts, ``return_token_ids``, ``logprobs: 0``). Prompts and tool
results are encoded here with the model folder's tokenizer, exactly as the transformers backend
encodes them, so an episode's tokens are the same whichever engine sampled it.

Seeds. A list (one per prompt, what the rollout driver sends) goes as one request per prompt,
each with its own seed, so a row's sample depends only on its prompt and seed, as on the
transformers backend. An int cannot seed a batch request (vLLM would give every prompt of it
that seed, and a GRPO group's samples would be equal), so the batch samples from the engine's
own generator, seeded once when it starts.

With ``adapter`` set, requests name that LoRA adapter (loaded into the engine at run time,
:meth:`~gymflow.policy.vllm_engine.VLLMEngine.load_lora`) instead of the base weights.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.policy.base import Generation
from gymflow.policy.transformers_backend import TokenizerEncoding
from gymflow.policy.vllm_engine import EngineOptions, VLLMEngine


class VLLMServedPolicy(TokenizerEncoding):
    """A :class:`~gymflow.policy.base.Policy` over a :class:`VLLMEngine`."""

    def __init__(
        self, engine: VLLMEngine, tokenizer, owns_engine: bool = False, max_parallel: int = 64
    ) -> None:
        self.engine, self.tokenizer, self.owns_engine = engine, tokenizer, owns_engine
        self.eos_id = tokenizer.eos_token_id
        self.adapter: str | None = None
        self.max_parallel = max_parallel

    @classmethod
    def start(cls, path: str | Path, options: EngineOptions | None = None) -> VLLMServedPolicy:
        """Start an engine on the model folder ``path``; :meth:`close` (or exit) stops it."""
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        return cls(VLLMEngine(path, options), tokenizer, owns_engine=True)

    def close(self) -> None:
        if self.owns_engine:
            self.engine.close()

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | list[int] | None = None,
    ) -> list[Generation]:
        if not prompts:
            return []
        body = {
            "model": self.adapter or self.engine.served_name,
            "max_tokens": max_new_tokens,
            "temperature": 0.0 if greedy else temperature,
            "top_p": 1.0,
            "top_k": 0,  # the full distribution: the logprobs are the policy's own
            "logprobs": 0,  # the sampled token's own logprob only
            "return_token_ids": True,
            "skip_special_tokens": False,  # the tool-call markers are part of the turn
        }
        if not isinstance(seed, list) or greedy:
            return self._answers(self.engine.post("/v1/completions", body | {"prompt": prompts}))
        if len(seed) != len(prompts):
            raise ValueError(f"{len(seed)} seeds for {len(prompts)} prompts")

        def one(i: int) -> Generation:
            request = body | {"prompt": list(prompts[i]), "seed": seed[i]}
            return self._answers(self.engine.post("/v1/completions", request))[0]

        # every request is in the engine at once, so it still batches them
        with ThreadPoolExecutor(min(self.max_parallel, len(prompts))) as pool:
            return list(pool.map(one, range(len(prompts))))

    def _answers(self, response: dict) -> list[Generation]:
        choices = sorted(response.get("choices", []), key=lambda c: c["index"])
        return [self._generation(c) for c in choices]

    def _generation(self, choice: dict) -> Generation:
        ids = list(choice.get("token_ids") or [])
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs") or []
        if len(logprobs) != len(ids) or any(lp is None for lp in logprobs):
            raise GymflowError(
                FailureKind.BACKEND_UNAVAILABLE,
                f"the vLLM engine returned {len(logprobs)} logprobs for {len(ids)} tokens",
            )
        # "stop" without stop strings: an EOS id ended it, and vLLM keeps that id last
        finished = choice.get("finish_reason") == "stop" and bool(ids)
        return Generation.decoded(ids, [float(lp) for lp in logprobs], finished, self.tokenizer)
