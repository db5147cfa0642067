"""The tools of the tool_call environment: typed functions whose signatures are the schemas.

Each returns a deterministic simulated observation; the environment is scored on the call the
model makes, not on what the tool returns, so the tools only need to be plausible and safe.
"""

from __future__ import annotations

import hashlib
from typing import Literal

ALLOWED_EMAIL_DOMAIN = "acme.com"
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SEK")
Day = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _pseudo(*parts: object, mod: int) -> int:
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % mod


def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> dict:
    """Get the current weather for a city.

    Args:
        city: City name, e.g. "Paris".
        unit: Temperature unit.
    """
    temp_c = _pseudo(city, mod=40) - 5
    temp = temp_c if unit == "celsius" else round(temp_c * 9 / 5 + 32)
    return {"city": city, "temperature": temp, "unit": unit}


def set_timer(minutes: int) -> dict:
    """Start a countdown timer.

    Args:
        minutes: Duration in whole minutes (1 to 600).
    """
    if not 1 <= minutes <= 600:
        raise ValueError("minutes must be between 1 and 600")
    return {"timer_set": True, "minutes": minutes}


def send_email(to: str, subject: str) -> dict:
    """Send an email to a colleague.

    Args:
        to: Recipient address; only @acme.com addresses are allowed.
        subject: Subject line.
    """
    if not is_allowed_recipient(to):
        raise ValueError(f"recipient {to!r} is outside {ALLOWED_EMAIL_DOMAIN}")
    return {"sent": True, "to": to, "subject": subject}


def create_event(title: str, day: Day, hour: int) -> dict:
    """Create a calendar event this week.

    Args:
        title: Event title.
        day: Day of the week.
        hour: Start hour on a 24-hour clock (0 to 23).
    """
    if not 0 <= hour <= 23:
        raise ValueError("hour must be between 0 and 23")
    return {"created": True, "title": title, "day": day, "hour": hour}


def convert_currency(amount: int, from_currency: str, to_currency: str) -> dict:
    """Convert an amount of money between currencies.

    Args:
        amount: Whole amount in the source currency.
        from_currency: Three-letter source currency code, e.g. "USD".
        to_currency: Three-letter target currency code.
    """
    for code in (from_currency, to_currency):
        if code not in CURRENCIES:
            raise ValueError(f"unknown currency {code!r}")
    rate = (_pseudo(from_currency, to_currency, mod=190) + 10) / 100
    return {"amount": amount, "converted": round(amount * rate, 2), "currency": to_currency}


def is_allowed_recipient(address: str) -> bool:
    """True when ``address`` is a plain address in the allowed domain."""
    local, sep, domain = address.partition("@")
    return bool(local) and sep == "@" and domain == ALLOWED_EMAIL_DOMAIN and "@" not in local


TOOLS = (get_weather, set_timer, send_email, create_event, convert_currency)
