"""Trajectories in the OpenAI Responses format, as gymflow and NeMo Gym write them, score as
they did when they were produced: through ``gymflow verify`` and through a served
environment's ``/verify`` (both read items with :func:`gymflow.env.items.normalize_items`).

Round trips: every environment's shipped example rollouts (gymflow's own NeMo Gym export,
content as lists of ``output_text`` parts), and the same environments' rollouts collected into
Parquet and exported with ``gymflow rollouts export``, give exactly the recorded rewards. The
lifecycle test (``tests/test_lifecycle.py``) does the same with a smoke run's model rollouts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rescore import assert_rescored_as_recorded, verify_cli  # tests/ is on the path
from typer.testing import CliRunner

from gymflow.cli.main import app
from gymflow.core.jsonl import read_jsonl
from gymflow.core.trajectory import assistant_items
from gymflow.data.nemo_gym import output_item, parse_rollout_row
from gymflow.env.items import ItemError, normalize_items
from gymflow.env.loopback import serve_on_loopback
from gymflow.env.registry import list_envs
from gymflow.policy.base import ChatTurn
from gymflow.rollout.chat_turns import chat_items
from gymflow.rollout.store import read_rollouts

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()
WITH_EXAMPLES = [n for n in list_envs() if (REPO / "environments" / n / "examples").is_dir()]


def text_part(text: str, kind: str = "output_text") -> dict:
    return {"type": kind, "text": text, "annotations": [], "logprobs": []}


# --- the one reading ---------------------------------------------------------------------------

ACCEPTED = {
    "string_content": (
        {"type": "message", "role": "assistant", "content": "5"},
        {"type": "message", "role": "assistant", "content": "5"},
    ),
    "output_text_parts_with_extras": (
        {"type": "message", "role": "assistant", "id": "msg_0", "status": "completed",
         "content": [text_part("9 - 4 = "), text_part("\\boxed{5}")]},
        {"type": "message", "role": "assistant", "content": "9 - 4 = \\boxed{5}"},
    ),
    "input_text_part": (
        {"type": "message", "role": "user", "content": [text_part("hi", "input_text")]},
        {"type": "message", "role": "user", "content": "hi"},
    ),
    "refusal_part": (
        {"type": "message", "role": "assistant",
         "content": [{"type": "refusal", "refusal": "I cannot do that."}]},
        {"type": "message", "role": "assistant", "content": "I cannot do that."},
    ),
    "call_with_id_and_status": (
        {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "c1",
         "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    ),
    "output_as_parts": (
        {"type": "function_call_output", "call_id": "c1", "output": [text_part("7", "input_text")]},
        {"type": "function_call_output", "call_id": "c1", "output": "7"},
    ),
    "broken_markup_gets_its_parse_error": (
        {"type": "message", "role": "assistant", "content": [text_part("<tool_call>{")]},
        {"type": "message", "role": "assistant", "content": "<tool_call>{",
         "parse_error": assistant_items("<tool_call>{", 0)[0]["parse_error"]},
    ),
}  # fmt: skip

REFUSED = {
    "call_id_a_list": (
        {"type": "function_call_output", "call_id": ["a"], "output": ""},
        "items.0.function_call_output: 'call_id' must be a string",
    ),
    "arguments_an_object": (
        {"type": "function_call", "name": "f", "arguments": {"x": 1}, "call_id": "c"},
        "items.0.function_call: 'arguments' must be a string",
    ),
    "unknown_part_without_text": (
        {"type": "message", "role": "assistant", "content": [{"type": "input_image"}]},
        "items.0.message: 'content' part 0 ('input_image') has no text",
    ),
    "content_null": (
        {"type": "message", "role": "assistant", "content": None},
        "items.0.message: 'content' must be text or a list of content parts",
    ),
    "unknown_item_type": ({"type": "reasoning_blob"}, "unknown item type 'reasoning_blob'"),
    "no_type": ({"role": "assistant", "content": "x"}, "must be an object with a string 'type'"),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_an_item_the_responses_format_allows_is_read_as_the_agent_loop_writes_it(case):
    item, expected = ACCEPTED[case]
    assert normalize_items([item]) == [expected]
    assert normalize_items(normalize_items([item])) == [expected]  # a fixed point


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_malformed_item_is_refused_with_where_and_why(case):
    item, message = REFUSED[case]
    with pytest.raises(ItemError, match=message.replace("(", r"\(").replace(")", r"\)")):
        normalize_items([item])


def test_items_no_verifier_reads_are_left_out_not_refused():
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [text_part("t", "summary_text")]}
    answer = {"type": "message", "role": "assistant", "content": [text_part("5")]}
    assert normalize_items([reasoning, {"type": "web_search_call"}, answer]) == [
        {"type": "message", "role": "assistant", "content": "5"}
    ]


# --- the repro and external data --------------------------------------------------------


def test_an_exported_math_rollout_scores_as_it_did(tmp_path):
    examples = REPO / "environments/math/examples"
    row = json.loads((examples / "rollouts.jsonl").read_text().splitlines()[0])
    assert isinstance(row["response"]["output"][0]["content"], list)  # parts, as exported
    (scored,) = verify_cli(
        "math", examples / "tasks.jsonl",
        [{"task_id": row["task_id"], "output": row["response"]["output"]}], tmp_path,
    )  # fmt: skip
    assert (scored["reward"], scored["failure_kind"]) == (row["reward"], None) == (1.0, None)


def test_workbench_gold_calls_then_a_final_message_score_full_on_every_task(tmp_path):
    """WorkBench's gold calls (its ``email.send_email`` is the tool ``email_send_email``)."""
    tasks_file = REPO / "environments/workplace/data/workbench_tasks.jsonl"
    rows = []
    for _, task in read_jsonl(tasks_file):
        output = []
        for i, call in enumerate(task["answer_calls"]):
            output += [
                {"type": "function_call", "id": f"fc_{i}", "call_id": f"c{i}", "status":
                 "completed", "name": call["name"].replace(".", "_"), "arguments": json.dumps(call["arguments"])},
                {"type": "function_call_output", "call_id": f"c{i}", "output": "ok"},
            ]  # fmt: skip
        output.append({"type": "message", "role": "assistant", "id": "msg", "status": "completed",
                       "content": [text_part("Done.")]})  # fmt: skip
        rows.append({"task_id": task["id"], "output": output})
    scored = verify_cli("workplace", tasks_file, rows, tmp_path, "--format", "workbench")
    assert len(scored) == 690
    assert [s["task_id"] for s in scored if s["reward"] != 1.0] == []


