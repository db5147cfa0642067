"""``gymflow eval``: any policy on the tasks of several environments, optionally against another.

What the command line and the Prefect flow ``flows/evaluate.py`` both run. :class:`EvalOptions`
is the one declaration of the options (the command's flags take their defaults and help from
its fields). :func:`run_eval` checks every name first (environments, policy specs, split), then
loads each policy once and evaluates it on every environment's tasks through
:func:`~gymflow.eval.evaluation.evaluate_policy`, i.e. the one episode driver and the one
rollout store: the policy's episodes of every environment land in ``OUT/rollouts/`` with
``OUT/tasks.parquet`` (``--against``'s in ``OUT/against/``), so ``gymflow rollouts export --in
OUT`` reads them. Both policies get the same tasks and the same per-rollout seeds (seeds come
from the task and sample, never from the policy), which is what makes their comparison paired.
With ``--agent URL[,URL...]`` the episodes run on agent servers (``gymflow agent serve``) with
the same plan and seeds, so the rows are those the in-process loop writes.

An episode the policy or the environment could not finish (a timeout, a server down) is kept as
a row with its failure kind and no reward; it counts as a failure and shows in the buckets.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gymflow.agent.runner import AgentService
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.ids import new_run_id
from gymflow.core.task_record import Task
from gymflow.data.task_table import dataset_hash
from gymflow.env.environment import Environment
from gymflow.eval.compare import paired_differences
from gymflow.eval.evaluation import evaluate_policy
from gymflow.eval.metrics import measure
from gymflow.eval.splits import SPLIT_NAMES, GeneratedSplit, eval_tasks
from gymflow.policy.registered import RegisteredPolicy
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS
from gymflow.rollout.store import Lineage

SCRIPTED_BUDGET = 1 << 16
"""Episode budget of a scripted policy: its "tokens" are UTF-8 bytes, which a model's budget
would cut short (as ``gymflow rollouts collect`` does)."""


class EvalOptions(BaseModel):
    """What to evaluate, on what, and how (``gymflow eval --help`` shows the same)."""

    model_config = ConfigDict(extra="forbid")

    envs: list[str] = Field(min_length=1, description="Environments, comma-separated.")
    policy: str = Field(
        description="transformers:PATH, vllm:PATH, openai:URL?model=M, models:/NAME@ALIAS, "
        "models:/NAME/VERSION, or scripted:ENV (gold)."
    )
    against: str | None = Field(
        None, description="A second policy spec: both run on the same tasks and seeds (paired)."
    )
    split: str = Field(
        "heldout",
        description="val, heldout (a run's with --run, else regenerated as a default run "
        "splits it), an external set (bfcl:simple_python, bfcl:live_simple; fetched on first "
        "use), or a task file (.parquet table, or JSONL in --format).",
    )
    fmt: str = Field("gymflow", description="Format of a JSONL task file (as for gymflow verify).")
    run: str | None = Field(
        None, description="Take val/heldout from this run (an id under <home>/runs, or a folder)."
    )
    samples: int = Field(1, ge=1, description="K samples per task: 1 = greedy, else sampled.")
    temperature: float = Field(1.0, gt=0, le=5, description="Sampling temperature (K > 1).")
    limit: int | None = Field(None, ge=1, description="Evaluate the first N tasks per environment.")
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, description="Tokens per model turn.")
    max_completion_tokens: int = Field(
        256, ge=1, description="Tokens per episode, model and tool tokens."
    )
    seed: int = Field(0, description="Base of every rollout's sampling seed.")
    out: Path | None = Field(None, description="Output folder (default: <home>/evals/<eval id>).")
    price_prompt: float | None = Field(
        None, ge=0, description="USD per million prompt tokens (cost, where usage is reported)."
    )
    price_completion: float | None = Field(
        None, ge=0, description="USD per million completion tokens."
    )
    mlflow: bool = Field(True, description="Log the evaluation to the home's MLflow store.")
    agent: str | None = Field(
        None,
        description="Run the episodes on agent servers (gymflow agent serve) at these URLs, "
        "comma-separated, instead of in this process; they load the policy spec themselves.",
    )
    max_unscored: float = Field(
        0.05,
        ge=0,
        le=1,
        description="The share of a policy's episodes that an infrastructure failure may leave "
        "without a verdict (policy_unavailable, env_unavailable, timeout, …); above it the "
        "evaluation is an error, not a score (exit 1, the MLflow run marked failed). Such "
        "episodes are failures in the table, never zeros.",
    )

    @field_validator("envs", mode="before")
    @classmethod
    def _comma_separated(cls, value):
        if isinstance(value, str):
            value = value.split(",")
        return [v.strip() for v in value if v and v.strip()]


@dataclass
class PolicyEval:
    """One policy's evaluation: its rows, measures per environment and pooled."""

    label: str
    spec: str
    lineage_spec: str
    """The spec recorded in every row: a registry alias pinned to its version."""
    registered: RegisteredPolicy | None
    folder: Path
    rows: list[dict]
    per_env: dict[str, dict]
    overall: dict
    wall_s: dict[str, float]


