"""``--retry-failed``: rollouts an env or policy fault left without a reward are run again."""

from __future__ import annotations

import asyncio
import inspect
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from asgi_faults import refusing_seed
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.tool_calls import CALL_CLOSE, CALL_OPEN
from gymflow.data.nemo_gym import read_rollout_rows
from gymflow.data.schemas import ROLLOUTS, write_table
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.loopback import LoopbackServer
from gymflow.env.resources_server import build_app
from gymflow.environments.counter import CounterEnvironment
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.policy.spec import load_policy
from gymflow.rollout.engine import ROLLOUTS_DIR, CollectSettings, collect_rollouts, plan_collection
from gymflow.rollout.episode import Sampling
from gymflow.rollout.export import export
from gymflow.rollout.store import read_parts

COUNTER = CounterEnvironment()
runner = CliRunner()


@pytest.fixture(scope="module")
def tasks():
    tasks = build_tasks(COUNTER, 40, seed=7, heldout_frac=0.0, val_frac=0.0)
    # one task per prompt: the gold replay finds a task by its prompt
    return list({t.prompt[0]["content"]: t for t in tasks}.values())[:3]


def test_dead_server_then_alive_retry_turns_failures_into_scored_rows(tmp_path, tasks):
    """A real HTTP server on 127.0.0.1: its port refuses connections during the first
    collection (bound, not listening) and serves the retry; all through the CLI."""
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    out = tmp_path / "out"
    server = LoopbackServer(build_app(COUNTER))
    args = [
        "rollouts", "collect", "--env", "counter", "--tasks", str(task_file),
        "--policy", "scripted:counter", "--out", str(out), "--num-repeats", "2",
        "--max-completion-tokens", "65536", "--env-url", server.url,
    ]  # fmt: skip
    n = 2 * len(tasks)
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert f"{n} without a reward" in first.output
    failed = read_parts(out / ROLLOUTS_DIR)
    assert set(failed["failure_kind"]) == {"env_unavailable"} and failed["reward"].null_count() == n

    with server:
        plain = runner.invoke(app, args)  # without the flag failed rows are final
        assert plain.exit_code == 0 and f"0 collected, {n} already on disk" in plain.output
        retry = runner.invoke(app, [*args, "--retry-failed"])
        assert retry.exit_code == 0, retry.output
        assert f"{n} retried (0 still without a reward), 0 without a reward" in retry.output
        again = runner.invoke(app, [*args, "--retry-failed"])
        assert again.exit_code == 0 and "0 retried" in again.output

    folder = out / ROLLOUTS_DIR
    df = read_parts(folder)
    assert df.height == n and df["rollout_id"].n_unique() == n
    assert df["reward"].to_list() == [1.0] * n and df["failure_kind"].null_count() == n
    assert df["attempt"].to_list() == [1] * n
    assert set(df["rollout_id"]) == set(failed["rollout_id"])  # same ids, same seeds
    assert sorted(df["seed"]) == sorted(failed["seed"])
    audit = read_parts(folder, every_attempt=True)  # the failed attempt stays on disk
    assert audit.height == 2 * n and sorted(audit["attempt"]) == [0] * n + [1] * n
    assert len(list(folder.glob("part-*.parquet"))) == 2

    from datasets import load_from_disk

    assert export(out, "hf", tmp_path / "hf") == n
    hf = load_from_disk(str(tmp_path / "hf"))
    assert sorted(hf["rollout_id"]) == sorted(df["rollout_id"]) and set(hf["reward"]) == {1.0}
    assert export(out, "nemo_gym", tmp_path / "nemo.jsonl") == n
    assert len(read_rollout_rows(tmp_path / "nemo.jsonl")) == n
    assert export(out, "sft", tmp_path / "sft.jsonl") == len(tasks)
    report = json.loads((out / "collect.json").read_text())
    assert report["retried"] == 0 and report["collected"] == 0


def refusing(bad_task_id: str):
    """The counter app, except ``/seed_session`` answers 503 for one task."""
    return refusing_seed(build_app(COUNTER), bad_task_id)


def test_only_unscored_rows_are_retried_and_a_retry_can_fail_again(tmp_path, tasks):
    down, sloppy = tasks[0], tasks[1]  # env refuses one; the policy writes broken JSON for one
    by_prompt = {t.prompt[0]["content"]: COUNTER.gold_turns(t) for t in tasks}

    def respond(prompt, turn, observations):
        if prompt == sloppy.prompt[0]["content"]:
            return CALL_OPEN + '{"name": "increment_counter", "arguments": {' + CALL_CLOSE
        turns = by_prompt[prompt]
        return turns[min(turn, len(turns) - 1)]

    settings = CollectSettings(
        run_id="r", num_repeats=2, concurrency=4, reward_range=(0.0, 1.0),
        sampling=Sampling(max_completion_tokens=1 << 16),
    )  # fmt: skip

    def run(app, retry: bool):
        async def go():
            async with EnvClient(app=app, retries=0) as client:
                cfg = CollectSettings(**{**vars(settings), "retry_failed": retry})
                return await collect_rollouts(
                    COUNTER, client, ScriptedPolicy(respond), tasks, tmp_path, cfg
                )

        return asyncio.run(go())

    first = run(refusing(down.task_id), retry=False)
    assert first.failures == {"env_unavailable": 2, "invalid_json": 2} and first.unscored == 2
    still = run(refusing(down.task_id), retry=True)  # the env still refuses that task
    assert (still.collected, still.retried, still.still_failed) == (2, 2, 2)
    healed = run(build_app(COUNTER), retry=True)
    assert (healed.collected, healed.retried, healed.still_failed) == (2, 2, 0)

    df = read_parts(tmp_path / ROLLOUTS_DIR)
    assert df.height == 6 and df["reward"].null_count() == 0
    rows = {r["task_id"]: r for r in df.iter_rows(named=True)}
    assert rows[down.task_id]["attempt"] == 2 and rows[down.task_id]["reward"] == 1.0
    # a scored mistake is a verdict: never retried
    assert rows[sloppy.task_id]["attempt"] == 0 and rows[sloppy.task_id]["reward"] == 0.0
    assert rows[sloppy.task_id]["failure_kind"] == str(FailureKind.INVALID_JSON)
    audit = read_parts(tmp_path / ROLLOUTS_DIR, every_attempt=True)
    history = audit.filter(pl.col("task_id") == down.task_id).sort("attempt")
    assert history["attempt"].to_list() == [0, 0, 1, 1, 2, 2]
    assert history["failure_kind"].to_list()[:4] == ["env_unavailable"] * 4
    assert set(df["rollout_id"]) == {p.rollout_id for p in plan_collection(tasks, settings)}


