"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl``: ``python -m environments.reasoning_gym.make_examples``.

Tasks: the first generated task of five families of the default mix (``seed=2026``). Rollouts,
in NeMo Gym's rollout format: each task's gold episode plus two adversarial ones on the first
task (the question echoed inside the answer tags, the right answer without the tags), played
through the in-process resources server (the verifier in its process pool).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gymflow.environments.reasoning_gym.server import ReasoningGymServer

from gymflow.core.jsonl import write_jsonl_atomic
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling
from gymflow.rollout.nemo_gym_rows import rollout_row

EXAMPLES = Path(__file__).resolve().parent / "examples"
SEED = 2026
FAMILIES = ("leg_counting", "chain_sum", "word_sorting", "base_conversion", "simple_equations")
SHOWN_PROBES = ("question_echoed", "no_answer_block")


def main() -> None:
    env = ReasoningGymServer()
    found = {}
    for task in build_tasks(env, 80, seed=SEED, heldout_frac=0.0, val_frac=0.0):
        found.setdefault(task.ground_truth["family"], task)
    tasks = [found[f] for f in FAMILIES]
    write_jsonl_atomic(EXAMPLES / "tasks.jsonl", [t.model_dump() for t in tasks])
    scripts = [(t, env.gold_text(t), "scripted-gold") for t in tasks]
    scripts += [
        (tasks[0], p.text, f"scripted-probe-{p.name}")
        for p in env.probes(tasks[0])
        if p.name in SHOWN_PROBES
    ]
    app = build_app(env, verify_workers=1)

    async def go():
        async with EnvClient(app=app) as client:
            episodes = []
            for task, text, _ in scripts:
                policy = ScriptedPolicy.replay([text])
                sampling = Sampling(max_completion_tokens=1 << 20)
                episodes += await run_episodes(client, env, policy, [task], sampling, [0])
            return episodes

    try:
        episodes = asyncio.run(go())
    finally:
        app.state.verifier.shutdown()
    rows = [rollout_row(ep, env, m) for ep, (_, _, m) in zip(episodes, scripts, strict=True)]
    write_jsonl_atomic(EXAMPLES / "rollouts.jsonl", rows)
    print(f"{len(tasks)} tasks, {len(rows)} rollouts -> {EXAMPLES}")
    for ep, (_, _, model) in zip(episodes, scripts, strict=True):
        family = ep.task.ground_truth["family"]
        print(f"  {family} {model}: {ep.reward} {ep.score['failure_kind']}")


if __name__ == "__main__":
    main()
