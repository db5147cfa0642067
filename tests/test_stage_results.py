"""Stage results survive what Prefect does to them: persisted (pickled) and hashed for the
``INPUTS`` cache key, so a resumed run finds a finished stage again."""

from __future__ import annotations

import pickle

from prefect.utilities.hashing import hash_objects

from gymflow.eval.gate import GateResult
from gymflow.lifecycle.stage_results import (
    GateReport,
    GRPOResult,
    StageInfo,
    TaskData,
)


def _results():
    info = StageInfo(mlflow_run_id="abc", wall_s=1.5)
    data = TaskData(
        paths={"train": "t.parquet", "val": "v.parquet", "heldout": "h.parquet"},
        counts={"train": 3},
        dataset_hash="d",
        env_version="1",
        stage=info,
    )
    grpo = GRPOResult(
        path="final",
        steps=3,
        train_wall_s=2.0,
        resumed_from=None,
        dynamic_sampling={"groups_generated": 4, "rollout_s": 0.5},
        threads=1,
        rollout_dir="rollouts",
        pool=10,
        start="sft",
        stage=info,
    )
    gate = GateReport(
        n=2,
        baseline={"success": 0.5},
        candidate={"success": 1.0},
        delta_success=0.5,
        ci95=(0.1, 0.9),
        gate=GateResult(passed=True, reason="ok"),
    )
    return data, grpo, gate


def test_results_pickle_and_hash_stably():
    for result in _results():
        again = pickle.loads(pickle.dumps(result))
        assert again == result
        assert hash_objects(again, raise_on_failure=True) == hash_objects(
            result, raise_on_failure=True
        )


def test_values_keep_their_json_types():
    _, grpo, gate = _results()
    assert grpo.dynamic_sampling == {"groups_generated": 4, "rollout_s": 0.5}
    assert isinstance(grpo.dynamic_sampling["groups_generated"], int)
    assert gate.ci95 == [0.1, 0.9] and gate.gate.model_dump(exclude_defaults=True) == {
        "passed": True,
        "reason": "ok",
    }
