"""Model turns for episodes that run independently, batched across those waiting together.

:func:`gymflow.rollout.driver.run_episode` asks a shared :class:`ModelTurns` for each of its turns;
the rollout engine runs a sliding window of such episodes, so batches form from whoever is
waiting for the model at that moment instead of from a fixed lock-step set. A small hand-written
batcher: the batching engines that exist (vLLM's) live inside a model server; the in-process
backends take a list of prompts, so something must gather the list.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from gymflow.core.failures import GymflowError
from gymflow.policy.base import (
    ChatPolicy,
    ChatRequest,
    ChatTurn,
    Generation,
    Policy,
    is_chat_policy,
)
from gymflow.rollout.episode import Episode, Sampling


class ModelTurns:
    """Model turns for independent episodes, batched across those waiting at the same moment.

    Token backends: requests are gathered and sent as one ``Policy.generate`` call when every
    episode taking turns (from seed to verify) is waiting for the model, or after a wait,
    whichever comes first. The wait bounds what an episode in a slow tool call costs the
    others: at most ``max_wait_s``, and never longer than a generation has been taking (a
    running average), since waiting longer than one generation costs more than generating a
    second batch — so an instant backend (scripted) hardly waits, a model waits to fill its
    batch. Generation runs on the event loop. Message
    backends: each request goes out at once (the backend runs them concurrently, up to its
    own limit).

    Seeds: every request carries its episode's seed + turn and ``generate`` gets one seed per
    prompt, so an episode samples the same tokens whatever episodes share its batch (which
    here depends on timing): a collection is reproducible from the rollout seeds in its rows
    (up to float rounding that batch shape can change, which flips a draw only rarely).

    A ``generate`` that raises a ``GymflowError`` is tried again one request at a time, so only
    the request that fails alone fails (its episode becomes a failure row); any other exception
    (a bug) fails every request of the batch.
    """

    def __init__(
        self, policy: Policy | ChatPolicy, sampling: Sampling, max_wait_s: float = 0.01
    ) -> None:
        self.policy, self.sampling, self.max_wait_s = policy, sampling, max_wait_s
        self.chat = is_chat_policy(policy)
        self.prompt_cache: dict[str, list[int]] = {}
        self.batches: list[int] = []
        """Size of every batch sent to ``generate`` (for tests and reports)."""
        self._taking = 0
        self._pending: list[tuple[list[int], int, asyncio.Future]] = []
        self._all_waiting = asyncio.Event()
        self._flusher: asyncio.Task | None = None
        self._generate_s = max_wait_s
        """Running average of a generate call's wall time (a first guess until one is timed)."""

    @contextmanager
    def taking_turns(self) -> Iterator[None]:
        """Count an episode as one whose next model turn may come (the batch waits for it)."""
        self._taking += 1
        try:
            yield
        finally:
            self._taking -= 1
            self._check_all_waiting()

    async def token_turn(self, ep: Episode, turn: int) -> Generation:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((ep.prompt_ids + ep.completion_ids, ep.seed + turn, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        self._check_all_waiting()
        return await future

    async def chat_turn(self, ep: Episode, turn: int) -> ChatTurn:
        (reply,) = await self.policy.chat([chat_request(ep, turn, self.sampling)])
        return reply

    def _check_all_waiting(self) -> None:
        if self._pending and len(self._pending) >= self._taking:
            self._all_waiting.set()

    async def _flush(self) -> None:
        with suppress(TimeoutError):
            wait = min(self.max_wait_s, self._generate_s)
            await asyncio.wait_for(self._all_waiting.wait(), wait)
        # from here to the end nothing awaits: a request that comes later starts a new flush
        batch, self._pending = self._pending, []
        self._all_waiting.clear()
        self.batches.append(len(batch))
        try:
            gens = self._generate([prompt for prompt, _, _ in batch], [s for _, s, _ in batch])
        except GymflowError as exc:
            if len(batch) == 1:
                _deliver(batch[0][2], error=exc)
                return
            # one bad prompt should not fail its batch-mates: each again on its own
            for prompt, seed, future in batch:
                try:
                    _deliver(future, self._generate([prompt], [seed])[0])
                except Exception as exc:
                    _deliver(future, error=exc)
            return
        except Exception as exc:
            for _, _, future in batch:
                _deliver(future, error=exc)
            return
        except BaseException as exc:
            # An exception a signal raised mid-generate (pytest-timeout's, Ctrl-C): asyncio keeps
            # it in this task, so the batch's episodes would wait forever for their turns.
            for _, _, future in batch:
                _deliver(future, error=exc)
            raise
        for (_, _, future), gen in zip(batch, gens, strict=True):
            _deliver(future, gen)

    def _generate(self, prompts: list[list[int]], seeds: list[int]) -> list[Generation]:
        started = time.perf_counter()
        gens = self.policy.generate(
            prompts,
            max_new_tokens=self.sampling.max_new_tokens,
            temperature=self.sampling.temperature,
            greedy=self.sampling.greedy,
            seed=seeds,
        )
        self._generate_s = 0.5 * self._generate_s + 0.5 * (time.perf_counter() - started)
        if len(gens) != len(prompts):
            raise RuntimeError(f"generate returned {len(gens)} turns for {len(prompts)} prompts")
        return gens


def _deliver(
    future: asyncio.Future, gen: Generation | None = None, error: Exception | None = None
) -> None:
    if future.done():  # its episode was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(gen)


def chat_request(ep: Episode, turn: int, sampling: Sampling) -> ChatRequest:
    temperature = 0.0 if sampling.greedy else sampling.temperature
    return ChatRequest(
        ep.messages, ep.task.tools or None, sampling.max_new_tokens, temperature, ep.seed + turn
    )
