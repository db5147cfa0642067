"""Kernel confinement a process applies to itself: Landlock rules and a seccomp filter.

Both are irrevocable: once applied, nothing the process runs afterwards (the model's answer,
``ctypes`` included) can lift them, and they are inherited by anything it could start. The
sandboxed interpreters apply them before any untrusted code runs (``inside.py`` receives this
module compiled, like itself, so it uses the standard library only); the host imports it to
read the Landlock ABI of its kernel.

* **Landlock** (Linux >= 5.13; ``landlock_abi()`` says which version): reads only under
  ``read_roots`` (the stdlib, the system libraries), reads and writes only under
  ``write_roots`` (the work dir), no ``execve`` of anything; from ABI 4 no TCP ``bind`` or
  ``connect`` at all; from ABI 6 no signal to, and no abstract Unix socket of, a process outside
  the process's own Landlock domain (the test process, the server).
* **seccomp**: a classic BPF program built by the host (``seccomp_filter.py``, libseccomp) and
  loaded here with ``prctl(PR_SET_SECCOMP)``; a denied system call kills the process.

Both need ``no_new_privs`` (set here), which also means a set-uid binary could never raise
privileges. Constants are the kernel's UAPI values (``linux/landlock.h``, ``linux/prctl.h``).
"""

import ctypes
import os

LANDLOCK_CREATE_RULESET = 444
LANDLOCK_ADD_RULE = 445
LANDLOCK_RESTRICT_SELF = 446
"""Landlock's system call numbers: the same on every architecture."""
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

# LANDLOCK_ACCESS_FS_*
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
"""The rights a rule on a file (not a directory) may grant."""
READ = READ_FILE | READ_DIR
WRITE = READ | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM
WRITE |= REFER | TRUNCATE


class ConfinementError(OSError):
    """The kernel refused to confine this process: it must not go on to run untrusted code."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _syscall(libc, number: int, *args) -> int:
    result = libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        errno = ctypes.get_errno()
        raise ConfinementError(errno, f"system call {number}: {os.strerror(errno)}")
    return result


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers an unprivileged process (0: none)."""
    libc = _libc()
    try:
        return _syscall(libc, LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_CREATE_RULESET_VERSION))  # fmt: skip
    except ConfinementError:  # ENOSYS (too old), EOPNOTSUPP (disabled at boot)
        return 0


def handled_fs(abi: int) -> int:
    """Every file-system right ABI ``abi`` knows (all are denied unless a rule grants them)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def no_new_privs(libc=None) -> None:
    libc = libc or _libc()
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    if libc.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), one, zero, zero, zero) != 0:
        raise ConfinementError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def landlock(abi: int, read_roots: list, write_roots: list) -> None:
    """Restrict this process (and all it starts) to ``read_roots`` / ``write_roots``.

    Roots that do not exist (or this uid cannot reach) are skipped; a root that is a file gets
    only file rights.
    """
    libc = _libc()
    handled = handled_fs(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0, 0)
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset = _syscall(libc, LANDLOCK_CREATE_RULESET, ctypes.byref(attr),
                       ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))  # fmt: skip
    try:
        for roots, rights in ((read_roots, READ), (write_roots, WRITE)):
            for root in roots:
                _allow(libc, ruleset, root, rights & handled)
        no_new_privs(libc)
        _syscall(libc, LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow(libc, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # missing, or not reachable by this uid: nothing to allow there
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _syscall(libc, LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                 ctypes.byref(rule), ctypes.c_uint32(0))  # fmt: skip
    finally:
        os.close(fd)


def seccomp(program: bytes) -> None:
    """Load a seccomp BPF program (8-byte ``sock_filter`` instructions, native byte order)."""
    libc = _libc()
    no_new_privs(libc)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    zero = ctypes.c_ulong(0)
    mode = ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    if libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), mode, ctypes.byref(fprog), zero, zero) != 0:
        raise ConfinementError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def confine(plan: dict) -> None:
    """Apply ``plan`` (``landlock_abi``, ``read``, ``write``, ``seccomp``): Landlock first (its
    set-up needs system calls the seccomp filter then denies, ``prctl`` among them)."""
    if plan.get("landlock_abi"):
        landlock(plan["landlock_abi"], plan["read"], plan["write"])
    if plan.get("seccomp"):
        seccomp(plan["seccomp"])
