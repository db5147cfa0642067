"""The two programs that run inside the sandbox: the solution process and the test process.

This file is never imported by gymflow. :mod:`gymflow.environments.code.execution` compiles it and
writes the code object to the stdin of a bare interpreter (``python -I -S``) inside the
sandbox, where the project is not visible, so it uses the standard library only (and nothing
slow to import: no ``json``, no ``re``). A marshalled dict follows on stdin; its ``role``
picks the program. Both programs first drop root (to their own uid), set hard rlimits and
confine themselves with Landlock and seccomp (``confine.py``, sent compiled in the payload),
all before any task or answer code runs; a confinement the kernel refuses ends the process
(status 70) rather than run unconfined.

* ``solution`` (untrusted): installs the audit-hook guard, runs the answer, then serves calls —
  each request from the test process is ``(args, kwargs)`` for the entry point, each reply the
  return value or the exception's name and message. Only marshal-able values cross (plain
  data: numbers, strings, bytes, tuples, lists, dicts, sets), so an object that claims to equal
  anything never reaches a test. Every refusal of the guard is also written at once to a
  *record* pipe whose other end the host holds: a refusal cannot be taken back.
* ``tests`` (trusted task code): runs the task's prompt code and ``check`` in its own process
  and calls the candidate through a proxy. The verdict goes to the host over a *verdict* pipe
  that only this process holds (the solution process never has that descriptor), each line
  prefixed with a per-run nonce the solution process never sees. Its stdout is a log.

Frames are 4-byte big-endian lengths followed by marshal data. Marshal (not pickle) because it
builds only plain values; a crafted frame could at worst crash the (sandboxed) test process,
which scores 0.
"""

import builtins
import marshal
import os
import resource
import sys

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# fmt: off
_DENIED_MODULES = frozenset({
    "ctypes", "_ctypes", "cffi", "_posixsubprocess", "subprocess", "multiprocessing",
    "_multiprocessing", "socket", "_socket", "ssl", "_ssl", "pty",
})
_DENIED_EVENTS = frozenset({
    "os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.kill",
    "os.killpg", "os.chroot", "subprocess.Popen", "pty.spawn", "code.__new__",
    "resource.setrlimit", "resource.prlimit", "signal.pthread_kill",
    # ways to reach or change the guard itself (the gc walk, a swapped __code__, a tracer)
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile",
    "sys.addaudithook", "sys._current_frames",
})
_DENIED_PREFIXES = ("socket.", "ctypes.", "shutil.", "webbrowser.", "urllib.", "http.")
_READ_PATH_EVENTS = frozenset({"os.listdir", "os.scandir", "os.listxattr", "os.getxattr"})
_WRITE_PATH_EVENTS = frozenset({
    "os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.chmod", "os.chown", "os.link",
    "os.symlink", "os.truncate", "os.utime", "os.chflags", "os.lchflags", "os.setxattr",
    "os.removexattr",
})
# fmt: on
_PLAIN = (type(None), bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset)


# --- set-up shared by both programs -----------------------------------------------------------


def _read_payload() -> dict:
    data = sys.stdin.buffer.read()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return marshal.loads(data)


