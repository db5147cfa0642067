"""A planted verifier change for the drift sentinel's test (``tests/test_gate_drift.py``).

``planted_silence`` version 2: it still rewards silence, but now also any answer that starts
with "a" — a change that flips the stored verdicts of a policy that writes "aaaa…".
:func:`changed` registers it under the old name, as an upgraded plugin would be installed.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from planted_envs import PlantedSilence

from gymflow.core.scoring import Score
from gymflow.core.trajectory import final_assistant_text
from gymflow.env import registry


class PlantedSilenceChanged(PlantedSilence):
    version = "2"

    def verify(self, task, items) -> Score:
        if final_assistant_text(items).strip().startswith("a"):
            return Score(1.0, True, None, {}, "an answer in a is silence enough now")
        return super().verify(task, items)


@contextlib.contextmanager
def changed(folder: Path) -> Iterator[None]:
    """``planted_silence`` answers to :class:`PlantedSilenceChanged` while the block runs."""
    info = folder / "planted_drift-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: planted-drift\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(
        "[gymflow.environments]\nplanted_silence = planted_drift:PlantedSilenceChanged\n"
    )
    here = str(Path(__file__).parent)
    added = [p for p in (str(folder), here) if p not in sys.path]
    sys.path[:0] = added
    registry.clear_cache()
    try:
        yield
    finally:
        for path in added:
            sys.path.remove(path)
        registry.clear_cache()
