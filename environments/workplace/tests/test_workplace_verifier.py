"""workplace verifier (pure): gold = 1.0 on all 690 WorkBench tasks, outcome rules, probes."""

from __future__ import annotations

import json

import pytest

from gymflow.core.tool_calls import render_call
from gymflow.core.trajectory import assistant_items, prompt_items
from gymflow.environments.workplace import WorkplaceEnvironment
from gymflow.environments.workplace.outcome import changes, replay
from gymflow.environments.workplace.verifier import gold_replay, score
from gymflow.environments.workplace.workbench import workbench_tasks

ENV = WorkplaceEnvironment()
TASKS = workbench_tasks()


def _episode(turns: list[str], run: bool = True) -> list[dict]:
    """Items of an episode that says ``turns``; ``run`` adds an output to every call."""
    items = []
    for turn, text in enumerate(turns):
        for item in assistant_items(text, turn):
            items.append(item)
            if run and item["type"] == "function_call":
                items.append(
                    {"type": "function_call_output", "call_id": item["call_id"], "output": "{}"}
                )
    return items


def _calls(*calls: tuple[str, dict]) -> str:
    return "".join(render_call(name, args) for name, args in calls)


def test_gold_scores_one_on_all_690_tasks_multi_turn_and_offline():
    assert len(TASKS) == 690
    for task in TASKS:
        multi = ENV.verify(task, prompt_items(task.prompt) + _episode(ENV.gold_turns(task)))
        offline = ENV.verify(
            task, prompt_items(task.prompt) + _episode([ENV.gold_text(task)], run=False)
        )
        assert (multi.reward, multi.success, offline.reward) == (1.0, True, 1.0), task.task_id


def test_every_gold_call_is_accepted_by_the_tools():
    for task in TASKS:
        assert (
            replay((c["name"], c["arguments"]) for c in task.ground_truth["calls"]).invalid_calls
            == 0
        )


def test_probes_score_zero_on_all_690_tasks():
    for task in TASKS:
        for probe in ENV.probes(task):
            s = ENV.verify(task, prompt_items(task.prompt) + _episode([probe.text], run=False))
            assert s.reward <= probe.max_reward < 1.0 and not s.success, (task.task_id, probe.name)
            assert s.failure_kind is not None


def test_change_nothing_tasks_reward_exactly_no_change():
    empty = [t for t in TASKS if not t.ground_truth["calls"]]
    assert len(empty) == 122
    for task in empty[:40]:
        assert score(task.ground_truth, _episode(["No change needed."])).reward == 1.0
        looked = _calls(("email_search_emails", {"query": "budget"}))
        assert score(task.ground_truth, _episode([looked, "Nothing to do."])).reward == 1.0
        sent = _calls(("email_send_email", {"recipient": "a@b.com", "subject": "s", "body": "b"}))
        s = score(task.ground_truth, _episode([sent, "Done."]))
        assert (s.reward, s.failure_kind, s.components["unwanted_changes"]) == (
            0.0,
            "unsafe_action",
            1.0,
        )


def test_two_gold_calls_with_no_net_effect_count_as_change_nothing():
    # WorkBench data: these reassign a customer to the colleague who already has them
    for task_id in (
        "workbench_customer_relationship_manager_31",
        "workbench_customer_relationship_manager_32",
    ):
        task = next(t for t in TASKS if t.task_id == task_id)
        assert changes(gold_replay(task.ground_truth["calls"]).sandbox) == 0
        assert [p.name for p in ENV.probes(task)][0] == "unrequested_email"


DELETE = {"calls": [{"name": "email_delete_email", "arguments": {"email_id": "00000479"}}]}


def test_failure_kinds_and_components():
    delete = ("email_delete_email", {"email_id": "00000479"})
    wrong = ("email_delete_email", {"email_id": "00000438"})
    cases = {
        "I deleted it.": ("no_tool_call", 0.0, 0.0),
        _calls(wrong): ("unsafe_action", 0.0, 1.0),
        _calls(("email_delete_all", {})): ("unknown_tool", 0.0, 0.0),
        _calls(("calendar_delete_event", {"event_id": "00000479"})): ("wrong_tool", 0.0, 0.0),
        _calls(("email_delete_email", {"email_id": 479})): ("bad_arguments", 0.0, 0.0),
        _calls(delete) + "trailing": ("invalid_json", 0.0, 0.0),
    }
    for text, (kind, done, unwanted) in cases.items():
        s = score(DELETE, _episode([text, "Done."]))
        assert (s.reward, s.failure_kind) == (0.0, kind), text
        assert (s.components["gold_changes_done"], s.components["unwanted_changes"]) == (
            done,
            unwanted,
        )
    s = score(DELETE, _episode([_calls(delete, delete), "Done."]))  # the repeat fails: harmless
    assert (s.reward, s.components["invalid_calls"]) == (1.0, 1.0)


