"""The OS layer of the code sandbox: which isolation the host allows, and how to launch it.

Every run starts two fresh interpreters (``python -I -S``: no site-packages, no environment
variables, no user site) in a new session, with hard rlimits the process sets on itself
before any untrusted code runs, and a wall-clock limit after which the host SIGKILLs the
process group. Three tiers, best first; ``auto`` takes the best that works here (each is
tried once per process with a real launch):

``bwrap`` (bubblewrap, ``apt-get install bubblewrap``) — covered:
    * **file system**: a new mount namespace whose root is an empty tmpfs holding only the
      interpreter's prefix, ``/usr/lib*`` and ``/etc/ld.so.cache`` read-only, ``/dev``
      (null, zero, random, urandom, tty), and two private size-capped tmpfs (``/tmp`` and
      the work dir ``/sandbox``). No ``/proc``, nothing else of ``/etc``, no home, no
      project: reading ``/etc/passwd`` or the project's files fails with "no such file",
      and whatever is written vanishes with the sandbox;
    * **network**: a new network namespace (only its own loopback): the host's
      127.0.0.1 services are unreachable;
    * **processes**: new PID, IPC and UTS namespaces, ``--die-with-parent``; killing the
      launcher's process group kills everything inside;
    * **privileges**: as root, bwrap keeps only CAP_SETUID/CAP_SETGID, and the solution
      process becomes uid/gid 65534 (nobody), the test process 65533, before the answer
      runs (a root-owned process would be exempt from ``RLIMIT_NPROC``); as another user,
      bwrap adds a user namespace (and forbids nested ones).
``unshare`` (util-linux) — network, IPC and UTS namespaces (and a user namespace when not
    root): the network as above, but no mount namespace and no PID namespace: the process
    sees the host's files with the rights of its uid (65534 when started by root, else the
    caller's), limited by the kernel layer below. As root with an interpreter only root can
    reach (``/root/...``), common stdlib modules are imported before the uid switch.
``none`` — rlimits, the session kill, the uid and the kernel layer only: the host's network
    namespace, closed by Landlock's TCP rules and the seccomp filter.

The kernel layer (:mod:`gymflow.environments.code.kernel_layer`), in every tier where the
kernel offers it: each interpreter confines itself before any task or answer code runs, with
Landlock (reads only under the stdlib, the system libraries and its work dir, writes only in
its work dir, no TCP, no signals or abstract sockets outside its own domain) and a seccomp
filter that kills it on process creation, ``execve``, sockets, ``ptrace``, ``prctl`` and other
escapes. Both are irrevocable: code inside cannot lift them, ``ctypes`` included. Without
bubblewrap *and* without Landlock the sandbox refuses to run answers unless
``GYMFLOW_CODE_INSECURE_SANDBOX=1`` (``gymflow env serve --insecure-sandbox``). On top, an
audit hook in the solution process (``inside.py``) refuses and records what the answer tries:
defence in depth and the record of an attempt, never the last line.

Always covered: CPU seconds (``RLIMIT_CPU``), address space (``RLIMIT_AS``), file size
(``RLIMIT_FSIZE``), open files, no core dumps, no processes or threads (``RLIMIT_NPROC`` 0,
which the kernel does not enforce for root: hence the switch to uid 65534), and the wall
clock. Not covered in any tier: CPU and memory *bandwidth* (a busy sandbox slows its
neighbours), and kernel exploits through the system calls the filter allows — this is a
sandbox for model-written code, not for a determined attacker with a kernel bug. If
bubblewrap is missing, ``auto`` logs a warning naming what is lost and how to install it;
asking for a tier by name that does not work raises instead.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gymflow.core.failures import FailureKind, GymflowError

Isolation = Literal["bwrap", "unshare", "none"]
TIERS: tuple[Isolation, ...] = ("bwrap", "unshare", "none")
SANDBOX_UID = 65534
"""The uid (and gid) the solution process started by root runs as: ``nobody`` on Debian."""
TESTS_UID = 65533
"""The uid (and gid) of the test process started by root: not the solution's, so that where
both share a PID namespace (the fallback tiers) the solution can neither signal nor trace it."""
WORK_DIR_IN_BWRAP = "/sandbox"
BOOTSTRAP = "import marshal, sys; exec(marshal.load(sys.stdin.buffer))"
"""The ``-c`` program of every sandboxed interpreter: run the compiled code object that comes
first on stdin (compiling ``inside.py`` in every sandbox would cost each interpreter ~9 ms)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run; each process of the run gets them."""

    cpu_s: int = 3
    """CPU seconds per process (RLIMIT_CPU, whole seconds): an endless loop ends here."""
    wall_s: float = 20.0
    """Wall-clock seconds for the whole run (start, import, every test), then SIGKILL."""
    memory_mb: int = 1024
    """Address space per process (RLIMIT_AS); a bigger allocation raises MemoryError."""
    file_mb: int = 8
    """Largest file a process may write (RLIMIT_FSIZE); also the size of each bwrap tmpfs."""
    open_files: int = 64
    """Open file descriptors per process (RLIMIT_NOFILE)."""


@dataclass(frozen=True)
class Interpreter:
    """The bare interpreter the sandbox runs: the base of the current (virtual) environment."""

    executable: str
    prefix: str

    @classmethod
    def current(cls) -> Interpreter:
        base = getattr(sys, "_base_executable", None) or sys.executable
        return cls(os.path.realpath(base), os.path.realpath(sys.base_prefix))

    def stdlib_reachable_by_others(self) -> bool:
        """Whether a uid other than the owner can reach the stdlib (``/root/...`` cannot)."""
        path = Path(os.path.dirname(os.__file__)).resolve()
        return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def launch_command(isolation: Isolation, interpreter: Interpreter, limits: Limits) -> list[str]:
    """The argv that starts ``interpreter`` in ``isolation``; the program comes on stdin."""
    python = [interpreter.executable, "-I", "-S", "-B"]
    if isolation == "none":
        return python
    if isolation == "unshare":
        userns = [] if os.geteuid() == 0 else ["--user"]
        # No PID namespace: the program would be its pid 1, which ignores SIGXCPU, and
        # unshare --fork hides how its child died. With RLIMIT_NPROC 0 it has no children.
        return ["unshare", *userns, "--net", "--ipc", "--uts", "--", *python]
    return [*_bwrap_args(interpreter, limits), *python]


def _bwrap_args(interpreter: Interpreter, limits: Limits) -> list[str]:
    namespaces = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    namespaces += ["--unshare-cgroup-try"]
    if os.geteuid() == 0:  # mount without a user namespace, then drop to SANDBOX_UID inside
        namespaces += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:  # an unprivileged bwrap needs a user namespace; none may be made inside it
        namespaces += ["--unshare-user", "--disable-userns"]
    # No --new-session: the program stays in the launcher's process group (start_new_session
    # already took the controlling terminal away), so one killpg reaches it at once.
    args = ["bwrap", *namespaces, "--die-with-parent", "--clearenv"]
    binds = _read_only_binds(interpreter)
    made: set[str] = set()
    for path in binds:  # bwrap would create missing parents 0700: unreadable after the drop
        for parent in reversed(Path(path).parents):
            if str(parent) != "/" and str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
    for path in binds:
        args += ["--ro-bind", path, path]
    for link in ("/bin", "/lib", "/lib64", "/lib32", "/sbin"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link) and link not in binds:
            args += ["--ro-bind", link, link]
    size = str(limits.file_mb << 20)
    args += ["--dev", "/dev"]
    args += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    args += ["--perms", "0777", "--size", size, "--tmpfs", WORK_DIR_IN_BWRAP]
    args += ["--chdir", WORK_DIR_IN_BWRAP, "--setenv", "HOME", WORK_DIR_IN_BWRAP]
    args += ["--setenv", "LANG", "C.UTF-8", "--"]
    return args


def _read_only_binds(interpreter: Interpreter) -> list[str]:
    """The interpreter's prefix and the system libraries, without paths nested in another."""
    wanted = [interpreter.prefix, os.path.dirname(interpreter.executable)]
    wanted += [p for p in ("/usr/lib", "/usr/lib64", "/usr/lib32") if os.path.isdir(p)]
    if os.path.isfile("/etc/ld.so.cache"):
        wanted.append("/etc/ld.so.cache")
    binds: list[str] = []
    for path in sorted(set(wanted), key=len):
        if not any(path == b or path.startswith(b.rstrip("/") + "/") for b in binds):
            binds.append(path)
    return binds


