"""Stage 6: the held-out gate (:mod:`gymflow.eval.gate`), evaluated sequentially.

The start, the candidates (GRPO, the SFT control) and the registry's champion run on the
held-out tasks in the gate's seeded random order, a batch at a time, until every candidate's
verdict is settled by its confidence sequence (:mod:`gymflow.eval.sequential_gate`); then the
candidates that passed are checked on the general-capability sets the same way
(:mod:`gymflow.eval.general_check`). The best candidate is promoted only if it beats the
champion (or, without one, the start) significantly with no guardrail broken. A run on a mix
of environments is judged on the pooled held-out set and, per environment, must not be
significantly worse on any of them. Episodes land in ``eval/heldout-<label>/`` (the rollout
layout), rows in ``eval/heldout-<label>.parquet``, the decision in MLflow and the report.
"""

from __future__ import annotations

import polars as pl

from gymflow.agent.runner import AgentService
from gymflow.data.env_mix import apportion
from gymflow.data.schemas import EVAL_ROWS, write_table
from gymflow.data.task_table import read_tasks
from gymflow.env.registry import get_env
from gymflow.env.resources_server import build_app
from gymflow.eval.eval_engine import EvalEngine
from gymflow.eval.evaluation import evaluate_policy
from gymflow.eval.general_check import (
    GeneralOutcome,
    PolicyMeasures,
    check_general,
    env_sets,
    external_sets,
    general_envs,
)
from gymflow.eval.sequential_gate import HeldOut, gate_order, judge, run_heldout, with_latency
from gymflow.eval.splits import GeneratedSplit, eval_tasks
from gymflow.eval.stats import paired_delta
from gymflow.eval.verdict import grpo_versus_controls, rl_verdict
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.model_registry import champion_version, download_version
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import (
    ChampionComparison,
    Checkpoint,
    ControlComparison,
    EnvHeldout,
    GateReport,
    TaskData,
)
from gymflow.lifecycle.training_inputs import validation_tasks
from gymflow.rollout.store import Lineage
from gymflow.train.checkpoint_choice import CheckpointRule

FOLDERS = {
    "baseline": "baseline", "grpo": "candidate", "sft_control": "sft_control",
    "rft_control": "rft_control",
}  # fmt: skip
"""Each policy's label in file names (``eval/heldout-<label>``); the champion's is its version."""


def _champion(run: RunContext, cfg: LifecycleConfig) -> tuple[str, str] | None:
    """The registry's champion of the environment now: ``(version, local folder)``."""
    name = cfg.model_name
    version = champion_version(name)
    if version is None:
        return None
    path = download_version(name, version, run.dir / "policies" / f"champion-v{version}")
    return version, str(path)


def heldout_tasks(cfg: LifecycleConfig, data: TaskData) -> dict:
    """The held-out tasks the gate may use, by id: ``heldout_n`` shared by the mix's weights,
    each environment's first ones in the file's order (as every evaluation takes them)."""
    tasks = read_tasks(data.paths["heldout"])
    weights = cfg.env_weights
    caps = (
        apportion(cfg.heldout_n, weights) if cfg.heldout_n is not None else dict.fromkeys(weights)
    )
    return {
        t.task_id: t
        for name, cap in caps.items()
        for t in [t for t in tasks if t.env == name][:cap]
    }


