"""workplace tools: schemas equal NeMo Gym's, WorkBench behaviour, copy-on-write sessions."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from gymflow.env.tool_schema import tool_spec
from gymflow.environments.workplace.sandbox import Sandbox, base
from gymflow.environments.workplace.tools import ACTIONS, TOOLS
from gymflow.environments.workplace.tools.analytics import (
    analytics_create_plot,
    analytics_engaged_users_count,
    analytics_get_average_session_duration,
    analytics_get_visitor_information_by_id,
    analytics_total_visits_count,
    analytics_traffic_source_count,
)
from gymflow.environments.workplace.tools.calendar_events import (
    calendar_create_event,
    calendar_delete_event,
    calendar_get_event_information_by_id,
    calendar_search_events,
    calendar_update_event,
)
from gymflow.environments.workplace.tools.company_directory import (
    company_directory_find_email_address,
)
from gymflow.environments.workplace.tools.crm import (
    customer_relationship_manager_add_customer,
    customer_relationship_manager_delete_customer,
    customer_relationship_manager_search_customers,
    customer_relationship_manager_update_customer,
)
from gymflow.environments.workplace.tools.emails import (
    email_delete_email,
    email_forward_email,
    email_get_email_information_by_id,
    email_reply_email,
    email_search_emails,
    email_send_email,
)
from gymflow.environments.workplace.tools.project_tasks import (
    project_management_create_task,
    project_management_search_tasks,
    project_management_update_task,
)

CRM = "customer_relationship_manager_data"


@pytest.fixture
def sb() -> Sandbox:
    return Sandbox()


def test_schemas_match_nemo_gym_names_parameters_types_required_and_descriptions():
    theirs = {s["name"]: s for s in base().tool_schemas}
    ours = {spec.name: spec.schema["function"] for spec in map(tool_spec, TOOLS)}
    assert set(ours) == set(theirs) and len(ours) == 27
    for name, fn in ours.items():
        mine, want = fn["parameters"], theirs[name]["parameters"]
        assert fn["description"] == theirs[name]["description"], name
        assert sorted(mine["required"]) == sorted(want["required"]), name
        assert mine["additionalProperties"] is False
        assert set(mine["properties"]) == set(want["properties"]), name
        for arg, prop in want["properties"].items():
            assert mine["properties"][arg]["type"] == prop["type"], (name, arg)
            assert mine["properties"][arg]["description"] == prop["description"], (name, arg)
    assert len(ACTIONS) == 14 and set(ours) > ACTIONS


def test_base_rows_are_read_only_and_shared(sb):
    row = base().tables["emails"].rows[0]
    assert isinstance(row, MappingProxyType)
    with pytest.raises(TypeError):
        row["subject"] = "x"  # type: ignore[index]
    assert Sandbox().base is sb.base


def test_changes_stay_in_the_session_overlay(sb):
    other = Sandbox()
    first = base().tables["emails"].rows[0]
    email_delete_email(sb, first["email_id"])
    calendar_update_event(sb, "00000013", "event_name", "Renamed")
    assert sb.get("emails", first["email_id"]) is None
    assert other.get("emails", first["email_id"]) == first
    assert base().tables["emails"].by_id[first["email_id"]] == first
    assert other.get("calendar_events", "00000013")["event_name"] == "sync up"
    assert sb.get("calendar_events", "00000013")["event_name"] == "Renamed"
    assert len(list(sb.rows("emails"))) == 499 and len(list(other.rows("emails"))) == 500


def test_search_emails_matches_all_words_newest_first_with_pages(sb):
    result = email_search_emails(sb, query="KOFI task", page_size=3)
    emails = result["emails"]
    assert len(emails) == 3 and result["pagination"]["total_emails"] > 3
    assert all("kofi" in e["sender/recipient"] for e in emails)
    assert [e["sent_datetime"] for e in emails] == sorted(
        (e["sent_datetime"] for e in emails), reverse=True
    )
    last = email_search_emails(sb, query="kofi task", page=99, page_size=3)
    assert last["pagination"]["page"] == last["pagination"]["total_pages"]
    dated = email_search_emails(sb, date_min="2023-11-29", date_max="2023-11-29", page_size=100)
    assert {e["sent_datetime"][:10] for e in dated["emails"]} == {"2023-11-29"}
    assert email_search_emails(sb, query="no-such-word-anywhere") == "No emails found."
    with pytest.raises(ValueError, match="Invalid date_min"):
        email_search_emails(sb, date_min="yesterday")


def test_send_forward_reply_append_outbox_records(sb):
    assert email_send_email(sb, "Raj.Patel@atlas.com", "Hi", "Body") == "Email sent successfully."
    (sent,) = sb.created["emails"].values()
    assert sent["email_id"] == "500"  # WorkBench: str(int(max id) + 1), not zero-padded
    assert sent["sender/recipient"] == "raj.patel@atlas.com" and sent["inbox/outbox"] == "outbox"
    assert sent["sent_datetime"] == "2023-11-30 23:59:00"
    email_forward_email(sb, "00000373", "nadia.moreau@atlas.com")
    email_reply_email(sb, "00000373", "Thanks")
    fw, re_ = list(sb.created["emails"].values())[1:]
    assert fw["subject"].startswith("FW: ") and fw["email_id"] == "501"
    assert (
        re_["subject"].startswith("RE: ")
        and re_["sender/recipient"] == "santiago.martinez@atlas.com"
    )
    with pytest.raises(ValueError, match="Invalid recipient"):
        email_send_email(sb, "nobody", "s", "b")
    with pytest.raises(ValueError, match="not provided"):
        email_send_email(sb, "a@b.com", "", "b")
    with pytest.raises(LookupError, match="Email not found"):
        email_delete_email(sb, "99999999")
    assert email_get_email_information_by_id(sb, "500", "subject") == {"subject": "Hi"}


def test_calendar_create_update_delete_and_validation(sb):
    new_id = calendar_create_event(sb, "Sync", "Akira.Sato@atlas.com", "2023-12-04 10:00:00", "30")
    assert new_id == str(int(base().tables["calendar_events"].ids_desc[0]) + 1).zfill(8)
    assert calendar_get_event_information_by_id(sb, new_id, "participant_email") == {
        "participant_email": "akira.sato@atlas.com"
    }
    calendar_update_event(sb, new_id, "duration", "60")
    assert sb.get("calendar_events", new_id)["duration"] == "60"
    assert calendar_delete_event(sb, new_id) == "Event deleted successfully."
    assert "calendar_events" not in sb.edits  # a created record leaves no trace when deleted
    for bad in ("123", "abcdefgh"):
        with pytest.raises(ValueError, match="8-digit"):
            calendar_delete_event(sb, bad)
    with pytest.raises(ValueError, match="positive"):
        calendar_create_event(sb, "x", "a@b.com", "2023-12-04 10:00:00", "-5")
    with pytest.raises(ValueError, match="Invalid field"):
        calendar_update_event(sb, "00000013", "event_id", "00000001")


def test_calendar_search_filters_on_start_time_newest_first(sb):
    found = calendar_search_events(
        sb, query="AMIR", time_min="2023-12-01 00:00:00", time_max="2023-12-31", page_size=50
    )
    starts = [e["event_start"] for e in found["events"]]
    assert starts == sorted(starts, reverse=True) and min(starts) >= "2023-12-01"
    assert len(starts) == 6 and all("amir" in e["participant_email"] for e in found["events"])


def test_analytics_counts_per_day_and_plots():
    sb = Sandbox()
    total = analytics_total_visits_count(sb)
    assert sum(total.values()) == 1000 and list(total) == sorted(total)
    window = analytics_total_visits_count(sb, time_min="2023-11-01", time_max="2023-11-07")
    assert set(window) <= {f"2023-11-0{d}" for d in range(1, 8)}
    by_source = [
        analytics_traffic_source_count(sb, traffic_source=s)
        for s in ("direct", "referral", "search engine", "social media")
    ]
    assert sum(sum(d.values()) for d in by_source) == 1000
    engaged = analytics_engaged_users_count(sb)
    assert 0 < sum(engaged.values()) < 1000
    assert set(analytics_get_average_session_duration(sb)) == set(total)
    visits = analytics_get_visitor_information_by_id(sb, "0860")
    assert visits and all(isinstance(v["user_engaged"], bool) for v in visits)
    path = analytics_create_plot(sb, "2023-11-01", "2023-11-07", "total_visits", "bar")
    assert path == "plots/2023-11-01_2023-11-07_total_visits_bar.png" and sb.plots == [path]
    with pytest.raises(ValueError, match="Plot type"):
        analytics_create_plot(sb, "2023-11-01", "2023-11-07", "total_visits", "pie")


def test_project_tasks_validate_assignee_list_and_board(sb):
    task_id = project_management_create_task(
        sb, "Write docs", "KOFI.MENSAH@atlas.com", "Backlog", "2023-12-01", "Design"
    )
    assert sb.get("project_tasks", task_id)["assigned_to_email"] == "kofi.mensah@atlas.com"
    with pytest.raises(ValueError, match="Assignee"):
        project_management_create_task(
            sb, "x", "raj.patel@atlas.com", "Backlog", "2023-12-01", "Design"
        )
    with pytest.raises(ValueError, match="List not valid"):
        project_management_update_task(sb, task_id, "list_name", "in review")
    project_management_update_task(sb, task_id, "list_name", "In Review")
    assert project_management_search_tasks(sb, task_name="write docs") == [
        dict(sb.get("project_tasks", task_id))
    ]
    with pytest.raises(ValueError, match="No search parameters"):
        project_management_search_tasks(sb)


def test_crm_search_update_add_delete(sb):
    found = customer_relationship_manager_search_customers(
        sb, status="won", assigned_to_email="lena", page_size=100
    )
    assert all(
        c["status"] == "Won" and "lena" in c["assigned_to_email"] for c in found["customers"]
    )
    recent = customer_relationship_manager_search_customers(
        sb, last_contact_date_min="2023-11-29", page_size=500
    )["customers"]
    assert recent and all(c["last_contact_date"] >= "2023-11-29" for c in recent)
    with pytest.raises(ValueError, match="Status not valid"):
        customer_relationship_manager_update_customer(sb, "00000189", "status", "won")
    customer_relationship_manager_update_customer(sb, "00000189", "status", "Won")
    assert sb.get(CRM, "00000189")["status"] == "Won"
    new_id = customer_relationship_manager_add_customer(
        sb, "Dakota Thomas", "Nadia.Moreau@atlas.com", "Lead"
    )
    assert (
        new_id == "00000200"
        and sb.get(CRM, new_id)["assigned_to_email"] == "nadia.moreau@atlas.com"
    )
    customer_relationship_manager_delete_customer(sb, "00000189")
    with pytest.raises(LookupError):
        customer_relationship_manager_update_customer(sb, "00000189", "notes", "x")


def test_directory_lookup_is_case_insensitive(sb):
    assert company_directory_find_email_address(sb, "NADIA") == ["nadia.moreau@atlas.com"]
    assert len(company_directory_find_email_address(sb, "patel")) == 2
    with pytest.raises(ValueError):
        company_directory_find_email_address(sb)


def test_next_id_skips_a_deleted_maximum_like_workbench(sb):
    top = base().tables[CRM].ids_desc[0]
    customer_relationship_manager_delete_customer(sb, top)
    reused = customer_relationship_manager_add_customer(sb, "A", "raj.patel@atlas.com", "Lead")
    assert reused == top  # max(live ids) + 1 gives the deleted id again, as in WorkBench
    assert sb.edits[CRM][top] is None and sb.get(CRM, top)["customer_name"] == "A"
