"""The run summary: ``summary.json`` in the run folder and MLflow, plus a printed table."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gymflow.core.machine import machine_info
from gymflow.lifecycle.code_version import code_version
from gymflow.lifecycle.run_context import RunContext
from gymflow.lifecycle.run_inputs import INPUTS_TAG, RunInputs
from gymflow.lifecycle.stage_results import LifecycleResults
from gymflow.train.grpo_metrics import zero_variance_share

_RATES = ("success", "reward", "well_formed")


def build_summary(
    run: RunContext,
    config,
    results: LifecycleResults,
    wall_s: float,
    links: dict[str, str] | None = None,
) -> dict:
    """``summary.json``: the held-out comparison, the gate, the registry, every stage's cost
    and the run's addresses in the Prefect and MLflow UIs (``links``)."""

    def rates(s: dict) -> dict:  # with the tasks they are on: a policy may have run on fewer
        return ({k: s[k] for k in _RATES} | {f"{k}_ci95": s[f"{k}_ci95"] for k in _RATES}
                | {"n": s["n"]})  # fmt: skip

    gate, grpo = results.heldout_gate, results.grpo
    inputs = RunInputs(
        env=config.env,
        env_version=results.generate_tasks.env_version,
        dataset_hash=results.generate_tasks.dataset_hash,
        champion_version=results.resolve_policy.champion_version,
        config_digest=config.digest(),
        code_version=code_version(),
    )
    summary = {
        "run_id": run.run_id,
        "run_dir": run.run_dir,
        "mlflow_run_id": run.mlflow_parent_id,
        "links": links or {},
        "inputs": inputs.model_dump() | {"fingerprint": inputs.fingerprint()},
        "env": config.env_label,
        **({"envs": config.env_weights} if config.envs is not None else {}),
        "config_digest": config.digest(),
        "wall_s": round(wall_s, 2),
        "machine": machine_info(),  # GRPO and its control are timed: their steps depend on it
        "stages": results.stage_wall_s(),
        "policy_start": results.resolve_policy.source,
        "sft_ran": results.sft is not None,
        "sft_decision": {
            "ran": results.sft is not None,
            "reason": results.baseline_eval.sft.reason,
        },
        "format_check": _format_checks(config),
        "heldout": {
            "n": gate.n,
            "baseline": rates(gate.baseline),
            "candidate": rates(gate.candidate),
            "delta_success": gate.delta_success,
            "ci95": gate.ci95,
            **({"per_env": _per_env(gate, rates)} if gate.per_env else {}),
        },
        **({"general": _general(gate)} if gate.general else {}),
        "gate": gate.gate.model_dump(),
        "registry": results.promote.model_dump(
            include={"model", "version", "champion_alias_moved", "previous_champion"}
        )
        | {"candidate": gate.gate.chosen},
        "grpo": {
            "steps": grpo.steps,
            "wall_s": grpo.stage.wall_s,
            "train_wall_s": grpo.train_wall_s,
            "threads": grpo.threads,
            "processes": grpo.processes,
            "resumed_from": grpo.resumed_from,
            "dynamic_sampling": grpo.dynamic_sampling,
            "pool": grpo.pool,
            "stopped_by": grpo.stopped_by,
            "samples": grpo.samples,
            "zero_variance_share": zero_variance_share(grpo.dynamic_sampling),
            "preflight": grpo.preflight,
            "episodes_by": _episodes_by(config),
        },
    }
    if (sft := results.sft) is not None:
        summary["sft"] = {
            "steps": sft.steps,
            "wall_s": sft.stage.wall_s,
            "demos": sft.demos,
            "history": sft.history,
            "stopped_by": sft.stopped_by,
            "samples": sft.samples,
            "processes": sft.processes,
        }
    if (rft := results.rft_control) is not None:
        versus = gate.rft_control
        summary["rft_control"] = {
            "steps": rft.steps,
            "wall_s": rft.stage.wall_s,
            "budget_s": rft.budget_s,
            "stopped_by": rft.stopped_by,
            "compute": rft.compute,
            **({"heldout": rates(versus.summary)} if versus else {}),
            "grpo_minus_control": versus.grpo_minus_control if versus else None,
            "ci95": versus.ci95 if versus else None,
        }
    if gate.verdict is not None:
        summary["verdict"] = gate.verdict
    if gate.pass_at_k:
        summary["pass_at_k"] = gate.pass_at_k
    if (drift := results.verifier_drift) is not None:
        summary["verifier_drift"] = drift.model_dump(exclude={"stage"})
    if (control := results.sft_control) is not None:
        versus = gate.sft_control
        summary["sft_control"] = {
            "steps": control.steps,
            "wall_s": control.stage.wall_s,
            "budget_s": control.budget_s,
            "beside_grpo": control.beside_grpo,
            "processes": control.processes,
            "stopped_by": control.stopped_by,
            "samples": control.samples,
            **({"heldout": rates(versus.summary)} if versus else {}),
            "grpo_minus_control": versus.grpo_minus_control if versus else None,
            "ci95": versus.ci95 if versus else None,
        }
    return summary


