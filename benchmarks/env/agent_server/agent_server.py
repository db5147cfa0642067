"""Agents as services: episodes/s through ``POST /run`` and through the capturing proxy, against
the in-process loop.

    python benchmarks/env/agent_server/agent_server.py [--rollouts 256] [--repeats 3] [--json] [--out FILE]

Every scenario runs the same ``counter`` gold episodes (seed, 4 model turns, 3 tool calls on
stateful tools, verify, close) with the scripted gold policy (an instant model, as NeMo Gym's
stub LLM is in its agent-server figure), at 1 and 16 episodes in flight:

* ``in_process`` — :func:`gymflow.rollout.driver.run_window`, the environment's app in-process;
* ``run`` — one ``POST /run`` per episode to ``gymflow agent serve`` in its own process (the
  same driver there, the environment in-process in the agent server);
* ``proxy`` — an external agent (a plain HTTP loop: chat completion, run the tool calls through
  the proxy's tool endpoint, repeat) against ``gymflow agent proxy`` in its own process, in
  front of the scripted policy served by :mod:`gymflow.policy.openai_server` in a third; the
  episode is opened, recorded and verified by the proxy and returned at ``/end`` (no scenario
  writes Parquet: the store's cost is the same whichever path made the episode).

For each: ``episodes_per_s``, ``ms_per_episode`` (wall / episodes), ``overhead_ms`` (ms per
episode over the in-process loop at the same concurrency), and ``cpu_ms_per_episode``: CPU of
this process plus every server process (read from /proc), so it is the whole stack's cost;
``cpu_ms_per_episode_by_process`` splits it (``client`` is this process: the caller of
``/run``, or the external agent with its HTTP client).
``nemo_gym`` repeats NeMo Gym 0.7.0's agent-server figures measured on this project's machines
(a 3-server stack, stub LLM, seed + 3 model turns + 2 tool calls + verify; DESIGN.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.common import arguments, emit, machine  # noqa: E402

GYMFLOW = str(Path(sys.executable).with_name("gymflow"))
TASK_SEED, DRAFTS = 3, 1200
NEMO_GYM = {
    "c1": {"rollouts_per_s": 36.7, "cpu_ms_per_rollout": 25.5},
    "c16": {"rollouts_per_s": 50.1, "cpu_ms_per_rollout": 23.5},
    "episode": "seed + 3 model turns + 2 tool calls + verify (example_session_state_mgmt)",
}
SERVED_POLICY = textwrap.dedent(
    """
    import sys, uvicorn
    from gymflow.data.task_set import build_tasks
    from gymflow.env.registry import get_env
    from gymflow.policy.openai_server import build_openai_app
    from gymflow.policy.spec import load_policy
    tasks = build_tasks(get_env("counter"), {drafts}, seed={seed}, heldout_frac=0.0, val_frac=0.0)
    policy = load_policy("scripted:counter", tasks=list({{t.prompt[0]["content"]: t for t in tasks}}.values()))
    app = build_openai_app(policy, "gold", max_tokens_limit=4096, batch_window_s=0.0)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
    """
)


def tasks_once():
    from gymflow.data.task_set import build_tasks
    from gymflow.env.registry import get_env

    tasks = build_tasks(get_env("counter"), DRAFTS, TASK_SEED, heldout_frac=0.0, val_frac=0.0)
    return list({t.prompt[0]["content"]: t for t in tasks}.values())  # one task per prompt


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_s(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) of this process (``client``) and of each of ``pids``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {"client": sum(os.times()[:2])}
    for name, pid in pids.items():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        out[name] = (int(fields[11]) + int(fields[12])) / tick
    return out


def started(cmd: list[str], health: str) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[:3]} exited")
        try:
            if httpx.get(health, timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError(f"{cmd[:3]} did not start")


def measure(run, n: int, concurrency: int, pids: dict[str, int], repeats: int) -> dict:
    """The best of ``repeats`` timed runs (the machine is shared: the best is the least
    disturbed), its CPU split by process."""
    run(min(n, 16), concurrency)  # warm: connections, caches
    best = None
    for _ in range(repeats):
        cpu0, t0 = cpu_s(pids), time.perf_counter()
        rewards = run(n, concurrency)
        wall, cpu1 = time.perf_counter() - t0, cpu_s(pids)
        assert rewards == [1.0] * n, f"not every gold episode scored 1.0: {sorted(set(rewards))}"
        if best is None or wall < best[0]:
            best = (wall, cpu0, cpu1)
    wall, cpu0, cpu1 = best
    by_process = {k: round(1000 * (cpu1[k] - cpu0[k]) / n, 2) for k in cpu0}
    return {
        "episodes_per_s": round(n / wall, 1),
        "ms_per_episode": round(1000 * wall / n, 2),
        "cpu_ms_per_episode": round(sum(by_process.values()), 2),
        "cpu_ms_per_episode_by_process": by_process,
    }


def in_process(tasks):
    from gymflow.env.client import EnvClient
    from gymflow.env.registry import get_env
    from gymflow.env.resources_server import build_app
    from gymflow.policy.spec import load_policy
    from gymflow.rollout.driver import run_window
    from gymflow.rollout.episode import Sampling
    from gymflow.rollout.model_turns import ModelTurns
    from gymflow.rollout.store import plan

    env, gold = get_env("counter"), load_policy("scripted:counter", tasks=tasks)
    app = build_app(env)

    def run(n: int, concurrency: int) -> list[float]:
        planned = plan(_cycle(tasks, n), "bench", 0, 1, 0)
        done = []

        async def go():
            async with EnvClient(app=app) as client:
                turns = ModelTurns(gold, Sampling(max_completion_tokens=1 << 16))
                await run_window(
                    client, env, turns, planned, concurrency, lambda *r: done.append(r)
                )

        asyncio.run(go())
        return [ep.reward for _, ep, _ in done]

    return run


def through_run(tasks, url: str):
    from gymflow.agent.runner import AgentService
    from gymflow.rollout.episode import Sampling
    from gymflow.rollout.store import plan

    def run(n: int, concurrency: int) -> list[float]:
        planned = plan(_cycle(tasks, n), "bench", 0, 1, 0)
        runner = AgentService((url,), "scripted:counter").runner(
            Sampling(max_completion_tokens=1 << 16), concurrency
        )
        done = []
        asyncio.run(runner(planned, lambda *r: done.append(r)))
        return [ep.reward for _, ep, _ in done]

    return run


def through_proxy(tasks, proxy: str):
    async def episode(http: httpx.AsyncClient, task) -> float:
        opened = (await http.post(f"{proxy}/episodes", json={"task": task.model_dump()})).json()
        base, tools = opened["base_url"], opened["tools_url"]
        messages = list(task.prompt)
        for _ in range(8):
            body = {"model": "gold", "messages": messages, "tools": task.tools, "max_tokens": 4096}
            message = (await http.post(f"{base}/chat/completions", json=body)).json()
            message = message["choices"][0]["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                break
            for call in message["tool_calls"]:
                fn = call["function"]
                args = fn["arguments"]
                out = await http.post(f"{tools}/{fn['name']}", content=args)
                result = out.json()
                shown = result["output"] if result["error"] is None else {"error": result["error"]}
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(shown)}
                )
        ended = (await http.post(f"{proxy}/episodes/{opened['episode_id']}/end", json={})).json()
        return ended["reward"]

    def run(n: int, concurrency: int) -> list[float]:
        async def go():
            gate = asyncio.Semaphore(concurrency)
            limits = httpx.Limits(max_connections=concurrency)
            async with httpx.AsyncClient(timeout=60, limits=limits) as http:

                async def one(task):
                    async with gate:
                        return await episode(http, task)

                return await asyncio.gather(*(one(t) for t in _cycle(tasks, n)))

        return list(asyncio.run(go()))

    return run


def _cycle(tasks, n: int):
    return [tasks[i % len(tasks)] for i in range(n)]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs each; the best counts")
    args = parser.parse_args()
    if args.smoke:  # the smallest sizes that run every code path (tests)
        args.rollouts, args.repeats = 8, 1
    load = os.getloadavg()
    tasks = tasks_once()
    procs: list[subprocess.Popen] = []
    result: dict = {"env": "counter gold: seed + 4 model turns + 3 tool calls + verify + close"}
    try:
        agent_port, policy_port, proxy_port = free_port(), free_port(), free_port()
        agent = started([GYMFLOW, "agent", "serve", "--port", str(agent_port), "--trust-client-tasks"],
                        f"http://127.0.0.1:{agent_port}/health")  # fmt: skip
        procs.append(agent)
        code = SERVED_POLICY.format(drafts=DRAFTS, seed=TASK_SEED)
        served = started([sys.executable, "-c", code, str(policy_port)],
                         f"http://127.0.0.1:{policy_port}/v1/models")  # fmt: skip
        procs.append(served)
        # the proxy returns each episode at /end, as /run does (no --out: no Parquet)
        proxy_cmd = [
            GYMFLOW, "agent", "proxy", "--backend", f"http://127.0.0.1:{policy_port}/v1",
            "--port", str(proxy_port), "--trust-client-tasks",
        ]  # fmt: skip
        proxy = started(proxy_cmd, f"http://127.0.0.1:{proxy_port}/health")
        procs.append(proxy)
        scenarios = {
            "in_process": (in_process(tasks), {}),
            "run": (
                through_run(tasks, f"http://127.0.0.1:{agent_port}"),
                {"agent_server": agent.pid},
            ),
            "proxy": (
                through_proxy(tasks, f"http://127.0.0.1:{proxy_port}"),
                {"proxy": proxy.pid, "policy_server": served.pid},
            ),
        }
        for c in (1, 16):
            base = None
            for name, (run, pids) in scenarios.items():
                figures = measure(run, args.rollouts, c, pids, args.repeats)
                if base is None:
                    base = figures["ms_per_episode"]
                figures["overhead_ms"] = round(figures["ms_per_episode"] - base, 2)
                result.setdefault(name, {})[f"c{c}"] = figures
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(20)
    result.update(
        {
            "rollouts": args.rollouts,
            "nemo_gym": NEMO_GYM,
            "command": f"python benchmarks/env/agent_server/agent_server.py --rollouts {args.rollouts} "
            f"--repeats {args.repeats}",
            **machine(load),
        }
    )
    emit(result, args.out, args.json)


if __name__ == "__main__":
    main()