@dataclass
class EvalResult:
    eval_id: str
    options: EvalOptions
    out: Path
    sources: dict[str, str]
    """Per environment: where its tasks came from."""
    tasks: dict[str, list[Task]]
    policies: list[PolicyEval]
    comparison: dict | None = None
    """``{env or "overall": paired_differences}`` of the first policy minus the second."""
    wall_s: float = 0.0

    def summary(self) -> dict:
        """Everything but the rows, JSON-ready (``summary.json``, MLflow, the flow's return)."""
        return {
            "eval_id": self.eval_id,
            "out": str(self.out),
            "options": self.options.model_dump(mode="json"),
            "sources": self.sources,
            "n_tasks": {env: len(tasks) for env, tasks in self.tasks.items()},
            "policies": [
                {
                    "label": p.label,
                    "spec": p.spec,
                    "lineage_spec": p.lineage_spec,
                    "registered": (
                        None
                        if p.registered is None
                        else {"name": p.registered.name, "version": p.registered.version}
                    ),
                    "folder": str(p.folder),
                    "per_env": p.per_env,
                    "overall": p.overall,
                    "wall_s": p.wall_s,
                }
                for p in self.policies
            ],
            "comparison": self.comparison,
            "wall_s": self.wall_s,
        }


def run_eval(options: EvalOptions, home: Path, generated: GeneratedSplit) -> EvalResult:
    """Evaluate ``options.policy`` (and ``options.against``); see the module docstring.

    ``generated`` are the task settings a ``val``/``heldout`` split is regenerated with when
    no run is named. Raises ``GymflowError`` (one line, with a kind) for any bad input.
    """
    from gymflow.env.registry import get_env
    from gymflow.policy.checkpoints import check_checkpoint
    from gymflow.policy.spec import check_model_path, parse_spec

    started = time.perf_counter()
    envs = [get_env(name) for name in dict.fromkeys(options.envs)]
    specs = [s for s in (options.policy, options.against) if s]
    for spec in specs:  # a bad spec fails before any work
        parsed = parse_spec(spec)
        check_model_path(parsed)  # a missing folder is refused before task caches are written
        if parsed.backend == "transformers" and Path(parsed.target).is_dir():
            check_checkpoint(parsed.target)  # no template, no EOS, foreign tool calls
        if parsed.backend == "scripted" and [e.name for e in envs] != [parsed.target]:
            raise GymflowError(
                FailureKind.BAD_REQUEST,
                f"{spec} replays {parsed.target}'s gold answers and knows no other tasks: "
                f"evaluate it with --env {parsed.target} alone",
            )
    run_dir = _run_folder(home, options.run) if options.run else None
    if (
        options.split not in SPLIT_NAMES
        and len(envs) > 1
        and not options.split.endswith(".parquet")
    ):
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"--split {options.split}: a JSONL task file is one environment's; evaluate several "
            "environments on val, heldout or a .parquet task table",
        )
    found = {
        env.name: eval_tasks(env, options.split, generated, options.fmt, run_dir, home / ".cache")
        for env in envs
    }
    tasks = {name: f.tasks[: options.limit] for name, f in found.items()}
    sources = {name: f.source for name, f in found.items()}
    _refuse_shared_ids(tasks)
    eval_id = new_run_id()
    out = Path(options.out or home / "evals" / eval_id).resolve()
    labels = ["policy", "against"]
    evaluated = []
    for label, spec in zip(labels, specs, strict=False):
        folder = out if label == "policy" else out / "against"
        evaluated.append(_evaluate(label, spec, envs, tasks, folder, eval_id, options, home))
    comparison = None
    if len(evaluated) == 2:
        a, b = evaluated
        comparison = {
            env.name: paired_differences(_env_rows(a, env), _env_rows(b, env)) for env in envs
        }
        comparison["overall"] = paired_differences(a.rows, b.rows)
    return EvalResult(
        eval_id, options, out, sources, tasks, evaluated, comparison,
        wall_s=time.perf_counter() - started,
    )  # fmt: skip


