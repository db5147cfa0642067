"""Ask a teacher policy for variants of train tasks; keep those whose gold answer the
environment accepts and that repeat no task (:mod:`gymflow.data.variants` says what a variant
is and how each requested one is judged).

The teacher is any policy spec (:func:`gymflow.policy.spec.load_policy`): an ``openai:`` server
(vLLM serve, a hosted API, ``gymflow policy serve``) or a local model (``transformers:``,
``models:``). Each seed task gets one request for ``per_task`` variants. A gold answer is
checked the way ``gymflow env check`` checks one: the environment must accept the ground truth
(``check_task``), then the gold episode (``gold_turns``) is played through the in-process
resources server and must score 1.0 with success. Variants go to the train split; a kept one
that is a held-out task or a near-duplicate of one stops the run with ``data_leakage``
(:func:`gymflow.data.leakage.refuse_leaks`), after the filter has already dropped every
variant near any task of the run.

A teacher that cannot answer (unreachable, an error after the backend's retries) fails the
stage with its kind: the task set would silently lack what the config asked for.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.core.task_record import Task
from gymflow.data.dedup import NearDupSettings
from gymflow.data.leakage import PromptRef, find_leaks, refuse_leaks
from gymflow.data.variants import (
    KINDS,
    VARIANT_SOURCE,
    Candidate,
    VariantReport,
    drop_near_duplicates,
    parse_reply,
    variant_request,
)
from gymflow.env.environment import Environment
from gymflow.policy.base import ChatRequest, is_chat_policy
from gymflow.policy.spec import load_policy, parse_spec
from gymflow.rollout.episode import Sampling

TOKEN_BATCH = 8
"""Requests per ``generate`` call of a local (token-level) teacher."""


class VariantSettings(BaseModel):
    """LLM-written variants of train tasks (``generate_tasks``, ``gymflow tasks generate``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    teacher: str = Field(
        description="Policy spec of the teacher, e.g. openai:http://127.0.0.1:8000/v1?model=M."
    )
    per_task: int = Field(3, ge=1, le=16, description="Variants asked per seed task.")
    seeds: int = Field(
        32, ge=1, description="Train tasks asked for variants (drawn with the task seed)."
    )
    kinds: list[Literal["paraphrase", "scenario"]] = Field(
        default_factory=lambda: list(KINDS),
        min_length=1,
        description="Kinds of variant the teacher may write.",
    )
    temperature: float = Field(0.7, ge=0.0, le=2.0, description="Teacher sampling temperature.")
    max_tokens: int = Field(1024, ge=16, description="Tokens the teacher may write per reply.")

    @field_validator("teacher")
    @classmethod
    def _a_policy_spec(cls, value: str) -> str:
        try:
            parse_spec(value)
        except GymflowError as exc:
            raise ValueError(exc.detail) from None
        return value


def add_variants(
    env: Environment,
    tasks: Sequence[Task],
    settings: VariantSettings,
    near_dup: NearDupSettings,
    recorded: Sequence[PromptRef] = (),
    seed: int = 0,
) -> VariantReport:
    """Variants of up to ``settings.seeds`` train tasks of ``tasks``, judged (see the module
    doc); ``recorded`` are held-out prompts of earlier runs, kept clear like this run's."""
    seeds = pick_seeds(tasks, settings.seeds, seed)
    if not seeds:
        raise GymflowError(
            FailureKind.BAD_CONFIG,
            "variants start from train tasks and this task set has none; generate more tasks",
        )
    requests = [
        ChatRequest(
            variant_request(env.name, s, settings.per_task, settings.kinds),
            None,
            settings.max_tokens,
            settings.temperature,
            seed * 1_000_003 + i,
        )
        for i, s in enumerate(seeds)
    ]
    candidates: list[Candidate] = []
    for s, (text, finished) in zip(seeds, ask_teacher(settings.teacher, requests), strict=True):
        found = parse_reply(text, s, settings.per_task, settings.teacher, settings.kinds)
        if not finished:
            for c in found:
                c.task = None
                c.reject("unparseable", f"the reply hit the {settings.max_tokens}-token limit")
        candidates += found
    check_gold(env, [c for c in candidates if c.verdict == "kept"])
    existing = [PromptRef.of(t, f"{t.split} task") for t in tasks] + list(recorded)
    drop_near_duplicates(candidates, existing, near_dup)
    report = VariantReport(candidates)
    heldout = [PromptRef.of(t, "held out") for t in tasks if t.split == "heldout"]
    kept = [PromptRef.of(t, VARIANT_SOURCE) for t in report.kept]
    refuse_leaks(find_leaks(kept, heldout + list(recorded), near_dup), "variant")
    return report


def pick_seeds(tasks: Sequence[Task], k: int, seed: int) -> list[Task]:
    """Up to ``k`` train tasks that are not variants themselves, drawn with ``seed``."""
    pool = sorted(
        (t for t in tasks if t.split == "train" and t.ground_truth.get("source") != VARIANT_SOURCE),
        key=lambda t: t.task_id,
    )
    return sorted(random.Random(seed).sample(pool, min(k, len(pool))), key=lambda t: t.task_id)


def ask_teacher(spec: str, requests: Sequence[ChatRequest]) -> list[tuple[str, bool]]:
    """``(reply text, finished)`` per request from the policy ``spec`` names; raises the
    backend's kind when a request got no answer."""
    if not requests:
        return []
    policy = load_policy(spec)
    if is_chat_policy(policy):
        return asyncio.run(_ask_chat(spec, policy, requests))
    out = []
    for start in range(0, len(requests), TOKEN_BATCH):
        batch = requests[start : start + TOKEN_BATCH]
        gens = policy.generate(
            [policy.encode_prompt(r.messages, None) for r in batch],
            max_new_tokens=batch[0].max_tokens,
            temperature=batch[0].temperature or 1.0,
            greedy=batch[0].temperature == 0.0,
            seed=[r.seed for r in batch],
        )
        out += [(g.text, g.finished) for g in gens]
    return out


async def _ask_chat(spec: str, policy, requests: Sequence[ChatRequest]) -> list[tuple[str, bool]]:
    try:
        turns = await policy.chat(list(requests))
    finally:
        await policy.aclose()
    failed = [t.error for t in turns if t.error is not None]
    if failed:
        raise GymflowError(
            failed[0].kind,
            f"the variants teacher {spec} did not answer {len(failed)} of {len(turns)} "
            f"requests (first: {failed[0].detail}); check that it is running, or leave "
            "variants out",
        )
    return [(t.text, t.finished) for t in turns]


def check_gold(env: Environment, candidates: Sequence[Candidate]) -> None:
    """Mark ``gold_rejected`` each candidate whose ground truth the environment refuses or
    whose gold episode, played through the in-process server, does not score 1.0."""
    playable: list[tuple[Candidate, list[str]]] = []
    for c in candidates:
        try:
            env.check_task(c.task)
            playable.append((c, env.gold_turns(c.task)))
        except Exception as exc:  # an environment may raise anything, with a message
            c.reject("gold_rejected", f"{env.name} cannot use its ground truth: {exc}")
    for (c, _), problem in zip(playable, asyncio.run(_play_gold(env, playable)), strict=True):
        if problem:
            c.reject("gold_rejected", problem)


async def _play_gold(env: Environment, playable: list[tuple[Candidate, list[str]]]) -> list[str]:
    """Per candidate, why its gold episode failed ('' when it scored 1.0 with success)."""
    from gymflow.env.client import EnvClient
    from gymflow.env.resources_server import build_app
    from gymflow.policy.scripted import ScriptedPolicy
    from gymflow.rollout.driver import run_episodes

    if not playable:
        return []
    app = build_app(env, verify_workers=1)
    sampling = Sampling(max_completion_tokens=1 << 20)  # scripted "tokens" are bytes
    problems = []
    try:
        async with EnvClient(app=app) as client:
            for c, turns in playable:  # one policy per episode: two variants may share a prompt
                try:
                    (ep,) = await run_episodes(
                        client, env, ScriptedPolicy.replay(turns), [c.task], sampling, [0]
                    )
                except GymflowError as exc:
                    problems.append(f"its gold episode failed: {exc.kind}: {exc.detail}")
                    continue
                score = ep.score
                ok = score["success"] and ep.reward == 1.0
                problems.append(
                    "" if ok else f"its gold answer scored {ep.reward} "
                    f"({score['failure_kind']}: {score.get('detail', '')})"
                )  # fmt: skip
    finally:
        app.state.verifier.shutdown()
    return problems


def write_report(report: VariantReport, path: Path) -> Path:
    """Every requested variant with its verdict, as JSONL for a person to read."""
    write_jsonl_atomic(path, [c.row() for c in report.candidates])
    return path
