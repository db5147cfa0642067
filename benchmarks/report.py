"""How every benchmark ends: print its one JSON object, and write it to ``--out`` if asked."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from gymflow.core.machine import machine_info


def emit(result: dict, out: Path | None, compact: bool = False) -> None:
    """Print ``result`` as JSON (one line if ``compact``); also write it to ``out``. The
    machine it ran on (:func:`gymflow.core.machine.machine_info`) is added as ``host``."""
    result = result | {"host": result.get("host") or machine_info()}
    text = json.dumps(result, indent=None if compact else 2)
    print(text)
    if out:
        out.write_text(text + "\n", encoding="utf-8")


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """The options every benchmark takes: ``--json`` (one line) and ``--out FILE``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    parser.add_argument("--json", action="store_true", help="print the JSON object on one line")
    parser.add_argument("--out", type=Path, help="also write the JSON object here")
    return parser


def machine(load_before: tuple[float, ...]) -> dict:
    """Where and when a benchmark ran: cores, load average before and after, date."""
    return {
        "machine": f"{os.cpu_count()} CPU cores (shared)",
        "load_average_1_5_15_before": [round(x, 2) for x in load_before],
        "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d"),
    }
