"""Seeded, deterministic task generator for tool_call: templates × value pools.

Each task is a request in plain English plus the one gold call that fulfils it. The same
``(seed, n)`` always gives the same tasks; splitting is by content hash elsewhere, so a request
that appears twice lands in one split only.
"""

from __future__ import annotations

import random

from gymflow.environments.tool_call.tools import ALLOWED_EMAIL_DOMAIN, CURRENCIES

CITIES = (
    "Paris",
    "London",
    "Tokyo",
    "Berlin",
    "Madrid",
    "Rome",
    "Oslo",
    "Lima",
    "Cairo",
    "Delhi",
    "Sydney",
    "Toronto",
    "Boston",
    "Denver",
    "Austin",
    "Dublin",
    "Vienna",
    "Prague",
    "Seoul",
    "Nairobi",
    "Lisbon",
    "Zurich",
    "Athens",
    "Miami",
)
NAMES = (
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "nina",
    "oscar",
    "peggy",
    "rupert",
    "sybil",
    "trent",
    "victor",
    "wendy",
    "zoe",
)
SUBJECTS = (
    "budget review",
    "team lunch",
    "quarterly report",
    "project update",
    "travel plans",
    "design notes",
    "hiring plan",
    "release notes",
    "offsite agenda",
    "sales figures",
    "server outage",
    "holiday schedule",
    "contract draft",
    "weekly sync",
)
TITLES = (
    "standup",
    "design review",
    "one on one",
    "planning",
    "retro",
    "demo",
    "interview",
    "lunch",
    "workshop",
    "all hands",
)
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _weather(rng: random.Random) -> tuple[str, dict]:
    city = rng.choice(CITIES)
    unit = rng.choice(("celsius", "fahrenheit"))
    template = rng.choice(
        (
            "What's the weather in {city} in {unit}?",
            "Tell me the temperature in {city}, in {unit} please.",
            "How warm is it in {city} right now? Use {unit}.",
            "Weather for {city} in {unit}.",
        )
    )
    return template.format(city=city, unit=unit), {"city": city, "unit": unit}


def _timer(rng: random.Random) -> tuple[str, dict]:
    minutes = rng.randint(1, 180)
    template = rng.choice(
        (
            "Set a timer for {m} minutes.",
            "Start a {m} minute timer.",
            "Remind me in {m} minutes.",
            "Countdown of {m} minutes, please.",
        )
    )
    return template.format(m=minutes), {"minutes": minutes}


def _email(rng: random.Random) -> tuple[str, dict]:
    name = rng.choice(NAMES)
    subject = rng.choice(SUBJECTS)
    template = rng.choice(
        (
            "Email {name} about the {subject}.",
            "Send {name} an email with the subject {subject}.",
            "Write to {name} regarding {subject}.",
            "Drop {name} a note about the {subject}.",
        )
    )
    return template.format(name=name, subject=subject), {
        "to": f"{name}@{ALLOWED_EMAIL_DOMAIN}",
        "subject": subject,
    }


def _event(rng: random.Random) -> tuple[str, dict]:
    title = rng.choice(TITLES)
    day = rng.choice(DAYS)
    hour = rng.randint(7, 19)
    template = rng.choice(
        (
            "Schedule a {title} on {day} at {hour}:00.",
            "Put {title} in my calendar for {day} at {hour}:00.",
            "Book a {title} {day} at {hour}:00.",
            "Add an event called {title} on {day}, {hour}:00.",
        )
    )
    return template.format(title=title, day=day, hour=hour), {
        "title": title,
        "day": day,
        "hour": hour,
    }


def _currency(rng: random.Random) -> tuple[str, dict]:
    amount = rng.randint(1, 9999)
    src, dst = rng.sample(CURRENCIES, 2)
    template = rng.choice(
        (
            "How much is {a} {s} in {d}?",
            "Convert {a} {s} to {d}.",
            "What do {a} {s} come to in {d}?",
            "Change {a} {s} into {d}.",
        )
    )
    return template.format(a=amount, s=src, d=dst), {
        "amount": amount,
        "from_currency": src,
        "to_currency": dst,
    }


MAKERS = {
    "get_weather": _weather,
    "set_timer": _timer,
    "send_email": _email,
    "create_event": _event,
    "convert_currency": _currency,
}


def generate(n: int, seed: int) -> list[dict]:
    """``n`` tasks as ``{"request", "tool", "arguments", "seed"}``; deterministic in ``seed``."""
    rng = random.Random(seed)
    names = sorted(MAKERS)
    out = []
    for i in range(n):
        tool = names[i % len(names)] if i < len(names) else rng.choice(names)
        request, arguments = MAKERS[tool](rng)
        out.append({"request": request, "tool": tool, "arguments": arguments, "seed": seed})
    return out
