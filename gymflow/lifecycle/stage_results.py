"""What each lifecycle stage hands to the next: one typed result per stage kind.

Stages (``tasks/``) return these and take them as inputs, so the flow only wires them. They are
small (paths and numbers; the data lives in the run folder and MLflow), pickle for Prefect's
persisted results, and hash stably for its ``INPUTS`` cache key: a resumed run finds the same
results again. ``summary.json`` is built from them (:mod:`gymflow.lifecycle.summary`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from gymflow.eval.gate import GateResult
from gymflow.train.checkpoint_choice import ChosenCheckpoint
from gymflow.train.sft_decision import SFTDecision

Split = Literal["train", "val", "heldout"]
EvalSummary = dict[str, Any]
"""``gymflow.eval.evaluation.summarize``'s rates with their 95 % CIs, ``n``, ``failures``."""


class StageInfo(BaseModel):
    """The stage's own MLflow run and wall time (:func:`gymflow.lifecycle.run_context.stage`)."""

    mlflow_run_id: str | None = None
    wall_s: float | None = None
    """Set when the stage ends; the whole stage, not a trainer's inner clock."""


class StageResult(BaseModel):
    stage: StageInfo = Field(default_factory=StageInfo)


class EnvTaskData(BaseModel):
    """One environment's part of a run's task data (a mix has one per environment)."""

    env_version: str
    counts: dict[str, int]
    """Tasks per split."""
    split_hashes: dict[str, str]


class TaskData(StageResult):
    """``generate_tasks``: the splits on disk and what identifies them. A split file holds the
    tasks of every environment of the run; each task names its own (``Task.env``)."""

    paths: dict[Split, str]
    """Parquet file of each split (``data/tasks-<split>.parquet``)."""
    counts: dict[str, int]
    dataset_hash: str
    env_version: str
    split_hashes: dict[str, str] = Field(default_factory=dict)
    """Each split's dataset hash (logged as MLflow params and dataset digests)."""
    dedup: dict[str, int] = Field(default_factory=dict)
    """Drafts, exact duplicates and near-duplicates dropped or counted (``generate_tasks``)."""
    coverage: str | None = None
    """The coverage report (JSON) in the run folder."""
    envs: dict[str, EnvTaskData] = Field(default_factory=dict)
    """Per environment, in the mix's order (one entry for a single-environment run)."""


class Checkpoint(StageResult):
    """A policy on disk (a ``from_pretrained`` folder); every stage that yields one extends it."""

    path: str


class ResolvedPolicy(Checkpoint):
    """``resolve_policy``: the policy the run starts from."""

    source: str
    """``path``, ``champion v<N>`` or the embedded tiny model."""
    champion_version: str | None


class VerifierProfile(StageResult):
    """``profile_verifier``: the report is ``report`` (JSON) in the run folder."""

    n: int
    by_source: dict[str, Any]
    report: str
    policy_share: float = 0.0
    """Share of the samples the policy wrote (sampled, temperature > 0)."""
    deterministic: bool = True
    """Every sample got the same verdict in two processes."""
    reports: dict[str, str] = Field(default_factory=dict)
    """A mix's report (JSON) per environment; ``report`` is its first environment's."""


class Evaluation(BaseModel):
    """One greedy evaluation of one policy on one split."""

    summary: EvalSummary
    rows: str
    """Per-task rows (``eval/<split>-<label>.parquet``)."""
    per_env: dict[str, EvalSummary] = Field(default_factory=dict)
    """Each environment's summary (a mix's ``summary`` pools them, one weight per task)."""


class DriftCheck(StageResult):
    """``verifier_drift``: the champion's stored held-out verdicts under today's verifiers
    (:mod:`gymflow.eval.drift`); a run whose verdicts flip beyond the threshold stops there."""

    checked: str
    """What was done, in words."""
    episodes: int = 0
    """Stored episodes re-scored (0: nothing changed, or no champion)."""
    flipped_tasks: list[str] = Field(default_factory=list)
    report: str | None = None
    """``reports/verifier_drift.md`` in the run folder."""


class BaselineEval(StageResult):
    """``baseline_eval``: the current policy on val, and whether SFT must run first."""

    evaluation: Evaluation
    sft: SFTDecision

    @property
    def needs_sft(self) -> bool:
        return self.sft.run


