"""The agent loop: seed → model turn → tool calls → observations → … → verify → close.

Episodes advance in lock-step turns so that every model turn is one batched generation across
all live episodes. The token view keeps what training needs: prompt ids, completion ids
(model tokens and, for multi-turn, the tool-output tokens between turns), the sampling logprob
of each model token, and ``env_mask`` (1 = model token, 0 = environment token, not trained).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

from gymflow.env_client import EnvClient
from gymflow.environment import Environment
from gymflow.failures import FailureKind
from gymflow.policy import Policy
from gymflow.task_record import Task
from gymflow.trajectory import assistant_items, prompt_items


@dataclass(frozen=True)
class Sampling:
    max_new_tokens: int = 48
    """Tokens per model turn."""
    max_completion_tokens: int = 256
    """Budget for the whole episode's completion (model + tool tokens)."""
    temperature: float = 1.0
    greedy: bool = False


@dataclass
class Episode:
    task: Task
    seed: int
    session_id: str = ""
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)
    turns: int = 0
    tool_calls: int = 0
    done: bool = False
    truncated: bool = False
    score: dict = field(default_factory=dict)
    started_at: float = 0.0
    latency_s: float = 0.0

    @property
    def reward(self) -> float:
        return float(self.score["reward"])


async def run_episodes(
    client: EnvClient,
    env: Environment,
    policy: Policy,
    tasks: list[Task],
    sampling: Sampling,
    seeds: list[int],
) -> list[Episode]:
    """Run one episode per task (tasks may repeat for groups); returns them verified and closed."""
    t0 = time.time()
    episodes = [Episode(task=t, seed=s, started_at=t0) for t, s in zip(tasks, seeds, strict=True)]
    session_ids = await asyncio.gather(*(client.seed_session(e.task) for e in episodes))
    prompt_cache: dict[str, list[int]] = {}
    for ep, sid in zip(episodes, session_ids, strict=True):
        ep.session_id = sid
        if ep.task.task_id not in prompt_cache:
            prompt_cache[ep.task.task_id] = policy.encode_prompt(ep.task.prompt, ep.task.tools)
        ep.prompt_ids = prompt_cache[ep.task.task_id]
        ep.items = prompt_items(ep.task.prompt)
    try:
        for turn in range(env.max_turns):
            live = [e for e in episodes if not e.done]
            if not live:
                break
            gens = policy.generate(
                [e.prompt_ids + e.completion_ids for e in live],
                max_new_tokens=sampling.max_new_tokens,
                temperature=sampling.temperature,
                greedy=sampling.greedy,
                seed=live[0].seed + turn,
            )
            await asyncio.gather(
                *(
                    _advance(client, env, policy, e, g, turn, sampling)
                    for e, g in zip(live, gens, strict=True)
                )
            )
        scores = await asyncio.gather(*(client.verify(e.session_id, e.items) for e in episodes))
        for ep, score in zip(episodes, scores, strict=True):
            if ep.truncated and score["failure_kind"] is None:
                score = {**score, "failure_kind": str(FailureKind.TRUNCATED)}
            ep.score = score
            ep.latency_s = time.time() - t0
    finally:
        await asyncio.gather(
            *(client.close_session(e.session_id) for e in episodes if e.session_id)
        )
    return episodes


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
    for call in calls:
        ep.tool_calls += 1
        result = await client.call_tool(ep.session_id, call["name"], json.loads(call["arguments"]))
        output = json.dumps(
            result["output"] if result["error"] is None else {"error": result["error"]}
        )
        ep.items.append(
            {"type": "function_call_output", "call_id": call["call_id"], "output": output}
        )
        obs_ids = policy.encode_observation(output)
        ep.completion_ids += obs_ids
        ep.logprobs += [0.0] * len(obs_ids)
        ep.env_mask += [0] * len(obs_ids)
    if len(ep.completion_ids) + sampling.max_new_tokens > sampling.max_completion_tokens:
        ep.done = ep.truncated = True
