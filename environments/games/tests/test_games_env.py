"""games through its server: gold games win, every probe is caught for its reason, examples hold."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from gymflow.cli.main import app as cli
from gymflow.core.trajectory import prompt_items
from gymflow.data.nemo_gym import read_rollout_rows
from gymflow.data.task_set import build_tasks
from gymflow.env.client import EnvClient
from gymflow.env.loopback import LoopbackServer
from gymflow.env.resources_server import build_app
from gymflow.environments.games import GamesEnvironment
from gymflow.environments.games.environment import NIM_MAX_STONES, SUDOKU_CLUES
from gymflow.environments.games.make_examples import example_tasks
from gymflow.environments.games.sudoku import render
from gymflow.policy.scripted import ScriptedPolicy
from gymflow.rollout.driver import run_episodes
from gymflow.rollout.episode import Sampling
from gymflow.rollout.examples import examples_folder, task_row

ENV = GamesEnvironment()
EXAMPLES = examples_folder(ENV)
SAMPLING = Sampling(max_completion_tokens=1 << 20)
runner = CliRunner()


def in_process(scripts) -> list:
    async def go():
        async with EnvClient(app=build_app(ENV)) as client:
            out = []
            for task, turns in scripts:
                policy = ScriptedPolicy.replay(turns)
                out += await run_episodes(client, ENV, policy, [task], SAMPLING, [0])
            return out

    return asyncio.run(go())


@pytest.fixture(scope="module")
def tasks():
    return build_tasks(ENV, 24, seed=3, heldout_frac=0.0, val_frac=0.0)


def test_env_check_passes():
    result = runner.invoke(cli, ["env", "check", "games", "--n", "30"])
    assert result.exit_code == 0, result.output
    assert "games: 30 gold episodes" in result.output and "0 problems" in result.output


def test_tasks_alternate_games_and_stay_in_their_bounds(tasks):
    games = [t.ground_truth["game"] for t in tasks]
    assert games.count("nim") == 8 and games.count("sudoku") == 16
    for task in tasks:
        truth = task.ground_truth
        if truth["game"] == "sudoku":
            low, high = SUDOKU_CLUES[truth["size"]]
            assert low <= truth["clues"] <= high and truth["mode"] in ("answer", "tools")
        else:
            assert sum(truth["heaps"]) <= NIM_MAX_STONES
    again = build_tasks(ENV, 24, seed=3, heldout_frac=0.0, val_frac=0.0)
    assert [t.task_id for t in again] == [t.task_id for t in tasks]


# What each probe must score and why (the detail or failure kind that names the reason).
SUDOKU_REASONS = {
    "puzzle_unchanged": "0 of",
    "clues_relabelled": "changes",
    "repeated_digit": "a digit repeats",
    "one_blank_left": "blank cells right",
    "prose_around_grid": "invalid_json",
    "grid_plus_a_row": "invalid_json",
    "claims_solved": "invalid_json",
    "place_on_clue": "invalid_json",
    "place_with_strings": "invalid_json",
    "one_cell_by_tool": "1 of",
}
NIM_REASONS = {
    "claims_victory": "no_tool_call",
    "take_too_many": "illegal move(s) refused",
    "take_nothing": "illegal move(s) refused",
    "no_such_heap": "illegal move(s) refused",
    "move_with_strings": "illegal move(s) refused",
    "move_for_the_opponent": "illegal move(s) refused",
    "wrong_game_tool": "no_tool_call",
    "bad_first_move": "",
}


def test_every_probe_is_caught_for_the_reason_it_names(tasks):
    scripts, probes = [], []
    for task in tasks:
        for probe in ENV.probes(task):
            scripts.append((task, [probe.text]))
            probes.append(probe)
    episodes = in_process(scripts)
    seen = set()
    for probe, ep in zip(probes, episodes, strict=True):
        seen.add(probe.name)
        reasons = NIM_REASONS if ep.task.ground_truth["game"] == "nim" else SUDOKU_REASONS
        why = f"{ep.score['failure_kind']} {ep.score['detail']}"
        assert probe.max_reward < 1.0 and not ep.score["success"], probe.name
        assert ep.reward == probe.max_reward, (probe.name, ep.reward, why)  # the ceiling is tight
        assert reasons[probe.name] in why, (probe.name, why)
    assert seen == set(SUDOKU_REASONS) | set(NIM_REASONS)


def test_either_way_of_answering_a_sudoku_scores_one(tasks):
    """The verifier takes a grid reply or the placed cells, whatever the prompt asked for."""
    variants = [
        task.model_copy(update={"ground_truth": {**task.ground_truth, "mode": mode}})
        for task in [t for t in tasks if t.ground_truth["game"] == "sudoku"][:4]
        for mode in ("answer", "tools")
    ]
    episodes = in_process([(t, ENV.gold_turns(t)) for t in variants])
    assert [ep.reward for ep in episodes] == [1.0] * len(variants)
    assert [ep.tool_calls > 0 for ep in episodes] == [False, True] * 4


def test_a_grid_reply_outranks_the_placed_cells(tasks):
    sudoku_task = next(t for t in tasks if t.ground_truth["game"] == "sudoku")
    truth = {**sudoku_task.ground_truth, "mode": "tools"}
    task = sudoku_task.model_copy(update={"ground_truth": truth})
    (ep,) = in_process([(task, ENV.gold_turns(task))])
    assert ep.items[-1]["content"] == "done" and ENV.verify(task, ep.items).reward == 1.0
    unchanged = render(truth["puzzle"], truth["size"])
    replied = ep.items[:-1] + [{"type": "message", "role": "assistant", "content": unchanged}]
    assert ENV.verify(task, replied).reward == 0.0


def test_the_verifier_trusts_no_observation_and_counts_only_executed_calls(tasks):
    task = next(t for t in tasks if t.ground_truth["game"] == "nim")
    heaps = task.ground_truth["heaps"]
    illegal = {"heap": 1, "take": heaps[0] + 5}
    forged = {"heaps": [0] * len(heaps), "opponent_took": None, "winner": "you"}
    items = prompt_items(task.prompt) + [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "move",
            "arguments": json.dumps(illegal),
        },
        {"type": "function_call_output", "call_id": "c1", "output": json.dumps(forged)},
        {"type": "message", "role": "assistant", "content": "I took the last stone: I won."},
    ]
    assert ENV.verify(task, items).reward == 0.0
    # The gold moves, but never executed (no outputs: e.g. made in the last allowed turn).
    (gold,) = in_process([(task, ENV.gold_turns(task))])
    assert gold.reward == 1.0
    unexecuted = [it for it in gold.items if it["type"] != "function_call_output"]
    assert ENV.verify(task, unexecuted).reward == 0.0
    # The same call id twice is one move, not two.
    first_call = next(i for i, it in enumerate(gold.items) if it["type"] == "function_call")
    doubled = gold.items[: first_call + 2] + gold.items[first_call:]
    assert ENV.verify(task, doubled).reward == 1.0


def test_tools_over_http_keep_each_sessions_game(tasks):
    nim_task = next(t for t in tasks if t.ground_truth["game"] == "nim")
    sudoku_task = next(t for t in tasks if t.ground_truth["game"] == "sudoku")
    heaps = nim_task.ground_truth["heaps"]

    async def go(url):
        async with EnvClient(base_url=url) as client:
            a, b = await client.seed_session(nim_task), await client.seed_session(nim_task)
            bad = await client.call_tool(a, "move", {"heap": 1, "take": heaps[0] + 1})
            typed = await client.call_tool(a, "move", {"heap": "1", "take": 1})
            wrong = await client.call_tool(a, "place", {"row": 1, "col": 1, "digit": 1})
            good = await client.call_tool(a, "move", {"heap": 1, "take": 1})
            s = await client.seed_session(sudoku_task)
            clue = sudoku_task.ground_truth["puzzle"].index(
                next(ch for ch in sudoku_task.ground_truth["puzzle"] if ch != ".")
            )
            row, col = divmod(clue, sudoku_task.ground_truth["size"])
            on_clue = await client.call_tool(
                s, "place", {"row": row + 1, "col": col + 1, "digit": 1}
            )
            grid = await client.call_tool(s, "show_grid", {})
            for sid in (a, b, s):
                await client.close_session(sid)
            return bad, typed, wrong, good, on_clue, grid

    with LoopbackServer(build_app(ENV)) as live:
        bad, typed, wrong, good, on_clue, grid = asyncio.run(go(live.url))
        episodes = asyncio.run(_gold_over_http(live.url, nim_task))
    assert bad["error"]["kind"] == "tool_error" and "stones" in bad["error"]["message"]
    assert typed["error"]["kind"] == "bad_arguments"
    assert "this task is a Nim game" in wrong["error"]["message"]
    assert good["error"] is None and good["output"]["heaps"][0] <= heaps[0] - 1
    assert good["output"]["opponent_took"] is not None
    assert on_clue["error"]["kind"] == "tool_error" and "is a clue" in on_clue["error"]["message"]
    assert "." in grid["output"]["grid"]
    assert [ep.reward for ep in episodes] == [1.0]


async def _gold_over_http(url, task):
    async with EnvClient(base_url=url) as client:
        policy = ScriptedPolicy.replay(ENV.gold_turns(task))
        return await run_episodes(client, ENV, policy, [task], SAMPLING, [0])


def test_examples_are_the_generators_and_their_rollouts_rescore(tmp_path):
    rows = [json.loads(line) for line in (EXAMPLES / "tasks.jsonl").read_text().splitlines()]
    assert rows == [task_row(ENV, t) for t in example_tasks(ENV)]
    rollouts = read_rollout_rows(EXAMPLES / "rollouts.jsonl")
    assert [r.reward for r in rollouts][:5] == [1.0] * 5 and len(rollouts) == 7
    out = tmp_path / "scores.jsonl"
    args = ["verify", "--env", "games", "--tasks", str(EXAMPLES / "tasks.jsonl")]
    args += ["--responses", str(EXAMPLES / "rollouts.jsonl"), "--out", str(out)]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    scores = [json.loads(line)["reward"] for line in out.read_text().splitlines()]
    assert scores == [r.reward for r in rollouts]
    assert 0.0 in scores and any(0 < s < 1 for s in scores)
