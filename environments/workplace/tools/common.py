"""What the workplace tools share: the sandbox's "now", paging, and date parsing.

Tool failures are raised as ``ValueError`` (bad input, with WorkBench's message) or
``LookupError`` (no such record); the resources server turns them into observations with the
kind ``tool_error``, and the verifier's replay treats them the same way (no change).
"""

from __future__ import annotations

from datetime import datetime

NOW = "2023-11-30 23:59:00"
"""WorkBench's "now" (2023-11-30) at the time NeMo Gym's system prompt gives (23:59:00)."""

KEEP_CASE = frozenset({"status", "list_name", "board"})
"""Fields whose values are compared case-sensitively; WorkBench lowercases the rest."""


def paginate(records: list[dict], page: int, page_size: int, noun: str) -> dict:
    """NeMo Gym's paging: the page is clamped into range; ``total_<noun>`` counts all matches."""
    if page_size < 1:
        raise ValueError("page_size must be a positive number.")
    total = len(records)
    total_pages = (total + page_size - 1) // page_size
    page = max(1, min(page, total_pages)) if total_pages else 1
    start = (page - 1) * page_size
    return {
        noun: records[start : start + page_size],
        "pagination": {
            f"total_{noun}": total,
            "page": page,
            "page_size": page_size,
            "total_pages": total_pages,
        },
    }


def parse_time(value: str, name: str) -> datetime:
    """An ISO date or date-time (``YYYY-MM-DD`` or ``YYYY-MM-DD HH:MM:SS``)."""
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"Invalid {name} format. Expected YYYY-MM-DD HH:MM:SS.") from None


def contains(haystack: str, needle: str) -> bool:
    """Case-insensitive substring test (WorkBench used pandas ``str.contains``, a regex; a
    plain substring gives the same answer for every query without regex characters)."""
    return needle.lower() in haystack.lower()


def require(*values: str, message: str) -> None:
    """WorkBench's "not provided" check: every value must be non-empty."""
    if not all(values):
        raise ValueError(message)
