"""Progress of long jobs for the person watching: a live bar, plain lines, or nothing.

The command line picks the mode with :func:`configure`: a bar when stdout is a terminal, plain
lines when it is not (a CI log, a file: one line at least every ``GYMFLOW_PROGRESS_EVERY``
seconds, 10 by default, while a job runs), nothing with ``--quiet``. The mode is the
environment variable ``GYMFLOW_PROGRESS``, so processes a command starts report the same way;
without it (library calls, tests, a Prefect worker) nothing is printed.

A job reports through a :class:`Tracker` (``with track("sft", total=300, unit="step") as t:
t.update(12, loss=0.4)``), which knows its rate and so its ETA, and with a time budget the time
left of it. Trackers nest per thread (a stage, then its trainer): :func:`show` sets figures on
the innermost one (GRPO's reward and zero-variance share come from its rollout batch), and
:func:`episodes_planned` / :func:`episode_done` count the episodes of the innermost tracker that
counts episodes (the evaluation and gate stages; the episode driver calls them).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

MODE_VAR = "GYMFLOW_PROGRESS"
EVERY_VAR = "GYMFLOW_PROGRESS_EVERY"
MODES = ("bar", "lines", "quiet")

_local = threading.local()
_lock = threading.RLock()
_open: list[Tracker] = []  # every open tracker, all threads, oldest first
_state = {"last_line": 0.0, "started": time.monotonic(), "heartbeat": False, "bar": None}


def configure(quiet: bool = False) -> str:
    """Set the mode for this process and those it starts: ``quiet``, else a bar on a terminal
    and lines elsewhere. An explicit ``GYMFLOW_PROGRESS`` (``bar``/``lines``) is kept."""
    if quiet:
        chosen = "quiet"
    elif os.environ.get(MODE_VAR) in ("bar", "lines"):
        chosen = os.environ[MODE_VAR]
    else:
        chosen = "bar" if sys.stdout.isatty() else "lines"
    os.environ[MODE_VAR] = chosen
    _state["started"] = time.monotonic()
    return chosen


def mode() -> str:
    """``bar``, ``lines``, ``quiet``, or ``off`` (no command line asked for progress)."""
    value = os.environ.get(MODE_VAR, "off")
    return value if value in MODES else "off"


def every_s() -> float:
    try:
        return max(0.5, float(os.environ.get(EVERY_VAR, "10")))
    except ValueError:
        return 10.0


def clock(seconds: float) -> str:
    """``1:05`` or ``1:02:03``."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def note(text: str) -> None:
    """A line for the person (a stage started or ended), printed in ``bar`` and ``lines``."""
    current = mode()
    if current == "lines" or (current == "bar" and _state["bar"] is None):
        _print_line(text)
    elif current == "bar":
        _state["bar"].console.print(_stamped(text), markup=False, highlight=False)


