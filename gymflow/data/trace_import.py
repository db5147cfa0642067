"""Logged trajectories into evaluation tasks: the flywheel from production failures to tasks.

A trace file is JSONL, one episode per line, in any of three shapes:

* **Responses items** — ``items`` (or ``output``, or ``trajectory`` as a list or a JSON string,
  as gymflow's own rollout rows hold it): ``message`` / ``function_call`` /
  ``function_call_output`` items, the prompt's messages first;
* **chat messages** — ``messages``: OpenAI chat messages, the prompt's first;
* **NeMo Gym rollout rows** — ``responses_create_params`` (the prompt) and ``response``.

The task's prompt is the messages before the first assistant turn (system, developer, user).
Its ground truth is the row's ``ground_truth`` object, or, for a NeMo Gym row, its verifier
fields (what the environment's own ``nemo_gym`` importer reads, else every field beside the
request, the response and gymflow's lineage fields, as gymflow writes rollouts); the environment
must accept it (:meth:`~gymflow.env.environment.Environment.check_task`). The outcome orders the
tasks, failures first: ``success`` false, a ``failure_kind``, or a ``reward`` under the top of
the environment's range. A trace whose prompt nearly repeats (:class:`~gymflow.data.dedup.
PromptIndex`) an existing task's or an earlier kept trace's, with the same ground truth, is
dropped; the same prompt with another ground truth is another task (counter's start value).
Tasks are held out (``split="heldout"``): they are for ``gymflow eval`` and
``task_data.heldout_files``, never for training.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind
from gymflow.core.jsonl import InputFileError, read_jsonl
from gymflow.core.task_record import Task, content_hash
from gymflow.data.dedup import NearDupSettings, PromptIndex, normalized_prompt
from gymflow.data.nemo_gym import GYMFLOW_FIELDS, is_rollout_row, nemo_prompt
from gymflow.env.environment import Environment

PROMPT_ROLES = ("system", "developer", "user")
OUTCOMES = ("failure", "unknown", "success")


@dataclass(frozen=True)
class Trace:
    line: int
    task: Task
    outcome: str
    """``failure``, ``unknown`` (the row says nothing) or ``success``."""


@dataclass
class ImportedTraces:
    tasks: list[Task]
    """Failures first, then unknown outcomes, then successes; each in file order."""
    counts: dict[str, int]


def read_traces(env: Environment, path: Path) -> list[Trace]:
    """Every row of ``path`` as a :class:`Trace`; a row that cannot become a task raises
    ``InputFileError`` naming the line and what is missing."""
    traces = []
    for line, row in read_jsonl(path):
        try:
            task = _task(env, row, path)
        except (ValueError, KeyError, TypeError) as exc:
            problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputFileError(
                path, line, f"not a trace for {env.name}: {problem}", FailureKind.SCHEMA_VIOLATION
            ) from None
        try:
            env.check_task(task)
        except Exception as exc:  # check_task may raise anything, with a message
            raise InputFileError(
                path,
                line,
                f"{env.name} cannot use its ground truth: {exc}",
                FailureKind.SCHEMA_VIOLATION,
            ) from None
        traces.append(Trace(line, task, _outcome(row, env)))
    return traces


def import_traces(
    env: Environment,
    path: Path,
    existing: Sequence[Task] = (),
    settings: NearDupSettings | None = None,
    failures_only: bool = False,
) -> ImportedTraces:
    """Tasks from the traces in ``path``, failures first, without repeats of ``existing``."""
    settings = settings or NearDupSettings()
    traces = read_traces(env, path)
    ranked = sorted(traces, key=lambda t: (OUTCOMES.index(t.outcome), t.line))
    if failures_only:
        ranked = [t for t in ranked if t.outcome == "failure"]
    index = PromptIndex(settings)
    truths = {f"existing:{i}": t.ground_truth for i, t in enumerate(existing)}
    index.insert((f"existing:{i}", normalized_prompt(t.prompt)) for i, t in enumerate(existing))
    kept: list[Task] = []
    near_existing = repeats = 0
    for trace in ranked:
        text, truth = normalized_prompt(trace.task.prompt), trace.task.ground_truth
        same = [m.key for m in index.query([text])[0] if truths[m.key] == truth]
        if any(key.startswith("existing:") for key in same):
            near_existing += 1
        elif same:
            repeats += 1
        else:
            kept.append(trace.task)
            truths[f"trace:{trace.line}"] = truth
            index.insert([(f"trace:{trace.line}", text)])
    outcomes = {o: sum(t.outcome == o for t in ranked) for o in OUTCOMES}
    counts = {"rows": len(traces), **outcomes, "kept": len(kept),
              "near_existing": near_existing, "repeats": repeats}  # fmt: skip
    return ImportedTraces(kept, counts)


def _task(env: Environment, row: dict, path: Path) -> Task:
    if is_rollout_row(row):
        messages = nemo_prompt(row)[0]
        truth = row["ground_truth"] if "ground_truth" in row else _verifier_fields(row, env)
    else:
        messages = _leading_messages(_items(row))
        truth = row.get("ground_truth")
    if not isinstance(truth, dict):
        raise ValueError(
            "the row has no 'ground_truth' object (what the verifier checks the answer "
            f"against); add one{' or the verifier fields' if is_rollout_row(row) else ''}"
        )
    if not messages:
        raise ValueError("no prompt: no system, developer or user message before the answer")
    digest = content_hash(messages, truth)
    return Task(
        task_id=f"{env.name}-trace-{digest[:12]}",
        env=env.name,
        split="heldout",
        prompt=messages,
        tools=env.tool_schemas,
        ground_truth=truth,
        generator=f"traces/{Path(path).name}",
        seed=0,
        content_hash=digest,
    )


def _verifier_fields(row: dict, env: Environment) -> dict | None:
    """A NeMo Gym row's ground truth: what the environment's ``nemo_gym`` importer reads, else
    every field beside the request, the response and gymflow's own (how rollouts are written)."""
    own = env.importers().get("nemo_gym")
    if own is not None:
        return own(row).ground_truth
    skip = {"responses_create_params", "response", "reward", *GYMFLOW_FIELDS}
    return {k: v for k, v in row.items() if k not in skip} or None


def _items(row: dict) -> list:
    for key in ("items", "output", "trajectory", "messages"):
        value = row.get(key)
        if isinstance(value, str) and key == "trajectory":
            value = json.loads(value)
        if isinstance(value, list):
            return value
    raise ValueError("no 'items', 'output', 'trajectory' or 'messages' list")


def _leading_messages(items: list) -> list[dict]:
    """The messages before the first assistant turn or tool item, as ``{role, content}``."""
    leading = []
    for item in items:
        if not isinstance(item, dict):
            raise TypeError("an item is not an object")
        if item.get("type", "message") != "message" or item.get("role") not in PROMPT_ROLES:
            break
        leading.append({"role": item["role"], "content": item.get("content", "")})
    return nemo_prompt({"responses_create_params": {"input": leading}})[0]


def _outcome(row: dict, env: Environment) -> str:
    if row.get("success") is False or row.get("failure_kind"):
        return "failure"
    reward = row.get("reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        return "failure" if reward < env.reward_range[1] else "success"
    return "success" if row.get("success") is True else "unknown"
