"""GRPO on TRL's ``GRPOTrainer`` with our rollout engine plugged in through ``rollout_func``.

TRL owns the loss, the optimizer and the checkpoints; we own generation, the environment
episodes and the rollout store. The dataset's ``prompt`` column holds task ids; TRL hands each
generation batch (already repeated ``num_generations`` times) to :class:`RolloutSource`, which
runs the episodes against the environment server, writes every rollout to Parquet, and returns
tokens, sampling logprobs, ``env_mask`` and the verifier's reward as an extra column.

Dynamic sampling (DAPO) is done here because TRL 1.16 lacks it: a group whose rewards are all
equal has zero advantage and teaches nothing, so it is replaced by a fresh group from the task
pool (up to ``max_resample_rounds``); the batch stays full.

The loss variants, KL, reward scaling and LoRA are TRL's and PEFT's own; the settings only name
them and refuse unknown values up front (TRL itself would fail only at the first loss). GSPO is
``importance_sampling_level="sequence"`` with ``loss_type="grpo"``. A LoRA run saves the merged
model, so the final policy loads with ``from_pretrained`` like a full fine-tune.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from gymflow.agent.settings import ExternalAgentSettings
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.task_record import Task
from gymflow.data.env_mix import draw_tasks
from gymflow.data.schemas import collected_rollouts
from gymflow.data.task_table import write_tasks
from gymflow.env.client import EnvClient
from gymflow.env.environment import Environment
from gymflow.policy.device import Device, trains_on_cpu
from gymflow.policy.transformers_backend import TransformersPolicy
from gymflow.rollout.driver import run_window, training_batch
from gymflow.rollout.episode import DEFAULT_MAX_NEW_TOKENS, Episode, Sampling
from gymflow.rollout.model_turns import ModelTurns
from gymflow.rollout.store import Lineage, Planned, RolloutWriter, plan, rollout_row
from gymflow.train.checkpoint_choice import load_chosen
from gymflow.train.demo_loss import DemoLoss, DemoLossSettings, with_demo_loss
from gymflow.train.distributed import agreed, gather, is_main, shard
from gymflow.train.lr_schedule import Schedule, with_progress_schedule
from gymflow.train.readiness import PreflightSettings
from gymflow.train.resume import KEEP_CHECKPOINTS, Progress
from gymflow.train.shared_prompt import with_shared_prompts
from gymflow.train.success_replay import SuccessReplay
from gymflow.train.task_pool import TaskPool, TaskPoolSettings, has_variance

LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
"""The ``loss_type`` values TRL 1.16 implements (``GRPOTrainer._compute_loss``)."""


class LoraSettings(BaseModel):
    """A PEFT LoRA adapter on the policy; merged into the weights when training ends."""

    model_config = {"extra": "forbid"}

    r: int = Field(16, gt=0, description="Adapter rank.")
    alpha: int = Field(32, gt=0, description="Scaling numerator (``lora_alpha``).")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the adapter input.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Modules to adapt; ``all-linear`` = every linear but the head."
    )

    def peft_config(self):
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=self.target_modules,
            task_type="CAUSAL_LM",
        )


class GRPOSettings(BaseModel):
    model_config = {"extra": "forbid"}

    max_steps: int = Field(
        250, ge=1, description="Optimizer steps (the time budget may stop it first)."
    )
    prompts_per_step: int = Field(4, ge=1, description="Distinct tasks per step (B).")
    num_generations: int = Field(
        8, ge=2, description="Completions per task (G, the group size; 2 or more to compare)."
    )
    num_iterations: int = Field(
        1,
        ge=1,
        description="Updates on each batch of rollouts (TRL's num_iterations, GRPO's mu): the "
        "batch sampled at one step is trained on again at the next mu - 1 steps, through the "
        "clipped ratio to the policy that sampled it; 1: every step samples its own.",
    )
    learning_rate: float = Field(5e-4, gt=0.0, le=1.0, description="Peak learning rate.")
    lr_schedule: Schedule = Field(
        "cosine",
        description="How the learning rate falls from its peak to about 0 when the run ends, "
        "at max_steps or at time_budget_s, whichever is further along (gymflow.train.lr_schedule).",
    )
    warmup_steps: int = Field(
        0,
        ge=0,
        description="Steps over which the learning rate ramps up linearly to the schedule's "
        "(gymflow.train.lr_schedule.warmup); 0: the first step trains at the peak.",
    )
    beta: float = Field(0.0, ge=0.0, description="KL coefficient; 0 loads no reference model.")
    loss_type: LossType = Field("dapo", description="TRL loss variant (its ``loss_type``).")
    importance_sampling_level: Literal["token", "sequence"] = Field(
        "token", description='"sequence" with loss_type "grpo" is GSPO.'
    )
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description='Advantage scaling; Dr. GRPO uses "none".'
    )
    lora: LoraSettings | None = Field(None, description="Train a LoRA adapter (PEFT) instead.")
    epsilon_high: float = Field(0.28, gt=0.0, description="Upper clip (DAPO clip-higher).")
    temperature: float = Field(
        1.1,
        gt=0.0,
        le=5.0,
        description="Rollout sampling temperature (TRL scales the loss's logits to match).",
    )
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, description="Tokens per model turn.")
    dynamic_sampling: bool = Field(
        True, description="Replace zero-variance groups with fresh ones."
    )
    max_resample_rounds: int = Field(2, ge=0, description="Replacement rounds per batch at most.")
    task_sampling: Literal["uniform", "difficulty"] = Field(
        "difficulty",
        description='Which tasks a step draws: "uniform" (TRL\'s shuffled dataset) or '
        '"difficulty" (a pool that tracks pass rates, gymflow.train.task_pool; a run on '
        'several environments, which the pool does not weigh, falls back to "uniform").',
    )
    task_pool: TaskPoolSettings = Field(
        default_factory=TaskPoolSettings, description='The "difficulty" pool\'s weights.'
    )
    preflight: PreflightSettings | None = Field(
        default_factory=PreflightSettings,
        description="Before the first step: pass@1, pass@G and the expected zero-variance "
        "share of the start on a sample of the pool, a verdict against the learnable band, "
        "and the curriculum's levels (gymflow.train.readiness); null: no preflight.",
    )
    demo_loss: DemoLossSettings | None = Field(
        default_factory=DemoLossSettings,
        description="Add an SFT loss on the run's demonstrations to every step "
        "(gymflow.train.demo_loss); null: the verifier's reward only.",
    )
    share_prompts: bool = Field(
        True,
        description="Run each group's shared prompt once in the loss forward "
        "(gymflow.train.shared_prompt), and the demo loss's common prefix once "
        "(gymflow.train.shared_prefix): TRL's log-probs and gradients, less compute.",
    )
    validate_every: int | None = Field(
        25,
        ge=1,
        description="Score greedy validation success every N steps and at the last; the best "
        "step is the policy GRPO hands on (None: the last step, nothing scored).",
    )
    validate_tasks: int | None = Field(
        None,
        ge=1,
        description="Validation tasks the checkpoint rule scores, for GRPO and its control "
        "alike: the first N of the val split, each environment its share; more than the "
        "split holds: all of it (None: val_eval_n, the tasks SFT's sampled check scores).",
    )
    vllm: Literal["off", "colocate", "server", "managed"] = Field(
        "off",
        description="Roll out with TRL's vLLM engine (GPU, the gpu extra): in the trainer's "
        'process ("colocate") or a `trl vllm-serve` server ("server"); TRL syncs the weights '
        'before each rollout batch. "managed": a `vllm serve` process gymflow starts from the '
        "vLLM environment (make setup-vllm; CPU or GPU) and syncs before each batch, full "
        "weights or the LoRA adapter (gymflow.policy.vllm_sync). Off: the training model "
        "generates (CPU path).",
    )
    vllm_server_url: str | None = Field(None, description='"server" mode: the server\'s URL.')
    vllm_gpu_memory_utilization: float = Field(
        0.3, gt=0.0, le=1.0, description='"colocate" mode: the GPU share vLLM may take.'
    )
    save_every: int = Field(20, ge=1, description="Checkpoint every N steps (resume point).")
    time_budget_s: float | None = Field(
        300.0,
        gt=0.0,
        description="Stop after this much training wall time (None: no limit). The embedded "
        "default is ended by it on both 2-core machines, its SFT control training beside it "
        "(340 s until 2026-11-28, when each step got cheaper and make run had to fit 10 "
        "minutes on the AVX2 machine too); docs/tuning.md.",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the backward pass. SmolLM2-135M on CPU holds "
        "~2.8 MB per trained token without it (4 × 405 tokens: 5.0 GB), ~1.1 MB with it "
        "(16 × 405: 7.7 GB; the rest is the 49,152-wide logits); costs a second forward pass.",
    )
    device: Device = Field(
        "auto",
        description="Where GRPO trains (and, without vLLM, rolls out): auto = CUDA when torch "
        'sees a GPU, else the CPU. vLLM needs the GPU: not "cpu" with vllm.',
    )
    seed: int = Field(0, description="Trainer and sampling seed.")
    engine: Literal["local", "ray"] = Field(
        "local",
        description='Where rollouts run: "local" (the trainer\'s process) or "ray" (Ray rollout '
        "workers, gymflow.train.ray_rollouts: the trainer's weights are synced to them through "
        "the object store before each step; the rows are stored here the same way). Not with "
        "lora or vllm.",
    )
    ray_workers: int = Field(2, ge=1, description='"ray": rollout workers (Ray actors).')
    ray_address: str | None = Field(
        None, description='"ray": a running cluster (default: a local one, started and stopped).'
    )
    agents: ExternalAgentSettings | None = Field(
        None,
        description="Roll out with external agent programs (LangGraph, the OpenAI Agents SDK, "
        "any code with an OpenAI client) instead of the episode driver: the policy being "
        "trained is served behind gymflow's capturing proxy and each program is pointed at it "
        '(gymflow.agent.training). Not with engine "ray" or vllm.',
    )

    @model_validator(mode="after")
    def _ray_engine_alone(self) -> GRPOSettings:
        if self.agents is not None and (self.engine == "ray" or self.vllm != "off"):
            raise ValueError('agents roll out through this process: engine "local", vllm "off"')
        if self.engine == "local" and self.ray_address:
            raise ValueError('ray_address is for engine "ray"')
        if self.engine == "ray" and (self.lora is not None or self.vllm != "off"):
            raise ValueError('engine "ray" rolls out full transformers weights: no lora, no vllm')
        if self.vllm in ("colocate", "server") and self.device == "cpu":
            raise ValueError(
                'TRL\'s vllm modes need the GPU: set device "auto" or "cuda", or vllm "managed"'
            )
        return self


class RolloutSource:
    """The ``rollout_func`` TRL calls: runs episodes, applies dynamic sampling, stores rollouts.

    Episodes run through the one driver (:func:`gymflow.rollout.driver.run_window`, every
    episode of a round live at once, a seed per row from :func:`gymflow.rollout.store.plan`)
    and, with ``out_dir``, every rollout of the step (the groups trained on and the ones
    dynamic sampling dropped, ``used_for_training`` telling which) is written through the one
    store as ``out_dir/rollouts/part-<step>-*.parquet`` with ``lineage`` (its iteration and
    policy version are the step). ``on_batch(episodes, used, step)`` sees the same batch.

    With ``task_sampling="difficulty"`` the tasks of a step (and dynamic sampling's
    replacements) come from a :class:`~gymflow.train.task_pool.TaskPool` instead of the ids
    TRL's sampler handed over; its ledger is ``pool_file`` (kept across a resume). ``task_pool``
    hands in a pool built elsewhere (the curriculum's, :mod:`gymflow.train.curriculum`).

    Several environments (``mix``: ``{name: (environment, app)}`` beside ``env``, ``weights``
    per name): each step's tasks and dynamic sampling's replacements are drawn by weight
    (:func:`gymflow.data.env_mix.draw_tasks`), each task's episodes run against its own
    environment's in-process app (:meth:`_run_envs`), and each row carries its environment.
    A group is the G samples of one task, so it never mixes environments.
    """

    def __init__(
        self,
        env: Environment,
        app,
        pool: list[Task],
        settings: GRPOSettings,
        out_dir: Path | None = None,
        lineage: Lineage | None = None,
        on_batch: Callable[[list[Episode], list[bool], int], None] | None = None,
        pool_file: Path | None = None,
        mix: dict[str, tuple[Environment, object]] | None = None,
        weights: dict[str, float] | None = None,
        task_pool: TaskPool | None = None,
    ) -> None:
        self.env, self.app, self.settings, self.on_batch = env, app, settings, on_batch
        self.envs = {env.name: (env, app)} | dict(mix or {})
        self.weights = dict(weights or dict.fromkeys(self.envs, 1.0))
        self.env_pools = {name: [t.task_id for t in pool if t.env == name] for name in self.envs}
        self.by_id = {t.task_id: t for t in pool}
        self.pool_ids = [t.task_id for t in pool]
        self.task_pool = None
        if settings.task_sampling == "difficulty":
            self.task_pool = task_pool or TaskPool(
                self.pool_ids, settings.task_pool, settings.seed, pool_file
            )
        self.replay = None  # the verified successes demo_loss imitates, when it asks for them
        if settings.demo_loss is not None and settings.demo_loss.success_share > 0:
            self.replay = SuccessReplay(settings.seed)
        self.lineage = lineage or Lineage("grpo", 0, 0, "grpo", env.name, env.version, "")
        self.writer = None
        if out_dir is not None and is_main():  # several processes: rank 0 writes every row
            ranges = [e.reward_range for e, _ in self.envs.values()]
            span = (min(r[0] for r in ranges), max(r[1] for r in ranges))
            schema = collected_rollouts(settings.num_generations, span)
            # one part per step, written while the step trains on it (run_grpo waits at step end)
            self.writer = RolloutWriter(out_dir, schema, chunk=1 << 30, background=True)
            write_tasks(pool, Path(out_dir) / "tasks.parquet")  # exports rebuild prompts
        self.loop = asyncio.new_event_loop()
        self.ray = None  # settings.engine "ray": rounds run on Ray workers (started at step 0)
        if settings.engine == "ray":
            from gymflow.train.ray_rollouts import RayRollouts

            sampling = Sampling(
                max_new_tokens=settings.max_new_tokens, temperature=settings.temperature
            )
            self.ray = RayRollouts(env, sampling, settings.ray_workers, settings.ray_address)
        self.agents = None  # settings.agents: external programs through the capturing proxy
        if settings.agents is not None:
            from gymflow.agent.training import ExternalRollouts

            sampling = Sampling(
                max_new_tokens=settings.max_new_tokens, temperature=settings.temperature
            )
            self.agents = ExternalRollouts(settings.agents, sampling)
        self.vllm = None  # settings.vllm "managed": an engine process gymflow keeps in sync
        if settings.vllm == "managed":
            from gymflow.policy.vllm_sync import SyncedEngine

            self.vllm = SyncedEngine()
        self.stats = {
            "groups_generated": 0,
            "groups_zero_variance": 0,
            "groups_refilled": 0,
            "rollout_s": 0.0,
        }

    def close(self) -> None:
        """Stop the Ray rollout workers or the vLLM engine, if any (the next step would start
        them again)."""
        if self.ray is not None:
            self.ray.close()
        if self.vllm is not None:
            self.vllm.close()
        if self.agents is not None:
            self.agents.close()

    def wait_stored(self) -> None:
        """Block until every rollout handed to the store is on disk (raise a write's error)."""
        if self.writer is not None:
            self.writer.wait()

    def resume_at(self, step: int) -> None:
        """Training restarts at ``step``: rollouts stored for it and later are made again."""
        if self.writer is not None:
            self.writer.drop_iterations_from(step)
        if self.task_pool is not None:
            self.task_pool.resume_at(step)
        if self.replay is not None:
            self.replay.resume_at(step, self.writer.folder if self.writer is not None else None)

    def __call__(self, prompts: list[str], trainer) -> dict:
        started = time.time()
        g = trainer.num_generations
        step = trainer.state.global_step
        wanted = [prompts[i] for i in range(0, len(prompts), g)]
        wanted = [t for part in gather(wanted) for t in part]  # every process's, in rank order
        if self.task_pool is not None:  # the pool picks; TRL's ids only say how many
            wanted = self.task_pool.draw(len(wanted), step, 0)
        elif len(self.envs) > 1:  # a mix: the weights pick, TRL's ids only say how many
            rng = random.Random(f"{self.settings.seed}-{step}-mix")
            wanted = draw_tasks(self.env_pools, self.weights, len(wanted), rng)
        policy = rollout_policy(trainer) if self.ray is None else self.ray.synced(trainer)
        if self.vllm is not None:  # the engine, given this step's weights first
            policy = self.vllm.policy(trainer)
        kept: list[list[Episode]] = []
        spare: list[list[Episode]] = []
        done: list[tuple[Planned, Episode | None, GymflowError | None]] = []
        candidates = list(wanted)
        for round_ in range(self.settings.max_resample_rounds + 1):
            results = self._run_round(policy, candidates, g, step, round_)
            done += results
            if any(error is not None for _, _, error in results):
                break  # stored below, then raised: the batch cannot be trained on
            for i in range(0, len(results), g):
                group = [ep for _, ep, _ in results[i : i + g]]
                informative = has_variance([e.reward for e in group])
                if self.task_pool is not None:
                    self.task_pool.record(
                        step, round_, group[0].task.task_id,
                        [e.score["success"] for e in group], [e.reward for e in group],
                    )  # fmt: skip
                self.stats["groups_generated"] += 1
                self.stats["groups_zero_variance"] += not informative
                if informative and len(kept) < len(wanted):
                    kept.append(group)
                else:
                    spare.append(group)
            if not self.settings.dynamic_sampling or len(kept) == len(wanted):
                break
            missing = len(wanted) - len(kept)
            if self.task_pool is not None:
                tried = {p.task.task_id for p, _, _ in done}
                candidates = self.task_pool.draw(missing * 2, step, round_ + 1, tried)
                if not candidates:
                    break
            else:
                rng = random.Random(f"{self.settings.seed}-{step}-{round_}")
                if len(self.envs) > 1:
                    candidates = draw_tasks(self.env_pools, self.weights, missing * 2, rng)
                else:
                    candidates = rng.sample(self.pool_ids, min(len(self.pool_ids), missing * 2))
        failed = [error for _, _, error in done if error is not None]
        while not failed and len(kept) < len(wanted):  # pool exhausted: zero-variance groups
            kept.append(spare.pop(0))
        self.stats["groups_refilled"] += sum(1 for grp in kept if grp[0].task.task_id not in wanted)
        chosen = {id(e) for grp in kept for e in grp}
        self._store(done, chosen, step)
        if self.replay is not None and not failed:
            self.replay.record(step, [ep for _, ep, _ in done])
        if self.task_pool is not None and is_main():
            self.task_pool.save()
        if failed:
            self.wait_stored()  # the failure rows are on disk before the step fails
            raise failed[0]
        self.stats["rollout_s"] += time.time() - started
        if self.on_batch is not None and is_main():
            episodes = [ep for _, ep, _ in done]
            self.on_batch(episodes, [id(e) in chosen for e in episodes], step)
        return training_batch([e for grp in shard(kept) for e in grp])  # this process's groups

    def _run_round(
        self, policy, task_ids: list[str], g: int, step: int, round_: int
    ) -> list[tuple[Planned, Episode | None, GymflowError | None]]:
        # Seeds depend on (seed, step, round, task, sample) only: a resumed run samples what
        # the first would have.
        tasks = [self.by_id[t] for t in task_ids]
        planned = plan(tasks, self.lineage.run_id, step, g, self.settings.seed, round_)
        sampling = Sampling(
            max_new_tokens=self.settings.max_new_tokens, temperature=self.settings.temperature
        )
        results: list[tuple[Planned, Episode | None, GymflowError | None]] = []
        everyone = planned
        planned = shard(planned)  # several processes: each runs its share, all see every result

        async def go() -> None:
            if self.ray is not None:  # on the Ray workers, which hold this step's weights
                return await self.ray.run(planned, lambda p, ep, e: results.append((p, ep, e)))
            if self.agents is not None:  # the programs, against this step's weights
                return await self.agents.run(policy, planned, lambda *r: results.append(r))
            await self._run_envs(
                policy, sampling, planned, lambda p, ep, err: results.append((p, ep, err))
            )

        self.loop.run_until_complete(go())
        results = [r for part in gather(results) for r in part]
        order = {p.rollout_id: i for i, p in enumerate(everyone)}
        return sorted(results, key=lambda r: order[r[0].rollout_id])

    async def _run_envs(self, policy, sampling: Sampling, planned: list[Planned], on_done) -> None:
        """Every planned rollout against its task's environment (one in-process client each),
        all live at once; one :class:`ModelTurns` batches model turns across environments."""
        turns = ModelTurns(policy, sampling)
        by_env: dict[str, list[Planned]] = {}
        for p in planned:
            by_env.setdefault(self._env_name(p.task), []).append(p)

        async def one_env(name: str, todo: list[Planned]) -> None:
            env, app = self.envs[name]
            async with EnvClient(app=app) as client:
                await run_window(client, env, turns, todo, len(todo), on_done)

        await asyncio.gather(*(one_env(name, todo) for name, todo in by_env.items()))

    def _env_name(self, task: Task) -> str:
        """The environment that scores ``task``: its own in a mix, else the one there is."""
        return task.env if len(self.envs) > 1 else self.env.name

    def _store(self, done, chosen: set[int], step: int) -> None:
        if self.writer is None:
            return
        lineage = replace(self.lineage, iteration=step, policy_version=step)
        for p, ep, error in done:
            mine = lineage
            if len(self.envs) > 1:  # a mix: the row names its task's environment
                env = self.envs[self._env_name(p.task)][0]
                mine = replace(lineage, env=env.name, env_version=env.version)
            self.writer.add(rollout_row(mine, p, ep, error, id(ep) in chosen))
        self.writer.flush()


def rollout_policy(trainer):
    """The policy this step's rollouts sample from.

    With vLLM on, TRL has just synced the trainer's weights into its engine (``GRPOTrainer.
    _generate`` does it before calling ``rollout_func``), so the engine is the current policy:
    ``colocate`` hands us the in-process ``vllm.LLM``, ``server`` a ``VLLMClient``. Otherwise
    the training model itself generates.
    """
    if getattr(trainer, "use_vllm", False):
        from gymflow.policy.vllm_backend import VLLMPolicy, VLLMServerPolicy

        engine = trainer.vllm_generation
        if engine.mode == "colocate":
            return VLLMPolicy(engine.llm, trainer.processing_class)
        return VLLMServerPolicy(engine.vllm_client, trainer.processing_class)
    return TransformersPolicy(trainer.model, trainer.processing_class)


def env_reward(completions, env_reward, **kwargs) -> list[float]:
    """The reward TRL optimizes: the verifier's, computed in the rollout (an extra column)."""
    return list(env_reward)


def run_grpo(
    model_path: Path,
    out_dir: Path,
    source: RolloutSource,
    settings: GRPOSettings,
    log_to_mlflow: bool = True,
    resume: bool = True,
    callbacks: list | None = None,
    demos: list[dict] | None = None,
) -> dict:
    """Train from ``model_path``; resumes from the newest checkpoint in ``out_dir`` if any
    (:mod:`gymflow.train.resume`: the wall time of earlier attempts counts against the budget).

    ``callbacks`` are extra ``TrainerCallback``s, called after the checkpoint's progress is
    recorded (the step benchmark times steps with one; the lifecycle injects failures and
    scores validation with :func:`gymflow.train.checkpoint_choice.validation_callback`: the
    saved policy is then its best step, ``validation`` in the result says which). ``demos``
    (``{"prompt", "completion"}`` pairs, as SFT takes) feed ``settings.demo_loss``.
    """
    import os

    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOTrainer

    progress = Progress.find(out_dir / "trainer", resume)

    class TimeBudget(TrainerCallback):
        """Stops at the time budget, earlier attempts' training time included."""

        def on_step_end(self, args, state, control, **kw):
            # the step's rollouts are on disk before its checkpoint (saved after this) can be
            source.wait_stored()
            budget = settings.time_budget_s
            if budget is not None and agreed(lambda: progress.trained_s() > budget):
                control.should_training_stop = True
            return control

    from datasets import Dataset

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_path)
    peft_config = settings.lora.peft_config() if settings.lora is not None else None
    batch = settings.prompts_per_step * settings.num_generations
    config = trainer_config(settings, out_dir / "trainer", log_to_mlflow)
    n_rows = max(len(source.pool_ids), batch)
    dataset = Dataset.from_list(
        [{"prompt": source.pool_ids[i % len(source.pool_ids)]} for i in range(n_rows)]
    )
    trainer_cls = GRPOTrainer
    if settings.demo_loss is not None:
        if not demos:
            raise GymflowError(
                FailureKind.BAD_CONFIG, "grpo.demo_loss needs demonstrations; the run has none"
            )
        demo_loss = DemoLoss(
            demos, tokenizer, settings.demo_loss, settings.seed, source.replay,
            share_prefix=settings.share_prompts,
        )  # fmt: skip
        trainer_cls = with_demo_loss(GRPOTrainer, demo_loss)
    if settings.share_prompts:
        trainer_cls = with_shared_prompts(trainer_cls)
    if settings.lr_schedule != "constant" or settings.warmup_steps:
        trainer_cls = with_progress_schedule(
            trainer_cls, settings.lr_schedule, settings.max_steps, settings.time_budget_s,
            progress.trained_s, settings.warmup_steps,
        )  # fmt: skip
    trainer = trainer_cls(
        model=model,
        reward_funcs=[env_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=source,
        callbacks=[TimeBudget(), progress.recorder(), *(callbacks or [])],
        peft_config=peft_config,
    )
    trainer.remove_callback(PrinterCallback)  # metrics go to MLflow; keep the console readable
    checkpoint, done_steps = progress.checkpoint, progress.steps
    source.resume_at(done_steps)
    progress.start_clock()
    try:
        if done_steps >= settings.max_steps:
            # Killed after its last step: the checkpoint is the result. Resuming from it would
            # train one step past max_steps (transformers 5.23), so load it instead (Trainer's
            # own loader: full weights or a LoRA adapter alike).
            trainer._load_from_checkpoint(str(checkpoint))
            trainer.state.global_step = done_steps
        else:
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except BaseException:
        with contextlib.suppress(Exception):  # keep what can be stored; report training's error
            source.wait_stored()
        raise
    finally:
        source.close()
    source.wait_stored()
    wall = progress.trained_s()
    validation = load_chosen(trainer, out_dir, model_path)  # the best validated step, if any
    final = out_dir / "final"
    if peft_config is not None:  # the adapter folded in: the policy loads as a plain model
        merged = trainer.model.merge_and_unload()
        if is_main():
            merged.save_pretrained(final)
    else:
        trainer.save_model(str(final))
    if is_main():
        tokenizer.save_pretrained(final)
    return {
        "path": str(final),
        "steps": trainer.state.global_step,
        "wall_s": round(wall, 2),
        "resumed_from": progress.resumed_from,
        "dynamic_sampling": dict(source.stats),
        "log_history": trainer.state.log_history,
        "validation": validation,
        "stopped_by": stopped_by(trainer.state.global_step, settings),
    }


def stopped_by(steps: int, settings: GRPOSettings) -> str:
    """Which limit ended a finished GRPO run: ``"max_steps"``, else the only other stop a run
    that returns can have met, ``"time_budget"`` (a failure raises instead).

    >>> stopped_by(250, GRPOSettings(max_steps=250, time_budget_s=340))
    'max_steps'
    >>> stopped_by(132, GRPOSettings(max_steps=250, time_budget_s=340))
    'time_budget'
    """
    return "max_steps" if steps >= settings.max_steps else "time_budget"


def completions_trained(steps: int, settings: GRPOSettings) -> int:
    """Completions ``steps`` updates trained on: a batch of prompts per step × generations is
    sampled at every ``num_iterations``-th step and trained on at that step and the next ones.

    >>> completions_trained(151, GRPOSettings(prompts_per_step=4, num_generations=8))
    4832
    >>> completions_trained(5, GRPOSettings(prompts_per_step=4, num_generations=8, num_iterations=2))
    96
    """
    batches = -(-steps // settings.num_iterations)
    return batches * settings.prompts_per_step * settings.num_generations


def trainer_config(settings: GRPOSettings, output_dir: Path, log_to_mlflow: bool = True):
    """TRL's ``GRPOConfig`` for ``settings``: CPU, fp32, ``num_iterations`` optimizer steps on each
    generation batch (one by default)."""
    from trl import GRPOConfig

    batch = settings.prompts_per_step * settings.num_generations
    vllm = {}
    if settings.vllm in ("colocate", "server"):  # TRL's own engine ("managed" is ours)
        vllm = {
            "use_vllm": True,
            "vllm_mode": settings.vllm,
            "vllm_gpu_memory_utilization": settings.vllm_gpu_memory_utilization,
        }
        if settings.vllm_server_url:
            vllm["vllm_server_base_url"] = settings.vllm_server_url
    return GRPOConfig(
        output_dir=str(output_dir),
        use_cpu=not vllm and trains_on_cpu(settings.device),
        **vllm,
        bf16=False,
        fp16=False,
        max_steps=settings.max_steps,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=1,
        num_generations=settings.num_generations,
        num_iterations=settings.num_iterations,
        max_completion_length=settings.max_new_tokens,
        temperature=settings.temperature,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",  # lr_schedule: gymflow.train.lr_schedule installs its own
        warmup_steps=0,
        weight_decay=0.0,
        beta=settings.beta,
        loss_type=settings.loss_type,
        importance_sampling_level=settings.importance_sampling_level,
        scale_rewards=settings.scale_rewards,
        epsilon_high=settings.epsilon_high,
        logging_steps=1,
        save_strategy="steps",
        save_steps=settings.save_every,
        save_total_limit=KEEP_CHECKPOINTS,
        report_to="mlflow" if log_to_mlflow else "none",
        gradient_checkpointing=settings.gradient_checkpointing,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=settings.seed,
    )