class _Evaluations:
    """``evaluate(label, task_ids) -> rows`` for the sequential gate: real greedy episodes on
    ``engine`` (each policy loaded once; on vLLM one engine whose weights follow the label
    asked for, :mod:`gymflow.eval.eval_engine`), each environment served in process once, every
    batch appended to the policy's rollout folder."""

    def __init__(
        self,
        run: RunContext,
        cfg: LifecycleConfig,
        data: TaskData,
        paths: dict,
        tasks: dict,
        engine: EvalEngine,
    ):
        self.run, self.cfg, self.data, self.paths, self.tasks = run, cfg, data, paths, tasks
        self.engine = engine
        self.folders = dict(FOLDERS)
        self.apps: dict[str, tuple] = {}
        self.started: set[str] = set()

    def __call__(self, label: str, ids: list[str]) -> list[dict]:
        if not ids:
            return []
        spec, policy, agent = self.engine.spec(self.paths[label]), None, None
        if self.cfg.agent_servers:  # the agent servers load the policy and run the episodes
            agent = AgentService(tuple(self.cfg.agent_servers), spec)
        else:
            policy = self.engine.policy(self.paths[label])
        out: dict[str, dict] = {}
        for name in dict.fromkeys(self.tasks[i].env for i in ids):
            if name not in self.apps:
                env = get_env(name)
                self.apps[name] = (env, build_app(env))
            env, app = self.apps[name]
            mine = [self.tasks[i] for i in ids if self.tasks[i].env == name]
            lineage = Lineage(
                self.run.run_id, 0, 0, spec, env.name, env.version, self.data.dataset_hash
            )
            folder = self.run.dir / "eval" / f"heldout-{self.folders[label]}"
            rows, _ = evaluate_policy(
                env, app, policy, mine, greedy=True, max_new_tokens=self.cfg.max_new_tokens,
                seed=self.cfg.seed, out_dir=folder, lineage=lineage, append=label in self.started,
                agent=agent,
            )  # fmt: skip
            self.started.add(label)
            out |= {r["task_id"]: {**r, "policy": self.folders[label]} for r in rows}
        return [out[i] for i in ids]

    def close(self) -> None:
        for _, app in self.apps.values():
            app.state.verifier.shutdown()


def run_heldout_gate(
    run: RunContext,
    cfg: LifecycleConfig,
    data: TaskData,
    baseline: Checkpoint,
    candidate: Checkpoint,
    control: Checkpoint | None,
    rft: Checkpoint | None = None,
) -> GateReport:
    """``baseline`` is the policy GRPO started from; ``candidate`` is GRPO's chosen policy;
    ``control`` the SFT control and ``rft`` the RFT control (when they ran): every one a
    candidate for promotion. After the decision: the verdict on GRPO against the controls
    (:mod:`gymflow.eval.verdict`) and pass@k of every policy (``gate.pass_k``)."""
    settings = cfg.gate
    with stage(run, "heldout_gate") as info:
        paths = {"baseline": baseline.path, "grpo": candidate.path}
        arms = {"grpo": candidate, "sft_control": control, "rft_control": rft}
        paths |= {name: arm.path for name, arm in arms.items() if arm is not None}
        names = [n for n in ("grpo", "sft_control", "rft_control") if n in paths]
        champ, start_label, champion_label = _champion(run, cfg), "the start", None
        if champ is not None and champ[1] == baseline.path:
            start_label = f"the start (champion v{champ[0]})"  # GRPO started from the champion
        elif champ is not None:
            champion_label, paths["champion"] = f"champion v{champ[0]}", champ[1]
        tasks = heldout_tasks(cfg, data)
        engine = EvalEngine(cfg.eval_engine)  # the stage's one engine: held-out, general sets
        evaluations = _Evaluations(run, cfg, data, paths, tasks, engine)
        if champion_label:
            evaluations.folders["champion"] = f"champion-v{champ[0]}"
        checkpoints = {n: c.choice.text() for n, c in arms.items()
                       if getattr(c, "choice", None) is not None}  # fmt: skip
        rule_tasks = validation_tasks(cfg, read_tasks(data.paths["val"]), greedy=True)
        rule = CheckpointRule(cfg.grpo.validate_every, sum(map(len, rule_tasks.values()))).text()
        env_of = {i: t.env for i, t in tasks.items()}
        try:
            held = run_heldout(gate_order(list(tasks), cfg.seed), names, evaluations, settings,
                               env_of, champion_label, start_label, checkpoints, rule)  # fmt: skip
            outcomes = _general(run, cfg, held, paths, engine)
            passk = _pass_at_k(run, cfg, paths, tasks, gate_order(list(tasks), cfg.seed), engine)
        finally:
            evaluations.close()
            engine.close()  # a vLLM engine process ends with the stage, on error too
        held.effort.skipped_general = {o.name: o.skipped for o in outcomes.values() if o.skipped}
        general = {n: {name: o.deltas[n] for name, o in outcomes.items() if n in o.deltas}
                   for n in names}  # fmt: skip
        final = judge(held.rows, names, settings, env_of, champion_label, start_label,
                      checkpoints, held.effort, True, general, held.judged_on)  # fmt: skip
        report = _report(run, cfg, held, final, outcomes, paths, champ, info)
        report = report.model_copy(update={"verdict": _verdict(final, names, settings),
                                           "pass_at_k": passk})  # fmt: skip
        _log(report, held)
    return report


