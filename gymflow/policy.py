"""Policy backends behind one interface, and the transformers backend.

Two kinds of backend:

* token-level (:class:`Policy`): token ids in, token ids + sampling logprobs out. The agent loop
  builds the exact token view training needs. ``transformers`` (here), ``vllm``
  (:mod:`gymflow.vllm_policy`) and :class:`~gymflow.scripted_policy.ScriptedPolicy`.
* message-level (:class:`ChatPolicy`): chat messages in, an assistant turn out (text and/or
  structured tool calls). ``openai`` (:mod:`gymflow.openai_policy`): any OpenAI-compatible server,
  vLLM serve, SGLang, a hosted API. Token ids and logprobs come back only when the server sends
  them (vLLM's ``return_token_ids``); without them an episode can be evaluated, not trained on.

:func:`gymflow.policy_spec.load_policy` picks one from a spec string.

The transformers backend generates for many episodes at once (left-padded batches), which is
where CPU throughput comes from (~4,600 tokens/s at batch 64 vs ~280 at batch 1 for the 3.6 M
model). Sampling uses the full distribution (``top_k=0, top_p=1``) so the logprobs returned are
the policy's own, as GRPO's importance ratio assumes. torch is imported inside the methods so
that message-level users (and the CLI) do not pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gymflow.failures import GymflowError


@dataclass(frozen=True)
class Generation:
    token_ids: list[int]
    """Completion tokens, ending with EOS when ``finished``."""
    logprobs: list[float]
    text: str
    """Decoded completion without EOS / padding (special tool-call tokens kept)."""
    finished: bool

    @classmethod
    def decoded(
        cls, token_ids: list[int], logprobs: list[float], finished: bool, tokenizer
    ) -> Generation:
        """A turn from its ids: the text is the ids decoded with special tokens kept, minus the
        final EOS when ``finished`` (every backend builds its turns this way)."""
        body = token_ids[:-1] if finished else token_ids
        return cls(token_ids, logprobs, tokenizer.decode(body, skip_special_tokens=False), finished)


class Policy(Protocol):
    """What the agent loop needs from a token-level backend.

    A backend that also has ``encode_assistant(text) -> ids`` (one assistant turn, ending with
    EOS) can be served over HTTP for whole conversations (:mod:`gymflow.openai_server`).
    """

    def encode_prompt(self, messages: list[dict], tools: list[dict] | None) -> list[int]: ...

    def encode_observation(self, output: str, last: bool = True) -> list[int]:
        """Token ids of a tool result turn; the last result of a turn adds the next assistant
        header (several results of one turn follow each other, as the chat template writes)."""
        ...

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | list[int] | None = None,
    ) -> list[Generation]:
        """One turn per prompt. ``seed``: an int seeds the batch (a row's draws then depend on
        its batch-mates too); a list gives every prompt its own seed, so a row's sample depends
        only on its prompt and its seed, whatever else shares the batch."""
        ...


@dataclass(frozen=True)
class ChatRequest:
    """One model turn asked of a message-level backend."""

    messages: list[dict]
    """The conversation so far, OpenAI chat format (assistant ``tool_calls``, ``tool`` results)."""
    tools: list[dict] | None
    max_tokens: int
    temperature: float = 1.0
    """0 asks for greedy decoding."""
    seed: int | None = None


@dataclass(frozen=True)
class ChatTurn:
    """One assistant turn from a message-level backend, or the error that replaced it."""

    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    """Structured calls as the server sent them: ``{"id", "type", "function": {name, arguments}}``."""
    finished: bool = True
    """False when the turn hit ``max_tokens`` (``finish_reason == "length"``)."""
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    """Sampling logprob of each of ``token_ids``; all three only when the server returns them."""
    error: GymflowError | None = None
    """Set when no usable answer came back (after capped retries); the rest is empty then."""


class ChatPolicy(Protocol):
    """What the agent loop needs from a message-level backend.

    ``chat`` answers every request (concurrently, in order) and never raises for one request's
    failure: that request's turn carries ``error`` with a kind, so one bad answer ends one
    episode, not the batch.
    """

    async def chat(self, requests: list[ChatRequest]) -> list[ChatTurn]: ...


def is_chat_policy(policy: object) -> bool:
    return callable(getattr(policy, "chat", None))


class TokenizerEncoding:
    """Prompt, observation and assistant-turn encoding with a transformers tokenizer.

    Shared by the transformers and vLLM backends. The observation turn is ChatML (the embedded
    model's template, :mod:`gymflow.chat_template`): the same text the template renders for a
    ``tool`` message, so a conversation encodes to the same ids in-process and through
    :mod:`gymflow.openai_server`.
    """

    tokenizer: object
    eos_id: int

    def encode_prompt(self, messages: list[dict], tools: list[dict] | None) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        return list(ids)

    def encode_observation(self, output: str, last: bool = True) -> list[int]:
        text = "\n<|im_start|>tool\n" + output + "<|im_end|>"
        if last:
            text += "\n<|im_start|>assistant\n"
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def encode_assistant(self, text: str) -> list[int]:
        """One assistant turn's ids (re-tokenized from text) ending with EOS."""
        return [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.eos_id]


class TransformersPolicy(TokenizerEncoding):
    def __init__(self, model, tokenizer, batch_size: int = 64) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    @classmethod
    def from_path(cls, path: str | Path, batch_size: int = 64) -> TransformersPolicy:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.eval()
        return cls(model, tokenizer, batch_size)

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        seed: int | list[int] | None = None,
    ) -> list[Generation]:
        import torch

        row_seeds = seed if isinstance(seed, list) else None
        if row_seeds is not None and len(row_seeds) != len(prompts):
            raise ValueError(f"{len(row_seeds)} seeds for {len(prompts)} prompts")
        if isinstance(seed, int):
            torch.manual_seed(seed)
        out: list[Generation] = []
        with torch.no_grad():
            for start in range(0, len(prompts), self.batch_size):
                batch = prompts[start : start + self.batch_size]
                seeds = row_seeds[start : start + self.batch_size] if row_seeds else None
                out.extend(self._batch(batch, max_new_tokens, temperature, greedy, seeds))
        return out

    def _batch(
        self,
        prompts: list[list[int]],
        max_new: int,
        temperature: float,
        greedy: bool,
        seeds: list[int] | None = None,
    ) -> list[Generation]:
        import torch

        # One generator per row when seeds are given: a row samples the same tokens whatever
        # its batch-mates (the collector's sliding window mixes episodes by timing).
        rngs = [torch.Generator().manual_seed(s) for s in seeds] if seeds and not greedy else None

        # A plain KV-cached decode loop instead of ``model.generate``: the same math with less
        # per-token overhead, which dominates at this model size (rollouts are most of a GRPO step).
        # Identical prompts (a GRPO group's G samples) are prefilled once and their KV cache
        # copied: prefill is about half the generation time and compute-bound on a CPU.
        unique: dict[tuple[int, ...], int] = {}
        row_of = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
        width = max(map(len, prompts))
        batch = len(prompts)
        ids = torch.full((len(unique), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(unique), width), dtype=torch.long)
        for i, p in enumerate(unique):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        was_training = self.model.training
        self.model.eval()
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
            logits_to_keep=1,
        )  # fmt: skip
        past, logits = out.past_key_values, out.logits[:, -1, :]
        if len(unique) < batch:
            rows = torch.tensor(row_of)
            past.batch_select_indices(rows)
            logits, mask, positions = logits[rows], mask[rows], positions[rows]
        next_pos = positions[:, -1:] + 1
        done = torch.zeros(batch, dtype=torch.bool)
        tokens, logps = [], []
        for _ in range(max_new):
            logp = torch.log_softmax(logits.float() / (1.0 if greedy else temperature), dim=-1)
            if greedy:
                tok = logp.argmax(-1)
            elif rngs is not None:
                probs = logp.exp()
                tok = torch.cat(
                    [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(rngs)]
                )
            else:
                tok = torch.multinomial(logp.exp(), 1).squeeze(-1)
            tok = torch.where(done, torch.full_like(tok, self.pad_id), tok)
            tokens.append(tok)
            logps.append(logp.gather(-1, tok[:, None]).squeeze(-1))
            done |= tok == self.eos_id
            if bool(done.all()):
                break
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=torch.long)], dim=1)
            out = self.model(
                input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos,
                past_key_values=past, use_cache=True,
            )  # fmt: skip
            past, logits = out.past_key_values, out.logits[:, -1, :]
            next_pos = next_pos + 1
        if was_training:
            self.model.train()
        seqs = torch.stack(tokens, dim=1).tolist()
        chosen = torch.stack(logps, dim=1).tolist()
        gens = []
        for i in range(batch):
            row = seqs[i]
            finished = self.eos_id in row
            n = row.index(self.eos_id) + 1 if finished else len(row)
            gens.append(Generation.decoded(row[:n], chosen[i][:n], finished, self.tokenizer))
        return gens
