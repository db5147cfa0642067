"""The ``vllm`` backend: an in-process vLLM engine behind the token-level Policy interface (GPU).

Prompt token ids in (``LLM.generate`` with ``{"prompt_token_ids": ...}`` prompts, vLLM's
``TokensPrompt``), token ids and the sampled token's logprob out (``logprobs=0``). The engine
runs with ``logprobs_mode="processed_logprobs"``, as TRL's colocated vLLM does, so logprobs are
those of the temperature-scaled distribution that was sampled from, like the transformers
backend's. Each prompt gets its own seed (``seed + i``), so a batch is reproducible prompt by
prompt. Text is decoded here with special tokens kept (vLLM's default drops them, and with them
the embedded model's ``<tool_call>`` markers).

vLLM is imported lazily: ``pip install 'gymflow[gpu]'`` provides it (TRL 1.16's ``vllm`` extra)
and it needs a CUDA GPU; without either, :func:`require_vllm` raises
``GymflowError(BACKEND_UNAVAILABLE)`` saying which is missing. :func:`load_vllm` (the
``vllm:PATH`` spec) then runs vLLM as its own process instead
(:mod:`gymflow.policy.vllm_served`): vLLM's CPU build, or a GPU build in its own environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.policy.base import Generation
from gymflow.policy.transformers_backend import TokenizerEncoding


def require_vllm() -> None:
    """Raise a kinded error unless vLLM imports and a CUDA GPU is visible."""
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"the vllm backend needs vLLM ({exc}): pip install 'gymflow[gpu]' on a CUDA machine, "
            "or use transformers:PATH",
        ) from None
    except Exception as exc:  # a broken CUDA install fails at import with all sorts of errors
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"vLLM is installed but does not import: {type(exc).__name__}: {exc}",
        ) from None
    import torch

    if not torch.cuda.is_available():
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            "the vllm backend needs a CUDA GPU and none is visible; use transformers:PATH",
        )


def load_vllm(path: str | Path):
    """The ``vllm:PATH`` policy: an in-process engine where vLLM imports here and a CUDA GPU is
    visible (:class:`VLLMPolicy`), else a ``vllm serve`` process from the vLLM environment
    (:class:`~gymflow.policy.vllm_served.VLLMServedPolicy`, ``make setup-vllm``; CPU or GPU),
    stopped by its ``close()`` or when the program exits. ``PATH`` may be a ``.gguf`` or
    ``catalog:NAME`` too: converted once into a folder, as the transformers backend does."""
    from gymflow.policy.checkpoints import CATALOG_PREFIX, checkpoint_folder
    from gymflow.policy.gguf_checkpoint import is_gguf

    converted = str(path).startswith(CATALOG_PREFIX) or is_gguf(str(path))
    if not converted and not Path(path).is_dir():
        raise GymflowError(FailureKind.BAD_REQUEST, f"no model folder at {str(path)!r}")
    try:
        require_vllm()
        in_process = True
    except GymflowError as missing:
        from gymflow.policy.vllm_engine import vllm_python

        try:
            vllm_python()
        except GymflowError as no_env:
            raise GymflowError(
                FailureKind.BACKEND_UNAVAILABLE, f"{missing.detail}; or {no_env.detail}"
            ) from None
        in_process = False
    folder = checkpoint_folder(path)
    if in_process:
        return VLLMPolicy.from_path(folder)
    from gymflow.policy.vllm_served import VLLMServedPolicy

    return VLLMServedPolicy.start(folder)


def sampling_kwargs(
    max_new_tokens: int, temperature: float, greedy: bool, seed: int | None
) -> dict[str, Any]:
    """``SamplingParams`` fields for one prompt (top-p/top-k left off: the full distribution)."""
    return {
        "n": 1,
        "max_tokens": max_new_tokens,
        "temperature": 0.0 if greedy else temperature,
        "seed": seed,
        "logprobs": 0,  # the sampled token's own logprob only
        "skip_special_tokens": False,
    }


def to_generation(output: Any, tokenizer: Any) -> Generation:
    """A vLLM ``CompletionOutput`` as a :class:`Generation` (EOS kept in ``token_ids``)."""
    token_ids = list(output.token_ids)
    if output.logprobs is None or len(output.logprobs) != len(token_ids):
        raise GymflowError(
            FailureKind.BACKEND_UNAVAILABLE, "vLLM returned no logprob for some sampled tokens"
        )
    logprobs = [float(step[t].logprob) for step, t in zip(output.logprobs, token_ids, strict=True)]
    # "stop" with no stop strings set means an EOS id ended it (generation_config may list
    # several, e.g. Qwen's <|im_end|> and <|endoftext|>), and vLLM keeps that id last.
    finished = output.finish_reason == "stop" and bool(token_ids)
    return Generation.decoded(token_ids, logprobs, finished, tokenizer)


class VLLMPolicy(TokenizerEncoding):
    """A :class:`~gymflow.policy.base.Policy` over ``vllm.LLM``; encodes like the transformers backend."""

    def __init__(self, llm: Any, tokenizer: Any) -> None:
        self.llm, self.tokenizer = llm, tokenizer
        self.eos_id = tokenizer.eos_token_id

    @classmethod
    def from_path(
        cls, path: str | Path, gpu_memory_utilization: float = 0.5, seed: int = 0, **engine: Any
    ) -> VLLMPolicy:
        """Load a checkpoint folder; ``engine`` goes to ``vllm.LLM`` (``max_model_len`` ...)."""
        require_vllm()
        from transformers import AutoTokenizer
        from vllm import LLM

        llm = LLM(
            model=str(path),
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            logprobs_mode="processed_logprobs",
            **engine,
        )
        return cls(llm, AutoTokenizer.from_pretrained(path))

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | list[int] | None = None,
    ) -> list[Generation]:
        from vllm import SamplingParams

        # vLLM seeds each request: a list is used as given, an int as seed + row
        seeds = (
            seed
            if isinstance(seed, list)
            else [None if seed is None else seed + i for i in range(len(prompts))]
        )
        params = [
            SamplingParams(**sampling_kwargs(max_new_tokens, temperature, greedy, s)) for s in seeds
        ]
        outputs = self.llm.generate(
            [{"prompt_token_ids": list(p)} for p in prompts], sampling_params=params, use_tqdm=False
        )
        return [to_generation(o.outputs[0], self.tokenizer) for o in outputs]


class VLLMServerPolicy(TokenizerEncoding):
    """A :class:`~gymflow.policy.base.Policy` over TRL's ``VLLMClient`` (a ``trl vllm-serve`` server).

    The GRPO stage uses it in TRL's server mode: TRL pushes the trainer's weights to the server
    before every call of our ``rollout_func``, so rollouts sample the current policy. Prompts go
    as token ids; one completion per prompt (``n=1``) with the sampled token's logprob. The
    server seeds a request as a whole, and a GRPO group repeats its prompt, so no seed is sent:
    one seed would make the group's samples identical.
    """

    def __init__(self, client: Any, tokenizer: Any) -> None:
        self.client, self.tokenizer = client, tokenizer
        self.eos_id = tokenizer.eos_token_id

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | list[int] | None = None,
    ) -> list[Generation]:
        out = self.client.generate(
            prompts=[list(p) for p in prompts],
            n=1,
            temperature=0.0 if greedy else temperature,
            max_tokens=max_new_tokens,
            logprobs=0,
            generation_kwargs={"skip_special_tokens": False},
        )
        completions, logprobs = out["completion_ids"], out["logprobs"]
        if len(completions) != len(prompts) or any(
            len(lp) != len(ids) for lp, ids in zip(logprobs, completions, strict=True)
        ):
            raise GymflowError(
                FailureKind.BACKEND_UNAVAILABLE,
                f"the vLLM server returned {len(completions)} completions (or logprobs that do "
                f"not match them) for {len(prompts)} prompts",
            )
        return [
            Generation.decoded(
                list(ids),
                [float(lp[0]) for lp in lps],
                bool(ids) and ids[-1] == self.eos_id,
                self.tokenizer,
            )  # fmt: skip
            for ids, lps in zip(completions, logprobs, strict=True)
        ]
