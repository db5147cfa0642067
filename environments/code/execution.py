"""Run an answer against a task's tests in the sandbox: two processes, one verdict.

The answer runs in the *solution process*; the task's tests run in the *test process*; both are
sandboxed (:mod:`gymflow.environments.code.sandbox`) and joined only by two pipes. The tests
call ``candidate(...)``, which sends the arguments to the solution process and gets back a plain
value or an exception's name (see ``inside.py``). The verdict is the test process's; nothing the
answer prints, patches or exits with can forge it.

Thread- and process-safe: no signals, no ``preexec_fn``, no shared state but a cached tier
choice, so the resources server may run :func:`run_program` on threads or in a process pool.
"""

from __future__ import annotations

import ast
import functools
import marshal
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.environments.code import sandbox
from gymflow.environments.code.sandbox import Interpreter, Limits

MAX_CODE_CHARS = 100_000
"""A longer answer is not run (``payload_too_large``)."""
MAX_MESSAGE_BYTES = 16 << 20
"""The largest return value (marshalled) the test process accepts from the solution."""
# fmt: off
PRELOAD = (
    "math", "cmath", "re", "string", "collections", "itertools", "functools", "operator",
    "heapq", "bisect", "copy", "random", "statistics", "fractions", "decimal", "numbers",
    "hashlib", "typing", "dataclasses", "enum", "datetime", "calendar", "json", "array",
    "struct", "textwrap", "unicodedata",
)
"""Modules imported before root gives up its uid, when the stdlib is not reachable after that
(an interpreter under ``/root``, without bubblewrap): the answer and the tests may use these."""
# fmt: on


@dataclass(frozen=True)
class Program:
    """What to run: the assembled answer, and the task's trusted code that tests it."""

    code: str
    """The answer as a module (the task's prompt and the completion, assembled)."""
    setup: str
    """Trusted code the tests need (the task's prompt: imports, helpers)."""
    test: str
    """Trusted test code defining ``check(candidate)``."""
    entry_point: str


@dataclass(frozen=True)
class Outcome:
    """How a run ended: ``passed`` or the failure kind, a line for a person, and its cost."""

    verdict: str
    detail: str
    isolation: str
    wall_s: float
    cpu_s: float = 0.0
    """CPU of both sandboxed interpreters as they report it (start-up included; known only
    for runs that reached the end of the tests)."""


BOOTSTRAP = "import marshal, sys; exec(marshal.load(sys.stdin.buffer))"
"""The ``-c`` program: run the compiled ``inside.py`` that comes first on stdin (compiling
its source in every sandbox would cost each interpreter ~9 ms of CPU)."""


@functools.cache
def _inside_code() -> bytes:
    path = Path(__file__).with_name("inside.py")
    return marshal.dumps(compile(path.read_text(), str(path), "exec"))


