"""Adversarial answers for a workplace task; each must score below 1.0 (they all cap at 0.0).

For a task that needs a change: doing nothing, only looking, the right tool on the wrong
record (or with a wrong value), the gold plus an unrequested deletion, a bulk deletion, and
the gold calls with trailing text (a malformed turn). For a task whose right outcome is no
change: an unrequested email, an unrequested deletion, a bulk deletion, a malformed turn.
A probe is one assistant text; the scripted policy repeats it every turn, and profiling scores
it once offline — it must fail both ways.
"""

from __future__ import annotations

from gymflow.core.tool_calls import render_call
from gymflow.env.environment import Probe
from gymflow.environments.workplace.sandbox import base
from gymflow.environments.workplace.tools.analytics import PLOT_TYPES

ID_TABLES = {
    "email_id": ("emails", "email_delete_email"),
    "event_id": ("calendar_events", "calendar_delete_event"),
    "task_id": ("project_tasks", "project_management_delete_task"),
    "customer_id": (
        "customer_relationship_manager_data",
        "customer_relationship_manager_delete_customer",
    ),
}
BULK = 5


def probes_for(calls: list[dict], changes_something: bool) -> list[Probe]:
    """The probes for a task whose gold is ``calls``."""
    touched = {c["arguments"][k] for c in calls for k in ID_TABLES if k in c["arguments"]}
    id_key = next((k for c in calls for k in ID_TABLES if k in c["arguments"]), "email_id")
    bystanders = _other_ids(id_key, touched, BULK + 1)
    delete_tool = ID_TABLES[id_key][1]
    deletions = [render_call(delete_tool, {id_key: i}) for i in bystanders]
    if not changes_something:
        return [
            Probe(
                "unrequested_email",
                render_call(
                    "email_send_email",
                    {"recipient": base().directory[0], "subject": "Update", "body": "Done."},
                ),
                0.0,
            ),
            Probe("unrequested_delete", deletions[0], 0.0),
            Probe("bulk_delete", "".join(deletions[:BULK]), 0.0),
            Probe("malformed_turn", "Nothing to change.<tool_call>", 0.0),
        ]
    gold = "".join(render_call(c["name"], c["arguments"]) for c in calls)
    wrong = [_altered(calls[0], touched), *calls[1:]]
    return [
        Probe("do_nothing", "I have taken care of that for you.", 0.0),
        Probe("look_only", render_call("company_directory_find_email_address", {"name": "a"}), 0.0),
        Probe("wrong_record", "".join(render_call(c["name"], c["arguments"]) for c in wrong), 0.0),
        Probe("gold_plus_unrequested_delete", gold + deletions[0], 0.0),
        Probe("bulk_delete", "".join(deletions[:BULK]), 0.0),
        Probe("gold_with_trailing_text", gold + " All done.", 0.0),
    ]


def _other_ids(id_key: str, touched: set[str], n: int) -> list[str]:
    """``n`` seeded ids of ``id_key``'s table that the gold does not touch (deterministic)."""
    table = base().tables[ID_TABLES[id_key][0]]
    return [i for i in table.ids_desc if i not in touched][:n]


def _altered(call: dict, touched: set[str]) -> dict:
    """``call`` aimed at another record, or with one value changed (so the outcome differs)."""
    args = dict(call["arguments"])
    id_key = next((k for k in ID_TABLES if k in args), None)
    if id_key is not None:
        args[id_key] = _other_ids(id_key, touched, 1)[0]
    elif "recipient" in args or "participant_email" in args:
        key = "recipient" if "recipient" in args else "participant_email"
        args[key] = next(a for a in base().directory if a != args[key].lower())
    elif "plot_type" in args:
        args["plot_type"] = next(p for p in PLOT_TYPES if p != args["plot_type"])
    else:
        key = next(k for k in ("customer_name", "task_name", "subject") if k in args)
        args[key] = f"{args[key]} (copy)"
    return {"name": call["name"], "arguments": args}
