"""What a run's SFT, GRPO and SFT-control stages train and validate on, without Prefect.

The lifecycle's stages (``tasks/train.py``) and ``benchmarks/grpo_vs_control.py`` (which asks
the lifecycle's question on a machine with no Prefect or MLflow) both take these from here:
the seeded split of the train tasks into demonstrations and GRPO's pool, the environments'
in-process servers, the validation scorer SFT and GRPO pick their checkpoints with, the
demonstrations, and the SFT settings of the start and of the control.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator

from gymflow.core.task_record import Task
from gymflow.data.env_mix import apportion
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.train.checkpoint_choice import VALIDATION_METRIC, validation_callback

Servers = dict[str, tuple]
"""``{environment name: (environment, in-process app)}``, in the run's order."""


def split_demos_and_pool(cfg: LifecycleConfig, train: list[Task]) -> tuple[list[Task], list[Task]]:
    """``(demonstrations, GRPO's pool)``: each environment's train tasks in a seeded shuffle,
    the first of them (its share of ``cfg.demos``) demonstrations, the rest its pool."""
    demos, pool = [], []
    for name, n in apportion(cfg.demos, cfg.env_weights, minimum=1).items():
        mine = [t for t in train if t.env == name]
        random.Random(cfg.seed).shuffle(mine)
        demos += mine[:n]
        pool += mine[n:]
    return demos, pool


@contextlib.contextmanager
def environment_servers(cfg: LifecycleConfig) -> Iterator[Servers]:
    """Every environment of the run with its in-process app; their verify process pools
    (math's, code's) are shut down on the way out: a spawned process (the control beside
    GRPO) could not exit while one waits for work. Their idle workers are killed, not asked to
    stop: CI once hung 16 minutes with the control process joining two workers that never got
    the executor's stop sentinel (CPython 3.11's ``shutdown(wait=False)``); nothing is in
    flight once a stage is done with its servers."""
    from gymflow.env.registry import get_env
    from gymflow.env.resources_server import build_app

    out: Servers = {}
    try:
        for name in cfg.env_weights:
            env = get_env(name)
            out[name] = (env, build_app(env))
        yield out
    finally:
        for _, app in out.values():
            app.state.verifier.shutdown(kill=True)


def validation_tasks(cfg: LifecycleConfig, val: list[Task], greedy: bool) -> dict[str, list[Task]]:
    """The validation tasks :func:`validation_success` scores, by environment: the first
    ``grpo.validate_tasks`` of ``val`` for the checkpoint rule (``greedy``), else the first
    ``val_eval_n``; each environment its share of them."""
    n = (cfg.grpo.validate_tasks or cfg.val_eval_n) if greedy else cfg.val_eval_n
    shares = apportion(n, cfg.env_weights, minimum=1)
    return {name: [t for t in val if t.env == name][:k] for name, k in shares.items()}


def validation_success(
    cfg: LifecycleConfig, servers: Servers, val: list[Task], greedy: bool
) -> Callable[[object, object], float]:
    """``evaluate(model, tokenizer) -> success`` on validation tasks (a mix: each environment's
    share of them, success pooled over all): sampled at ``sft.sample_temperature`` (SFT's
    pick) or greedy, as the gate scores (the checkpoint rule), on :func:`validation_tasks`."""
    from gymflow.eval.evaluation import evaluate_policy
    from gymflow.policy.transformers_backend import TransformersPolicy

    tasks = validation_tasks(cfg, val, greedy)

    def success(model, tokenizer) -> float:
        policy, hits, n = TransformersPolicy(model, tokenizer), 0.0, 0
        for name, (env, app) in servers.items():
            _, summary = evaluate_policy(
                env, app, policy, tasks[name], greedy=greedy, temperature=cfg.sft.sample_temperature,
                max_new_tokens=cfg.max_new_tokens, seed=cfg.seed + 17,
            )  # fmt: skip
            hits, n = hits + summary["success"] * summary["n"], n + summary["n"]
        return hits / max(1, n)

    return success


def candidate_choice(
    cfg: LifecycleConfig,
    servers: Servers,
    val: list[Task],
    every: int | None = None,
    log_to_mlflow: bool = False,
    metric: str = VALIDATION_METRIC,
) -> list:
    """The one checkpoint rule of both gate candidates (GRPO and the control), as the
    ``TrainerCallback`` list to train with: greedy success on the same validation tasks
    (:func:`validation_success`) at step 0, every ``every`` steps (default
    ``grpo.validate_every``) and the last; none when validation is off (the last step then,
    for both). ``metric``: the name it logs the scores under."""
    every = every or cfg.grpo.validate_every
    if every is None:
        return []
    greedy = validation_success(cfg, servers, val, greedy=True)
    return [validation_callback(greedy, every, log_to_mlflow, metric)]


def run_demonstrations(servers: Servers, demo_tasks: list[Task], tokenizer) -> list[dict]:
    """The run's demonstrations (SFT's, the control's, GRPO's ``demo_loss``): each
    environment's from its own gold answers."""
    from gymflow.train.sft import demonstrations

    demos = []
    for name, (env, _) in servers.items():
        demos += demonstrations(env, tokenizer, [t for t in demo_tasks if t.env == name])
    return demos


def sft_settings(cfg: LifecycleConfig, control: bool):
    """SFT's settings seeded by the run (its data order); the control's also train for a wall
    time — GRPO's, not SFT's own budget — not up to the GRPO start's sampled-validation target."""
    update: dict = {"seed": cfg.seed}
    if control:
        update |= {"max_steps": 100_000, "target_sampled_success": 1.01, "time_budget_s": None}
    return cfg.sft.model_copy(update=update)