def _episodes_by(config) -> str:
    """Who played GRPO's episodes: gymflow's agent loop, or the external agent programs."""
    engine = config.grpo.rollout
    if engine.engine != "agents":
        return "gymflow's agent loop"
    return "agent programs: " + ", ".join(engine.programs)


def _format_checks(config) -> dict[str, str]:
    """Each environment's format check (:meth:`Environment.well_formed`), as reports quote it."""
    from gymflow.env.registry import get_env

    return {name: get_env(name).format_rule() for name in config.env_weights}


def preflight_line(summary: dict) -> str | None:
    """The preflight's prediction beside what GRPO measured, in one line (None without one).

    >>> preflight_line({"grpo": {"zero_variance_share": 0.31, "preflight": {"verdict": "in_band",
    ...     "pass_at_1": 0.42, "group_size": 8, "pass_at_k": 0.9, "predicted_zero_variance": 0.22,
    ...     "open_levels": None}}})
    'GRPO preflight: in band (pass@1 0.42, pass@8 0.90); zero-variance groups predicted 22 %, GRPO measured 31 %'
    """
    grpo = summary.get("grpo", {})
    pre = grpo.get("preflight")
    if not pre:
        return None
    verdict = pre["verdict"].replace("_", " ")
    levels = pre.get("open_levels")
    where = f"; curriculum levels {', '.join(map(str, levels))}" if levels else ""
    line = (
        f"GRPO preflight: {verdict} (pass@1 {pre['pass_at_1']:.2f}, pass@{pre['group_size']} "
        f"{pre['pass_at_k']:.2f}{where}); zero-variance groups predicted "
        f"{100 * pre['predicted_zero_variance']:.0f} %"
    )
    measured = grpo.get("zero_variance_share")
    return line + (f", GRPO measured {100 * measured:.0f} %" if measured is not None else "")


def _per_env(gate, rates) -> dict:
    """A mix's held-out figures per environment: the start, GRPO (with its paired gain over
    the start) and the SFT control, each with 95 % CIs."""
    out = {}
    for env, held in gate.per_env.items():
        grpo = held.deltas["grpo"]
        row = {
            "n": held.n,
            "baseline": rates(held.summaries["baseline"]),
            "candidate": rates(held.summaries["grpo"]),
            "delta_success": grpo["delta"],
            "ci95": grpo["ci95"],
        }
        if "sft_control" in held.summaries:
            control = held.deltas["sft_control"]
            row |= {
                "sft_control": rates(held.summaries["sft_control"]),
                "control_delta_success": control["delta"],
                "control_ci95": control["ci95"],
            }
        out[env] = row
    return out


def _general(gate) -> dict:
    """The general-capability sets: tasks, the measure per policy evaluated there (``success``
    holds it, success or gold-answer probability as ``measure`` says), each candidate's paired
    difference with the start (the gate's confidence sequence) and, for a skipped set, why."""
    checks = getattr(gate, "general_checks", {}) or {}
    return {
        name: {
            "n": gate.general_n.get(name),
            "success": by,
            "delta_success": gate.general_deltas.get(name, {}),
            **{k: checks[name][k] for k in ("measure", "margin", "skipped") if name in checks},
        }
        for name, by in gate.general.items()
    }


GENERAL_TABLE_HEADER = [
    "general set",
    "n",
    "start",
    "GRPO",
    "GRPO − start, points [CS]",
    "SFT control",
    "control − start, points [CS]",
]


