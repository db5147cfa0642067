"""The verifier drift sentinel: does today's verifier still agree with the champion's verdicts?

The champion was gated with some version of each environment's verifier. When an environment's
``version`` or its verifier code (:func:`verifier_digest`: its own source files) is no longer
what the champion's registry version records (``lineage.verifiers``), a comparison with the
champion mixes two meanings of "success". Before any training, :func:`rescore` scores the
champion run's stored held-out episodes (every policy the gate evaluated,
``<run>/eval/heldout-*/``) again with the current verifier and lists the tasks whose verdict
(success) flipped; the lifecycle stops with ``verifier_drift`` when more than
``GateSettings.drift_max_flip_share`` of them did, naming them, so a person decides whether the
change was meant (then the champion is re-gated) or is a bug.

What is covered: the environment's own module files (its package's ``*.py``, not its tests)
and its ``version``; code it imports from elsewhere (``gymflow.core``) is not in the digest.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import sys
from pathlib import Path

import polars as pl
from pydantic import BaseModel, Field

from gymflow.core.task_record import Task
from gymflow.data.task_table import read_tasks
from gymflow.env.environment import Environment
from gymflow.env.verify_pool import VerifyPool
from gymflow.rollout.store import read_rollouts


def verifier_digest(env: Environment) -> str:
    """sha256 (16 hex digits) of the environment's version and its own source files: its
    package's ``*.py`` (not sub-folders such as tests), or its module's file alone."""
    module = sys.modules[type(env).__module__]
    path = Path(inspect.getfile(module))
    package = module.__package__ or ""
    files = sorted(path.parent.glob("*.py")) if "." in module.__name__ and package else [path]
    digest = hashlib.sha256(f"{env.name}:{env.version}".encode())
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def verifier_identity(envs: list[Environment]) -> dict[str, dict[str, str]]:
    """``{name: {"version", "digest"}}``: what a registry version records of its verifiers."""
    return {e.name: {"version": str(e.version), "digest": verifier_digest(e)} for e in envs}


class Flip(BaseModel):
    """One stored episode whose verdict the current verifier changed."""

    task_id: str
    env: str
    policy: str
    """The evaluation folder it came from (``heldout-candidate``, ``heldout-baseline`` ...)."""
    before: dict
    """``{"success", "reward", "failure_kind"}`` as stored."""
    after: dict


class DriftReport(BaseModel):
    """What the sentinel found (``reports/verifier_drift.json``)."""

    champion: str | None = None
    """``gymflow-tool_call v3``; None without a champion."""
    changed: dict[str, dict] = Field(default_factory=dict)
    """Per environment whose verifier differs: ``{"then", "now"}`` identities."""
    checked: str
    """What was done, in words (nothing to compare, unchanged, re-scored ...)."""
    episodes: int = 0
    """Stored episodes re-scored."""
    flips: list[Flip] = Field(default_factory=list)
    threshold: float = 0.0
    stopped: bool = False

    @property
    def flip_share(self) -> float:
        return len(self.flips) / self.episodes if self.episodes else 0.0

    def flipped_tasks(self) -> list[str]:
        return sorted({f.task_id for f in self.flips})

    def markdown(self) -> str:
        lines = ["# Verifier drift sentinel", "", self.checked, ""]
        for name, ids in self.changed.items():
            lines.append(f"- `{name}`: gated with {ids.get('then')}, now {ids.get('now')}")
        if self.flips:
            lines += ["", "| task | env | policy | before | after |", "|---|---|---|---|---|"]
            for f in self.flips:
                lines.append(
                    f"| {f.task_id} | {f.env} | {f.policy} | {_verdict(f.before)} | "
                    f"{_verdict(f.after)} |"
                )
        return "\n".join(lines) + "\n"


def _verdict(v: dict) -> str:
    word = "success" if v.get("success") else (v.get("failure_kind") or "fail")
    reward = v.get("reward")
    return f"{word} ({reward:.3g})" if isinstance(reward, float) else word


def changed_verifiers(
    then: dict[str, dict] | None, now: dict[str, dict], env_versions: dict[str, str]
) -> dict[str, dict]:
    """The environments whose verifier differs from the champion's record. ``then`` is the
    recorded identities (None: a version registered before they were recorded, when only
    ``env_versions`` — ``lineage.env_version`` — is known: a digest then counts as unknown,
    so changed).

    >>> now = {"math": {"version": "2", "digest": "b"}}
    >>> changed_verifiers({"math": {"version": "2", "digest": "b"}}, now, {})
    {}
    >>> sorted(changed_verifiers({"math": {"version": "1", "digest": "a"}}, now, {})["math"])
    ['now', 'then']
    """
    out = {}
    for name, ident in now.items():
        before = (then or {}).get(name) or (
            {"version": env_versions[name], "digest": "unknown"} if name in env_versions else None
        )
        if before is not None and before != ident:
            out[name] = {"then": before, "now": ident}
    return out


def rescore(run_dir: Path, envs: dict[str, Environment]) -> tuple[int, list[Flip]]:
    """Score every stored held-out episode of ``run_dir`` of the environments in ``envs``
    again; ``(episodes re-scored, flips)``. Episodes without a stored verdict are skipped."""
    folders = sorted(p for p in (run_dir / "eval").glob("heldout-*") if (p / "rollouts").is_dir())
    jobs: list[tuple[str, Task, list[dict], dict]] = []
    for folder in folders:
        tasks = {t.task_id: t for t in read_tasks(folder / "tasks.parquet")}
        rows = read_rollouts(folder).filter(pl.col("reward").is_not_null())
        for row in rows.iter_rows(named=True):
            if row["env"] in envs and row["task_id"] in tasks:
                before = {k: row[k] for k in ("success", "reward", "failure_kind")}
                jobs.append(
                    (folder.name, tasks[row["task_id"]], json.loads(row["trajectory"]), before)
                )
    pools = {name: VerifyPool(env) for name, env in envs.items()}

    async def score_all() -> list[dict]:
        return await asyncio.gather(*(pools[t.env].verify(t, items) for _, t, items, _ in jobs))

    try:
        scores = asyncio.run(score_all())
    finally:
        for pool in pools.values():
            pool.shutdown()
    flips = [
        Flip(
            task_id=task.task_id,
            env=task.env,
            policy=folder,
            before=before,
            after={
                "success": bool(s["success"]),
                "reward": float(s["reward"]),
                "failure_kind": s.get("failure_kind"),
            },
        )  # fmt: skip
        for (folder, task, _, before), s in zip(jobs, scores, strict=True)
        if bool(s["success"]) != bool(before["success"])
    ]
    return len(jobs), flips