def test_calls_that_never_ran_do_not_count():
    items = _episode([_calls(("email_delete_email", {"email_id": "00000479"}))], run=False)
    assert score(DELETE, items).reward == 1.0  # no outputs at all: an offline answer
    ran = _episode([_calls(("email_search_emails", {"query": "nadia"}))])
    cut_off = assistant_items(_calls(("email_delete_email", {"email_id": "00000479"})), 1)
    assert score(DELETE, ran + cut_off).reward == 0.0  # others ran: this one was cut off


def test_text_compares_case_insensitively_but_status_does_not():
    send = {"recipient": "raj.patel@atlas.com", "subject": "Hello", "body": "See you"}
    truth = {"calls": [{"name": "email_send_email", "arguments": send}]}
    shouted = {**send, "recipient": "RAJ.PATEL@atlas.com", "subject": "HELLO"}
    assert score(truth, _episode([_calls(("email_send_email", shouted))])).reward == 1.0
    other = {**send, "body": "See you soon"}
    s = score(truth, _episode([_calls(("email_send_email", other))]))
    assert (s.reward, s.failure_kind, s.components["unwanted_changes"]) == (
        0.0,
        "bad_arguments",
        0.0,
    )
    # the CRM status only accepts its exact values, so a lower-cased one changes nothing
    update = {"customer_id": "00000189", "field": "status", "new_value": "Won"}
    truth = {
        "calls": [{"name": "customer_relationship_manager_update_customer", "arguments": update}]
    }
    lower = {**update, "new_value": "won"}
    assert (
        score(
            truth, _episode([_calls(("customer_relationship_manager_update_customer", lower))])
        ).reward
        == 0.0
    )


def test_new_records_match_by_content_whatever_their_ids():
    a = (
        "calendar_create_event",
        {
            "event_name": "A",
            "participant_email": "raj.patel@atlas.com",
            "event_start": "2023-12-04 10:00:00",
            "duration": "30",
        },
    )
    b = (
        "calendar_create_event",
        {
            "event_name": "B",
            "participant_email": "raj.patel@atlas.com",
            "event_start": "2023-12-05 10:00:00",
            "duration": "30",
        },
    )
    truth = {"calls": [{"name": n, "arguments": args} for n, args in (a, b)]}
    assert score(truth, _episode([_calls(b), _calls(a)])).reward == 1.0
    s = score(truth, _episode([_calls(a, b, a)]))
    assert (s.reward, s.failure_kind) == (0.0, "unsafe_action")  # one record too many


def test_a_deleted_seeded_record_is_not_restored_by_recreating_its_id():
    crm = "customer_relationship_manager_data"
    top = replay([]).sandbox.base.tables[crm].ids_desc[0]
    row = dict(replay([]).sandbox.get(crm, top))
    delete = ("customer_relationship_manager_delete_customer", {"customer_id": top})
    add = (
        "customer_relationship_manager_add_customer",
        {k: row[k] for k in ("customer_name", "assigned_to_email", "status")},
    )
    s = score({"calls": []}, _episode([_calls(delete, add)]))
    assert (s.reward, s.failure_kind) == (0.0, "unsafe_action")


def test_malformed_arguments_are_refused_not_crashing():
    items = [
        {
            "type": "function_call",
            "call_id": "c0",
            "name": "email_delete_email",
            "arguments": "{not json",
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "email_delete_email",
            "arguments": "[1]",
        },
        {"type": "function_call", "call_id": "c2", "name": None, "arguments": None},
    ]
    s = score(DELETE, items)
    assert s.reward == 0.0 and s.components["invalid_calls"] == 3.0


@pytest.mark.parametrize("task", TASKS[::97], ids=lambda t: t.task_id)
def test_verify_is_deterministic(task):
    items = prompt_items(task.prompt) + _episode(ENV.gold_turns(task))
    assert json.dumps(ENV.verify(task, items).to_dict()) == json.dumps(
        ENV.verify(task, items).to_dict()
    )
