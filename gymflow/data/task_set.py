"""Turn an environment's drafts into deduplicated, split, identified tasks.

* **Exact duplicates** (same normalized prompt, same ground truth) are dropped.
* **The split** is drawn from the normalized prompt's hash (:func:`~gymflow.data.dedup.prompt_key`),
  not from the ground truth: one prompt with two ground truths (counter's prompts do not state
  the start value) is in one split.
* **Near-duplicates across the boundary**: a train task whose prompt nearly repeats a held-out
  or validation prompt (or one held out elsewhere: added files, earlier runs) is dropped
  (:func:`drop_near_heldout`), so the groups of near-duplicates a text split would cut in two
  end up on the evaluation side. Near-duplicates within one split are kept: they are similar
  tasks, not leaks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Split, Task, content_hash, split_of
from gymflow.data.dedup import NearDupSettings, near_duplicates, normalized_prompt, prompt_key
from gymflow.data.leakage import Leak, PromptRef, find_leaks, refuse_leaks
from gymflow.data.settings import TaskDataSettings
from gymflow.data.task_files import load_tasks
from gymflow.env.environment import Environment, TaskDraft


def build_tasks(
    env: Environment, n: int, seed: int, heldout_frac: float, val_frac: float
) -> list[Task]:
    """Generate ``n`` drafts, drop exact duplicates, split by normalized-prompt hash."""
    return tasks_from_drafts(env, env.generate(n, seed), heldout_frac, val_frac)


def tasks_from_drafts(
    env: Environment, drafts: Sequence[TaskDraft], heldout_frac: float, val_frac: float
) -> list[Task]:
    """Drafts as identified tasks: exact duplicates dropped, split by normalized-prompt hash."""
    seen: set[tuple[str, str]] = set()
    tasks: list[Task] = []
    for draft in drafts:
        key = prompt_key(draft.prompt)
        same = (key, json.dumps(draft.ground_truth, sort_keys=True, ensure_ascii=False))
        if same in seen:
            continue
        seen.add(same)
        digest = content_hash(draft.prompt, draft.ground_truth)
        tasks.append(
            Task(
                task_id=f"{env.name}-{digest[:12]}",
                env=env.name,
                split=draft.split or split_of(key, heldout_frac, val_frac),
                prompt=draft.prompt,
                tools=env.tool_schemas if draft.tools is None else draft.tools,
                ground_truth=draft.ground_truth,
                generator=f"{env.name}/{env.version}",
                seed=draft.seed,
                content_hash=digest,
            )
        )
    return tasks


def drop_near_heldout(
    tasks: Sequence[Task], elsewhere: Sequence[PromptRef], settings: NearDupSettings
) -> tuple[list[Task], list[Leak]]:
    """Drop train tasks whose prompt is (nearly) a val or held-out prompt of ``tasks`` or one
    of ``elsewhere``; returns the kept tasks and, per dropped task, what it repeated."""
    train = [PromptRef.of(t, "train") for t in tasks if t.split == "train"]
    evaluation = [PromptRef.of(t, t.split) for t in tasks if t.split != "train"]
    leaks = find_leaks(train, [*evaluation, *elsewhere], settings)
    dropped = {leak.train.id for leak in leaks}
    return [t for t in tasks if t.task_id not in dropped], leaks


def within_split_near_duplicates(tasks: Sequence[Task], settings: NearDupSettings) -> int:
    """How many tasks nearly repeat an earlier task's prompt of the same split (kept; counted
    for the coverage report). Exact repeats with another ground truth count too."""
    found = 0
    for split in ("train", "val", "heldout"):
        texts = [normalized_prompt(t.prompt) for t in tasks if t.split == split]
        found += len(near_duplicates(texts, settings))
    return found


@dataclass
class AssembledTasks:
    """The task set of a run and what was left out on the way (``generate_tasks`` logs it)."""

    tasks: list[Task]
    counts: dict[str, int]
    """``drafts``, ``exact_duplicates``, ``near_heldout_dropped``, ``near_duplicates_within``
    (kept), ``added_train``, ``added_heldout``, ``recorded_heldout``."""
    dropped: list[Leak]
    """Each generated train task dropped, with the held-out prompt it (nearly) repeats."""


def assemble_tasks(
    env: Environment,
    n: int,
    seed: int,
    heldout_frac: float,
    val_frac: float,
    settings: TaskDataSettings,
    recorded: Sequence[PromptRef] = (),
) -> AssembledTasks:
    """Generated tasks plus the task files ``settings`` adds, cleared of leakage.

    Generated train tasks near a held-out prompt (this run's, an added file's, or one of
    ``recorded``) are dropped. Added train tasks are never dropped: if one is a held-out task
    or nearly one, ``data_leakage`` is raised naming the pairs, before anything is written.
    """
    drafts = env.generate(n, seed)
    generated = tasks_from_drafts(env, drafts, heldout_frac, val_frac)
    exact = len(drafts) - len(generated)
    added_heldout = _added(env, settings.heldout_files, "heldout")
    added_train = _added(env, settings.train_files, "train")
    added = {t.content_hash for t in added_heldout + added_train}
    generated = [t for t in generated if t.content_hash not in added]  # the added copy wins
    elsewhere = [PromptRef.of(t, "added held-out") for t in added_heldout] + list(recorded)
    kept, dropped = drop_near_heldout(generated, elsewhere, settings.near_dup)
    tasks = kept + added_heldout + added_train
    _refuse_repeated_ids(tasks)
    heldout = [PromptRef.of(t, "held out") for t in tasks if t.split == "heldout"]
    train = [PromptRef.of(t, "train") for t in kept if t.split == "train"]
    train += [PromptRef.of(t, "added train") for t in added_train]
    refuse_leaks(find_leaks(train, heldout + list(recorded), settings.near_dup), "training")
    counts = {
        "drafts": len(drafts),
        "exact_duplicates": exact,
        "near_heldout_dropped": len(dropped),
        "near_duplicates_within": within_split_near_duplicates(tasks, settings.near_dup),
        "added_train": len(added_train),
        "added_heldout": len(added_heldout),
        "recorded_heldout": len(recorded),
    }
    return AssembledTasks(tasks, counts, dropped)


def _added(env: Environment, files: Sequence[str], split: Split) -> list[Task]:
    """Every task of ``files`` (gymflow task JSONL), moved to ``split``; the content hash is
    computed again (a file's own may be stale)."""
    tasks: list[Task] = []
    for path in files:
        for task in load_tasks(env, Path(path)).values():
            digest = content_hash(task.prompt, task.ground_truth)
            tasks.append(task.model_copy(update={"split": split, "content_hash": digest}))
    return tasks


def _refuse_repeated_ids(tasks: Sequence[Task]) -> None:
    seen: set[str] = set()
    for task in tasks:
        if task.task_id in seen:
            raise GymflowError(
                FailureKind.SCHEMA_VIOLATION,
                f"task id {task.task_id!r} is used twice (generated and added, or in two added "
                "files); give the added task another id",
            )
        seen.add(task.task_id)