class Tracker:
    """One job: ``done`` of ``total`` units (``None``: open-ended), figures, rate and ETA.

    ``budget_s`` with ``used_s()`` (seconds of it spent, earlier attempts included): the time
    left of the budget is shown and the ETA is never past it.
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        unit: str = "step",
        budget_s: float | None = None,
        used_s: Callable[[], float] | None = None,
        counts_episodes: bool = False,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.budget_s, self.counts_episodes = budget_s, counts_episodes
        self.opened = time.monotonic()
        self.used_s = used_s or (lambda: time.monotonic() - self.opened)
        self.done = 0
        self.fields: dict[str, object] = {}
        self._base: tuple[float, int] | None = None  # (time, done) at the first update
        self._bar_task = None

    def update(self, done: int | None = None, advance: int = 0, **fields: object) -> None:
        """Set ``done`` (or add ``advance``) and figures; maybe print (see the module doc)."""
        with _lock:
            self.done = (self.done if done is None else done) + advance
            if self._base is None:
                self._base = (time.monotonic(), self.done)
            self.fields.update(fields)
        _report(self)

    def eta_s(self) -> float | None:
        """Seconds to ``total`` at the rate since the first update, capped by the budget."""
        left = self.budget_left_s()
        if self.total is None or self._base is None:
            return left
        spent, moved = time.monotonic() - self._base[0], self.done - self._base[1]
        if moved <= 0 or spent <= 0:
            return left
        eta = max(0, self.total - self.done) * spent / moved
        return eta if left is None else min(eta, left)

    def budget_left_s(self) -> float | None:
        return None if self.budget_s is None else max(0.0, self.budget_s - self.used_s())

    def status(self) -> str:
        """``grpo: step 12/250 · reward 0.53 · zero-variance 20% · eta 4:10 · budget left 3:55``."""
        if self.total is not None:
            parts = [f"{self.unit} {self.done}/{self.total}"]
        elif self.done:
            parts = [f"{self.done} {self.unit}s"]
        else:
            parts = [f"running {clock(time.monotonic() - self.opened)}"]
        parts += self.figures()
        eta = self.eta_s()
        if eta is not None and (self.total is not None or self.budget_s is not None):
            parts.append(f"eta {clock(eta)}")
        left = self.budget_left_s()
        if left is not None:
            parts.append(f"budget left {clock(left)}")
        return f"{self.label}: " + " · ".join(parts)

    def figures(self) -> list[str]:
        """The figures set by updates, as shown: ``["reward 0.53", "zero-variance 20%"]``."""
        return [f"{_name(name)} {_figure(name, v)}" for name, v in self.fields.items()]

    def close(self, outcome: str | None = None) -> None:
        """Forget the tracker; print ``outcome`` (e.g. ``done in 12.0 s``) if given."""
        with _lock:
            if self in _open:
                _open.remove(self)
            stack = _stack()
            if self in stack:
                del stack[stack.index(self) :]
            if self._bar_task is not None:
                _bar().remove_task(self._bar_task)
                self._bar_task = None
                if not _open:
                    _stop_bar()
        if outcome:
            note(f"{self.label}: {outcome}")


def open_tracker(label: str, total: int | None = None, unit: str = "step", **kw) -> Tracker:
    """A new innermost tracker of this thread (close it with :meth:`Tracker.close`)."""
    tracker = Tracker(label, total, unit, **kw)
    if mode() in ("bar", "lines"):
        with _lock:
            _open.append(tracker)
            _stack().append(tracker)
        _start_heartbeat()
        _report(tracker)
    return tracker


@contextlib.contextmanager
def track(label: str, total: int | None = None, unit: str = "step", **kw) -> Iterator[Tracker]:
    tracker = open_tracker(label, total, unit, **kw)
    try:
        yield tracker
    finally:
        tracker.close()


def close_all() -> None:
    """Forget every open tracker, in every thread, and stop the bar (a command's last word)."""
    with _lock:
        for tracker in list(_open):
            tracker.close()
        _stop_bar()


def silence() -> None:
    """Print nothing more, in this process and those it starts (an interrupted command)."""
    os.environ[MODE_VAR] = "quiet"
    close_all()


def innermost() -> Tracker | None:
    stack = _stack()
    return stack[-1] if stack else None


def find(label: str) -> Tracker | None:
    """This thread's innermost open tracker called ``label``."""
    return next((t for t in reversed(_stack()) if t.label == label), None)


def find_open(label: str) -> Tracker | None:
    """The newest open tracker called ``label``, in any thread."""
    with _lock:
        return next((t for t in reversed(_open) if t.label == label), None)


def show(**fields: object) -> None:
    """Set figures on this thread's innermost tracker (no-op when there is none)."""
    if (tracker := innermost()) is not None:
        tracker.update(**fields)


def episodes_planned(n: int) -> None:
    """``n`` more episodes will run: the innermost episode-counting tracker's total grows."""
    if (tracker := _episode_tracker()) is not None:
        with _lock:
            tracker.total = (tracker.total or 0) + n
        _report(tracker)


def episode_done(n: int = 1) -> None:
    if (tracker := _episode_tracker()) is not None:
        tracker.update(advance=n)


def _episode_tracker() -> Tracker | None:
    return next((t for t in reversed(_stack()) if t.counts_episodes), None)


def _stack() -> list[Tracker]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def _name(name: str) -> str:
    """``zero_variance_share`` -> ``zero-variance`` (a share is shown as a percentage)."""
    return name.removesuffix("_share").replace("_", "-")


def _figure(name: str, value: object) -> str:
    if isinstance(value, float):
        return f"{100 * value:.0f}%" if name.endswith("share") else f"{value:.3g}"
    return str(value)


def _stamped(text: str) -> str:
    """``text`` after the time since the command started, ``[   1:05] …``."""
    return f"[{clock(time.monotonic() - _state['started']):>7}] {text}"


def _print_line(text: str) -> None:
    with _lock:
        sys.stdout.write(_stamped(text) + "\n")
        sys.stdout.flush()
        _state["last_line"] = time.monotonic()


def _report(tracker: Tracker) -> None:
    """Lines: print when nothing was printed for :func:`every_s`. Bar: refresh its row."""
    current = mode()
    if current == "lines":
        if time.monotonic() - _state["last_line"] >= every_s():
            _print_line(tracker.status())
    elif current == "bar" and tracker in _open:
        with _lock:
            bar = _bar()
            if tracker._bar_task is None:
                tracker._bar_task = bar.add_task(tracker.label, total=tracker.total, info="")
            info = tracker.status().removeprefix(f"{tracker.label}: ")
            bar.update(tracker._bar_task, completed=tracker.done, total=tracker.total, info=info)


def _start_heartbeat() -> None:
    """Lines only: a daemon thread prints the newest open tracker when all went quiet."""
    with _lock:
        if _state["heartbeat"] or mode() != "lines":
            return
        _state["heartbeat"] = True

    def beat() -> None:
        while True:
            time.sleep(0.5)
            with _lock:
                newest = _open[-1] if _open else None
                quiet_for = time.monotonic() - _state["last_line"]
            if newest is not None and quiet_for >= every_s():
                _print_line(newest.status())

    threading.Thread(target=beat, name="gymflow-progress", daemon=True).start()


def _bar():
    """The process's one rich progress display (stdout), started on first use."""
    if _state["bar"] is None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

        bar = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
            TextColumn("{task.fields[info]}"), console=Console(), transient=True,
        )  # fmt: skip
        bar.start()
        _state["bar"] = bar
    return _state["bar"]


def _stop_bar() -> None:
    if _state["bar"] is not None:
        _state["bar"].stop()
        _state["bar"] = None