def run_program(
    program: Program, limits: Limits, isolation: str = "auto", guard: bool = True
) -> Outcome:
    """Run ``program`` in the sandbox; ``guard=False`` leaves out the audit hook (for tests).

    Raises :class:`GymflowError` (``env_unavailable``) when the sandbox itself cannot start,
    and (``schema_violation``) when the task's own test code is broken.
    """
    tier = sandbox.resolve(isolation)
    if len(program.code) > MAX_CODE_CHARS:
        return Outcome("payload_too_large", f"{len(program.code)} characters", tier, 0.0)
    interpreter = Interpreter.current()
    argv = [*sandbox.launch_command(tier, interpreter, limits), "-c", BOOTSTRAP]
    as_root = os.geteuid() == 0
    preload = as_root and tier != "bwrap" and not interpreter.stdlib_reachable_by_others()
    limits_inside = {k: v for k, v in asdict(limits).items() if k != "wall_s"}
    to_solution_r, to_solution_w = os.pipe()
    to_tests_r, to_tests_w = os.pipe()
    solution_payload = {
        "role": "solution",
        "code": program.code,
        "entry_point": program.entry_point,
        "guard": guard,
        "fd_in": to_solution_r,
        "fd_out": to_tests_w,
        "limits": limits_inside,
        "drop_to_uid": sandbox.SANDBOX_UID if as_root else None,
        "preload": PRELOAD if preload else (),
    }
    tests_payload = {
        "role": "tests",
        "setup": program.setup,
        "test": program.test,
        "entry_point": program.entry_point,
        "max_message_bytes": MAX_MESSAGE_BYTES,
        "fd_in": to_tests_r,
        "fd_out": to_solution_w,
        "limits": limits_inside,
        "drop_to_uid": sandbox.TESTS_UID if as_root else None,
        "preload": PRELOAD if preload else (),
    }
    own_fds = [to_solution_r, to_solution_w, to_tests_r, to_tests_w]
    work_dir = None if tier == "bwrap" else sandbox.make_work_dir()
    processes: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        with tempfile.TemporaryFile() as solution_log, tempfile.TemporaryFile() as tests_log:
            solution = sandbox.spawn(
                argv, (to_solution_r, to_tests_w), solution_log, solution_log, work_dir
            )
            processes.append(solution)
            tests = sandbox.spawn(
                argv, (to_tests_r, to_solution_w), subprocess.PIPE, tests_log, "/"
            )
            processes.append(tests)
            for fd in own_fds:  # the children hold them now; EOF must reach the other side
                os.close(fd)
            own_fds.clear()
            _feed(solution, solution_payload)
            try:
                stdin = _inside_code() + marshal.dumps(tests_payload)
                out, _ = tests.communicate(stdin, timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                detail = f"wall-clock limit of {limits.wall_s:g} s reached"
                return Outcome("timeout", detail, tier, time.monotonic() - started)
            wall_s = time.monotonic() - started
            verdict = _parse_verdict(out, tests, tests_log)
            if verdict["verdict"] == "solution_gone":
                return _gone(solution, limits, solution_log, tier, wall_s)
            if verdict["verdict"] == "task_error":
                raise GymflowError(
                    FailureKind.SCHEMA_VIOLATION, f"broken task: {verdict['detail']}"
                )
            cpu_s = verdict.get("solution_cpu_s", 0.0) + verdict.get("tests_cpu_s", 0.0)
            return Outcome(verdict["verdict"], verdict["detail"], tier, wall_s, cpu_s)
    finally:
        for process in processes:
            sandbox.kill(process)
        for fd in own_fds:
            os.close(fd)
        sandbox.remove_work_dir(work_dir)


def _feed(process: subprocess.Popen, payload: dict) -> None:
    """Write the program and its payload, close stdin (a dead process: the other side reports).

    Never blocks for long: the process reads all of stdin first thing.
    """
    try:
        process.stdin.write(_inside_code() + marshal.dumps(payload))
        process.stdin.close()
    except BrokenPipeError:
        pass


def _parse_verdict(out: bytes, tests: subprocess.Popen, log) -> dict:
    lines = out.decode(errors="replace").splitlines()
    if not lines or lines[0] != "started":
        raise GymflowError(
            FailureKind.ENV_UNAVAILABLE,
            f"the sandboxed test process did not start (status {tests.returncode}): " + _tail(log),
        )
    try:
        verdict = ast.literal_eval(lines[-1]) if len(lines) > 1 else None
    except (ValueError, SyntaxError, RecursionError):
        verdict = None
    if not isinstance(verdict, dict):  # it died after starting: only the answer's data got in
        return {"verdict": "runtime_error", "detail": f"the test process died: {_tail(log)}"}
    if verdict["verdict"] == "solution_gone" and not verdict["solution_started"]:
        raise GymflowError(
            FailureKind.ENV_UNAVAILABLE, "the sandboxed solution process did not start"
        )
    return verdict


def _gone(solution: subprocess.Popen, limits: Limits, log, tier: str, wall_s: float) -> Outcome:
    """The solution process ended without answering: a CPU limit, a crash, or an exit."""
    try:
        status = solution.wait(timeout=2.0)
    except subprocess.TimeoutExpired:  # it closed its pipe but runs on: killed in cleanup
        return Outcome("runtime_error", "the solution process closed its pipe", tier, wall_s)
    # A launcher (bwrap, unshare) reports a signal as 128 + its number.
    sig = -status if status < 0 else status - 128 if status > 128 else None
    if sig in (signal.SIGXCPU, signal.SIGKILL):
        return Outcome("timeout", f"CPU limit of {limits.cpu_s} s reached", tier, wall_s)
    tail = _tail(log)
    detail = f"the solution process ended (status {status}) before answering"
    return Outcome("runtime_error", detail + (f": {tail}" if tail else ""), tier, wall_s)


def _tail(log, size: int = 300) -> str:
    log.flush()
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - size))
    return " ".join(log.read().decode(errors="replace").split())
