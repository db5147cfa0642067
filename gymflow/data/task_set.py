"""Turn an environment's drafts into deduplicated, split, identified tasks."""

from __future__ import annotations

from gymflow.core.task_record import Task, content_hash, split_of
from gymflow.env.environment import Environment


def build_tasks(
    env: Environment, n: int, seed: int, heldout_frac: float, val_frac: float
) -> list[Task]:
    """Generate ``n`` drafts, drop exact duplicates, split by content hash."""
    seen: set[str] = set()
    tasks: list[Task] = []
    for draft in env.generate(n, seed):
        digest = content_hash(draft.prompt, draft.ground_truth)
        if digest in seen:
            continue
        seen.add(digest)
        tasks.append(
            Task(
                task_id=f"{env.name}-{digest[:12]}",
                env=env.name,
                split=split_of(digest, heldout_frac, val_frac),
                prompt=draft.prompt,
                tools=env.tool_schemas,
                ground_truth=draft.ground_truth,
                generator=f"{env.name}/{env.version}",
                seed=draft.seed,
                content_hash=digest,
            )
        )
    return tasks
