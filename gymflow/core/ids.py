"""Run ids: sortable by start time, unique enough for one project's runs."""

from __future__ import annotations

import secrets
import time


def new_run_id() -> str:
    """``YYYYMMDD-HHMMSS-xxxx``: the start time, then 4 random hex digits."""
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