def _verdict(final: HeldOut, names: list[str], settings) -> dict | None:
    """Is RL worth it here: GRPO − each control on the tasks both ran, at the gate's level
    (:func:`gymflow.eval.verdict.rl_verdict`); None when no control ran."""
    controls = [n for n in names if n != "grpo"]
    if not controls:
        return None
    success = {n: [float(r["success"]) for r in final.rows[n]] for n in names}
    alpha = settings.candidate_alpha(len(names))
    evidence = grpo_versus_controls(success, controls, alpha)
    return rl_verdict(evidence, settings.verdict_margin).model_dump()


def _pass_at_k(run, cfg, paths: dict, tasks: dict, order: list[str], engine) -> dict:
    """Greedy pass@1 and pass@k (``gate.pass_k`` samples per task) of the start and every arm
    on the first ``gate.pass_k_tasks`` held-out tasks in the gate's order, per environment of
    the run; ``{}`` with ``pass_k`` 0 or on agent servers (whose policies are theirs to load)."""
    settings = cfg.gate
    if not settings.pass_k or cfg.agent_servers:
        return {}
    from gymflow.eval.arm_passk import heldout_pass_at_k

    chosen = [tasks[i] for i in order[: settings.pass_k_tasks]]
    out: dict[str, dict] = {}
    for label in [n for n in ("baseline", "grpo", "sft_control", "rft_control") if n in paths]:
        policy = engine.policy(paths[label])
        for env_name in dict.fromkeys(t.env for t in chosen):
            env = get_env(env_name)
            app = build_app(env)
            try:
                mine = [t for t in chosen if t.env == env_name]
                measured = heldout_pass_at_k(
                    env, app, policy, mine, k=settings.pass_k, seed=cfg.seed,
                    max_new_tokens=cfg.max_new_tokens,
                )  # fmt: skip
            finally:
                app.state.verifier.shutdown()
            figures = measured.model_dump(exclude={"greedy_by_task"})
            out.setdefault(label, {})[env_name] = figures
    return out


def _general(
    run: RunContext, cfg: LifecycleConfig, held: HeldOut, paths: dict, engine: EvalEngine
) -> dict[str, GeneralOutcome]:
    """The general-capability sets: the environments' for the candidates that passed every
    held-out check (it can only refuse), the external sets for every candidate."""
    settings = cfg.gate
    passed = [v.candidate for v in held.result.verdicts if v.passed]
    everyone = [c.name for c in held.candidates]
    envs = general_envs(settings.general_envs, set(cfg.env_weights)) if passed else []
    sets = [(s, passed) for s in env_sets(envs, settings.general_n, settings.general_measure)]
    sets += [(s, everyone) for s in external_sets(settings.general_sets, settings.general_sets_n)]
    if not sets:
        return {}
    measures = PolicyMeasures(paths, _gold_pairs, cfg.seed, cfg.max_new_tokens, run.dir, engine)
    alpha = settings.candidate_alpha(len(everyone))
    generated = GeneratedSplit.like(cfg)
    out = {}
    try:
        for general, who in sets:
            found = eval_tasks(get_env(general.env), general.split, generated, run_dir=run.dir,
                               cache_dir=run.cache_dir)  # fmt: skip
            tasks = found.tasks[: general.limit]
            step = settings.batch if settings.sequential else len(tasks)
            out[general.name] = check_general(general, tasks, who, measures, settings.general_margin,
                                              alpha, step, cfg.seed)  # fmt: skip
    finally:
        measures.close()
    return out


def _gold_pairs(env, tokenizer, tasks) -> list[list[dict]]:
    """Each task's gold episode as SFT demonstrations are made (one pair per assistant turn)."""
    from gymflow.train.sft import demonstrations

    return [demonstrations(env, tokenizer, [t]) for t in tasks]


