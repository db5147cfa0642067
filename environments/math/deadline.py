"""Stop a pure-Python computation after a CPU-time budget, in any thread, without signals.

math-verify's own timeouts use ``signal.alarm``: main thread only, and they would cancel
pytest-timeout's alarm. sympy's ``simplify`` can take minutes on a short answer
(``(1+\\sqrt{2}+\\sqrt{3}+\\sqrt{5}+\\sqrt{7})^{64}`` takes ~160 s) and an answer's size does not
predict its cost, so the equivalence check needs a real bound. A process per check would cost
more than the check; instead the call runs in the calling thread and a watchdog thread raises
:class:`DeadlineExceeded` in it once (CPython's ``PyThreadState_SetAsyncExc``, the mechanism
of ``stopit`` and ``func_timeout``, neither of them maintained) when the thread has used
``cpu_s`` seconds of **its own CPU time**, so a busy machine does not change the outcome.

Limits of that mechanism, and how they are met:

* the exception arrives between bytecodes: one long C call (a huge big-integer power) is not
  cut short, so :mod:`gymflow.environments.math.equivalence` refuses those before calling;
* it derives from ``BaseException`` so the ``except Exception`` blocks of math-verify and
  sympy do not swallow it (sympy 1.14 and math-verify 0.9.0 have no bare ``except:``);
* it is raised at most once, and a raise still pending when the call returns is cleared, so
  it never escapes into the caller's later code (see :func:`call_with_cpu_limit`).
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.01
_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_CLEAR = ctypes.py_object()  # NULL: clears a pending asynchronous exception


class DeadlineExceeded(BaseException):  # noqa: N818 (a signal to stop, not an error type)
    """Raised inside the call that ran out of CPU time."""


def call_with_cpu_limit(fn: Callable[[], T], cpu_s: float) -> T:
    """``fn()``, or raise :class:`DeadlineExceeded` once this thread has spent ``cpu_s``.

    The watchdog raises only while ``armed`` and disarms itself when it does, both under
    ``lock``; the caller disarms under the same lock when ``fn`` returns and then clears a
    raise that may still be pending. A raise that lands after ``fn`` returned (in that
    narrow window) is reported as a timeout, which is what it nearly was.
    """
    target = threading.get_ident()
    clock = _cpu_clock(target)
    start = clock()
    lock = threading.Lock()
    armed = [True]
    finished = threading.Event()

    def watch() -> None:
        while not finished.wait(POLL_S):
            try:
                spent = clock() - start
            except OSError:  # the thread ended between the wait and the read: nothing to stop
                return
            if spent > cpu_s:
                with lock:
                    if armed[0]:
                        armed[0] = False
                        _set_async_exc(target, ctypes.py_object(DeadlineExceeded))
                return

    threading.Thread(target=watch, name="cpu-deadline", daemon=True).start()
    try:
        try:
            return fn()
        finally:
            with lock:
                armed[0] = False
            finished.set()
            _set_async_exc(target, _CLEAR)
    except DeadlineExceeded:
        raise DeadlineExceeded(f"over {cpu_s} s of CPU time") from None


def _cpu_clock(thread_id: int) -> Callable[[], float]:
    """The CPU-time clock of ``thread_id`` (Linux, BSD, macOS), else the wall clock."""
    try:
        clock_id = time.pthread_getcpuclockid(thread_id)
        time.clock_gettime(clock_id)
    except (AttributeError, OSError):  # no per-thread CPU clocks on this platform
        return time.monotonic
    return lambda: time.clock_gettime(clock_id)