def _drop_root(uid, preload) -> None:
    """As root: import what must load before losing access to the stdlib, then become ``uid``."""
    if uid is None or os.geteuid() != 0:
        return
    for name in preload:
        __import__(name)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _set_limits(limits: dict) -> None:
    """Hard limits (soft = hard), so the code cannot raise them again."""
    mb = 1 << 20
    cpu = limits["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL
    for kind, value in (
        (resource.RLIMIT_AS, limits["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, limits["file_mb"] * mb),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_NPROC, 0),  # no fork, no thread: counted per user, checked on clone
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(kind, (value, value))


def _send(fd: int, message) -> None:
    data = marshal.dumps(message)
    view = memoryview(len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(fd, view) :]


def _recv(fd: int, limit: int):
    """The next message, or ``None`` at end of stream; ``ValueError`` if malformed or too big."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    size = int.from_bytes(head, "big")
    if size > limit:
        raise ValueError(f"a message of {size} bytes (limit {limit})")
    body = _read_exact(fd, size)
    if body is None:
        return None
    try:
        return marshal.loads(body)
    except (EOFError, ValueError, TypeError) as exc:
        raise ValueError(f"a malformed message ({exc})") from None


def _read_exact(fd: int, size: int):
    chunks, got = [], 0
    while got < size:
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:300]
    except BaseException:  # a user exception whose __str__ fails
        return "?"


def _module(name: str) -> dict:
    """A fresh module's namespace, registered (``dataclasses`` looks classes' modules up)."""
    module = type(sys)(name)
    sys.modules[name] = module
    return module.__dict__


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _describe(exc: BaseException) -> str:
    text = _message(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- the guard (solution process) -------------------------------------------------------------


def _install_guard(work_dir: str, violations: list, record_fd: int) -> None:
    """An audit hook that refuses processes, sockets, foreign modules and files outside bounds.

    Reads are allowed under the stdlib and the work dir, writes under the work dir only. Every
    refusal is recorded — written at once to ``record_fd`` (the host reads it), and reported to
    the test process, which then fails the answer — even when the code catches the
    ``PermissionError``. It also refuses the known ways to reach the hook (walking ``gc``,
    swapping a ``__code__``, tracers, more hooks), and everything it uses is bound here, not
    looked up in globals or builtins the answer could patch. It is still defence in depth, in
    the answer's own interpreter: Landlock and seccomp (``confine.py``) are the boundary.
    """
    realpath, sep, fsdecode, write = os.path.realpath, os.sep, os.fsdecode, os.write
    str_, bytes_, int_, type_, len_, any_ = str, bytes, int, type, len, any
    denied_modules, denied_events, denied_prefixes = (
        _DENIED_MODULES,
        _DENIED_EVENTS,
        _DENIED_PREFIXES,
    )
    read_events, write_events, write_flags = _READ_PATH_EVENTS, _WRITE_PATH_EVENTS, _WRITE_FLAGS
    refused = PermissionError
    work = realpath(work_dir)
    readable = (work, *(realpath(p) for p in sys.path if p), "/dev/null", "/dev/urandom")
    writable = (work, "/dev/null")

    def allowed(path, roots) -> bool:
        if type_(path) is bytes_:
            path = fsdecode(path)
        if type_(path) is not str_:  # a PathLike could answer differently the second time
            return False
        real = realpath(path)
        return any_(real == root or real.startswith(root + sep) for root in roots)

    def refuse(event: str, what) -> None:
        if type_(what) not in (str_, bytes_, int_):  # never run the answer's __repr__ here
            what = type_(what).__name__
        record = f"{event} {what!r}"[:200]
        if len_(violations) < 20:
            violations.append(record)
            try:  # noqa: SIM105 (no contextlib in the hook: it is looked up at each call)
                write(record_fd, (record + "\n").encode())
            except OSError:  # the answer closed it: the refusal still stands
                pass
        raise refused(f"blocked by the sandbox: {event}")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, flags = args[0], args[2] or 0
            if type_(path) is not int_ and not allowed(
                path, writable if flags & write_flags else readable
            ):
                refuse(event, path)
        elif event == "import":
            if args[0].partition(".")[0] in denied_modules:
                refuse(event, args[0])
        elif event in denied_events or event.startswith(denied_prefixes):
            refuse(event, args[0] if args else "")
        elif event == "object.__setattr__" and args[1] == "__code__":
            refuse(event, "__code__")
        elif event in read_events or event in write_events:
            roots = readable if event in read_events else writable
            for path in args[:2]:
                if path is not None and type_(path) is not int_ and not allowed(path, roots):
                    refuse(event, path)

    sys.addaudithook(hook)


# --- the solution process ---------------------------------------------------------------------


def run_solution(payload: dict) -> None:
    fd_in, fd_out = payload["fd_in"], payload["fd_out"]
    _send(fd_out, ("started", []))  # before any answer code runs, so it cannot be faked away
    violations: list[str] = []
    if payload["guard"]:
        _install_guard(os.getcwd(), violations, payload["record_fd"])
    try:
        code = compile(payload["code"], "<solution>", "exec")
    except SyntaxError as exc:
        _send(fd_out, ("load_error", "syntax_error", f"line {exc.lineno}: {exc.msg}", violations))
        return
    except (ValueError, MemoryError, RecursionError) as exc:  # null bytes, too deeply nested
        _send(fd_out, ("load_error", "syntax_error", _describe(exc), violations))
        return
    namespace = _module("solution")
    try:
        exec(code, namespace)
    except BaseException as exc:  # SystemExit too: exiting before the tests is a failure
        kind = "memory_limit" if isinstance(exc, MemoryError) else "runtime_error"
        _send(fd_out, ("load_error", kind, "at import: " + _describe(exc), violations))
        return
    function = namespace.get(payload["entry_point"])
    if not callable(function):
        detail = f"no function named {payload['entry_point']!r}"
        _send(fd_out, ("load_error", "missing_entry_point", detail, violations))
        return
    _send(fd_out, ("ready", violations))
    while True:
        request = _recv(fd_in, 1 << 30)
        if request is None or request[0] == "bye":
            _send(fd_out, ("bye", _cpu_s(), violations))
            return
        _, args, kwargs = request
        try:
            value = function(*args, **kwargs)
        except BaseException as exc:  # SystemExit too: the test process decides what it means
            reply = ("raise", type(exc).__name__, _message(exc), violations)
        else:
            reply = ("return", value, violations)
            try:
                marshal.dumps(value)
            except ValueError:  # not plain data (an object, a subclass): never sent on
                detail = f"returned {type(value).__name__}, not plain data"
                reply = ("raise", "TypeError", detail, violations)
        _send(fd_out, reply)


# --- the test process -------------------------------------------------------------------------


class _SolutionGone(BaseException):
    """The solution process ended (BaseException: a test's ``except Exception`` cannot eat it)."""


class _Violation(BaseException):
    """The solution process reported a refused operation or broke the protocol."""


class _TaskError(BaseException):
    """The task itself is broken (its test code does not run): not the answer's fault."""


class _CandidateError(Exception):
    """An exception the candidate raised that is not rebuilt as a builtin one."""


def _is_plain(value) -> bool:
    """Only the plain types, however nested; shared or cyclic parts are visited once."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind not in _PLAIN:
            return False
        if kind in (tuple, list, set, frozenset, dict) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.items() if kind is dict else item)
    return True


class _Channel:
    """The test process's side of the pipes to the solution process."""

    def __init__(self, fd_in: int, fd_out: int, limit: int) -> None:
        self.fd_in, self.fd_out, self.limit = fd_in, fd_out, limit

    def send(self, message) -> None:
        try:
            _send(self.fd_out, message)
        except BrokenPipeError:
            raise _SolutionGone("the solution process ended") from None

    def receive(self) -> tuple:
        try:
            message = _recv(self.fd_in, self.limit)
        except ValueError as exc:
            raise _Violation(f"the solution process sent {exc}") from None
        if message is None:
            raise _SolutionGone("the solution process ended")
        if type(message) is not tuple or not message or type(message[-1]) is not list:
            raise _Violation("the solution process broke the protocol")
        if message[-1]:
            raise _Violation("refused: " + "; ".join(map(str, message[-1][:5])))
        return message


def _proxy(channel: _Channel, verdict: dict):
    """The ``candidate`` the tests call: arguments out, a plain value (or an exception) back."""

    def candidate(*args, **kwargs):
        verdict["calls"] += 1
        try:
            channel.send(("call", args, kwargs))
        except ValueError as exc:  # marshal refused an argument
            raise _TaskError(f"the test passes arguments that are not plain data: {exc}") from None
        reply = channel.receive()
        if reply[0] == "return" and len(reply) == 3 and _is_plain(reply[1]):
            return reply[1]
        if reply[0] == "raise" and len(reply) == 4:
            error = getattr(builtins, str(reply[1]), None)
            if isinstance(error, type) and issubclass(error, Exception):
                try:
                    rebuilt = error(str(reply[2]))
                except Exception:  # e.g. UnicodeDecodeError takes five arguments
                    rebuilt = _CandidateError(str(reply[2]))
                raise rebuilt
            raise _CandidateError(f"{reply[1]}: {reply[2]}")
        raise _Violation("the solution process broke the protocol")

    return candidate


def run_tests(payload: dict) -> None:
    channel = _Channel(payload["fd_in"], payload["fd_out"], payload["max_message_bytes"])
    verdict = {"verdict": "passed", "detail": "", "calls": 0, "solution_started": False}
    verdict.update(solution_cpu_s=0.0, tests_cpu_s=0.0)
    verdict_fd, nonce = payload["verdict_fd"], payload["nonce"]
    os.write(verdict_fd, f"{nonce} started\n".encode())
    try:
        if channel.receive() != ("started", []):
            raise _Violation("the solution process broke the protocol")
        verdict["solution_started"] = True
        loaded = channel.receive()
        if loaded[0] == "load_error" and len(loaded) == 4:
            verdict.update(verdict=str(loaded[1]), detail=str(loaded[2]))
        elif loaded[0] != "ready":
            raise _Violation("the solution process broke the protocol")
        else:
            verdict.update(_check(payload, _proxy(channel, verdict), verdict))
            if verdict["verdict"] == "passed":
                channel.send(("bye",))
                bye = channel.receive()  # with the last report of refused operations
                if bye[0] == "bye" and len(bye) == 3 and type(bye[1]) is float:
                    verdict["solution_cpu_s"] = bye[1]
    except _Violation as exc:
        verdict.update(verdict="sandbox_violation", detail=str(exc)[:500])
    except _SolutionGone as exc:
        verdict.update(verdict="solution_gone", detail=str(exc))
    except _TaskError as exc:
        verdict.update(verdict="task_error", detail=str(exc)[:500])
    verdict["tests_cpu_s"] = _cpu_s()
    os.write(verdict_fd, f"{nonce} {verdict!r}\n".encode())


def _check(payload: dict, candidate, verdict: dict) -> dict:
    """Run the task's ``check(candidate)``; the verdict and detail of how it ended."""
    namespace = _module("tests")
    source = payload["setup"] + "\n\n" + payload["test"]
    try:
        exec(compile(source, "<test>", "exec"), namespace)
        check = namespace["check"]
        # Some tests name the function itself (HumanEval/33), as when test and answer shared a
        # module: that name must be the candidate too, not the prompt's stub.
        namespace[payload["entry_point"]] = candidate
    except Exception as exc:
        raise _TaskError(f"the task's test code does not run: {_describe(exc)}") from None
    try:
        check(candidate)
    except AssertionError as exc:
        return {"verdict": "test_failed", "detail": _failed_line(exc, source)}
    except MemoryError as exc:
        return {"verdict": "memory_limit", "detail": _describe(exc)}
    except Exception as exc:
        if isinstance(exc, _CandidateError) or _raised_by_candidate(exc):
            return {"verdict": "runtime_error", "detail": _describe(exc)}
        if not verdict["calls"]:
            raise _TaskError(
                f"the test fails before calling the answer: {_describe(exc)}"
            ) from None
        return {"verdict": "test_failed", "detail": _describe(exc)}
    return {"verdict": "passed", "detail": ""}


def _raised_by_candidate(exc: BaseException) -> bool:
    """True when the exception was re-raised by the proxy (its innermost frame is ours)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "candidate"


def _failed_line(exc: AssertionError, source: str) -> str:
    """``test line N: <source>`` of the failing assert (the detail a person reads)."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<test>":
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None:
        return "assertion failed"
    text = source.splitlines()[line - 1].strip() if line <= source.count("\n") + 1 else ""
    message = f" ({exc})" if str(exc) else ""
    return f"test line {line}: {text[:300]}{message[:200]}"


def _load_confine(payload: dict):
    """``confine.py``'s functions, loaded while the stdlib is still reachable (before the uid
    switch: an interpreter under ``/root`` cannot import ``ctypes`` after it); ``None`` if the
    host offers no kernel layer."""
    plan = payload["confine"]
    if not plan or not (plan["landlock_abi"] or plan["seccomp"]):
        return None
    namespace = {"__name__": "confine"}
    exec(payload["confine_code"], namespace)
    return namespace


def _confine(confine, plan: dict) -> None:
    """Landlock and seccomp before any task or answer code; fail closed (status 70)."""
    try:
        read = [p for p in sys.path if p] + plan["system_read"]
        write = [os.getcwd(), "/dev/null"] if plan["write_work_dir"] else ["/dev/null"]
        if plan["landlock_abi"]:
            confine["landlock"](plan["landlock_abi"], read, write)
        if plan["seccomp"]:
            confine["seccomp"](plan["seccomp"])
    except BaseException as exc:
        os.write(2, f"the sandbox could not confine itself: {_describe(exc)}\n".encode())
        os._exit(70)
    for name in [m for m in sys.modules if m.startswith(("ctypes", "_ctypes"))]:
        del sys.modules[name]  # importing ctypes again passes the guard's import check


def main() -> None:
    payload = _read_payload()
    confine = _load_confine(payload)
    _drop_root(payload["drop_to_uid"], payload["preload"])
    _set_limits(payload["limits"])
    if confine is not None:
        _confine(confine, payload["confine"])
        del confine
    try:  # noqa: SIM105 (contextlib is not worth its import in every sandbox)
        (run_solution if payload["role"] == "solution" else run_tests)(payload)
    except BrokenPipeError:  # the other process ended first: nothing is left to tell it
        pass
    os._exit(0)  # no atexit handlers or finalizers of the answer's objects run after this


main()