def spawn(
    argv: list[str],
    pass_fds: tuple[int, ...],
    stdout,
    stderr,
    cwd: str | None,
) -> subprocess.Popen:
    """Start a sandboxed process in its own session (its process group is killed as one).

    No ``preexec_fn``: it is unsafe with threads, and verify runs on server threads and in
    worker processes. Limits and the uid switch happen inside (see ``inside.py``).
    """
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=stdout,
        stderr=stderr,
        pass_fds=pass_fds,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        start_new_session=True,
    )


def kill(process: subprocess.Popen) -> None:
    """SIGKILL the process group of a process still running, then reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):  # it ended after the poll
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def make_work_dir() -> str:
    """A throwaway host directory for the tiers without a private tmpfs (owned by the sandbox)."""
    path = tempfile.mkdtemp(prefix="gymflow-code-")
    if os.geteuid() == 0:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    return path


def remove_work_dir(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


@functools.cache
def works(isolation: Isolation) -> str | None:
    """``None`` if a real launch in ``isolation`` succeeds here, else why not (cached)."""
    interpreter = Interpreter.current()
    if isolation != "none" and shutil.which(isolation) is None:
        return f"{isolation} is not installed"
    argv = launch_command(isolation, interpreter, Limits()) + ["-c", "pass"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{isolation} does not start: {exc}"
    if done.returncode != 0:
        return f"{isolation} fails: {done.stderr.decode(errors='replace').strip()[:300]}"
    return None


@functools.cache
def resolve(requested: str = "auto") -> Isolation:
    """:func:`choose` once per process: the tier every run of this process uses."""
    return choose(requested)


def choose(requested: str, probe: Callable[[Isolation], str | None] = works) -> Isolation:
    """``requested`` if it works (else raise), or for ``auto`` the best tier that works."""
    if requested != "auto":
        if requested not in TIERS:
            raise ValueError(f"unknown isolation {requested!r}; choose auto, {', '.join(TIERS)}")
        problem = probe(requested)
        if problem:
            raise GymflowError(FailureKind.ENV_UNAVAILABLE, f"sandbox tier unusable: {problem}")
        return requested
    reasons = []
    for tier in TIERS:
        problem = probe(tier)
        if problem is None:
            if reasons:
                log.warning(
                    "code sandbox: %s; falling back to %r, which has %s. Install bubblewrap "
                    "(apt-get install bubblewrap) for full isolation.",
                    "; ".join(reasons),
                    tier,
                    "no mount or PID namespace (Landlock and seccomp guard files and processes)"
                    if tier == "unshare"
                    else "no namespaces (Landlock and seccomp guard files, network, processes)",
                )
            return tier
        reasons.append(problem)
    raise GymflowError(FailureKind.ENV_UNAVAILABLE, "no sandbox tier works: " + "; ".join(reasons))
