"""Run an answer against a task's tests in the sandbox: two processes, one verdict.

The answer runs in the *solution process*; the task's tests run in the *test process*; both are
sandboxed (:mod:`gymflow.environments.code.sandbox`, confined by
:mod:`gymflow.environments.code.kernel_layer`) and joined only by two pipes. The tests call
``candidate(...)``, which sends the arguments to the solution process and gets back a plain
value or an exception's name (see ``inside.py``).

The verdict is the test process's, and it reaches the host over a pipe the solution process
never holds (the descriptor exists only in the test process; the host closes its copy), on
lines that carry a per-run nonce the solution process never sees: printing "PASSED", exiting
early, patching builtins or ``check``, writing to its own or another process's stdout cannot
forge it. The guard's refusals reach the host over a second pipe the moment they happen, and a
solution process the seccomp filter killed (``SIGSYS``) is scored ``sandbox_violation``.

Thread- and process-safe: no signals, no ``preexec_fn``, no shared state but cached tier and
kernel-layer probes, so the resources server may run :func:`run_program` on threads or in a
process pool.
"""

from __future__ import annotations

import ast
import functools
import marshal
import os
import secrets
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.environments.code import confine, kernel_layer, sandbox
from gymflow.environments.code.sandbox import Interpreter, Limits

MAX_CODE_CHARS = 100_000
"""A longer answer is not run (``payload_too_large``)."""
MAX_MESSAGE_BYTES = 16 << 20
"""The largest return value (marshalled) the test process accepts from the solution."""
MAX_VERDICT_BYTES = 64 << 10
"""The most the host reads from the verdict and record pipes (a verdict is a few hundred)."""
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


@functools.cache
def _inside_code() -> bytes:
    path = Path(__file__).with_name("inside.py")
    return marshal.dumps(compile(path.read_text(), str(path), "exec"))


@functools.cache
def _confine_code():
    path = Path(confine.__file__)
    return compile(path.read_text(), str(path), "exec")


