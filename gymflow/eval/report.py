"""An evaluation's report: the console table, ``report.md`` with PNG plots, ``summary.json``.

:func:`console_table` is what ``gymflow eval`` prints: one line per environment and one for all
of them pooled, per policy, and with ``--against`` the paired differences. :func:`write_report`
writes the files into ``OUT/report/`` (what MLflow and the Prefect artifact carry): the same
figures and more (execution success, usage and cost, wall time), the failure buckets with two
example episodes each, and plots (success with 95 % intervals, reward histograms, failure
kinds, pass@k when K > 1) drawn with matplotlib (installed with MLflow).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

from gymflow.eval.suite import EvalResult, PolicyEval

REPORT_DIR = "report"


@dataclass(frozen=True)
class ReportFiles:
    folder: Path
    markdown: Path
    summary: Path
    plots: list[Path]


def _ci(m: dict | None, digits: int = 3) -> str:
    if m is None:
        return "—"
    lo, hi = m["ci95"]
    return f"{m['value']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _rate_of(summary: dict, key: str) -> dict:
    """A ``summarize`` rate (``key`` + ``key_ci95``) in the shape of the metrics' rates."""
    return {"value": summary[key], "ci95": summary[f"{key}_ci95"]}


def _delta(d: dict | None) -> str:
    if d is None:
        return "—"
    lo, hi = d["ci95"]
    mark = "*" if d["significant"] else ""
    return f"{d['delta']:+.3f} [{lo:+.3f}, {hi:+.3f}]{mark}"


def _line(name: str, m: dict) -> list[str]:
    k = str(m["samples"])
    return [
        name,
        f"{m['n_tasks']}×{m['samples']}",
        _ci(_rate_of(m, "success")),
        _ci(_rate_of(m, "reward")),
        _ci(m["pass_at"][k]) if m["samples"] > 1 else "=success",
        _ci(_rate_of(m, "well_formed")),
        _ci(m["right_tool"]),
        _ci(m["arg_accuracy"]),
        f"{m['unsafe']['value']:.3f}",
        f"{m['turns']:.2f}",
        f"{m['tokens']:.0f}",
        f"{m['latency_p50']:.2f}/{m['latency_p95']:.2f}",
    ]


HEADERS = [
    "env", "tasks×K", "success [95% CI]", "reward [95% CI]", "pass@K", "well formed",
    "right tool", "arg accuracy", "unsafe", "turns", "tokens", "latency p50/p95 s",
]  # fmt: skip


def _rows(p: PolicyEval) -> list[list[str]]:
    lines = [_line(env, m) for env, m in p.per_env.items()]
    return [*lines, _line("overall", p.overall)]


def console_table(result: EvalResult) -> str:
    """The tables ``gymflow eval`` prints (rich, rendered to plain text)."""
    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=200, force_terminal=False)
    mode = "greedy" if result.options.samples == 1 else f"K={result.options.samples} sampled"
    for p in result.policies:
        table = Table(title=f"gymflow eval {result.eval_id} — {p.label}: {p.spec} ({mode})")
        for h in HEADERS:
            table.add_column(h, justify="left" if h == "env" else "right")
        for line in _rows(p):
            table.add_row(*line)
        console.print(table)
    if result.comparison:
        a, b = (p.spec for p in result.policies)
        table = Table(title=f"paired: {a} minus {b} (same tasks, same seeds; * = CI excludes 0)")
        for h in ("env", "Δ success", "Δ reward", "Δ well formed", "Δ unsafe"):
            table.add_column(h, justify="left" if h == "env" else "right")
        for env, d in result.comparison.items():
            table.add_row(
                env, *(_delta(d[k]) for k in ("success", "reward", "well_formed", "unsafe"))
            )
        console.print(table)
    return buf.getvalue()


