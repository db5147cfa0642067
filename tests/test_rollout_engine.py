"""The rollout engine and its exports, with real env servers (in-process or on loopback)."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import socket

import polars as pl
import pytest
from asgi_faults import refusing_seed

from gymflow.core import folder_lock
from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.trajectory import prompt_items
from gymflow.data.nemo_gym import read_rollout_rows
from gymflow.data.schemas import collected_rollouts, validate
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.resources_server import build_app
from gymflow.environments.counter import CounterEnvironment
from gymflow.environments.tool_call import ToolCallEnvironment
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.policy.spec import load_policy
from gymflow.rollout.engine import (
    ROLLOUTS_DIR,
    CollectSettings,
    collect,
    collect_rollouts,
    plan_collection,
)
from gymflow.rollout.export import export
from gymflow.rollout.store import read_parts, rollout_id, rollouts_frame
from gymflow.train.sft import demonstrations

COUNTER = CounterEnvironment()
BIG = {"max_completion_tokens": 1 << 16}  # scripted tokens are bytes: no budget cut


def settings(**kw) -> CollectSettings:
    from gymflow.rollout.episode import Sampling

    base = {"run_id": "run-a", "num_repeats": 3, "concurrency": 8, "sampling": Sampling(**BIG)}
    return CollectSettings(**{**base, **kw})


@pytest.fixture(scope="module")
def tasks():
    return build_tasks(COUNTER, 12, seed=5, heldout_frac=0.0, val_frac=0.0)


def gold(tasks):
    return load_policy("scripted:counter", tasks=tasks)


def half_wrong(env, tasks) -> ScriptedPolicy:
    """Gold turns, except every other episode answers a wrong number at once (reward 0)."""
    by_prompt = {"\n".join(m["content"] for m in t.prompt): env.gold_turns(t) for t in tasks}
    starts = itertools.count()

    def respond(prompt, turn, observations):
        if turn == 0 and next(starts) % 2:
            return "-999"
        turns = by_prompt[prompt]
        return turns[min(turn, len(turns) - 1)]

    return ScriptedPolicy(respond)


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- collection -------------------------------------------------------------------------------


def test_collection_end_to_end_with_lineage(tmp_path, tasks):
    cfg = settings(policy_spec="scripted:counter", reward_range=(0.0, 1.0), iteration=2)
    report = collect(COUNTER, gold(tasks), tasks, tmp_path, cfg)
    n = len(tasks) * 3
    assert (report.planned, report.collected, report.already_on_disk) == (n, n, 0)
    assert report.failures == {} and report.unscored == 0
    assert report.rollouts_per_s > 0 and report.tokens_per_s > 0
    parts = sorted((tmp_path / ROLLOUTS_DIR).iterdir())
    assert [p.name for p in parts] == [
        f"part-0002-{i:05d}.parquet" for i in range(1, math.ceil(n / 8) + 1)
    ]  # one part per chunk of `concurrency` episodes, no temp file left
    df = read_parts(tmp_path / ROLLOUTS_DIR)
    assert df.height == n and df["rollout_id"].n_unique() == n
    assert df["reward"].to_list() == [1.0] * n and df["success"].all()
    row = df.row(0, named=True)
    assert row["run_id"] == "run-a" and row["iteration"] == 2
    assert row["policy"] == "scripted:counter" and row["env"] == "counter"
    assert row["env_version"] == COUNTER.version and len(row["dataset_hash"]) == 16
    for r in df.iter_rows(named=True):  # ids are what (run, iteration, task, sample) give
        assert r["group_id"] == f"2-{r['task_id']}"
        assert r["rollout_id"] == rollout_id("run-a", 2, r["group_id"], r["sample_idx"])
        assert len(r["env_mask"]) == len(r["completion_ids"]) > 0
        assert r["turns"] == 4 and r["tool_calls"] == 3
    assert sorted(df["sample_idx"].unique().to_list()) == [0, 1, 2]
    assert json.loads((tmp_path / "collect.json").read_text())["collected"] == n


def test_rerun_resumes_without_loss_or_duplicates(tmp_path, tasks):
    cfg = settings()
    collect(COUNTER, gold(tasks), tasks, tmp_path, cfg)
    folder = tmp_path / ROLLOUTS_DIR
    full = read_parts(folder)
    parts = sorted(folder.iterdir())
    lost = pl.read_parquet(parts[1])["rollout_id"].to_list()
    parts[1].unlink()  # as if the collector died before writing this chunk
    (folder / ".part-0000-00009.parquet.dead.tmp").write_bytes(b"half a write")
    report = collect(COUNTER, gold(tasks), tasks, tmp_path, cfg)
    assert report.collected == len(lost) and report.already_on_disk == full.height - len(lost)
    back = read_parts(folder)
    assert sorted(back["rollout_id"].to_list()) == sorted(full["rollout_id"].to_list())
    assert not list(folder.glob("*.tmp"))
    again = collect(COUNTER, gold(tasks), tasks, tmp_path, cfg.__class__(**{**vars(cfg)}))
    assert again.collected == 0 and again.parts == []


def test_a_second_collector_on_the_same_folder_fails_at_once(tmp_path, tasks):
    folder = tmp_path / ROLLOUTS_DIR
    folder.mkdir()
    with folder_lock.exclusive(tmp_path):  # a first collector holds the folder
        with pytest.raises(GymflowError, match=f"pid {os.getpid()}") as err:
            collect(COUNTER, gold(tasks), tasks[:2], tmp_path, settings())
        assert err.value.kind == FailureKind.FOLDER_BUSY
        assert read_parts(folder).is_empty()  # it wrote nothing
    report = collect(COUNTER, gold(tasks), tasks[:2], tmp_path, settings())  # released: runs
    assert report.collected == 6


def test_ids_do_not_depend_on_chunking(tasks):
    a = [p.rollout_id for p in plan_collection(tasks, settings(concurrency=1))]
    b = [p.rollout_id for p in plan_collection(tasks, settings(concurrency=64))]
    assert a == b and len(set(a)) == len(a)
    assert a != [p.rollout_id for p in plan_collection(tasks, settings(run_id="run-b"))]


def test_dead_env_url_gives_env_unavailable_rows_not_reward_zero(tmp_path, tasks):
    url = f"http://127.0.0.1:{dead_port()}"
    report = collect(
        COUNTER, gold(tasks), tasks[:3], tmp_path, settings(), env_url=url, env_retries=1
    )
    assert report.collected == 9 and report.unscored == 9
    assert report.failures == {"env_unavailable": 9}
    df = read_parts(tmp_path / ROLLOUTS_DIR)
    assert df.height == 9
    assert df["reward"].null_count() == 9 and not df["success"].any()
    assert set(df["failure_kind"]) == {"env_unavailable"}
    assert all(url.split("//")[1] in d or "ConnectError" in d for d in df["failure_detail"])
    first = df.filter(df["task_id"] == tasks[0].task_id)  # rows land in completion order
    assert json.loads(first["trajectory"][0]) == prompt_items(tasks[0].prompt)


def test_policy_server_down_gives_policy_rows_and_healthy_env(tmp_path, tasks):
    spec = f"openai:http://127.0.0.1:{dead_port()}/v1?model=m&retries=0&timeout_s=2"
    report = collect(COUNTER, load_policy(spec), tasks[:2], tmp_path, settings(policy_spec=spec))
    df = read_parts(tmp_path / ROLLOUTS_DIR)
    assert df.height == 6 and report.unscored == 6
    assert set(df["failure_kind"]) == {str(FailureKind.POLICY_UNAVAILABLE)}
    assert df["reward"].null_count() == 6 and df["policy"].to_list() == [spec] * 6


def test_env_failing_for_some_episodes_keeps_the_others(tmp_path, tasks):
    """A server that refuses one task's seed: its rows fail, the chunk's others are scored."""
    bad = tasks[1].task_id
    picky = refusing_seed(build_app(COUNTER), bad)

    async def go():
        async with EnvClient(app=picky, retries=1, backoff_s=0.01) as client:
            return await collect_rollouts(
                COUNTER, client, gold(tasks), tasks[:3], tmp_path, settings()
            )

    report = asyncio.run(go())
    df = read_parts(tmp_path / ROLLOUTS_DIR)
    failed = df.filter(pl.col("reward").is_null())
    assert set(failed["task_id"]) == {bad} and failed.height == 3
    assert report.failures == {"env_unavailable": 3}
    assert df.filter(pl.col("reward").is_not_null())["reward"].to_list() == [1.0] * 6


def test_corrupt_part_is_a_kinded_error_naming_the_file(tmp_path, tasks):
    collect(COUNTER, gold(tasks), tasks[:4], tmp_path, settings())
    part = sorted((tmp_path / ROLLOUTS_DIR).iterdir())[0]
    part.write_bytes(part.read_bytes()[:100])
    with pytest.raises(GymflowError) as info:
        collect(COUNTER, gold(tasks), tasks[:4], tmp_path, settings())
    assert info.value.kind is FailureKind.CORRUPT_FILE and str(part) in str(info.value)


def test_folder_of_another_run_is_refused(tmp_path, tasks):
    collect(COUNTER, gold(tasks), tasks[:2], tmp_path, settings())
    with pytest.raises(GymflowError) as info:
        collect(COUNTER, gold(tasks), tasks[:2], tmp_path, settings(run_id="other"))
    assert info.value.kind is FailureKind.BAD_REQUEST and "run-a" in str(info.value)


def test_schema_checks_data_not_only_types(tmp_path, tasks):
    collect(COUNTER, gold(tasks), tasks[:2], tmp_path, settings())
    rows = read_parts(tmp_path / ROLLOUTS_DIR).to_dicts()
    schema = collected_rollouts(3, (0.0, 1.0))

    def refused(change: dict, index: int = 0) -> str:
        bad = [dict(r) for r in rows]
        bad[index].update(change)
        with pytest.raises(GymflowError) as info:
            validate(rollouts_frame(bad), schema, "x")
        return str(info.value)

    assert "in_range(0.0, 1.0)" in refused({"reward": -0.5})
    assert "less_than(3)" in refused({"sample_idx": 3})
    assert "null without a failure_kind" in refused({"reward": None})
    assert "differ in length" in refused({"env_mask": [1]})
    assert "rollout_id" in refused({"rollout_id": rows[1]["rollout_id"]})
    assert "no turn" in refused({"turns": 0})


# --- exports ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, tasks):
    """Counter rollouts where each group has one gold and one wrong sample, plus failures."""
    out = tmp_path_factory.mktemp("mixed")
    cfg = settings(num_repeats=2, concurrency=8, policy_spec="half-wrong")
    collect(COUNTER, half_wrong(COUNTER, tasks), tasks[:4], out, cfg)
    return out


def test_export_hf_keeps_every_row_and_column(mixed, tmp_path):
    from datasets import load_from_disk

    assert export(mixed, "hf", tmp_path / "hf") == 8
    ds = load_from_disk(str(tmp_path / "hf"))
    df = read_parts(mixed / ROLLOUTS_DIR)
    assert sorted(ds["rollout_id"]) == sorted(df["rollout_id"].to_list())
    assert set(ds.column_names) == set(df.columns)
    assert sorted(ds["reward"]) == [0.0] * 4 + [1.0] * 4


def test_export_nemo_gym_rows_rescore_to_the_same_rewards(mixed, tmp_path):
    path = tmp_path / "nemo.jsonl"
    assert export(mixed, "nemo_gym", path) == 8
    df = read_parts(mixed / ROLLOUTS_DIR)
    by_task = {t.task_id: t for t in build_tasks(COUNTER, 12, 5, 0.0, 0.0)}
    rows = read_rollout_rows(path)
    rewards = sorted((r.task_id, r.reward) for r in rows)
    assert rewards == sorted(zip(df["task_id"], df["reward"], strict=True))
    for r in rows:  # the exported items are what the verifier scored
        task = by_task[r.task_id]
        assert COUNTER.verify(task, prompt_items(task.prompt) + r.items).reward == r.reward


def test_export_sft_is_best_of_group_above_threshold(mixed, tmp_path):
    path = tmp_path / "sft.jsonl"
    assert export(mixed, "sft", path) == 4
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    df = read_parts(mixed / ROLLOUTS_DIR)
    best = {r["rollout_id"] for r in df.filter(pl.col("reward") == 1.0).iter_rows(named=True)}
    assert {r["rollout_id"] for r in rows} == best
    by_task = {t.task_id: t for t in build_tasks(COUNTER, 12, 5, 0.0, 0.0)}
    for r in rows:
        task = by_task[r["task_id"]]
        assert r["prompt"] == task.prompt and r["tools"] == task.tools
        assert [m["role"] for m in r["completion"]] == ["assistant", "tool"] * 3 + ["assistant"]
        assert r["completion"][-1]["content"] == COUNTER.gold_text(task)
    assert export(mixed, "sft", path, min_reward=1.5) == 0  # nothing reaches the threshold


def test_export_dpo_pairs_best_against_worst(mixed, tmp_path):
    path = tmp_path / "dpo.jsonl"
    assert export(mixed, "dpo", path) == 4
    for r in map(json.loads, path.read_text().splitlines()):
        assert r["chosen_reward"] == 1.0 and r["rejected_reward"] == 0.0
        assert r["rejected"] == [{"role": "assistant", "content": "-999"}]
        assert r["chosen"][0]["tool_calls"][0]["function"]["name"] == "increment_counter"


def test_dpo_skips_groups_without_a_preference(tmp_path, tasks):
    collect(COUNTER, gold(tasks), tasks[:3], tmp_path, settings())
    assert export(tmp_path, "dpo", tmp_path / "dpo.jsonl") == 0


def test_sft_with_a_tokenizer_matches_the_sft_stage_demonstrations(tmp_path):
    """Single-turn gold rollouts render exactly as gymflow.train.sft.demonstrations renders gold."""
    from gymflow.policy.tiny_model import build_tokenizer

    env = ToolCallEnvironment()
    tasks = build_tasks(env, 6, seed=1, heldout_frac=0.0, val_frac=0.0)
    tok = build_tokenizer([json.dumps(t.model_dump()) for t in tasks], 400)
    tok.save_pretrained(tmp_path / "tok")
    policy = load_policy("scripted:tool_call", tasks=tasks)
    collect(env, policy, tasks, tmp_path / "c", settings(num_repeats=2))
    path = tmp_path / "sft.jsonl"
    assert export(tmp_path / "c", "sft", path, tokenizer=tmp_path / "tok") == len(tasks)
    got = {r["task_id"]: r for r in map(json.loads, path.read_text().splitlines())}
    for task, demo in zip(tasks, demonstrations(env, tok, tasks), strict=True):
        assert (got[task.task_id]["prompt"], got[task.task_id]["completion"]) == (
            demo["prompt"],
            demo["completion"],
        )


def test_unknown_format_and_missing_folder(tmp_path):
    for fmt, src in (("csv", tmp_path), ("hf", tmp_path / "nope")):
        with pytest.raises(GymflowError) as info:
            export(src, fmt, tmp_path / "x")
        assert info.value.kind is FailureKind.BAD_REQUEST
