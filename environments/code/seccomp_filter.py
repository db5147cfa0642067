"""The seccomp filter of the code sandbox, built once on the host with libseccomp.

The sandboxed interpreters load the exported BPF program themselves (``confine.seccomp``):
building it needs libseccomp (``libseccomp2``, a dependency of apt on Debian) and its Python
binding ``pyseccomp`` (a dependency of gymflow), loading it needs neither. Everything not listed
is allowed; a listed system call **kills the process** (``SECCOMP_RET_KILL_PROCESS``), so the
host sees the attempt (the solution process dies by ``SIGSYS``, scored ``sandbox_violation``)
even when the answer switched the in-process guard off. System calls of another architecture
(``int 0x80`` from a 64-bit process) are killed too.

Denied: creating processes or threads and ``execve``; ``ptrace`` and reading or writing other
processes' memory; every socket; ``prctl`` (``PR_SET_DUMPABLE``, ``PR_SET_PTRACER`` and the like:
the process sets what it needs before loading the filter); name spaces and mounts; the kernel
interfaces that are common exploit paths (``bpf``, ``io_uring``, ``userfaultfd``,
``perf_event_open``, keyrings, modules); uid/gid changes; ``ioctl(TIOCSTI)``.
"""

from __future__ import annotations

import functools
import tempfile

# fmt: off
DENIED = (
    # processes, threads, programs
    "fork", "vfork", "clone", "clone3", "execve", "execveat",
    # other processes: tracing, their memory, their file descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # the network and local sockets
    "socket", "socketpair",
    # escapes through process attributes and a second filter
    "prctl", "seccomp", "personality",
    # name spaces, mounts, roots
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "open_by_handle_at", "name_to_handle_at",
    # kernel attack surface
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "acct", "swapon", "swapoff", "reboot",
    "syslog", "iopl", "ioperm", "quotactl", "vhangup", "uselib", "mknod", "mknodat",
    # identities
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
    "setfsuid", "setfsgid", "capset",
)
# fmt: on
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
"""ioctls that type into a terminal (a sandbox has none; still denied)."""


@functools.cache
def program() -> tuple[bytes | None, str]:
    """``(BPF bytes, "")``, or ``(None, why not)`` where libseccomp or pyseccomp is missing."""
    try:
        import pyseccomp
    except (ImportError, OSError, AttributeError, TypeError) as exc:
        return None, (
            f"no seccomp filter: pyseccomp/libseccomp unavailable ({type(exc).__name__}: "
            f"{exc}); install them with `apt-get install libseccomp2` and "
            "`pip install pyseccomp` (a gymflow dependency)"
        )
    kill = pyseccomp.KILL_PROCESS
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    rules.set_attr(pyseccomp.Attr.ACT_BADARCH, kill)
    for name in DENIED:
        try:
            rules.add_rule(kill, name)
        except OSError:  # a call this architecture does not have (e.g. fork on arm64)
            continue
    for request in (_TIOCSTI, _TIOCLINUX):
        rules.add_rule(kill, "ioctl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, request))
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read(), ""