def _evaluate(
    label: str,
    spec: str,
    envs: list[Environment],
    tasks: dict[str, list[Task]],
    folder: Path,
    eval_id: str,
    o: EvalOptions,
    home: Path,
) -> PolicyEval:
    from gymflow.env.resources_server import build_app

    agent = None
    if o.agent:  # the agent servers load the policy; a registry alias is pinned here
        policy, registered = None, _registered(spec, home)
        sent = registered.pinned_spec if registered else spec
        agent = AgentService(tuple(u.strip() for u in o.agent.split(",") if u.strip()), sent)
    else:
        policy, registered = _load_policy(spec, tasks, home)
    scripted = spec.startswith("scripted:")
    lineage_spec = registered.pinned_spec if registered else spec
    run_id = eval_id if label == "policy" else f"{eval_id}-{label}"
    prices = (
        (o.price_prompt or 0.0, o.price_completion or 0.0)
        if o.price_prompt is not None or o.price_completion is not None
        else None
    )
    rows: list[dict] = []
    per_env, walls = {}, {}
    for i, env in enumerate(envs):
        env_tasks = tasks[env.name]
        version = int(registered.version) if registered else 0
        lineage = Lineage(
            run_id, 0, version, lineage_spec, env.name, env.version, dataset_hash(env_tasks)
        )
        t0 = time.perf_counter()
        env_rows, _ = evaluate_policy(
            env, build_app(env), policy, env_tasks, greedy=o.samples == 1, samples=o.samples,
            max_new_tokens=o.max_new_tokens,
            max_completion_tokens=(
                max(o.max_completion_tokens, SCRIPTED_BUDGET) if scripted
                else o.max_completion_tokens
            ),
            seed=o.seed, temperature=o.temperature, out_dir=folder, lineage=lineage,
            keep_incomplete=True, append=i > 0, agent=agent,
        )  # fmt: skip
        walls[env.name] = time.perf_counter() - t0
        per_env[env.name] = measure(env_rows, prices) | {"wall_s": walls[env.name]}
        rows += env_rows
    _refuse_unmeasured(label, spec, rows, o.max_unscored)
    overall = measure(rows, prices) | {"wall_s": sum(walls.values())}
    return PolicyEval(label, spec, lineage_spec, registered, folder, rows, per_env, overall, walls)


def _refuse_unmeasured(label: str, spec: str, rows: list[dict], max_share: float) -> None:
    """An evaluation whose episodes mostly never reached a verdict measured the infrastructure,
    not the policy: raise with the commonest failure's kind and one of its details."""
    unscored = [r for r in rows if not r["scored"]]
    if not rows or len(unscored) <= max_share * len(rows):
        return
    kinds = Counter(r["failure_kind"] for r in unscored)
    kind, count = kinds.most_common(1)[0]
    detail = next(r["failure_detail"] for r in unscored if r["failure_kind"] == kind)
    raise GymflowError(
        FailureKind(kind),
        f"{len(unscored)} of {len(rows)} episodes of --{label} {spec} got no verdict "
        f"({', '.join(f'{k} {n}' for k, n in kinds.most_common())}; e.g. {detail}): not a "
        f"measurement of the policy (more than max_unscored {100 * max_share:g} %)",
    )


def _load_policy(spec: str, tasks: dict[str, list[Task]], home: Path):
    """The loaded policy and, for a ``models:`` spec, the registry version behind it."""
    from gymflow.policy.registered import resolve
    from gymflow.policy.spec import load_policy, parse_spec

    parsed = parse_spec(spec)
    if parsed.backend == "models":
        registered = resolve(parsed.target, home)
        return load_policy(f"transformers:{registered.path}"), registered
    return load_policy(parsed, tasks=tasks.get(parsed.target), home=home), None


def _registered(spec: str, home: Path) -> RegisteredPolicy | None:
    """The registry version a ``models:`` spec names (None for any other spec)."""
    from gymflow.policy.registered import resolve
    from gymflow.policy.spec import parse_spec

    parsed = parse_spec(spec)
    return resolve(parsed.target, home) if parsed.backend == "models" else None


def _run_folder(home: Path, run: str) -> Path:
    for candidate in (Path(run), home / "runs" / run):
        if (candidate / "data").is_dir():
            return candidate.resolve()
    raise GymflowError(
        FailureKind.BAD_REQUEST,
        f"--run {run}: no run folder with data/ at {run} or {home / 'runs' / run}; "
        "give a run id from <home>/runs or a run folder",
    )


def _refuse_shared_ids(tasks: dict[str, list[Task]]) -> None:
    seen: dict[str, str] = {}
    for env, env_tasks in tasks.items():
        for t in env_tasks:
            if seen.setdefault(t.task_id, env) != env:
                raise GymflowError(
                    FailureKind.BAD_REQUEST,
                    f"task id {t.task_id!r} is in both {seen[t.task_id]} and {env}: one "
                    "evaluation folder needs distinct ids; evaluate those environments apart",
                )


def _env_rows(p: PolicyEval, env: Environment) -> list[dict]:
    return [r for r in p.rows if r["env"] == env.name]