def _write_rows(run: RunContext, label: str, rows: list[dict]) -> str:
    """``eval/heldout-<label>.parquet`` (every task the policy ran) and its MLflow artifact."""
    import mlflow

    frame = pl.DataFrame(rows, schema_overrides={"failure_kind": pl.String}).select(
        list(EVAL_ROWS.columns)
    )
    path = write_table(frame, EVAL_ROWS, run.dir / "eval" / f"heldout-{label}.parquet")
    mlflow.log_artifact(str(path), artifact_path="eval")
    return str(path)


def _normal(a: list[dict], b: list[dict]) -> dict:
    """The descriptive paired difference (normal 95 % CI) a run's tables show."""
    return paired_delta([float(r["success"]) for r in a], [float(r["success"]) for r in b])


def _report(run, cfg, held: HeldOut, final: HeldOut, outcomes, paths, champ, info) -> GateReport:
    rows, decision = held.rows, final.result
    files = {label: _write_rows(run, held_label, rows[label])
             for label, held_label in _labels(paths, champ).items()}  # fmt: skip
    grpo = final.candidates[0]
    comparison, champion = None, None
    if "sft_control" in rows:
        ctrl, n = final.candidates[1], min(len(rows["grpo"]), len(rows["sft_control"]))
        versus = _normal(rows["grpo"][:n], rows["sft_control"][:n])
        own = _normal(rows["sft_control"], rows["baseline"][: len(rows["sft_control"])])
        comparison = ControlComparison(
            summary=held.figures("sft_control"), grpo_minus_control=versus["delta"],
            ci95=versus["ci95"],
            delta_success=own["delta"], delta_ci95=own["ci95"], cs=final.vs_control.cs,
            delta_cs=ctrl.delta.cs, n=n,
        )  # fmt: skip
    rft = None
    if "rft_control" in rows:
        arm = next(c for c in final.candidates if c.name == "rft_control")
        n = min(len(rows["grpo"]), len(rows["rft_control"]))
        versus = _normal(rows["grpo"][:n], rows["rft_control"][:n])
        own = _normal(rows["rft_control"], rows["baseline"][: len(rows["rft_control"])])
        cs = final.between.get(("grpo", "rft_control"))
        rft = ControlComparison(
            summary=held.figures("rft_control"), grpo_minus_control=versus["delta"],
            ci95=versus["ci95"], delta_success=own["delta"], delta_ci95=own["ci95"],
            cs=list(cs.cs) if cs is not None else None, delta_cs=arm.delta.cs, n=n,
        )  # fmt: skip
    if "champion" in rows:
        champion = ChampionComparison(version=champ[0], summary=held.figures("champion"),
                                      rows=files["champion"])  # fmt: skip
    own = _normal(rows["grpo"], rows["baseline"][: len(rows["grpo"])])
    return GateReport(  # the table's figures: on every task each policy ran, as its gains are
        n=decision.tasks_used,
        baseline=held.figures("baseline"),
        candidate=held.figures("grpo"),
        delta_success=own["delta"],
        ci95=own["ci95"],
        cs=grpo.delta.cs,
        gate=decision,
        sft_control=comparison,
        rft_control=rft,
        champion=champion,
        general={name: o.values for name, o in outcomes.items()},
        general_n={name: o.n.get("baseline", 0) for name, o in outcomes.items()},
        general_deltas={
            name: {c: _general_delta(d, o, c, rows) for c, d in o.deltas.items()}
            for name, o in outcomes.items()
        },
        general_checks={name: o.model_dump(mode="json") for name, o in outcomes.items()},
        chosen_path=paths[decision.chosen],
        per_env=_per_env_report(rows, final),
        stage=info,
    )


def _general_delta(d, outcome: GeneralOutcome, name: str, rows) -> dict:
    """A general set's comparison as the report keeps it: the mean difference, its confidence
    sequence (``ci95`` for the tables that read it) and the tasks it took."""
    return {"delta": d.delta, "ci95": list(d.cs), "cs": list(d.cs), "n": d.n,
            "margin": outcome.margin, "measure": outcome.measure}  # fmt: skip


def _labels(paths: dict, champ) -> dict[str, str]:
    out = {label: FOLDERS[label] for label in paths if label in FOLDERS}
    if "champion" in paths:
        out["champion"] = f"champion-v{champ[0]}"
    return out


