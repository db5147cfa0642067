"""How every benchmark ends: print its one JSON object, and write it to ``--out`` if asked."""

from __future__ import annotations

import json
from pathlib import Path


def emit(result: dict, out: Path | None, compact: bool = False) -> None:
    """Print ``result`` as JSON (one line if ``compact``); also write it to ``out``."""
    text = json.dumps(result, indent=None if compact else 2)
    print(text)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
