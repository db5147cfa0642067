"""Where ``gymflow eval``'s val/heldout come from without ``--run``: regenerated as a lifecycle
run's ``generate_tasks`` splits them — checked against that stage's own output — and cached."""

from __future__ import annotations

from gymflow.data.task_table import read_tasks
from gymflow.env.registry import get_env
from gymflow.eval.splits import GeneratedSplit, eval_tasks
from gymflow.lifecycle.config import LifecycleConfig


def test_regenerated_splits_are_the_runs_own(gym_home, prefect_engine, tmp_path):
    from gymflow.lifecycle.run_context import RunContext
    from gymflow.lifecycle.tracking import parent_run_id
    from gymflow.tasks.generate import generate_tasks

    cfg = LifecycleConfig(n_tasks=600, task_seed=3)
    run = RunContext(
        run_id="split-check",
        run_dir=str(tmp_path / "split-check"),
        home=str(gym_home),
        mlflow_parent_id=parent_run_id("split-check"),
    )
    data = generate_tasks.fn(run, cfg)
    env = get_env(cfg.env)
    for split in ("val", "heldout"):
        written = read_tasks(data.paths[split])
        regenerated = eval_tasks(
            env, split, GeneratedSplit.like(cfg), cache_dir=tmp_path / "c"
        ).tasks
        assert len(written) > 10
        assert regenerated == written, split
        cached = eval_tasks(env, split, GeneratedSplit.like(cfg), cache_dir=tmp_path / "c").tasks
        assert cached == written
    assert len(list((tmp_path / "c" / "eval-splits").glob("*.parquet"))) == 2
    other = GeneratedSplit.like(cfg.model_copy(update={"task_seed": 4}))
    assert eval_tasks(env, "heldout", other, cache_dir=tmp_path / "c").tasks != written