def general_table_rows(summary: dict) -> list[list[str]]:
    """One row per general-capability set (held-out splits of other environments, external
    sets such as ``bfcl:simple_python``): success of the start and of each candidate evaluated
    there, with its paired gain over the start. A set the gate skipped (the start at its floor:
    nothing to lose) says so where the gain would be; ``—`` for a policy not evaluated there (a
    candidate that failed an earlier check, or any candidate on a skipped set of an environment).

    >>> skipped = {"n": 32, "success": {"baseline": 0.001}, "delta_success": {}, "skipped": "…"}
    >>> general_table_rows({"general": {"math": skipped}})
    [['math', '32', '0.001', '—', 'skipped: start at the floor', '—', 'skipped: start at the floor']]
    """
    rows = []
    for name, g in summary.get("general", {}).items():
        cells = [name, str(g["n"]), f"{g['success']['baseline']:.3f}"]
        for label in ("grpo", "sft_control"):
            score = g["success"].get(label)
            cells.append("—" if score is None else f"{score:.3f}")
            d = g["delta_success"].get(label)
            if d is not None:
                lo, hi = d["ci95"]
                cells.append(f"{100 * d['delta']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
            else:
                cells.append("skipped: start at the floor" if g.get("skipped") else "—")
        rows.append(cells)
    return rows


def env_table_rows(summary: dict) -> list[list[str]]:
    """A mix's per-environment held-out rows, the pooled mix last: environment, n, start →
    GRPO success with 95 % CIs, GRPO − start in points with its paired CI, the SFT control
    (``""`` without one). Empty for one environment."""
    h = summary["heldout"]
    if "per_env" not in h:
        return []
    control = summary.get("sft_control", {}).get("heldout")

    def success(s: dict) -> str:
        lo, hi = s["success_ci95"]
        return f"{s['success']:.3f} [{lo:.3f}, {hi:.3f}]"

    def gain(d: float, ci: list[float]) -> str:
        return f"{100 * d:+.1f} [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"

    rows = []
    for env, e in h["per_env"].items():
        weight = summary.get("envs", {}).get(env)
        label = f"{env} ({weight:.2g})" if weight is not None else env
        rows.append([label, str(e["n"]), success(e["baseline"]), success(e["candidate"]),
                     gain(e["delta_success"], e["ci95"]),
                     success(e["sft_control"]) if "sft_control" in e else ""])  # fmt: skip
    rows.append(["mix (pooled)", str(h["n"]), success(h["baseline"]), success(h["candidate"]),
                 gain(h["delta_success"], h["ci95"]), success(control) if control else ""])  # fmt: skip
    return rows


ENV_TABLE_HEADER = [
    "environment (weight)",
    "n",
    "start success [95% CI]",
    "GRPO success [95% CI]",
    "GRPO − start, points [95% CI]",
    "SFT control",
]


def write_summary(run: RunContext, summary: dict) -> Path:
    import mlflow

    path = Path(run.run_dir) / "summary.json"
    path.write_text(json.dumps(summary, indent=2))
    with mlflow.start_run(run_id=run.mlflow_parent_id):
        mlflow.log_artifact(str(path))
        metrics = {
            "heldout_delta_success": summary["heldout"]["delta_success"],
            "gate_passed": float(summary["gate"]["passed"]),
            "wall_s": summary["wall_s"],
        }
        if summary["gate"].get("grpo_minus_control") is not None:
            metrics["grpo_minus_control"] = summary["gate"]["grpo_minus_control"]
        mlflow.log_metrics(metrics)
        mlflow.set_tag(INPUTS_TAG, summary["inputs"]["fingerprint"])  # what it was run on
    return path


def policy_rows(summary: dict, names: tuple[str, str, str]) -> list[tuple[str, dict]]:
    """The held-out table's rows: (name, figures) for the start, GRPO and the control (when it
    ran), ``names`` in that order. A policy the sequential gate stopped before the others ran on
    fewer tasks than the title's n; its name says on how many.

    >>> s = {"heldout": {"n": 96, "baseline": {"n": 96}, "candidate": {"n": 32}}}
    >>> [name for name, _ in policy_rows(s, ("start", "GRPO", "control"))]
    ['start', 'GRPO, n=32']
    """
    h = summary["heldout"]
    policies = [(names[0], h["baseline"]), (names[1], h["candidate"])]
    if control := summary.get("sft_control", {}).get("heldout"):
        policies.append((names[2], control))
    if rft := summary.get("rft_control", {}).get("heldout"):
        policies.append((names[3] if len(names) > 3 else "RFT control", rft))
    return [(name if s.get("n", h["n"]) == h["n"] else f"{name}, n={s['n']}", s)
            for name, s in policies]  # fmt: skip


def render_table(summary: dict) -> str:
    """A plain-text table (rich renders it in the terminal)."""
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    h = summary["heldout"]
    table = Table(title=f"gymflow run {summary['run_id']} — held-out n={h['n']} (greedy)")
    table.add_column("policy")
    for k in _RATES:
        table.add_column(f"{k} [95% CI]", justify="right")

    def row(name: str, s: dict) -> None:
        table.add_row(
            name,
            *(f"{s[k]:.3f} [{s[k + '_ci95'][0]:.3f}, {s[k + '_ci95'][1]:.3f}]" for k in _RATES),
        )

    for name, s in policy_rows(summary, ("baseline (GRPO start)", "candidate (after GRPO)",
                                         "control (SFT, same time)",
                                         "control (RFT, same time)")):  # fmt: skip
        row(name, s)
    buf = StringIO()
    console = Console(file=buf, width=110, force_terminal=False)
    console.print(table)
    for title, header, rows in (
        ("held-out success per environment (paired, greedy)", ENV_TABLE_HEADER,
         env_table_rows(summary)),
        ("general capability: success on sets not trained on (paired, greedy)",
         GENERAL_TABLE_HEADER, general_table_rows(summary)),
    ):  # fmt: skip
        if rows:
            extra = Table(title=title)
            for column in header:
                extra.add_column(column, justify="left" if column == header[0] else "right")
            for cells in rows:
                extra.add_row(*cells)
            console.print(extra)
    for line in gate_lines(summary):
        console.print(line)
    for line in verdict_lines(summary):
        console.print(line)
    for line in training_lines(summary):
        console.print(line)
    if (line := preflight_line(summary)) is not None:
        console.print(line)
    console.print(registry_line(summary))
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in summary["stages"].items() if v is not None)
    console.print(f"stage wall time: {stages}; total {summary['wall_s']:.1f}s")
    return buf.getvalue()


