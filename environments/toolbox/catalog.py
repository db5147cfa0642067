"""The toolbox's tools: function docs (BFCL's format) and, for each, requests that need it.

A tool is a function doc as the Berkeley Function Calling Leaderboard writes one (``name``,
``description``, ``parameters`` with BFCL's types: ``string integer float boolean array dict``)
and a **maker**: ``rng -> (request sentence, arguments)``, the arguments exactly as the request
states them. Tasks show the docs as JSON-schema tools (``tool_call``'s BFCL importer converts
them) and are scored by BFCL's rules (:mod:`gymflow.environments.tool_call.bfcl`).

``SEEN`` tools appear in every split; ``UNSEEN`` ones only in held-out tasks (the generator
fixes their split), so neither the demonstrations nor GRPO's pool ever show them: a held-out
success there is a schema the policy read, not one it memorized. Half the tools take a nested
argument (an object, or an array of strings or objects).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Oslo", "Lima", "Cairo",
          "Delhi", "Sydney", "Toronto", "Boston", "Denver", "Dublin", "Vienna", "Prague",
          "Seoul", "Lisbon", "Zurich", "Athens", "Miami"]  # fmt: skip
PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
          "nina", "oscar", "peggy", "victor", "wendy", "zoe"]  # fmt: skip
TOPICS = ["budget review", "team lunch", "quarterly report", "release plan", "design notes",
          "hiring plan", "offsite agenda", "server outage", "contract draft", "weekly sync"]  # fmt: skip
ITEMS = ["apples", "coffee beans", "batteries", "notebooks", "green tea", "olive oil",
         "dish soap", "rice", "paper towels", "oat milk"]  # fmt: skip
DISHES = ["pad thai", "margherita pizza", "caesar salad", "ramen", "falafel wrap",
          "chicken curry", "veggie burger", "miso soup"]  # fmt: skip
ARTISTS = ["Nina Simone", "Miles Davis", "Daft Punk", "Radiohead", "Bach", "Aretha Franklin"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD"]

Maker = Callable[[random.Random], tuple[str, dict]]


@dataclass(frozen=True)
class Tool:
    doc: dict
    make: Maker

    @property
    def name(self) -> str:
        return self.doc["name"]


def _doc(name: str, description: str, required: list[str], **props: dict) -> dict:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "dict", "properties": props, "required": required},
    }


def _s(description: str = "", **extra) -> dict:
    return {"type": "string", **({"description": description} if description else {}), **extra}


def _i(description: str = "") -> dict:
    return {"type": "integer", **({"description": description} if description else {})}


def _pick(rng: random.Random, *phrasings: str) -> str:
    return rng.choice(phrasings)


def _email(who: str) -> str:
    return f"{who}@acme.com"


def _weather(rng):
    city, unit = rng.choice(CITIES), rng.choice(["celsius", "fahrenheit"])
    text = _pick(
        rng, "What's the weather in {c} in {u}?", "Tell me the temperature in {c}, in {u}."
    )
    return text.format(c=city, u=unit), {"city": city, "unit": unit}


def _timer(rng):
    minutes = rng.randint(1, 120)
    if rng.random() < 0.5:
        label = rng.choice(["tea", "pasta", "laundry", "break", "oven"])
        return f"Set a {minutes} minute timer called {label}.", {"minutes": minutes, "label": label}
    return _pick(rng, "Set a timer for {m} minutes.", "Start a {m} minute timer.").format(
        m=minutes
    ), {"minutes": minutes}


def _send_email(rng):
    to = rng.sample(PEOPLE, rng.choice([1, 2]))
    topic = rng.choice(TOPICS)
    names = " and ".join(to)
    text = _pick(rng, "Email {n} about the {t}.", "Send {n} an email with the subject {t}.")
    return text.format(n=names, t=topic), {"to": [_email(p) for p in to], "subject": topic}


def _create_event(rng):
    title, day, hour = rng.choice(["standup", "retro", "demo", "workshop"]), rng.choice(DAYS), rng.randint(8, 18)  # fmt: skip
    args = {"title": title, "when": {"day": day, "hour": hour}}
    text = f"Put a {title} in my calendar on {day} at {hour}:00"
    if rng.random() < 0.5:
        guests = rng.sample(PEOPLE, 2)
        args["attendees"] = guests
        text += f" with {guests[0]} and {guests[1]}"
    return text + ".", args


def _convert(rng):
    amount = rng.choice([rng.randint(5, 900), round(rng.uniform(1, 500), 2)])
    src, dst = rng.sample(CURRENCIES, 2)
    text = _pick(rng, "Convert {a} {s} to {d}.", "How much is {a} {s} in {d}?")
    return text.format(a=amount, s=src, d=dst), {
        "amount": float(amount),
        "from_currency": src,
        "to_currency": dst,
    }


def _book_flight(rng):
    origin, destination = rng.sample(CITIES, 2)
    adults, children = rng.randint(1, 4), rng.randint(0, 3)
    text = (
        f"Book a flight from {origin} to {destination} for {adults} adults and {children} children."
    )
    return text, {
        "origin": origin,
        "destination": destination,
        "passengers": {"adults": adults, "children": children},
    }


def _add_to_cart(rng):
    item, quantity = rng.choice(ITEMS), rng.randint(1, 12)
    text = _pick(rng, "Add {q} {i} to my cart.", "Put {q} {i} in the shopping cart.")
    return text.format(q=quantity, i=item), {"item": item, "quantity": quantity}


def _restaurants(rng):
    city = rng.choice(CITIES)
    cuisine, price = rng.choice(["thai", "italian", "indian", "mexican", "japanese"]), rng.choice([20, 30, 50, 80])  # fmt: skip
    text = f"Find {cuisine} restaurants in {city} under {price} dollars a person."
    return text, {"city": city, "filters": {"cuisine": cuisine, "max_price": price}}


def _translate(rng):
    phrase = rng.choice(["good morning", "where is the station", "thank you very much", "see you soon"])  # fmt: skip
    language = rng.choice(["french", "german", "spanish", "japanese", "italian"])
    return f"Translate '{phrase}' into {language}.", {"text": phrase, "target_language": language}


def _ticket(rng):
    title = rng.choice(["login page broken", "slow dashboard", "printer offline", "vpn drops"])
    priority = rng.choice(["low", "medium", "high"])
    tags = rng.sample(["bug", "network", "ui", "urgent", "backend"], 2)
    text = f"Open a {priority} priority ticket titled {title}, tagged {tags[0]} and {tags[1]}."
    return text, {"title": title, "priority": priority, "tags": tags}


def _stock(rng):
    symbol = rng.choice(["AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "SAP"])
    return _pick(rng, "What is {s} trading at?", "Get the stock price of {s}.").format(s=symbol), {
        "symbol": symbol
    }


def _reminder(rng):
    task = rng.choice(["call mom", "water the plants", "pay rent", "book a dentist"])
    hour, minute = rng.randint(6, 21), rng.choice([0, 15, 30, 45])
    text = f"Remind me to {task} at {hour}:{minute:02d}."
    return text, {"text": task, "time": {"hour": hour, "minute": minute}}


def _rent_car(rng):
    city, days = rng.choice(CITIES), rng.randint(1, 14)
    automatic, seat = rng.random() < 0.5, rng.random() < 0.5
    gear = "an automatic" if automatic else "a manual"
    seat_text = "with" if seat else "without"
    text = f"Rent {gear} car in {city} for {days} days, {seat_text} a child seat."
    return text, {"city": city, "days": days,
                  "options": {"automatic": automatic, "child_seat": seat}}  # fmt: skip


def _order_food(rng):
    place = rng.choice(["Luigi's", "Green Bowl", "Spice Route", "Noodle Bar"])
    dishes = rng.sample(DISHES, 2)
    street, floor = (
        rng.choice(["Elm Street 4", "Main Street 12", "Oak Avenue 7"]),
        rng.randint(1, 9),
    )
    text = f"Order {dishes[0]} and {dishes[1]} from {place} to {street}, floor {floor}."
    return text, {"restaurant": place, "items": dishes,
                  "delivery": {"street": street, "floor": floor}}  # fmt: skip


def _play_music(rng):
    artist, shuffle = rng.choice(ARTISTS), rng.random() < 0.5
    text = f"Play some {artist}" + (", shuffled." if shuffle else " in order.")
    return text, {"artist": artist, "shuffle": shuffle}


def _reserve_table(rng):
    place, guests = rng.choice(["Chez Anna", "The Oak Room", "Sakura"]), rng.randint(2, 8)
    day, hour = rng.choice(DAYS), rng.randint(17, 22)
    text = f"Reserve a table for {guests} at {place} on {day} at {hour}:00."
    return text, {"restaurant": place, "guests": guests, "time": {"day": day, "hour": hour}}


def _track_package(rng):
    carrier = rng.choice(["dhl", "ups", "fedex"])
    code = f"{rng.choice('ABCDEFGH')}{rng.randint(100000, 999999)}"
    return f"Where is my {carrier} package {code}?", {"tracking_id": code, "carrier": carrier}


def _schedule_meeting(rng):
    topic, people = rng.choice(TOPICS), rng.sample(PEOPLE, rng.choice([2, 3]))
    minutes = rng.choice([15, 30, 45, 60])
    text = f"Set up a {minutes} minute meeting on the {topic} with {', '.join(people)}."
    return text, {"topic": topic, "participants": [_email(p) for p in people],
                  "duration_minutes": minutes}  # fmt: skip


_DAY = _s("Day of the week.", enum=DAYS)
SEEN = [
    Tool(_doc("get_weather", "Current weather in a city.", ["city"], city=_s(),
              unit=_s(enum=["celsius", "fahrenheit"])), _weather),
    Tool(_doc("set_timer", "Start a countdown timer.", ["minutes"], minutes=_i(),
              label=_s("Optional name.")), _timer),
    Tool(_doc("send_email", "Email colleagues (addresses name@acme.com).", ["to", "subject"],
              to={"type": "array", "items": {"type": "string"}}, subject=_s()), _send_email),
    Tool(_doc("create_event", "Add a calendar event this week.", ["title", "when"], title=_s(),
              when={"type": "dict", "properties": {"day": _DAY, "hour": _i("0-23")},
                    "required": ["day", "hour"]},
              attendees={"type": "array", "items": {"type": "string"},
                         "description": "First names."}), _create_event),
    Tool(_doc("convert_currency", "Convert money between currencies.",
              ["amount", "from_currency", "to_currency"], amount={"type": "float"},
              from_currency=_s("ISO code."), to_currency=_s("ISO code.")), _convert),
    Tool(_doc("book_flight", "Book a flight.", ["origin", "destination", "passengers"],
              origin=_s(), destination=_s(),
              passengers={"type": "dict", "properties": {"adults": _i(), "children": _i()},
                          "required": ["adults", "children"]}), _book_flight),
    Tool(_doc("add_to_cart", "Add an item to the shopping cart.", ["item", "quantity"],
              item=_s(), quantity=_i()), _add_to_cart),
    Tool(_doc("search_restaurants", "Find restaurants in a city.", ["city", "filters"],
              city=_s(), filters={"type": "dict", "properties": {
                  "cuisine": _s(), "max_price": _i("Dollars per person.")},
                  "required": ["cuisine", "max_price"]}), _restaurants),
    Tool(_doc("translate_text", "Translate text.", ["text", "target_language"], text=_s(),
              target_language=_s("Lower-case language name.")), _translate),
    Tool(_doc("create_ticket", "Open a support ticket.", ["title", "priority", "tags"],
              title=_s(), priority=_s(enum=["low", "medium", "high"]),
              tags={"type": "array", "items": {"type": "string"}}), _ticket),
    Tool(_doc("get_stock_price", "Latest price of a stock.", ["symbol"], symbol=_s("Ticker.")),
         _stock),
    Tool(_doc("set_reminder", "Remind the user at a time today.", ["text", "time"], text=_s(),
              time={"type": "dict", "properties": {"hour": _i(), "minute": _i()},
                    "required": ["hour", "minute"]}), _reminder),
]  # fmt: skip
UNSEEN = [
    Tool(_doc("rent_car", "Rent a car.", ["city", "days", "options"], city=_s(), days=_i(),
              options={"type": "dict", "properties": {"automatic": {"type": "boolean"},
                       "child_seat": {"type": "boolean"}},
                       "required": ["automatic", "child_seat"]}), _rent_car),
    Tool(_doc("order_food", "Order food for delivery.", ["restaurant", "items", "delivery"],
              restaurant=_s(), items={"type": "array", "items": {"type": "string"}},
              delivery={"type": "dict", "properties": {"street": _s(), "floor": _i()},
                        "required": ["street", "floor"]}), _order_food),
    Tool(_doc("play_music", "Play an artist's music.", ["artist", "shuffle"], artist=_s(),
              shuffle={"type": "boolean"}), _play_music),
    Tool(_doc("reserve_table", "Reserve a restaurant table.", ["restaurant", "guests", "time"],
              restaurant=_s(), guests=_i(),
              time={"type": "dict", "properties": {"day": _DAY, "hour": _i()},
                    "required": ["day", "hour"]}), _reserve_table),
    Tool(_doc("track_package", "Track a parcel.", ["tracking_id", "carrier"], tracking_id=_s(),
              carrier=_s(enum=["dhl", "ups", "fedex"])), _track_package),
    Tool(_doc("schedule_meeting", "Schedule a meeting (addresses name@acme.com).",
              ["topic", "participants", "duration_minutes"], topic=_s(),
              participants={"type": "array", "items": {"type": "string"}},
              duration_minutes=_i()), _schedule_meeting),
]  # fmt: skip
NESTED = {tool.name for tool in SEEN + UNSEEN
          if any(p["type"] in ("dict", "array") for p in tool.doc["parameters"]["properties"].values())}  # fmt: skip
"""Tools with an object or array argument (a one-call task on one of them is level 1)."""
