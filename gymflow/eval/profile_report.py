"""A verifier profile for people: summary JSON, reward histogram, probe table, sample tables.

:func:`profile_summary` turns a :class:`~gymflow.eval.profiling.ProfileReport` into JSON-able
data; :func:`samples_markdown` / :func:`samples_html` render every sample with its whole
trajectory (nothing cut), :func:`plot_rewards` draws the reward histogram per source.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from gymflow.eval.profiling import ProfileReport

BINS = 10


def profile_summary(report: ProfileReport, reward_range: tuple[float, float]) -> dict:
    rows = sample_rows(report)
    rewards = [r["reward"] for r in rows if r["reward"] is not None]
    differing = [r["index"] for r in rows if not r["deterministic"]]
    return {
        "n": len(rows),
        "sources": _counts(r["source"].split(":")[0] for r in rows),
        "policy_requested": report.policy_requested,
        "policy_share": sum(r["source"] == "policy" for r in rows) / max(1, len(rows)),
        "by_source": _by_source(rows),
        "reward_histogram": histogram(rewards, reward_range),
        "probes": probe_table(rows),
        "determinism": {
            "compared": len(rows),
            "differing": len(differing),
            "differing_samples": differing,
            "processes": sorted({report.first[0].pid, report.second[0].pid}) if rows else [],
        },
        "verify_latency_ms": _latency(report),
        "timings_s": {k: round(v, 2) for k, v in report.timings.items()},
        "problems": [f"[{kind}] {message}" for kind, message in report.problems],
        "rows": rows,
    }


def sample_rows(report: ProfileReport) -> list[dict]:
    """One row per sample: both scores, the verdict, the ceiling, the latencies, the trajectory."""
    rows = []
    for i, (sample, a, b) in enumerate(
        zip(report.samples, report.first, report.second, strict=True)
    ):
        score = a.score or {}
        rows.append(
            {
                "index": i,
                "source": sample.source,
                "task_id": sample.task.task_id,
                "reward": score.get("reward"),
                "reward_other_process": (b.score or {}).get("reward"),
                "deterministic": a.verdict() == b.verdict(),
                "success": score.get("success"),
                "failure_kind": score.get("failure_kind") or a.error,
                "ceiling": sample.ceiling,
                "verify_ms": [round(a.latency_s * 1000, 3), round(b.latency_s * 1000, 3)],
                "trajectory": readable(sample.items),
            }
        )
    return rows


def readable(items: Sequence[dict]) -> str:
    """A trajectory as lines a person reads: ``role: text``, calls and their outputs."""
    lines = []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            lines.append(f"{item.get('role')}: {item.get('content')}")
        elif kind == "function_call":
            lines.append(f"call {item.get('name')}({item.get('arguments')})")
        elif kind == "function_call_output":
            lines.append(f"-> {item.get('output')}")
        else:
            lines.append(json.dumps(item, ensure_ascii=False))
    return "\n".join(lines)


def probe_table(rows: Sequence[dict]) -> list[dict]:
    """Per probe kind: how many, the highest reward, its ceiling, how many went over it."""
    out: dict[str, dict] = {}
    for r in rows:
        if not r["source"].startswith("probe:") or r["reward"] is None:
            continue
        entry = out.setdefault(
            r["source"][6:], {"probe": r["source"][6:], "n": 0, "max_reward": r["reward"],
                              "ceiling": r["ceiling"], "over_ceiling": 0},
        )  # fmt: skip
        entry["n"] += 1
        entry["max_reward"] = max(entry["max_reward"], r["reward"])
        entry["ceiling"] = min(entry["ceiling"], r["ceiling"])
        entry["over_ceiling"] += int(r["reward"] > r["ceiling"] or bool(r["success"]))
    return sorted(out.values(), key=lambda e: e["probe"])


def histogram(values: Sequence[float], reward_range: tuple[float, float]) -> dict[str, int]:
    low, high = reward_range
    width = (high - low) / BINS
    counts = [0] * BINS
    for v in values:
        counts[min(BINS - 1, max(0, int((v - low) / width)))] += 1
    return {f"[{low + i * width:.2f},{low + (i + 1) * width:.2f})": c for i, c in enumerate(counts)}


def _counts(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _by_source(rows: Sequence[dict]) -> dict:
    groups: dict[str, list[float]] = {}
    for r in rows:
        if r["reward"] is not None:
            groups.setdefault(r["source"].split(":")[0], []).append(r["reward"])
    return {
        k: {"n": len(v), "mean_reward": sum(v) / len(v), "max_reward": max(v)}
        for k, v in groups.items()
    }


def _latency(report: ProfileReport) -> dict:
    out = {}
    for name, scorings in (("first_process", report.first), ("second_process", report.second)):
        ms = sorted(s.latency_s * 1000 for s in scorings)
        if ms:
            out[name] = {
                "p50": round(statistics.median(ms), 3),
                "p95": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 3),
                "max": round(ms[-1], 3),
                "total": round(sum(ms), 1),
            }
    return out


COLUMNS = ("index", "source", "task_id", "reward", "reward_other_process", "deterministic",
           "success", "failure_kind", "ceiling", "verify_ms", "trajectory")  # fmt: skip


def samples_markdown(summary: dict) -> str:
    """Every sample as a markdown table row, the whole trajectory in its cell."""
    lines = [
        f"# Verifier profile: {summary['n']} samples",
        "",
        f"Sources: {summary['sources']}; deterministic across two processes: "
        f"{summary['determinism']['compared'] - summary['determinism']['differing']}"
        f"/{summary['determinism']['compared']}; problems: {len(summary['problems'])}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for row in summary["rows"]:
        lines.append("| " + " | ".join(_md_cell(row[c]) for c in COLUMNS) + " |")
    lines += ["", "## Problems", ""] + [f"- {p}" for p in summary["problems"]] + [""]
    return "\n".join(lines)


def _md_cell(value) -> str:
    text = "" if value is None else str(value)
    return html.escape(text, quote=False).replace("|", "&#124;").replace("\n", "<br>")


def samples_html(summary: dict) -> str:
    """The same table as HTML (trajectories in ``<pre>``), a page to open in a browser."""
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    body = []
    for row in summary["rows"]:
        cells = []
        for c in COLUMNS:
            text = html.escape("" if row[c] is None else str(row[c]))
            cells.append(f"<td><pre>{text}</pre></td>" if c == "trajectory" else f"<td>{text}</td>")
        style = "" if row["deterministic"] else ' style="background:#fdd"'
        body.append(f"<tr{style}>{''.join(cells)}</tr>")
    problems = "".join(f"<li>{html.escape(p)}</li>" for p in summary["problems"])
    return (
        "<!doctype html><meta charset='utf-8'><title>Verifier profile</title>"
        "<style>td,th{border:1px solid #ccc;vertical-align:top;font:12px monospace}"
        "pre{white-space:pre-wrap;margin:0}</style>"
        f"<h1>Verifier profile: {summary['n']} samples</h1><ul>{problems}</ul>"
        f"<table><tr>{head}</tr>{''.join(body)}</table>"
    )


def plot_rewards(summary: dict, reward_range: tuple[float, float], path: Path) -> Path:
    """Reward histogram, one colour per source (policy, gold, probe)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3))
    for source in sorted(summary["sources"]):
        rewards = [
            r["reward"]
            for r in summary["rows"]
            if r["source"].split(":")[0] == source and r["reward"] is not None
        ]
        ax.hist(
            rewards, bins=BINS, range=reward_range, alpha=0.6, label=f"{source} (n={len(rewards)})"
        )
    ax.set_xlabel("reward")
    ax.set_ylabel("samples")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
