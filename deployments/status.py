"""``gymflow deploy --status``: what serves this project's deployments, and what they did.

Read from the project's Prefect API with plain HTTP (no Prefect import: it answers in a
second): each deployment with its schedules, whether they are active, its next scheduled run,
and the flow runs it made lately; plus the background processes
(:mod:`gymflow.deployments.background`).
"""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime

RECENT_RUNS = 5


def api(url: str, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method="POST" if body is not None else "GET",
        headers={"content-type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read()
        return json.loads(text) if text else None


def deployment_lines(api_url: str) -> list[str]:
    """One line per deployment, then the latest flow runs of all of them."""
    deployments = api(f"{api_url}/deployments/filter", {"sort": "NAME_ASC"})
    if not deployments:
        return ["no deployments registered (gymflow deploy registers them)"]
    flows = {f["id"]: f["name"] for f in api(f"{api_url}/flows/filter", {})}
    lines = []
    for d in deployments:
        crons = [s["schedule"].get("cron") or str(s["schedule"]) for s in d.get("schedules", [])]
        active = [s for s in d.get("schedules", []) if s.get("active", True)]
        if d.get("paused"):
            state = "paused"
        elif not crons:
            state = "on demand"
        else:
            state = "active" if active else "schedules inactive"
        upcoming = api(
            f"{api_url}/flow_runs/filter",
            {
                "deployments": {"id": {"any_": [d["id"]]}},
                "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}},
                "sort": "EXPECTED_START_TIME_ASC",
                "limit": 1,
            },
        )
        when = f"; next run {_when(upcoming[0]['expected_start_time'])}" if upcoming else ""
        schedule = ", ".join(crons) + " (UTC)" if crons else "no schedule"
        lines.append(f"{flows.get(d['flow_id'], '?')}/{d['name']}: {schedule}, {state}{when}")
    recent = api(
        f"{api_url}/flow_runs/filter",
        {
            "deployments": {"id": {"any_": [d["id"] for d in deployments]}},
            "flow_runs": {"state": {"type": {"not_any_": ["SCHEDULED"]}}},
            "sort": "START_TIME_DESC",
            "limit": RECENT_RUNS,
        },
    )
    if recent:
        lines.append("latest runs:")
        for run in recent:
            took = f", {run['total_run_time']:.0f} s" if run.get("total_run_time") else ""
            started = _when(run.get("start_time") or run.get("expected_start_time"))
            lines.append(f"  {run['name']}  {run['state_name']}  {started}{took}")
    return lines


def _when(stamp: str | None) -> str:
    if not stamp:
        return "?"
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")