def _per_env_report(rows: dict[str, list[dict]], final: HeldOut) -> dict[str, EnvHeldout]:
    """A mix's held-out figures per environment: every policy's summary and each candidate's
    paired success gain over the start (empty for one environment)."""
    envs = sorted({r["env"] for r in rows["baseline"]})
    if len(envs) < 2:
        return {}
    out = {}
    for env in envs:
        summaries, deltas = {}, {}
        for label, mine in rows.items():
            of_env = [r for r in mine if r["env"] == env]
            if of_env:
                summaries[label] = with_latency(of_env)
        for c in final.candidates:
            mine = rows[c.name]
            start = rows["baseline"][: len(mine)]
            pairs = [(a, b) for a, b in zip(mine, start, strict=True) if a["env"] == env]
            d = _normal([a for a, _ in pairs], [b for _, b in pairs])
            deltas[c.name] = d | {"cs": list(c.env_deltas[env].cs)} if env in c.env_deltas else d
        out[env] = EnvHeldout(n=summaries["baseline"]["n"], summaries=summaries, deltas=deltas)
    return out


def _log(report: GateReport, held: HeldOut) -> None:
    import mlflow

    decision = report.gate
    metrics = {
        "delta_success": report.delta_success,
        "gate_passed": float(decision.passed),
        "gate/tasks_used": decision.tasks_used,
        "gate/tasks_available": decision.tasks_available,
        "gate/episodes_used": decision.episodes_used,
        "gate/episodes_full": decision.episodes_full,
    }
    if report.sft_control is not None:
        metrics["grpo_minus_control"] = report.sft_control.grpo_minus_control
    if report.rft_control is not None:
        metrics["grpo_minus_rft_control"] = report.rft_control.grpo_minus_control
    for label, by_env in report.pass_at_k.items():
        for env, figures in by_env.items():
            where = f"pass_at_k/{label}" if len(by_env) == 1 else f"pass_at_k/{label}/{env}"
            metrics[f"{where}/greedy"] = figures["greedy"]["value"]
            metrics |= {f"{where}/pass_at_{k}": v["value"] for k, v in figures["pass_at"].items()}
    for verdict in decision.verdicts:
        metrics[f"gate/{verdict.candidate}_tasks"] = verdict.n
        if verdict.champion_delta is not None:
            metrics[f"{verdict.candidate}_minus_champion"] = verdict.champion_delta
    for name, by in report.general.items():
        metrics |= {f"general/{name}/{label}_value": v for label, v in by.items()}
        for label, d in report.general_deltas.get(name, {}).items():
            lo, hi = d["cs"]
            metrics |= {f"general/{name}/{label}_delta": d["delta"],
                        f"general/{name}/{label}_cs_lo": lo,
                        f"general/{name}/{label}_cs_hi": hi,
                        f"general/{name}/{label}_tasks": d["n"]}  # fmt: skip
    for env, held_env in report.per_env.items():
        metrics |= {
            f"{env}/delta_success_{name}": d["delta"] for name, d in held_env.deltas.items()
        }
    for label, rows in held.rows.items():
        summary = with_latency(rows)
        metrics |= {f"{FOLDERS.get(label, label)}/{k}": v for k, v in summary.items()
                    if isinstance(v, int | float)}  # fmt: skip
    mlflow.log_metrics(metrics)
    mlflow.set_tags(
        {
            **({"gate.rl_verdict": report.verdict["verdict"]} if report.verdict else {}),
            "gate.chosen": decision.chosen,
            "gate.reason": decision.reason[:5000],
            "gate.compared_with": ", ".join(decision.compared_with),
            "gate.rule": decision.rule,
            "gate.tasks_used": f"{decision.tasks_used} of {decision.tasks_available}",
        }
    )
    left_out = {"stage"} | ({"sft_control"} if report.sft_control is None else set())
    left_out |= {"rft_control"} if report.rft_control is None else set()
    left_out |= set() if report.per_env else {"per_env"}
    mlflow.log_dict(report.model_dump(mode="json", exclude=left_out), "heldout_gate.json")
    mlflow.log_dict({"looks": held.looks}, "heldout_gate_looks.json")
