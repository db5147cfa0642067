"""The collector's progress bar: rollouts done of planned, with rollouts/s and tokens/s."""

from __future__ import annotations

import sys


class RolloutProgress:
    """A rich progress bar on stderr with rollouts/s and tokens/s; silent off a terminal."""

    def __init__(self, total: int, done: int, enabled: bool | None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total, self.done, self.new = total, done, 0

    def __enter__(self) -> RolloutProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(
                TextColumn("rollouts"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"), console=Console(stderr=True),
            )  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task("collect", total=self.total, completed=self.done, rate="")
        return self

    def advance(self, n: int, tokens: int, elapsed: float) -> None:
        self.done, self.new = self.done + n, self.new + n
        if self.enabled and elapsed > 0:
            rate = f"{self.new / elapsed:.1f} rollouts/s  {tokens / elapsed:.0f} tokens/s"
            self.bar.update(self.task, completed=self.done, rate=rate)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.stop()