def markdown(result: EvalResult, plots: list[Path]) -> str:
    o = result.options
    lines = [
        f"# Evaluation {result.eval_id}",
        "",
        f"- environments: {', '.join(result.tasks)}; tasks: "
        + ", ".join(f"{env} {src} (n={len(result.tasks[env])})" for env, src in result.sources.items()),
        f"- decoding: {'greedy' if o.samples == 1 else f'{o.samples} samples at T={o.temperature}'},"
        f" seed {o.seed}, {o.max_new_tokens} tokens per turn, {o.max_completion_tokens} per episode",
        f"- wall time: {result.wall_s:.1f} s; episodes in `{result.out}`"
        + (" and `against/`" if len(result.policies) > 1 else ""),
        "",
    ]  # fmt: skip
    for p in result.policies:
        lines += _policy_section(p)
    if result.comparison:
        a, b = (p.spec for p in result.policies)
        lines += [f"## Paired differences: `{a}` − `{b}`", "", "Mean per-task difference with "
                  "its 95 % CI (the gate's paired statistics); * = the CI excludes 0.", "",
                  "| env | Δ success | Δ reward | Δ well formed | Δ unsafe | tasks |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for env, d in result.comparison.items():
            n = d["success"]["n_tasks"] if d["success"] else 0
            cells = [_delta(d[k]) for k in ("success", "reward", "well_formed", "unsafe")]
            lines.append(f"| {env} | {' | '.join(cells)} | {n} |")
        lines.append("")
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    return "\n".join(lines)


def _policy_section(p: PolicyEval) -> list[str]:
    registered = f" (registry {p.registered.name} v{p.registered.version})" if p.registered else ""
    lines = [f"## {p.label}: `{p.spec}`{registered}", "", "| " + " | ".join(HEADERS) + " |",
             "|" + "---|" * len(HEADERS)]  # fmt: skip
    lines += ["| " + " | ".join(line) + " |" for line in _rows(p)]
    lines += ["", "| env | mean@K | pass@k | tool execution | tool calls | usage (prompt/completion) "
              "| cost USD | wall s |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for env, m in [*p.per_env.items(), ("overall", p.overall)]:
        passes = ", ".join(f"@{k} {v['value']:.3f}" for k, v in m["pass_at"].items())
        usage, cost = m["usage"], "—"
        if usage and usage["cost_usd"] is not None:
            cost = f"{usage['cost_usd']:.4f}"
        used = f"{usage['prompt_tokens']}/{usage['completion_tokens']}" if usage else "—"
        mean_at = next(iter(m["mean_at"].values()))
        lines.append(
            f"| {env} | {_ci(mean_at)} | {passes} | {_ci(m['tool_execution'])} | "
            f"{m['tool_calls']:.2f} | {used} | {cost} | {m['wall_s']:.1f} |"
        )
    lines += ["", f"### Failures of `{p.spec}`", ""]
    for env, m in p.per_env.items():
        if not m["failure_buckets"]:
            lines += [f"- {env}: none", ""]
            continue
        lines += [f"**{env}**", "", "| kind | category | count | share |", "|---|---|---|---|"]
        for b in m["failure_buckets"]:
            lines.append(f"| {b['kind']} | {b['category']} | {b['count']} | {b['share']:.1%} |")
        lines.append("")
        for b in m["failure_buckets"]:
            for ex in b["examples"]:
                answer = json.dumps(ex["answer"], ensure_ascii=False)[:160]
                lines.append(
                    f"- `{b['kind']}` — task `{ex['task_id']}` sample {ex['sample_idx']} "
                    f"(rollout `{ex['rollout_id']}`, reward {ex['reward']}): answer {answer}; "
                    f"{(ex['failure_detail'] or '').splitlines()[0][:160] if ex['failure_detail'] else ''}"
                )
        lines.append("")
    return lines


def plot(result: EvalResult, folder: Path) -> list[Path]:
    """The report's PNGs (Agg backend, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    names = [*result.tasks, "overall"]
    width = 0.8 / len(result.policies)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(names), 3.2))
    for i, p in enumerate(result.policies):
        ms = [*p.per_env.values(), p.overall]
        ys = [m["success"] for m in ms]
        errs = [[y - m["success_ci95"][0] for y, m in zip(ys, ms, strict=True)],
                [m["success_ci95"][1] - y for y, m in zip(ys, ms, strict=True)]]  # fmt: skip
        xs = [j + (i - (len(result.policies) - 1) / 2) * width for j in range(len(names))]
        ax.bar(xs, ys, width, yerr=errs, capsize=3, label=f"{p.label}: {p.spec}"[:60])
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 1)
    ax.set_ylabel("success (95 % CI)")
    ax.legend(fontsize=7)
    paths.append(_save(fig, plt, folder / "success.png"))

    fig, axes = plt.subplots(
        1, len(result.tasks), figsize=(3.2 * len(result.tasks), 2.8), squeeze=False
    )
    for ax, env in zip(axes[0], result.tasks, strict=True):
        for p in result.policies:
            rewards = [r["reward"] for r in p.rows if r["env"] == env and r["reward"] is not None]
            ax.hist(rewards, bins=20, alpha=0.6, label=p.label)
        ax.set_title(env)
        ax.set_xlabel("reward")
    axes[0][0].set_ylabel("episodes")
    axes[0][0].legend(fontsize=7)
    paths.append(_save(fig, plt, folder / "rewards.png"))

    kinds = sorted({b["kind"] for p in result.policies for b in p.overall["failure_buckets"]})
    if kinds:
        fig, ax = plt.subplots(figsize=(6, 0.6 + 0.3 * len(kinds)))
        height = 0.8 / len(result.policies)
        for i, p in enumerate(result.policies):
            counts = {b["kind"]: b["count"] for b in p.overall["failure_buckets"]}
            ys = [j + i * height for j in range(len(kinds))]
            ax.barh(ys, [counts.get(k, 0) for k in kinds], height, label=p.label)
        ax.set_yticks(range(len(kinds)), kinds)
        ax.set_xlabel("failed episodes (all environments)")
        ax.legend(fontsize=7)
        paths.append(_save(fig, plt, folder / "failures.png"))

    if result.options.samples > 1:
        fig, ax = plt.subplots(figsize=(4.5, 3))
        for p in result.policies:
            for env, m in [*p.per_env.items(), ("overall", p.overall)]:
                ks = [int(k) for k in m["pass_at"]]
                ax.plot(ks, [m["pass_at"][str(k)]["value"] for k in ks], marker="o",
                        label=f"{p.label} {env}")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.set_ylabel("pass@k")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=6)
        paths.append(_save(fig, plt, folder / "pass_at_k.png"))
    return paths


def _save(fig, plt, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(result: EvalResult) -> ReportFiles:
    """``OUT/report/report.md``, ``summary.json`` and ``plots/*.png``."""
    folder = result.out / REPORT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    plots = plot(result, folder / "plots")
    md = folder / "report.md"
    md.write_text(markdown(result, plots), encoding="utf-8")
    summary = folder / "summary.json"
    summary.write_text(json.dumps(result.summary(), indent=2), encoding="utf-8")
    return ReportFiles(folder, md, summary, plots)