def _collect_gold(out: Path, tasks, settings: CollectSettings) -> None:
    """The scripted gold policy's rollouts of ``tasks`` under ``out`` (no completion cap)."""

    async def go():
        async with EnvClient(app=build_app(COUNTER)) as client:
            policy = load_policy("scripted:counter", tasks=tasks)
            cfg = CollectSettings(**{**vars(settings), "sampling": Sampling(1 << 16, 1 << 16)})
            return await collect_rollouts(COUNTER, client, policy, tasks, out, cfg)

    asyncio.run(go())


def test_the_same_attempt_twice_is_a_duplicate(tmp_path, tasks):
    settings = CollectSettings(run_id="d", num_repeats=1, reward_range=(0.0, 1.0))
    folder = tmp_path / ROLLOUTS_DIR
    _collect_gold(tmp_path, tasks, settings)
    part = sorted(folder.glob("part-*.parquet"))[0]
    shutil.copy(part, folder / "part-0000-00099.parquet")
    with pytest.raises(GymflowError) as info:
        read_parts(folder)
    assert info.value.kind is FailureKind.SCHEMA_VIOLATION and "rollout_id" in str(info.value)


def test_a_bad_row_is_named_with_its_part(tmp_path, tasks):
    """The parts are validated in one pass; a row that fails names the part file it is in."""
    settings = CollectSettings(run_id="b", num_repeats=2, reward_range=(0.0, 1.0))  # 6 rows
    folder = tmp_path / ROLLOUTS_DIR
    _collect_gold(tmp_path, tasks, settings)
    (written,) = folder.glob("part-*.parquet")  # one batch here: split it in three parts
    rows = pl.read_parquet(written)
    written.unlink()
    parts = [folder / f"part-0000-{k:05d}.parquet" for k in (1, 2, 3)]
    for k, part in enumerate(parts):
        rows[2 * k : 2 * k + 2].write_parquet(part)
    assert read_parts(folder).height == 6
    bad = parts[1]
    rows[2:4].with_columns(pl.lit(-1, pl.Int64).alias("iteration")).write_parquet(bad)
    with pytest.raises(GymflowError) as info:
        read_parts(folder)
    assert info.value.kind is FailureKind.SCHEMA_VIOLATION
    assert str(bad) in str(info.value) and "iteration" in str(info.value)


def test_parts_written_before_attempts_count_as_attempt_zero(tmp_path, tasks):
    """Folders collected before the ``attempt`` column still read, and can be retried."""
    settings = CollectSettings(
        run_id="old", num_repeats=1, reward_range=(0.0, 1.0), retry_failed=True,
        sampling=Sampling(max_completion_tokens=1 << 16),
    )  # fmt: skip
    policy = load_policy("scripted:counter", tasks=tasks)

    async def go(app):
        async with EnvClient(app=app, retries=0) as client:
            return await collect_rollouts(COUNTER, client, policy, tasks, tmp_path, settings)

    asyncio.run(go(refusing(tasks[0].task_id)))
    folder = tmp_path / ROLLOUTS_DIR
    for part in folder.glob("part-*.parquet"):  # as an older gymflow wrote them
        write_table(pl.read_parquet(part).drop("attempt"), ROLLOUTS, part)
    assert read_parts(folder)["attempt"].to_list() == [0] * len(tasks)
    report = asyncio.run(go(build_app(COUNTER)))
    assert (report.retried, report.still_failed) == (1, 0)
    df = read_parts(folder)
    assert df["reward"].to_list() == [1.0] * len(tasks) and sorted(df["attempt"]) == [0, 0, 1]


def test_one_options_model_for_the_flow_and_the_command():
    """The flow's options are ``CollectOptions``; the command has one flag per field, whose
    default and help are the field's."""
    from gymflow.cli.commands.rollouts import rollouts_collect
    from gymflow.flows.collect import collect
    from gymflow.rollout.collection import CollectOptions

    param, *mapping = inspect.signature(collect.fn).parameters.values()
    assert param.annotation in (CollectOptions, "CollectOptions")
    # the flow's own: how Prefect maps its shards (the command runs no flow)
    assert [p.name for p in mapping] == ["shards", "task_runner", "ray_address"]
    flags = inspect.signature(rollouts_collect).parameters
    # run_id is the flag --run (one spelling for a run id); --run-id is its hidden old spelling
    assert set(flags) == set(CollectOptions.model_fields) | {"run"}
    assert flags["run"].default.param_decls == ("--run",) and flags["run_id"].default.hidden
    for name, field in CollectOptions.model_fields.items():
        option = flags["run" if name == "run_id" else name].default
        assert option.help == field.description and field.description
        assert option.default == (... if field.is_required() else field.default)
    assert Path(inspect.getsourcefile(collect.fn)).name == "collect.py"
