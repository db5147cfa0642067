"""The one episode driver: seed → model turn → tool calls → observations → … → verify → close.

Every rollout the product makes goes through :func:`run_window`: GRPO's rollout batches,
evaluation and profiling samples, collection, the environment self-check. It keeps a sliding
window of at most ``size`` live episodes (:func:`run_episode`); the next planned one starts as
soon as one ends, so a slow episode (a long multi-turn one, a slow tool) holds only itself.
Model turns are batched by a shared :class:`~gymflow.rollout.model_turns.ModelTurns`: the
turns of every episode waiting for the model at that moment go out as one generation, each
row with its own seed (``episode seed + turn``), so an episode samples the same tokens
whatever shares its batch. :func:`run_episodes` is the same window over a list of tasks,
returning the episodes in order (the form tests, examples and self-checks want).

Token backends (:class:`~gymflow.policy.base.Policy`) give the token view training needs: prompt
ids, completion ids (model tokens and, for multi-turn, the tool-output tokens between turns),
the sampling logprob of each model token, and ``env_mask`` (1 = model token, 0 = environment
token, not trained). Message backends (:class:`~gymflow.policy.base.ChatPolicy`) keep the same
Responses-style items; their token view is rebuilt from the ids the server returns when each
turn's prompt ids extend the previous context exactly, and is empty otherwise
(``has_token_view`` False): such episodes are evaluated, and :func:`training_batch` refuses
them. A turn the backend could not produce (server down, timeout, garbage) ends its episode
with that failure kind instead of a verifier score; the other episodes go on. An episode that
raises a ``GymflowError`` (env down, a refused call) is handed to ``on_done`` with the error;
any other exception (a bug) stops the window after cancelling the live episodes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass
from typing import Protocol, TypeVar

from gymflow.core import progress
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.policy.base import ChatPolicy, ChatTurn, Policy, is_chat_policy
from gymflow.rollout.chat_turns import (
    assistant_message,
    chat_items,
    drop_token_view,
    extend_token_view,
)
from gymflow.rollout.episode import Episode, Sampling
from gymflow.rollout.model_turns import ModelTurns


class Planned(Protocol):
    """What the window needs of one planned rollout (the store's ``Planned`` is one)."""

    @property
    def task(self) -> Task: ...

    @property
    def seed(self) -> int: ...


P = TypeVar("P", bound=Planned)
OnDone = Callable[[P, Episode | None, GymflowError | None], None]


async def run_window(
    client: EnvClient,
    env: Environment,
    turns: ModelTurns,
    todo: Iterable[P],
    size: int,
    on_done: OnDone,
) -> None:
    """Run every planned rollout of ``todo``, at most ``size`` live at once.

    ``on_done(planned, episode, None)`` for each finished episode (verified, or ended by a
    policy failure), ``on_done(planned, None, error)`` for one a ``GymflowError`` stopped.
    """
    if size < 1:
        raise ValueError(f"window size must be at least 1, got {size}")

    async def one(p: P) -> tuple[P, Episode | None, GymflowError | None]:
        try:
            return p, await run_episode(client, env, turns, p.task, p.seed), None
        except GymflowError as exc:
            return p, None, exc

    if isinstance(todo, Sized):  # an evaluation stage's progress counts its episodes
        progress.episodes_planned(len(todo))
    queue = iter(todo)
    live: set[asyncio.Task] = set()
    try:
        while True:
            for p in itertools.islice(queue, size - len(live)):
                live.add(asyncio.create_task(one(p)))
            if not live:
                break
            done, live = await asyncio.wait(live, return_when=asyncio.FIRST_COMPLETED)
            bugs = [t.exception() for t in done if t.exception() is not None]
            for t in done:
                if t.exception() is None:
                    on_done(*t.result())
                    progress.episode_done()
            if bugs:
                raise bugs[0]
    finally:
        for t in live:
            t.cancel()
        await asyncio.gather(*live, return_exceptions=True)


@dataclass(frozen=True)
class _Seeded:
    task: Task
    seed: int
    index: int


async def run_episodes(
    client: EnvClient,
    env: Environment,
    policy: Policy | ChatPolicy,
    tasks: list[Task],
    sampling: Sampling,
    seeds: list[int],
    concurrency: int | None = None,
    batch_wait_s: float = 0.01,
) -> list[Episode]:
    """One episode per task (tasks may repeat for groups), in order, through :func:`run_window`.

    ``concurrency`` defaults to all of them live at once. Raises the first ``GymflowError``
    an episode raised, after every episode has ended (use :func:`run_window` to keep them).
    """
    todo = [_Seeded(t, s, i) for i, (t, s) in enumerate(zip(tasks, seeds, strict=True))]
    out: list[Episode | None] = [None] * len(todo)
    errors: list[GymflowError] = []

    def done(p: _Seeded, episode: Episode | None, error: GymflowError | None) -> None:
        out[p.index] = episode
        if error is not None:
            errors.append(error)

    turns = ModelTurns(policy, sampling, batch_wait_s)
    await run_window(client, env, turns, todo, concurrency or max(1, len(todo)), done)
    if errors:
        raise errors[0]
    return out  # type: ignore[return-value]


async def run_episode(
    client: EnvClient, env: Environment, turns: ModelTurns, task: Task, seed: int
) -> Episode:
    """Run one episode, its model turns batched by ``turns`` with other episodes' turns.

    Its session is closed whatever happens. ``latency_s`` is this episode's own, from seed to verdict.
    """
    ep = Episode(task=task, seed=seed, started_at=time.time())
    try:
        with turns.taking_turns():  # from the start: a batch forming now waits for our turn 0
            ep.session_id = await client.seed_session(task)
            _open(ep, turns.policy, turns.prompt_cache)
            for turn in range(env.max_turns):
                if ep.done:
                    break
                if turns.chat:
                    reply = await turns.chat_turn(ep, turn)
                    await _advance_chat(client, env, ep, reply, turn, turns.sampling)
                else:
                    gen = await turns.token_turn(ep, turn)
                    await _advance(client, env, turns.policy, ep, gen, turn, turns.sampling)
        if not ep.policy_failed:
            score = await client.verify(ep.session_id, ep.items, close=True)
            ep.closed = True
            _set_score(ep, score)
        ep.latency_s = time.time() - ep.started_at
    finally:
        if ep.session_id and not ep.closed:
            await client.close_session(ep.session_id)
    return ep


def training_batch(episodes: list[Episode]) -> dict:
    """The token view TRL's ``rollout_func`` returns; refuses episodes that have none.

    Raises ``GymflowError(NO_TOKEN_VIEW)`` for message-level episodes without token ids and
    the policy failure's own kind for episodes the backend could not finish: their reward says
    nothing about the policy, so training on them would be training on noise.
    """
    failed = [e for e in episodes if e.policy_failed]
    if failed:
        kind = FailureKind(failed[0].score["failure_kind"])
        raise GymflowError(
            kind,
            f"{len(failed)} of {len(episodes)} episodes failed in the policy backend "
            f"(first: {failed[0].score['detail']}); they cannot be trained on",
        )
    blind = [e for e in episodes if not e.has_token_view]
    if blind:
        raise GymflowError(
            FailureKind.NO_TOKEN_VIEW,
            f"{len(blind)} of {len(episodes)} episodes have no token ids (a message-level policy "
            "backend whose server returns none, or re-rendered turns that do not extend the "
            "sampled tokens); evaluate them, train with the transformers or vllm backend",
        )
    return {
        "prompt_ids": [e.prompt_ids for e in episodes],
        "completion_ids": [e.completion_ids for e in episodes],
        "logprobs": [e.logprobs for e in episodes],
        "env_mask": [e.env_mask for e in episodes],
        "env_reward": [e.reward for e in episodes],
    }


def _open(ep: Episode, policy: Policy | ChatPolicy, prompt_cache: dict[str, list[int]]) -> None:
    """The episode's starting context: items, and the chat messages or the prompt ids."""
    ep.items = prompt_items(ep.task.prompt)
    if is_chat_policy(policy):
        ep.messages = [dict(m) for m in ep.task.prompt]
        return
    if ep.task.task_id not in prompt_cache:
        prompt_cache[ep.task.task_id] = policy.encode_prompt(ep.task.prompt, ep.task.tools)
    ep.prompt_ids = prompt_cache[ep.task.task_id]


def _set_score(ep: Episode, score: dict) -> None:
    if ep.truncated and not score["success"]:
        # the budget cut the episode: say so, keeping the verifier's own verdict in detail
        # (for a reader) and in verdict_kind (for evaluation's format rate)
        verdict = f"{score['failure_kind']}: {score.get('detail', '')}".rstrip(": ")
        score = {
            **score,
            "failure_kind": str(FailureKind.TRUNCATED),
            "verdict_kind": str(score["failure_kind"]),
            "detail": verdict,
        }
    ep.score = score


async def _advance(
    client: EnvClient,
    env: Environment,
    policy: Policy,
    ep: Episode,
    gen,
    turn: int,
    sampling: Sampling,
) -> None:
    ep.turns += 1
    ep.completion_ids += gen.token_ids
    ep.logprobs += gen.logprobs
    ep.env_mask += [1] * len(gen.token_ids)
    new_items = assistant_items(gen.text, turn)
    ep.items += new_items
    calls = [it for it in new_items if it["type"] == "function_call"]
    if not gen.finished:
        ep.done = ep.truncated = True
        return
    if not calls or turn + 1 >= env.max_turns:
        ep.done = True
        return
    outputs = await _call_tools(client, ep, calls)
    for i, output in enumerate(outputs):
        obs_ids = policy.encode_observation(output, last=i == len(outputs) - 1)
        ep.completion_ids += obs_ids
        ep.logprobs += [0.0] * len(obs_ids)
        ep.env_mask += [0] * len(obs_ids)
    if len(ep.completion_ids) + sampling.max_new_tokens > sampling.max_completion_tokens:
        ep.done = ep.truncated = True


async def _call_tools(client: EnvClient, ep: Episode, calls: list[dict]) -> list[str]:
    """Run the calls in order (they may share state); append and return their outputs."""
    outputs = []
    for call in calls:
        ep.tool_calls += 1
        result = await client.call_tool(ep.session_id, call["name"], json.loads(call["arguments"]))
        output = json.dumps(
            result["output"] if result["error"] is None else {"error": result["error"]}
        )
        ep.items.append(
            {"type": "function_call_output", "call_id": call["call_id"], "output": output}
        )
        outputs.append(output)
    return outputs


async def _advance_chat(
    client: EnvClient, env: Environment, ep: Episode, reply: ChatTurn, turn: int, sampling: Sampling
) -> None:
    if reply.error is not None:
        ep.done, ep.policy_failed = True, True
        drop_token_view(ep)
        ep.score = {
            "reward": 0.0,
            "success": False,
            "failure_kind": str(reply.error.kind),
            "components": {},
            "detail": f"policy: {reply.error.detail}",
        }
        return
    ep.turns += 1
    for key, count in (reply.usage or {}).items():
        ep.usage[key] = ep.usage.get(key, 0) + int(count or 0)
    extend_token_view(ep, reply)
    new_items = chat_items(reply, turn)
    ep.items += new_items
    calls = [it for it in new_items if it["type"] == "function_call"]
    # The server's call ids go back with the tool results (a hosted API checks them).
    ids = [tc.get("id") if isinstance(tc, dict) else None for tc in reply.tool_calls]
    ok = len(ids) == len(calls) and all(isinstance(i, str) and i for i in ids)
    call_ids = ids if ok else [c["call_id"] for c in calls]
    ep.messages.append(assistant_message(reply, calls, call_ids))
    if not reply.finished:
        ep.done = ep.truncated = True
        return
    if not calls or turn + 1 >= env.max_turns:
        ep.done = True
        return
    outputs = await _call_tools(client, ep, calls)
    for call_id, output in zip(call_ids, outputs, strict=True):
        ep.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
    if ep.has_token_view and (
        len(ep.completion_ids) + sampling.max_new_tokens > sampling.max_completion_tokens
    ):
        ep.done = ep.truncated = True
