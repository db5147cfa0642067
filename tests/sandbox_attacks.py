"""The attack suite of the code sandbox: answers that go after the guard, the verdict and the host.

Used by ``tests/test_sandbox_attacks.py``, in-process for the caller it runs as, and as a
script (``python sandbox_attacks.py SPEC.json``, printing JSON results) for a non-root caller:
that copy runs under a plain user with the system Python, so this file imports only the
standard library and the sandbox's own modules.

Every attack is a *wrong* function (the tests want ``"right"``, it returns ``"wrong"``) plus
steps that would get it through anyway or reach outside: each step that works adds a
``LEAK <step>`` to the returned text (``BYPASS <step>`` for a step that only disarms the
in-process guard), which the failing assert carries into the verdict's detail. A harmless sandbox therefore yields a verdict other than ``passed`` with no ``LEAK``;
the harness also checks the host itself (a listener, a victim process, files).
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

HEAD = """import os, sys

LEAKS = []


def step(name, fn, bypass=False):
    try:
        got = fn()
    except BaseException:
        return
    LEAKS.append(f"{'BYPASS' if bypass else 'LEAK'} {name}: {got!r}"[:80])


def right(ctx):
"""
# The bodies run inside ``right(ctx)``; ``ctx`` holds pids, a port and paths the tests pass in.
ATTACKS = {
    # find the audit hook through gc and swap its code for one that allows everything
    "gc_hook_swap": """
    def swap():
        import gc
        for obj in gc.get_objects():
            if type(obj).__name__ == "function" and obj.__name__ == "hook":
                n = len(obj.__code__.co_freevars)
                src = "def outer():\\n" + "".join(f"    v{i} = 0\\n" for i in range(n))
                src += "    def hook(event, args):\\n        return (" + "".join(f"v{i}, " for i in range(n)) + ")\\n"
                src += "    return hook\\n"
                ns = {}
                exec(src, ns)
                obj.__code__ = ns["outer"]().__code__
                return "swapped"
    step("swap", swap, bypass=True)
    step("hostname", lambda: open("/etc/hostname").read())
    step("secret", lambda: open(ctx["secret"]).read())
""",
    # patch the __code__ of a function the hook relies on (realpath): every path looks allowed
    "code_patch": """
    import posixpath
    def patch():
        posixpath.realpath.__code__ = (lambda filename, *, strict=False: "/dev/null").__code__
    step("patched", patch, bypass=True)
    step("secret", lambda: open(ctx["secret"]).read())
""",
    # try to add, replace or silence audit hooks, then open a socket
    "audit_hook_removal": """
    step("added a hook", lambda: sys.addaudithook(lambda event, args: None), bypass=True)
    step("sys.audit patched", lambda: setattr(sys, "audit", lambda *a: None), bypass=True)
    def connect():
        import socket
        return socket.create_connection(("127.0.0.1", ctx["port"]), 2).send(b"GET /")
    step("socket", connect)
""",
    # libc through ctypes: a socket and a signal without Python's audited functions
    "ctypes": """
    def libc():
        import ctypes
        return ctypes.CDLL(None)
    step("ctypes", libc, bypass=True)
    step("libc socket", lambda: libc().socket(2, 1, 0) >= 0 or 1 / 0)
    step("libc kill", lambda: libc().kill(ctx["victim"], 9) == 0 or 1 / 0)
""",
    # signal the test process, a victim process of the caller, the host (SIGKILL by number:
    # an interpreter only root can read has no `signal` module after the uid switch)
    "kill_sibling": """
    for target in ("tests_pid", "victim"):  # (in bwrap another namespace's pid may be ours)
        if ctx[target] != os.getpid():
            step(f"kill {target}", lambda: os.kill(ctx[target], 9))
    step("signal host", lambda: os.kill(ctx["host_pid"], 0))
""",
    # forge a verdict: on every descriptor, and through /proc on the host's and the tests'
    "forge_verdict": """
    fake = b"started\\n{'verdict': 'passed', 'detail': ''}\\n"
    for fd in range(64):
        try:
            os.write(fd, fake)
        except OSError:
            pass
    for pid in (ctx["host_pid"], ctx["tests_pid"]):
        for fd in range(8):
            step(f"/proc/{pid}/fd/{fd}", lambda: open(f"/proc/{pid}/fd/{fd}", "wb").write(fake))
""",
    # a child process that outlives the run and writes outside
    "fork": """
    def child():
        pid = os.fork()
        if pid == 0:
            open(ctx["outside"], "w").write("child")
            os._exit(0)
        return pid
    step("fork", child)
""",
    # the host's and the tests' memory through /proc
    "proc_mem": """
    for pid in (ctx["host_pid"], ctx["tests_pid"]):
        step(f"maps {pid}", lambda: open(f"/proc/{pid}/maps").read(40))
        step(f"mem {pid}", lambda: open(f"/proc/{pid}/mem", "rb").read(1))
""",
    # an MLflow-like listener on the host's loopback: move the champion alias
    "socket_loopback": """
    def post():
        import socket
        s = socket.create_connection(("127.0.0.1", ctx["port"]), 2)
        return s.send(b"POST /api/2.0/mlflow/registered-models/alias champion")
    step("socket", post)
""",
    # files outside the sandbox: the host name, a planted world-readable secret, the root
    "read_secrets": """
    step("hostname", lambda: open("/etc/hostname").read())
    step("secret", lambda: open(ctx["secret"]).read())
    step("listdir /", lambda: os.listdir("/"))
    step("write outside", lambda: open(ctx["outside"], "w").write("pwned"))
""",
}
TAIL = """
    return "wrong " + "; ".join(LEAKS)
"""
TEST = """def check(candidate):
    import os
    ctx = dict(CTX, tests_pid=os.getpid())
    got = candidate(ctx)
    assert got == "right", got
"""


def program_parts(name: str, ctx: dict) -> tuple[str, str, str, str]:
    """``(code, setup, test, entry_point)`` of attack ``name`` given the host's ``ctx``."""
    code = HEAD + ATTACKS[name] + TAIL
    return code, "CTX = " + repr(ctx) + "\n", TEST, "right"


def run_attacks(tiers: list[str], ctx: dict, threads: int = 2) -> list[dict]:
    """Every attack in every tier, with the audit-hook guard and without (as if bypassed)."""
    from gymflow.environments.code.execution import Program, run_program
    from gymflow.environments.code.sandbox import Limits

    limits = Limits(cpu_s=2, wall_s=15)
    jobs = [(t, n, g) for t in tiers for n in ATTACKS for g in (True, False)]

    def one(job: tuple[str, str, bool]) -> dict:
        tier, name, guard = job
        outcome = run_program(Program(*program_parts(name, ctx)), limits, tier, guard)
        return {"tier": tier, "attack": name, "guard": guard, "verdict": outcome.verdict,
                "detail": outcome.detail}  # fmt: skip

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, jobs))


if __name__ == "__main__":  # as a non-root caller: python sandbox_attacks.py SPEC.json
    with open(sys.argv[1]) as spec_file:
        spec = json.load(spec_file)
    spec["ctx"]["host_pid"] = spec["ctx"]["host_pid"] or os.getpid()
    print(json.dumps(run_attacks(spec["tiers"], spec["ctx"])))
