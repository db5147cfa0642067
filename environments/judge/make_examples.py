"""Write ``examples/tasks.jsonl`` and ``examples/rollouts.jsonl`` through
:func:`gymflow.rollout.examples.write_examples`.

    python -m gymflow.environments.judge.make_examples

Tasks: the first five distinct generated tasks (``seed=2026``). Rollouts, in NeMo Gym's rollout
format: each task's gold episode and three adversarial ones on the first task (the injection,
the key points alone, the reference padded), played through the in-process resources server
and graded by the reference judge served on loopback — the same HTTP path a model judge takes.
"""

from __future__ import annotations

import os

from gymflow.data.task_set import build_tasks
from gymflow.env.loopback import serve_on_loopback
from gymflow.environments.judge.environment import JudgeEnvironment
from gymflow.environments.judge.reference_judge import reference_judge_app
from gymflow.rollout.examples import adversarial, gold, write_examples

SEED = 2026
SHOWN_PROBES = ("injection", "key_points_only", "reference_padded")


def main() -> None:
    env = JudgeEnvironment()
    tasks = build_tasks(env, 40, seed=SEED, heldout_frac=0.0, val_frac=0.0)[:5]
    scripts = [gold(env, t) for t in tasks]
    scripts += [adversarial(tasks[0], p) for p in env.probes(tasks[0]) if p.name in SHOWN_PROBES]
    with serve_on_loopback(reference_judge_app()) as url:
        os.environ["GYMFLOW_JUDGE_URL"] = url + "/v1"  # read by the verifier's worker process
        write_examples(env, tasks, scripts)


if __name__ == "__main__":
    main()