class SFTResult(Checkpoint):
    """``sft``: the checkpoint picked by sampled validation success."""

    steps: int
    history: list[dict[str, Any]]
    """``{"step", "sampled_success"}`` per validation."""
    demos: int
    resumed_from: str | None = None
    """The checkpoint an earlier attempt left and this one went on from."""
    stopped_by: str | None = None
    """The limit that ended training (:func:`gymflow.train.sft.run_sft`)."""
    samples: int | None = None
    """Demonstrations trained on, repeats counted (steps × batch size)."""
    processes: int = 1
    """Processes it trained on (``train_processes``)."""


class GRPOResult(Checkpoint):
    """``grpo``: the final policy and how it was trained."""

    steps: int
    train_wall_s: float
    """The trainer's own wall time (the SFT control's budget); ``stage.wall_s`` is the stage's."""
    resumed_from: str | None
    dynamic_sampling: dict[str, int | float]
    threads: int
    rollout_dir: str
    pool: int
    start: str
    """The checkpoint GRPO started from."""
    choice: ChosenCheckpoint | None = None
    """The step the gate's one checkpoint rule chose (None: validation off, the last step)."""
    stopped_by: str | None = None
    """``"max_steps"`` or ``"time_budget"`` (:func:`gymflow.train.grpo.stopped_by`)."""
    samples: int | None = None
    """Completions trained on (batches sampled × prompts per step × generations; a batch is
    sampled every ``num_iterations`` steps); ``dynamic_sampling`` counts the groups generated,
    refills included."""
    preflight: dict[str, Any] | None = None
    """The RL-readiness preflight's figures and verdict (:class:`gymflow.train.readiness.
    Readiness`); None when ``grpo.preflight`` is off."""
    processes: int = 1
    """Processes it trained on (``train_processes``)."""


class SFTControlResult(Checkpoint):
    """``sft_control``: more SFT from GRPO's start for GRPO's training wall time."""

    steps: int
    history: list[dict[str, Any]]
    """``{"step", "success"}`` per validation of the checkpoint rule (step 0 first)."""
    budget_s: float
    beside_grpo: bool
    """Ran at the same time as GRPO (a spawned process) rather than after it."""
    resumed_from: str | None = None
    choice: ChosenCheckpoint | None = None
    """The step the checkpoint rule chose, by the same rule as GRPO's."""
    stopped_by: str | None = None
    """The limit that ended it: GRPO's wall time (``"should_stop"`` beside GRPO, else
    ``"time_budget"``)."""
    samples: int | None = None
    """Demonstrations trained on, repeats counted (steps × batch size): what GRPO's wall time
    bought the cheap alternative."""
    processes: int = 1
    """Processes it trained on (``train_processes``)."""


class RFTControlResult(Checkpoint):
    """``rft_control``: online rejection-sampling fine-tuning from GRPO's start for GRPO's
    training wall time (:mod:`gymflow.train.rft`), its checkpoint chosen by GRPO's rule."""

    steps: int
    history: list[dict[str, Any]]
    """``{"step", "success"}`` per validation of the checkpoint rule (step 0 first)."""
    budget_s: float
    resumed_from: str | None = None
    choice: ChosenCheckpoint | None = None
    stopped_by: str | None = None
    compute: dict[str, Any] = Field(default_factory=dict)
    """Updates, samples generated, successes trained, tokens, wall time, and the sampler's
    ledger (:class:`gymflow.eval.arms.ArmCompute` and ``rft``)."""


class ControlComparison(BaseModel):
    """The SFT control on held-out: its summary, GRPO − control (paired) and its own gain."""

    summary: EvalSummary
    grpo_minus_control: float
    ci95: list[float]
    """95 % CI of GRPO − control."""
    delta_success: float | None = None
    """The control's paired success gain over the start."""
    delta_ci95: list[float] | None = None
    cs: list[float] | None = None
    """The gate's confidence sequence of GRPO − control (what its choice read)."""
    delta_cs: list[float] | None = None
    """The gate's confidence sequence of the control's gain over the start."""
    n: int | None = None
    """Held-out tasks both ran (GRPO − control is paired on them)."""


class ChampionComparison(BaseModel):
    """The registry's champion, evaluated by the gate on the same held-out tasks and seeds."""

    version: str
    summary: EvalSummary
    rows: str
    """Per-task rows (``eval/heldout-champion-v<N>.parquet``)."""


