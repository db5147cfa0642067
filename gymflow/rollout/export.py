"""Collected rollouts out to other tools: Hugging Face datasets, NeMo Gym, SFT demos, DPO pairs.

Reads any rollout folder the product wrote (:mod:`gymflow.rollout.store`: a lifecycle run folder,
a collection, an evaluation, or their ``rollouts/``; parts validated, ``tasks.parquet`` beside
them for prompts and tools): one row per rollout id, its latest attempt (a
rollout retried with ``--retry-failed`` is exported as its retry, never twice).

* ``hf``: every row and column as a ``datasets.Dataset`` (``save_to_disk``), failures included.
* ``nemo_gym``: NeMo Gym rollout JSONL (:func:`gymflow.data.nemo_gym.rollout_row`). Only rows with
  a reward: a NeMo Gym rollout is a ``/verify`` answer, and unscored rows never got one.
* ``sft``: rejection sampling — per group, the best scored sample if its reward reaches
  ``min_reward`` (ties: lowest sample index).
* ``dpo``: per group, best vs worst scored sample, only when their rewards differ.

``sft`` and ``dpo`` rows are TRL's conversational format (``prompt`` messages, ``completion`` /
``chosen`` / ``rejected`` assistant and tool messages, ``tools``); with a ``tokenizer`` folder
they are rendered to strings with its chat template instead, the prompt as
:func:`gymflow.train.sft.demonstrations` renders it and the completion ending with the EOS token, so
the SFT stage consumes them unchanged. Every row keeps its lineage (rollout ids, reward).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from gymflow.core.conversation import messages_from_items, split_rendered
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.core.task_record import Task
from gymflow.data.task_table import read_tasks
from gymflow.rollout.episode import Episode
from gymflow.rollout.store import read_rollouts, tasks_file

FORMATS = ("hf", "nemo_gym", "sft", "dpo")


def export(
    src: Path, fmt: str, out: Path, min_reward: float = 1.0, tokenizer: Path | None = None
) -> int:
    """Write ``src``'s rollouts to ``out`` in ``fmt``; returns the rows written."""
    if fmt not in FORMATS:
        raise GymflowError(FailureKind.BAD_REQUEST, f"unknown format {fmt!r}; use one of {FORMATS}")
    df = read_rollouts(src).sort("rollout_id")
    if fmt == "hf":
        from datasets import Dataset

        Dataset.from_polars(df).save_to_disk(str(out))
        return df.height
    tasks = {t.task_id: t for t in read_tasks(tasks_file(src))}
    if fmt == "nemo_gym":
        rows = nemo_gym_rows(df, tasks)
    else:
        render = _renderer(tokenizer)
        rows = (
            sft_rows(df, tasks, min_reward, render) if fmt == "sft" else dpo_rows(df, tasks, render)
        )
    write_jsonl_atomic(Path(out), rows)
    return len(rows)


def nemo_gym_rows(df: pl.DataFrame, tasks: dict[str, Task]) -> list[dict]:
    from gymflow.env.registry import get_env
    from gymflow.rollout.nemo_gym_rows import rollout_row

    rows = []
    for row in df.filter(pl.col("reward").is_not_null()).iter_rows(named=True):
        env = get_env(row["env"])
        rows.append(rollout_row(_episode(row, tasks[row["task_id"]]), env, row.get("policy") or ""))
    return rows


def sft_rows(df: pl.DataFrame, tasks: dict[str, Task], min_reward: float, render) -> list[dict]:
    out = []
    for group in _scored_groups(df):
        best = group[0]
        if best["reward"] < min_reward:
            continue
        task = tasks[best["task_id"]]
        prompt, completion = render(task, completion_messages(task, best))
        out.append(
            {
                "prompt": prompt,
                "completion": completion,
                **({"tools": task.tools} if isinstance(prompt, list) else {}),
                "task_id": task.task_id,
                "rollout_id": best["rollout_id"],
                "reward": best["reward"],
            }
        )
    return out


def dpo_rows(df: pl.DataFrame, tasks: dict[str, Task], render) -> list[dict]:
    out = []
    for group in _scored_groups(df):
        best, worst = group[0], group[-1]
        if best["reward"] == worst["reward"]:
            continue  # no preference to learn
        task = tasks[best["task_id"]]
        prompt, chosen = render(task, completion_messages(task, best))
        _, rejected = render(task, completion_messages(task, worst))
        out.append(
            {
                "prompt": prompt,
                "chosen": chosen,
                "rejected": rejected,
                **({"tools": task.tools} if isinstance(prompt, list) else {}),
                "task_id": task.task_id,
                "chosen_id": best["rollout_id"],
                "rejected_id": worst["rollout_id"],
                "chosen_reward": best["reward"],
                "rejected_reward": worst["reward"],
            }
        )
    return out


def completion_messages(task: Task, row: dict) -> list[dict]:
    """The episode after its prompt as chat messages (see :mod:`gymflow.core.conversation`)."""
    return messages_from_items(json.loads(row["trajectory"])[len(task.prompt) :])


def _scored_groups(df: pl.DataFrame) -> list[list[dict]]:
    """Each group's scored rows, best first (reward descending, then sample index)."""
    scored = df.filter(pl.col("reward").is_not_null()).sort(
        ["group_id", "reward", "sample_idx"], descending=[False, True, False]
    )
    return [g.to_dicts() for _, g in scored.group_by("group_id", maintain_order=True)]


def _renderer(tokenizer_path: Path | None):
    """``(task, completion messages) -> (prompt, completion)``: messages, or template strings."""
    if tokenizer_path is None:
        return lambda task, messages: ([dict(m) for m in task.prompt], messages)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_path))

    def render(task: Task, messages: list[dict]) -> tuple[str, str]:
        return split_rendered(tok, task.prompt, task.tools, messages)

    return render


def _episode(row: dict, task: Task) -> Episode:
    """A verified episode back from its row (what :func:`gymflow.data.nemo_gym.rollout_row` reads)."""
    return Episode(
        task=task,
        seed=row["seed"],
        session_id=row["rollout_id"],
        prompt_ids=list(row["prompt_ids"]),
        completion_ids=list(row["completion_ids"]),
        logprobs=list(row["logprobs"]),
        env_mask=list(row["env_mask"]),
        items=json.loads(row["trajectory"]),
        turns=row["turns"],
        tool_calls=row["tool_calls"],
        done=True,
        truncated=row["failure_kind"] == FailureKind.TRUNCATED,
        score={
            "reward": row["reward"],
            "success": row["success"],
            "failure_kind": row["failure_kind"],
            "components": json.loads(row["reward_components"]),
            "detail": row.get("failure_detail") or "",
        },
        started_at=row["started_at"],
        latency_s=row["latency_s"],
    )