def gate_lines(summary: dict) -> list[str]:
    """The gate's outcome at a glance: the verdict, then one line per candidate with the
    interval that decided it (the gate's confidence sequence, named so), and GRPO − control.
    The whole reason (every guardrail, the effort) is in ``report.md`` and ``summary.json``.

    >>> lines = gate_lines({"gate": {"passed": False, "chosen": "grpo", "verdicts": [
    ...     {"candidate": "grpo", "passed": False, "success": 0.5, "delta_success": 0.0,
    ...      "cs": [-0.096, 0.096], "n": 32, "reason": "success gain over the start +0.000 "
    ...      "(CS [-0.096, +0.096], n=32) not significant; latency: ..."}]}})
    >>> print("\\n".join(lines))
    gate: not passed — nothing promoted (full reason in report.md)
      grpo: refused — success 0.500, +0.000 over the start (gate's 95% CS [-0.096, +0.096], n=32); success gain over the start +0.000 not significant
    """
    gate = summary["gate"]
    verdicts = gate.get("verdicts") or []
    if gate["passed"]:
        head = f"gate: passed — {gate.get('chosen')} promoted (full reason in report.md)"
    else:
        head = "gate: not passed — nothing promoted (full reason in report.md)"
    level = 100 * (1 - gate.get("alpha", 0.05))
    lines = [head]
    for v in verdicts:
        lo, hi = v["cs"]
        state = "passes" if v["passed"] else "refused"
        if v["passed"] and v["candidate"] == gate.get("chosen"):
            state = "promoted" if gate["passed"] else state
        first = re.sub(r" \(CS \[[^\]]*\], n=\d+\)", "", v["reason"].split("; ")[0])
        why = "" if v["passed"] else "; " + first[:160]
        lines.append(
            f"  {v['candidate']}: {state} — success {v['success']:.3f}, "
            f"{v['delta_success']:+.3f} over the start (gate's {level:.0f}% CS "
            f"[{lo:+.3f}, {hi:+.3f}], n={v['n']}){why}"
        )
    if gate.get("grpo_minus_control_cs"):
        lo, hi = gate["grpo_minus_control_cs"]
        lines.append(
            f"  GRPO − SFT control {gate['grpo_minus_control']:+.3f} (gate's {level:.0f}% CS "
            f"[{lo:+.3f}, {hi:+.3f}])"
        )
    return lines