def test_bfcl_irrelevance_declined_in_a_message_scores_full(tmp_path):
    tasks_file = REPO / "environments/tool_call/tests/data/bfcl/BFCL_v4_irrelevance.json"
    ids = [row["id"] for _, row in read_jsonl(tasks_file)]
    decline = [text_part("None of these tools can answer that.")]
    rows = [
        {"task_id": i, "output": [{"type": "message", "role": "assistant", "content": decline}]}
        for i in ids
    ]
    scored = verify_cli("tool_call", tasks_file, rows, tmp_path, "--format", "bfcl")
    assert len(scored) == len(ids) >= 30  # the rows vendored for tests (PROVENANCE.md there)
    assert {(s["reward"], s["success"]) for s in scored} == {(1.0, True)}


# --- round trips: what gymflow wrote scores as it was scored ---------------------------------


@pytest.fixture(scope="module")
def judge_served():
    """The judge environment's reference judge on loopback (what its examples were graded by)."""
    from gymflow.environments.judge.reference_judge import reference_judge_app

    with serve_on_loopback(reference_judge_app()) as url:
        before = os.environ.get("GYMFLOW_JUDGE_URL")
        os.environ["GYMFLOW_JUDGE_URL"] = url + "/v1"
        yield
        if before is None:
            del os.environ["GYMFLOW_JUDGE_URL"]
        else:
            os.environ["GYMFLOW_JUDGE_URL"] = before


@pytest.mark.parametrize("env", WITH_EXAMPLES)
def test_shipped_example_rollouts_rescore_as_recorded(env, tmp_path, judge_served):
    examples = REPO / "environments" / env / "examples"
    rows = [row for _, row in read_jsonl(examples / "rollouts.jsonl")]
    assert any(isinstance(r["response"]["output"][-1].get("content"), list) for r in rows)
    assert_rescored_as_recorded(env, examples / "tasks.jsonl", rows, tmp_path)


@pytest.mark.parametrize("env", WITH_EXAMPLES)
def test_collected_then_exported_rollouts_rescore_as_recorded(env, tmp_path, judge_served):
    """``rollouts collect`` into Parquet, ``rollouts export --format nemo_gym``, re-scored."""
    tasks_file = REPO / "environments" / env / "examples" / "tasks.jsonl"
    collected, exported = tmp_path / "collected", tmp_path / "nemo.jsonl"
    result = runner.invoke(app, [
        "rollouts", "collect", "--env", env, "--tasks", str(tasks_file), "--policy",
        f"scripted:{env}", "--out", str(collected), "--num-repeats", "2",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app, ["rollouts", "export", "--in", str(collected), "--format", "nemo_gym",
              "--out", str(exported)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [row for _, row in read_jsonl(exported)]
    parquet = read_rollouts(collected)
    by_id = dict(zip(parquet["rollout_id"], parquet["reward"], strict=True))
    assert sorted(r["reward"] for r in rows) == sorted(by_id.values())
    assert_rescored_as_recorded(env, tasks_file, rows, tmp_path)


# --- every trajectory the product writes passes the reading unchanged ------------------------

assistant_text = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda name, args: (
            f'<tool_call>{{"name": {json.dumps(name)}, "arguments": '
            f"{json.dumps(args)}}}</tool_call>"
        ),
        st.text(min_size=1, max_size=12),
        st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=6), max_size=3),
    ),
    st.sampled_from(["<tool_call>{", '<tool_call>{"name": "f"}}</tool_call>', "  plain  "]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(assistant_text, min_size=1, max_size=4))
def test_agent_loop_items_read_back_unchanged_and_survive_export(texts):
    items = [it for turn, text in enumerate(texts) for it in assistant_items(text, turn)]
    items += [{"type": "function_call_output", "call_id": "call_0_0", "output": "{}"}]
    assert normalize_items(items) == items
    exported = [json.loads(json.dumps(output_item(it, i))) for i, it in enumerate(items)]
    assert parse_rollout_row({"response": {"output": exported}}).items == items


json_args = st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=6), max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=40),
    st.lists(
        st.fixed_dictionaries(
            {"name": st.text(max_size=8), "args": json_args | st.text(max_size=8)}
        ),
        max_size=3,
    ),
)
def test_chat_turn_items_from_servers_and_agents_read_back_unchanged(text, calls):
    """The capturing proxy and agent programs' turns (:func:`chat_items`) pass unchanged."""
    tool_calls = [
        {"id": f"x{i}", "type": "function", "function": {"name": c["name"], "arguments":
         c["args"] if isinstance(c["args"], str) else json.dumps(c["args"])}}
        for i, c in enumerate(calls)
    ]  # fmt: skip
    items = chat_items(ChatTurn(text=text, tool_calls=tool_calls), 0)
    assert normalize_items(items) == items