class EnvHeldout(BaseModel):
    """One environment of a mix on held-out (paired, the same tasks and seeds for all)."""

    n: int
    summaries: dict[str, EvalSummary]
    """Per policy: ``baseline`` (the start), ``grpo``, ``sft_control``, ``champion``."""
    deltas: dict[str, dict]
    """Per candidate: its success gain over the start, ``{"delta", "ci95"}``."""


class GateReport(StageResult):
    """``heldout_gate``: the start (baseline), the champion and each candidate on held-out
    (paired), and the decision. ``candidate``/``delta_success``/``ci95`` are the GRPO policy's
    (against the start); the control's are in ``sft_control``; ``gate.chosen`` names the one
    promoted (or the best one when none was). Summaries carry the p95 latency figures."""

    n: int
    baseline: EvalSummary
    candidate: EvalSummary
    delta_success: float
    ci95: list[float]
    """Descriptive paired 95 % CI (normal approximation) of ``delta_success``."""
    gate: GateResult
    cs: list[float] | None = None
    """The gate's confidence sequence of GRPO's gain over the start (what it decided on)."""
    sft_control: ControlComparison | None = None
    rft_control: ControlComparison | None = None
    """The RFT control on held-out, as ``sft_control`` is the SFT control's."""
    verdict: dict[str, Any] | None = None
    """Is RL worth it here (:class:`gymflow.eval.verdict.RLVerdict`): ``rl_pays``,
    ``cheaper_suffices`` or ``undecided``, with GRPO − each control's interval; None when no
    control ran."""
    pass_at_k: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    """Per policy (``baseline`` and the arms), per environment: greedy pass@1 and pass@k on the
    first ``gate.pass_k_tasks`` held-out tasks (:class:`gymflow.eval.arm_passk.PassAtK`)."""
    champion: ChampionComparison | None = None
    """The champion the candidates had to beat; None without one, or when it is the start."""
    general: dict[str, dict[str, float]] = Field(default_factory=dict)
    """General capability: the measure (success, or gold-answer probability) per set, per
    policy evaluated there: the start
    (``baseline``) and the candidates (``grpo``, ``sft_control``). A set is an environment the
    run did not train on (its held-out split; only candidates that passed every other check,
    since this one can only refuse) or an external set (``bfcl:simple_python``: every
    candidate, as the run's before/after figure on a public benchmark)."""
    general_n: dict[str, int] = Field(default_factory=dict)
    """Tasks per general set."""
    general_deltas: dict[str, dict[str, dict]] = Field(default_factory=dict)
    """Per general set, per candidate judged there: its paired difference with the start,
    ``{"delta", "ci95", "cs", "n", "margin", "measure"}`` (``ci95`` = ``cs``, the gate's
    confidence sequence)."""
    general_checks: dict[str, dict] = Field(default_factory=dict)
    """Per general set: its whole outcome (:class:`gymflow.eval.general_check.GeneralOutcome`),
    ``skipped`` saying why a set could not guard anything."""
    chosen_path: str | None = None
    """The checkpoint of ``gate.chosen``: what ``promote`` registers."""
    per_env: dict[str, EnvHeldout] = Field(default_factory=dict)
    """A mix: each environment's held-out figures (the fields above pool them)."""


class Registration(StageResult):
    """``promote``: the registered version and whether ``champion`` moved to it."""

    model: str
    version: str
    champion_alias_moved: bool
    previous_champion: str | None


class LifecycleResults(BaseModel):
    """Every stage's result of one run, fields in run order and named as the stages."""

    generate_tasks: TaskData
    resolve_policy: ResolvedPolicy
    profile_verifier: VerifierProfile
    verifier_drift: DriftCheck | None
    baseline_eval: BaselineEval
    sft: SFTResult | None
    grpo: GRPOResult
    sft_control: SFTControlResult | None
    rft_control: RFTControlResult | None
    heldout_gate: GateReport
    promote: Registration

    def stage_wall_s(self) -> dict[str, float | None]:
        """Wall time of each stage that ran, in run order."""
        return {
            name: result.stage.wall_s
            for name in type(self).model_fields
            if (result := getattr(self, name)) is not None
        }