def run_program(
    program: Program, limits: Limits, isolation: str = "auto", guard: bool = True
) -> Outcome:
    """Run ``program`` in the sandbox; ``guard=False`` leaves out the audit hook (for tests:
    what an answer that switched the hook off meets — the tier and the kernel layer).

    Raises :class:`GymflowError` (``env_unavailable``) when the sandbox itself cannot start or
    the host offers neither bubblewrap nor Landlock (see :func:`kernel_layer.require`), and
    (``schema_violation``) when the task's own test code is broken.
    """
    tier = sandbox.resolve(isolation)
    layer = kernel_layer.require(tier)
    if len(program.code) > MAX_CODE_CHARS:
        return Outcome("payload_too_large", f"{len(program.code)} characters", tier, 0.0)
    interpreter = Interpreter.current()
    argv = [*sandbox.launch_command(tier, interpreter, limits), "-c", sandbox.BOOTSTRAP]
    as_root = os.geteuid() == 0
    preload = as_root and tier != "bwrap" and not interpreter.stdlib_reachable_by_others()
    common = {
        "limits": {k: v for k, v in asdict(limits).items() if k != "wall_s"},
        "preload": PRELOAD if preload else (),
        "confine_code": _confine_code(),
        "entry_point": program.entry_point,
    }
    nonce = secrets.token_hex(16)
    pipes = _Pipes()
    solution_payload = {
        **common,
        "role": "solution",
        "code": program.code,
        "guard": guard,
        "fd_in": pipes.to_solution[0],
        "fd_out": pipes.to_tests[1],
        "record_fd": pipes.record[1],
        "drop_to_uid": sandbox.SANDBOX_UID if as_root else None,
        "confine": layer.plan(write_work_dir=True),
    }
    tests_payload = {
        **common,
        "role": "tests",
        "setup": program.setup,
        "test": program.test,
        "max_message_bytes": MAX_MESSAGE_BYTES,
        "fd_in": pipes.to_tests[0],
        "fd_out": pipes.to_solution[1],
        "verdict_fd": pipes.verdict[1],
        "nonce": nonce,
        "drop_to_uid": sandbox.TESTS_UID if as_root else None,
        "confine": layer.plan(write_work_dir=False),
    }
    work_dir = None if tier == "bwrap" else sandbox.make_work_dir()
    processes: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        with tempfile.TemporaryFile() as solution_log, tempfile.TemporaryFile() as tests_log:
            solution_fds = (pipes.to_solution[0], pipes.to_tests[1], pipes.record[1])
            solution = sandbox.spawn(argv, solution_fds, solution_log, solution_log, work_dir)
            processes.append(solution)
            tests_fds = (pipes.to_tests[0], pipes.to_solution[1], pipes.verdict[1])
            tests = sandbox.spawn(argv, tests_fds, tests_log, tests_log, "/")
            processes.append(tests)
            pipes.close_children_ends()  # EOF must reach the other side; no forged writer here
            _feed(solution, solution_payload)
            try:
                stdin = _inside_code() + marshal.dumps(tests_payload)
                tests.communicate(stdin, timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                detail = f"wall-clock limit of {limits.wall_s:g} s reached"
                return Outcome("timeout", detail, tier, time.monotonic() - started)
            wall_s = time.monotonic() - started
            verdict = _parse_verdict(_drain(pipes.verdict[0]), nonce, tests, tests_log)
            status = _ended(solution)
            records = _drain(pipes.record[0]).decode(errors="replace").split("\n")
            return _outcome(verdict, status, [r for r in records if r], limits, solution_log,
                            tier, wall_s)  # fmt: skip
    finally:
        for process in processes:
            sandbox.kill(process)
        pipes.close()
        sandbox.remove_work_dir(work_dir)


class _Pipes:
    """The run's pipes: calls both ways, the verdict (test process -> host) and the guard's
    records (solution process -> host). The host keeps only the read ends of the last two."""

    def __init__(self) -> None:
        self.to_solution, self.to_tests = os.pipe(), os.pipe()
        self.verdict, self.record = os.pipe(), os.pipe()
        self._open = {*self.to_solution, *self.to_tests, *self.verdict, *self.record}

    def close_children_ends(self) -> None:
        for fd in (*self.to_solution, *self.to_tests, self.verdict[1], self.record[1]):
            self._close(fd)

    def close(self) -> None:
        for fd in list(self._open):
            self._close(fd)

    def _close(self, fd: int) -> None:
        if fd in self._open:
            self._open.discard(fd)
            os.close(fd)


def _drain(fd: int) -> bytes:
    """What is in the pipe now (its writers have ended or been killed), at most the cap."""
    os.set_blocking(fd, False)
    chunks, size = [], 0
    while size < MAX_VERDICT_BYTES:
        try:
            chunk = os.read(fd, MAX_VERDICT_BYTES - size)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _ended(solution: subprocess.Popen) -> int | None:
    """The solution process's exit status (it ends once the tests have), ``None`` if it
    still runs after a grace period (then it is killed in cleanup)."""
    try:
        return solution.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        return None


def _signal_of(status: int | None) -> int | None:
    # A launcher (bwrap, unshare) reports a signal as 128 + its number.
    if status is None:
        return None
    return -status if status < 0 else status - 128 if status > 128 else None


def _outcome(
    verdict: dict, status: int | None, records: list[str], limits: Limits, log, tier: str,
    wall_s: float,
) -> Outcome:  # fmt: skip
    """The run's outcome: a refusal or a seccomp kill first, then the test process's verdict."""
    if _signal_of(status) == signal.SIGSYS:
        detail = "the kernel's seccomp filter killed the solution process (a forbidden system "
        detail += "call: processes, sockets, ptrace, prctl, ...)"
        return Outcome("sandbox_violation", detail, tier, wall_s)
    if records:
        return Outcome("sandbox_violation", "refused: " + "; ".join(records[:5]), tier, wall_s)
    if verdict["verdict"] == "solution_gone":
        return _gone(status, limits, log, tier, wall_s)
    if verdict["verdict"] == "task_error":
        raise GymflowError(FailureKind.SCHEMA_VIOLATION, f"broken task: {verdict['detail']}")
    cpu_s = verdict.get("solution_cpu_s", 0.0) + verdict.get("tests_cpu_s", 0.0)
    return Outcome(verdict["verdict"], verdict["detail"], tier, wall_s, cpu_s)


def _feed(process: subprocess.Popen, payload: dict) -> None:
    """Write the program and its payload, close stdin (a dead process: the other side reports).

    Never blocks for long: the process reads all of stdin first thing.
    """
    try:
        process.stdin.write(_inside_code() + marshal.dumps(payload))
        process.stdin.close()
    except BrokenPipeError:
        pass


def _parse_verdict(raw: bytes, nonce: str, tests: subprocess.Popen, log) -> dict:
    """The test process's verdict from the verdict pipe: every line must carry the nonce."""
    prefix = nonce + " "
    lines = [line[len(prefix) :] for line in raw.decode(errors="replace").splitlines()
             if line.startswith(prefix)]  # fmt: skip
    if not lines or lines[0] != "started":
        raise GymflowError(
            FailureKind.ENV_UNAVAILABLE,
            f"the sandboxed test process did not start (status {tests.returncode}): " + _tail(log),
        )
    try:
        verdict = ast.literal_eval(lines[-1]) if len(lines) > 1 else None
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        verdict = None
    if not isinstance(verdict, dict) or not isinstance(verdict.get("verdict"), str):
        # it died after starting: only the answer's data got in
        return {"verdict": "runtime_error", "detail": f"the test process died: {_tail(log)}"}
    if verdict["verdict"] == "solution_gone" and not verdict.get("solution_started"):
        raise GymflowError(
            FailureKind.ENV_UNAVAILABLE, "the sandboxed solution process did not start"
        )
    return verdict


def _gone(status: int | None, limits: Limits, log, tier: str, wall_s: float) -> Outcome:
    """The solution process ended without answering: a CPU limit, a crash, or an exit."""
    if status is None:  # it closed its pipe but runs on: killed in cleanup
        return Outcome("runtime_error", "the solution process closed its pipe", tier, wall_s)
    if _signal_of(status) in (signal.SIGXCPU, signal.SIGKILL):
        return Outcome("timeout", f"CPU limit of {limits.cpu_s} s reached", tier, wall_s)
    tail = _tail(log)
    detail = f"the solution process ended (status {status}) before answering"
    return Outcome("runtime_error", detail + (f": {tail}" if tail else ""), tier, wall_s)


def _tail(log, size: int = 300) -> str:
    log.flush()
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - size))
    return " ".join(log.read().decode(errors="replace").split())
