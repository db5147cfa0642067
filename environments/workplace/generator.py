"""Seeded synthetic workplace tasks: templated requests over the sandbox's own records.

Each template picks records (an email, an event, a task, a customer) and colleagues from the
base tables with a seeded RNG, phrases a request that names them unambiguously, and writes the
gold state-changing calls. Conditional templates ("... if their status is Lost") give the
right answer "change nothing" when the condition is false, as 122 WorkBench tasks do. The same
``(n, seed)`` always gives the same tasks.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from gymflow.environments.workplace.sandbox import Base, base
from gymflow.environments.workplace.tools.analytics import PLOT_TYPES
from gymflow.environments.workplace.tools.crm import STATUSES
from gymflow.environments.workplace.tools.project_tasks import LISTS

Calls = list[dict]
Template = Callable[[random.Random, Base], tuple[str, Calls]]

SUBJECTS = ("Quarterly numbers", "Offsite plan", "Design review", "Hiring update", "Budget")
BODIES = (
    "Can we meet tomorrow to go over this?",
    "Please review the attached draft by Friday.",
    "Thanks, this looks good to me.",
    "Let's push this to next week.",
)
EVENT_NAMES = ("Roadmap review", "Vendor call", "Team lunch", "Security training", "1:1")
TASK_NAMES = ("Write API docs", "Fix login bug", "Design onboarding flow", "Update CI pipeline")
NEW_CUSTOMERS = ("Jordan Blake", "Morgan Reyes", "Avery Quinn", "Riley Hart", "Casey Moss")
PLOT_VALUES = {
    "total_visits": "total visits",
    "session_duration_seconds": "session duration",
    "user_engaged": "engaged users",
    "visits_direct": "direct visits",
}


def _call(name: str, **arguments: str) -> dict:
    return {"name": name, "arguments": arguments}


def _first(address: str) -> str:
    return address.split(".")[0].capitalize()


def _unique(rows, *fields: str) -> list:
    """Rows whose ``fields`` values no other row shares (so a request names one record)."""
    counts = Counter(tuple(r[f] for f in fields) for r in rows)
    return [r for r in rows if counts[tuple(r[f] for f in fields)] == 1]


def delete_email(rng: random.Random, b: Base) -> tuple[str, Calls]:
    email = rng.choice(_unique(b.tables["emails"].rows, "sender/recipient", "subject"))
    who = _first(email["sender/recipient"])
    query = f"Delete the email {who} sent me with the subject '{email['subject']}'."
    return query, [_call("email_delete_email", email_id=email["email_id"])]


def send_email(rng: random.Random, b: Base) -> tuple[str, Calls]:
    to, subject, body = rng.choice(b.directory), rng.choice(SUBJECTS), rng.choice(BODIES)
    query = f"Send {_first(to)} an email with the subject '{subject}' saying '{body}'"
    return query, [_call("email_send_email", recipient=to, subject=subject, body=body)]


def forward_email(rng: random.Random, b: Base) -> tuple[str, Calls]:
    email = rng.choice(_unique(b.tables["emails"].rows, "sender/recipient", "subject"))
    to = rng.choice([a for a in b.directory if a != email["sender/recipient"]])
    who = _first(email["sender/recipient"])
    query = f"Forward {who}'s email about '{email['subject']}' to {_first(to)}."
    return query, [_call("email_forward_email", email_id=email["email_id"], recipient=to)]


def reply_email(rng: random.Random, b: Base) -> tuple[str, Calls]:
    email = rng.choice(_unique(b.tables["emails"].rows, "sender/recipient", "subject"))
    body = rng.choice(BODIES)
    who = _first(email["sender/recipient"])
    query = f"Reply to {who}'s email about '{email['subject']}' with '{body}'"
    return query, [_call("email_reply_email", email_id=email["email_id"], body=body)]


def create_event(rng: random.Random, b: Base) -> tuple[str, Calls]:
    who, name = rng.choice(b.directory), rng.choice(EVENT_NAMES)
    day, hour, minutes = rng.randint(4, 22), rng.randint(9, 15), rng.choice((30, 60, 90, 120))
    start = f"2023-12-{day:02d} {hour:02d}:00:00"
    query = (
        f"Schedule a {minutes} minute '{name}' with {_first(who)} on December {day} at {hour}:00."
    )
    calls = [
        _call(
            "calendar_create_event",
            event_name=name,
            participant_email=who,
            event_start=start,
            duration=str(minutes),
        )
    ]
    return query, calls


def cancel_event(rng: random.Random, b: Base) -> tuple[str, Calls]:
    rows = _unique(b.tables["calendar_events"].rows, "participant_email", "event_start")
    event = rng.choice(rows)
    who, start = _first(event["participant_email"]), event["event_start"]
    query = f"Cancel my '{event['event_name']}' with {who} on {start[:10]} at {start[11:16]}."
    return query, [_call("calendar_delete_event", event_id=event["event_id"])]


def rename_event(rng: random.Random, b: Base) -> tuple[str, Calls]:
    rows = _unique(b.tables["calendar_events"].rows, "participant_email", "event_start")
    event = rng.choice(rows)
    new = rng.choice([n for n in EVENT_NAMES if n.lower() != event["event_name"].lower()])
    who, start = _first(event["participant_email"]), event["event_start"]
    query = f"Rename my meeting with {who} on {start[:10]} at {start[11:16]} to '{new}'."
    return query, [
        _call(
            "calendar_update_event", event_id=event["event_id"], field="event_name", new_value=new
        )
    ]


def create_plot(rng: random.Random, b: Base) -> tuple[str, Calls]:
    value, plot = rng.choice(sorted(PLOT_VALUES)), rng.choice(PLOT_TYPES)
    start, end = sorted(rng.sample(range(1, 30), 2))
    low, high = f"2023-11-{start:02d}", f"2023-11-{end:02d}"
    query = f"Make a {plot} chart of {PLOT_VALUES[value]} from {low} to {high}."
    return query, [
        _call(
            "analytics_create_plot",
            time_min=low,
            time_max=high,
            value_to_plot=value,
            plot_type=plot,
        )
    ]


def create_task(rng: random.Random, b: Base) -> tuple[str, Calls]:
    people = sorted({t["assigned_to_email"] for t in b.tables["project_tasks"].rows})
    who, name = rng.choice(people), rng.choice(TASK_NAMES)
    board, day = rng.choice(("Back end", "Front end", "Design")), rng.randint(1, 29)
    due = f"2023-12-{day:02d}"
    query = f"Add a '{name}' task for {_first(who)} to the {board} backlog, due {due}."
    return query, [
        _call(
            "project_management_create_task",
            task_name=name,
            assigned_to_email=who,
            list_name="Backlog",
            due_date=due,
            board=board,
        )
    ]


def move_task(rng: random.Random, b: Base) -> tuple[str, Calls]:
    task = rng.choice(_unique(b.tables["project_tasks"].rows, "task_name", "assigned_to_email"))
    target = rng.choice([name for name in LISTS if name != task["list_name"]])
    who = _first(task["assigned_to_email"])
    query = f"Move {who}'s task '{task['task_name']}' to {target}."
    return query, [
        _call(
            "project_management_update_task",
            task_id=task["task_id"],
            field="list_name",
            new_value=target,
        )
    ]


def delete_customer_if(rng: random.Random, b: Base) -> tuple[str, Calls]:
    customer = rng.choice(b.tables["customer_relationship_manager_data"].rows)
    status = customer["status"] if rng.random() < 0.5 else rng.choice(STATUSES)
    query = f"If {customer['customer_name']} is marked {status} in the crm, delete them."
    if status != customer["status"]:
        return query, []  # the condition is false: the right outcome is no change
    return query, [
        _call("customer_relationship_manager_delete_customer", customer_id=customer["customer_id"])
    ]


def update_status_and_email(rng: random.Random, b: Base) -> tuple[str, Calls]:
    customer = rng.choice(b.tables["customer_relationship_manager_data"].rows)
    status = rng.choice([s for s in STATUSES if s != customer["status"]])
    owner, name = customer["assigned_to_email"], customer["customer_name"]
    subject, body = f"{name} update", f"{name} is now {status}."
    query = (
        f"Set {name}'s status to {status} in the crm, then email {_first(owner)} with the "
        f"subject '{subject}' and the body '{body}'"
    )
    return query, [
        _call(
            "customer_relationship_manager_update_customer",
            customer_id=customer["customer_id"],
            field="status",
            new_value=status,
        ),
        _call("email_send_email", recipient=owner, subject=subject, body=body),
    ]


def add_customer(rng: random.Random, b: Base) -> tuple[str, Calls]:
    owners = sorted(
        {c["assigned_to_email"] for c in b.tables["customer_relationship_manager_data"].rows}
    )
    name, owner = rng.choice(NEW_CUSTOMERS), rng.choice(owners)
    query = f"Add {name} as a new lead in the crm and assign them to {_first(owner)}."
    return query, [
        _call(
            "customer_relationship_manager_add_customer",
            customer_name=name,
            assigned_to_email=owner,
            status="Lead",
        )
    ]


TEMPLATES: tuple[Template, ...] = (
    delete_email,
    send_email,
    forward_email,
    reply_email,
    create_event,
    cancel_event,
    rename_event,
    create_plot,
    create_task,
    move_task,
    delete_customer_if,
    update_status_and_email,
    add_customer,
)


def generate(n: int, seed: int) -> list[tuple[str, Calls]]:
    """``n`` synthetic ``(query, gold calls)`` pairs; deterministic in ``seed``."""
    rng, data = random.Random(seed), base()
    return [TEMPLATES[i % len(TEMPLATES)](rng, data) for i in range(n)]