def verdict_lines(summary: dict) -> list[str]:
    """Is RL worth it here, and pass@k beside greedy pass@1 of each policy.

    >>> verdict_lines({"verdict": {"verdict": "undecided", "sentence": "Undecided: …"},
    ...     "pass_at_k": {"grpo": {"tool_call": {"k": 8, "n_tasks": 32,
    ...         "greedy": {"value": 0.5}, "pass_at": {"8": {"value": 0.75}}}}}})
    ['RL verdict: undecided — Undecided: …', 'pass@k (32 tasks, greedy pass@1 / pass@8): grpo 0.500 / 0.750']
    """
    lines = []
    if verdict := summary.get("verdict"):
        lines.append(f"RL verdict: {verdict['verdict']} — {verdict['sentence']}")
    cells = []
    n = k = None
    for label, by_env in (summary.get("pass_at_k") or {}).items():
        for env, f in by_env.items():
            name = label if len(by_env) == 1 else f"{label} ({env})"
            n, k = f["n_tasks"], f["k"]
            cells.append(f"{name} {f['greedy']['value']:.3f} / {f['pass_at'][str(k)]['value']:.3f}")
    if cells:
        lines.append(f"pass@k ({n} tasks, greedy pass@1 / pass@{k}): " + ", ".join(cells))
    return lines


def registry_line(summary: dict) -> str:
    """What the registry did, said so that a refused candidate does not read as a success.

    >>> registry_line({"registry": {"model": "m", "version": "2", "candidate": "grpo",
    ...     "champion_alias_moved": False, "previous_champion": "1"}})
    'registry: m v2 (GRPO policy) registered as challenger (not promoted); champion stays at v1'
    """
    reg = summary["registry"]
    what = {"grpo": "GRPO policy", "sft_control": "SFT control", "rft_control": "RFT control"}.get(
        reg.get("candidate"), ""
    )
    what = f" ({what})" if what else ""
    if reg["champion_alias_moved"]:
        return f"registry: {reg['model']} v{reg['version']}{what} registered as champion"
    stays = f"v{reg['previous_champion']}" if reg.get("previous_champion") else "none"
    return (
        f"registry: {reg['model']} v{reg['version']}{what} registered as challenger "
        f"(not promoted); champion stays at {stays}"
    )


def training_lines(summary: dict) -> list[str]:
    """What each trained arm got and what ended it: SFT, GRPO and the control beside it (the
    two are compared at one wall time, so the updates and samples each bought are shown).

    >>> training_lines({"grpo": {"steps": 214, "samples": 6848, "stopped_by": "time_budget",
    ...     "train_wall_s": 240.4}, "sft_control": {"steps": 402, "samples": 12864,
    ...     "stopped_by": "should_stop"}})
    ['GRPO: 214 updates, 6848 completions in 240s (ended by its time budget)', "SFT control: 402 updates, 12864 demonstrations in the same time (ended by GRPO's wall time)"]
    """
    lines = []
    if decision := summary.get("sft_decision"):
        lines.append(f"SFT {'ran' if decision['ran'] else 'skipped'}: {decision['reason']}")
    if (sft := summary.get("sft")) and sft.get("samples") is not None:
        lines.append(
            f"SFT: {sft['steps']} updates, {sft['samples']} demonstrations "
            f"(ended by {_LIMITS.get(sft.get('stopped_by'), sft.get('stopped_by'))})"
        )
    grpo = summary["grpo"]
    if grpo.get("samples") is not None:
        by = grpo.get("episodes_by", "")
        by = f"; episodes by {by}" if by.startswith("agent programs") else ""
        lines.append(
            f"GRPO: {grpo['steps']} updates, {grpo['samples']} completions in "
            f"{grpo['train_wall_s']:.0f}s (ended by {_LIMITS.get(grpo.get('stopped_by'))}{by})"
        )
    if (control := summary.get("sft_control")) and control.get("samples") is not None:
        why = "GRPO's wall time" if control.get("stopped_by") in ("should_stop", "time_budget") else control.get("stopped_by")  # fmt: skip
        lines.append(
            f"SFT control: {control['steps']} updates, {control['samples']} demonstrations "
            f"in the same time (ended by {why})"
        )
    if (rft := summary.get("rft_control")) and rft.get("compute"):
        c = rft["compute"]
        lines.append(
            f"RFT control: {rft['steps']} updates, {c.get('samples_generated', 0)} samples "
            f"generated, {c.get('examples_trained', 0)} verified successes trained on, in "
            f"GRPO's time"
        )
    return lines


_LIMITS = {
    "max_steps": "its step cap",
    "time_budget": "its time budget",
    "run_budget": "the run's time budget (run_budget_s)",
    "target_sampled_success": "its sampled-success target",
}
