"""Policy backends behind one interface, and the transformers backend.

Two kinds of backend:

* token-level (:class:`Policy`): token ids in, token ids + sampling logprobs out. The agent loop
  builds the exact token view training needs. ``transformers`` (here), ``vllm``
  (:mod:`gymflow.policy.vllm_backend`) and :class:`~gymflow.policy.scripted.ScriptedPolicy`.
* message-level (:class:`ChatPolicy`): chat messages in, an assistant turn out (text and/or
  structured tool calls). ``openai`` (:mod:`gymflow.policy.openai_backend`): any OpenAI-compatible server,
  vLLM serve, SGLang, a hosted API. Token ids and logprobs come back only when the server sends
  them (vLLM's ``return_token_ids``); without them an episode can be evaluated, not trained on.

:func:`gymflow.policy.spec.load_policy` picks one from a spec string.

The transformers backend generates for many episodes at once (left-padded batches), which is
where CPU throughput comes from (~4,600 tokens/s at batch 64 vs ~280 at batch 1 for the 3.6 M
model). Sampling uses the full distribution (``top_k=0, top_p=1``) so the logprobs returned are
the policy's own, as GRPO's importance ratio assumes. torch is imported inside the methods so
that message-level users (and the CLI) do not pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gymflow.core.failures import GymflowError


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
    EOS) can be served over HTTP for whole conversations (:mod:`gymflow.policy.openai_server`).
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
    usage: dict[str, int] | None = None
    """The server's token counts for this request (``prompt_tokens``, ``completion_tokens``)."""
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
