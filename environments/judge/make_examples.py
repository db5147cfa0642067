"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl``: ``python -m environments.judge.make_examples``.

Tasks: the first five distinct generated tasks (``seed=2026``). Rollouts, in NeMo Gym's rollout
format: each task's gold episode and three adversarial ones on the first task (the injection,
the key points alone, the reference padded), played through the in-process resources server
and graded by the reference judge served on loopback — the same HTTP path a model judge takes.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from gymflow.environments.judge.reference_judge import reference_judge_app
from gymflow.environments.judge.server import JudgeServer

from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.loopback import serve_on_loopback
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling
from gymflow.rollout.nemo_gym_rows import rollout_row

EXAMPLES = Path(__file__).resolve().parent / "examples"
SEED = 2026
SHOWN_PROBES = ("injection", "key_points_only", "reference_padded")


def main() -> None:
    env = JudgeServer()
    tasks = build_tasks(env, 40, seed=SEED, heldout_frac=0.0, val_frac=0.0)[:5]
    write_jsonl_atomic(EXAMPLES / "tasks.jsonl", [t.model_dump() for t in tasks])
    scripts = [(t, env.gold_text(t), "scripted-gold") for t in tasks]
    scripts += [
        (tasks[0], p.text, f"scripted-probe-{p.name}")
        for p in env.probes(tasks[0])
        if p.name in SHOWN_PROBES
    ]
    with serve_on_loopback(reference_judge_app()) as url:
        os.environ["GYMFLOW_JUDGE_URL"] = url + "/v1"  # read by the verifier's worker process
        app = build_app(env, verify_workers=1)

        async def go():
            async with EnvClient(app=app) as client:
                episodes = []
                for task, text, _ in scripts:
                    episodes += await run_episodes(
                        client,
                        env,
                        ScriptedPolicy.replay([text]),
                        [task],
                        Sampling(max_completion_tokens=1 << 20),
                        [0],
                    )
                return episodes

        try:
            episodes = asyncio.run(go())
        finally:
            app.state.verifier.shutdown()
    rows = [
        rollout_row(ep, env, model) for ep, (_, _, model) in zip(episodes, scripts, strict=True)
    ]
    write_jsonl_atomic(EXAMPLES / "rollouts.jsonl", rows)
    print(f"{len(tasks)} tasks, {len(rows)} rollouts -> {EXAMPLES}")
    for ep, (_, _, model) in zip(episodes, scripts, strict=True):
        print(f"  {model}: {ep.reward} {ep.score['failure_kind']} {ep.score['detail']}")


if __name__ == "__main__":
    main()
