"""The code sandbox, tier by tier: what the OS layer stops alone, what the guard adds, cleanup.

Each check runs a real program in a real sandbox; the program reports what happened to it
(``"blocked"`` or what it got) and the trusted test asserts on that, so a test here fails the
moment a boundary leaks. OS-layer checks run with the audit-hook guard off: the tier and the
kernel layer (Landlock, seccomp) alone. An attempt the seccomp filter answers by killing the
process scores ``sandbox_violation`` instead of ``"blocked"``: both count as stopped.
The attack suite of ``tests/test_sandbox_attacks.py`` goes further (guard bypasses, forged
verdicts, root and non-root callers).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pytest

from gymflow.core.failures import GymflowError
from gymflow.environments.code import kernel_layer, sandbox
from gymflow.environments.code.execution import Program, run_program
from gymflow.environments.code.sandbox import Limits

TIERS = [pytest.param(t, marks=pytest.mark.skipif(bool(sandbox.works(t)), reason=str(sandbox.works(t)))) for t in sandbox.TIERS]  # fmt: skip
FAST = Limits(cpu_s=1, wall_s=15)
PROJECT_FILE = str(Path(__file__).resolve())
AS_ROOT = os.geteuid() == 0


def probe(body: str, tier: str, guard: bool = False, limits: Limits = FAST) -> str:
    """Run ``f()`` whose body is ``body`` (it returns what happened); the verdict or an error."""
    code = "def f():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    test = "def check(candidate):\n    global got\n    got = candidate()\n    assert got == 'blocked', got\n"
    outcome = run_program(Program(code, "", test, "f"), limits, tier, guard)
    failed = outcome.verdict in ("test_failed", "runtime_error")
    return f"{outcome.verdict}: {outcome.detail}" if failed else outcome.verdict


STOPPED = {"passed", "sandbox_violation"}
"""``passed``: the attempt raised; ``sandbox_violation``: the seccomp filter killed it."""


def attempt(statement: str) -> str:
    """A body that runs ``statement`` and returns "blocked" if it raised, else "open: ..."."""
    return f"try:\n    got = {statement}\nexcept BaseException:\n    return 'blocked'\nreturn 'open: ' + repr(got)[:80]"


# --- the OS layer alone (guard off) -----------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
def test_host_loopback_is_unreachable(tier):
    layer = kernel_layer.layer(tier)
    if tier == "none" and layer.landlock_abi < 4 and layer.seccomp is None:
        pytest.skip("the none tier shares the host's network: only the kernel layer closes it")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        port = server.getsockname()[1]
        body = attempt(f"__import__('socket').create_connection(('127.0.0.1', {port}), 2)")
        assert probe(body, tier) in STOPPED
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever knocked


@pytest.mark.parametrize("tier", [p for p in TIERS if p.values[0] == "bwrap"])
def test_bwrap_hides_the_file_system(tier):
    for path in ("/etc/passwd", PROJECT_FILE, "/root", "/home", "/work"):
        assert probe(attempt(f"open({path!r}).read()"), tier) == "passed", path
    assert probe(attempt("__import__('os').listdir('/proc')"), tier) == "passed"


@pytest.mark.parametrize("tier", TIERS)
def test_writes_outside_never_reach_the_host(tier, tmp_path):
    if tier != "bwrap" and not AS_ROOT:
        pytest.skip("without bwrap, a non-root sandbox writes with the caller's own rights")
    target = Path(PROJECT_FILE).parents[3] / f"gymflow-sandbox-probe-{os.getpid()}.txt"
    for path in (target, tmp_path / "x.txt"):
        probe(attempt(f"open({str(path)!r}, 'w').write('pwned')"), tier)
        assert not path.exists()


@pytest.mark.parametrize("tier", TIERS)
def test_no_process_or_thread_can_start(tier):
    python = "__import__('sys').executable"
    checks = {
        "fork": attempt("__import__('os').fork()"),
        "system": "import os\nreturn 'blocked' if os.system('true') != 0 else 'open'",
        "subprocess": attempt(f"__import__('subprocess').run([{python}, '-c', 'pass'])"),
        "thread": attempt("__import__('threading').Thread(target=print).start()"),
    }
    for name, body in checks.items():
        assert probe(body, tier) in STOPPED, name


@pytest.mark.parametrize("tier", TIERS)
def test_memory_cpu_and_wall_clock_limits_and_cleanup(tier):
    assert probe(attempt("bytearray(2 << 30)"), tier) == "passed"  # RLIMIT_AS 1 GiB
    big = "open('big', 'wb').write(b'x' * (16 << 20))"  # RLIMIT_FSIZE 8 MiB
    assert probe(attempt(big), tier) == "passed"
    started = time.monotonic()
    assert probe("while True:\n    pass", tier) == "timeout"
    assert probe("import time\ntime.sleep(60)", tier, limits=Limits(wall_s=1)) == "timeout"
    assert time.monotonic() - started < 20
    if AS_ROOT:  # the sandbox uid is ours alone: nothing of a killed run may survive
        deadline = time.monotonic() + 3  # SIGKILLed processes take a moment to be reaped
        while _sandbox_processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _sandbox_processes() == []


def _sandbox_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid in (sandbox.SANDBOX_UID, sandbox.TESTS_UID):
                    found.append((entry / "cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                continue
    return found


# --- the guard (on by default) ----------------------------------------------------------------

ATTACKS = {
    "os.system": "__import__('os').system('true')",
    "read /etc/passwd": "open('/etc/passwd').read()",
    "read the project": f"open({PROJECT_FILE!r}).read()",
    "write /tmp": "open('/tmp/gymflow-guard-probe', 'w')",
    "socket": "__import__('socket').socket()",
    "fork": "__import__('os').fork()",
    "kill": "__import__('os').kill(1, 9)",
    "ctypes": "__import__('ctypes')",
    "listdir /": "__import__('os').listdir('/')",
}


@pytest.mark.parametrize("tier", TIERS)
def test_a_caught_refusal_still_fails_the_answer(tier):
    for name, statement in ATTACKS.items():
        body = f"try:\n    {statement}\nexcept BaseException:\n    pass\nreturn 'blocked'"
        assert probe(body, tier, guard=True) == "sandbox_violation", name


@pytest.mark.parametrize("tier", TIERS)
def test_ordinary_code_is_not_refused(tier):
    body = """import collections, dataclasses, fractions, functools, hashlib, heapq, itertools
import json, math, random, re, statistics, string, typing, decimal, bisect, copy, datetime
Point = collections.namedtuple('Point', 'x y')
@dataclasses.dataclass
class Box:
    size: int
class Pair(typing.NamedTuple):
    a: int
@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
with open('scratch.txt', 'w') as fh:
    fh.write(json.dumps({'fib': fib(30)}))
assert json.load(open('scratch.txt'))['fib'] == 832040
assert re.sub(r'\\d', '#', 'a1b2') == 'a#b#' and hashlib.md5(b'x').hexdigest()
assert Point(1, 2).x == 1 and Box(3).size == 3 and Pair(4).a == 4
assert math.gcd(12, 18) == 6 and fractions.Fraction(1, 3) * 3 == 1
assert sorted(heapq.nsmallest(2, [3, 1, 2])) == [1, 2] and random.Random(1).random() < 1
return 'blocked'"""  # "blocked" is the probe's word for "as expected"
    assert probe(body, tier, guard=True) == "passed"


# --- callers: threads, worker processes, tier choice -------------------------------------------

GOLD = Program(
    "def add(a, b):\n    return a + b\n",
    "",
    "def check(candidate):\n    assert candidate(2, 3) == 5\n",
    "add",
)


def test_runs_from_threads_and_worker_processes():
    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(run_program, [GOLD] * 8, [FAST] * 8))
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        outcomes += list(pool.map(run_program, [GOLD] * 4, [FAST] * 4))
    assert [o.verdict for o in outcomes] == ["passed"] * 12


def test_auto_prefers_bwrap_and_names_what_a_fallback_loses(monkeypatch, caplog, tmp_path):
    if sandbox.works("bwrap") is None:
        assert sandbox.resolve("auto") == "bwrap"
    unshare = Path("/usr/bin/unshare")
    if not unshare.exists():
        pytest.skip("no util-linux unshare here")
    (tmp_path / "unshare").symlink_to(unshare)  # a PATH with unshare and no bwrap
    monkeypatch.setenv("PATH", str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="gymflow.environments.code.sandbox"):
        tier = sandbox.choose("auto", sandbox.works.__wrapped__)
    assert tier in ("unshare", "none")
    assert "bwrap is not installed" in caplog.text and "apt-get install bubblewrap" in caplog.text
    with pytest.raises(GymflowError, match="env_unavailable"):
        sandbox.choose("bwrap", sandbox.works.__wrapped__)
    with pytest.raises(ValueError, match="unknown isolation"):
        sandbox.resolve("chroot")


NON_ROOT_LAUNCH = """
import importlib.util, os, socket, subprocess, sys
sys.path.insert(0, {root!r})
spec = importlib.util.spec_from_file_location("sandbox_module", {path!r})
module = importlib.util.module_from_spec(spec)
sys.modules["sandbox_module"] = module
spec.loader.exec_module(module)
interpreter = module.Interpreter(sys.executable, sys.base_prefix)
argv = module.launch_command("bwrap", interpreter, module.Limits())
code = "import os, socket\\ntry:\\n    socket.create_connection(('127.0.0.1', 22), 1)\\n"
code += "except OSError:\\n    print(os.getuid(), sorted(os.listdir('/')), os.listdir('/etc'))"
print(subprocess.run(argv + ["-c", code], capture_output=True, text=True, cwd="/").stdout)
"""


def _world_readable_copy(folder: Path) -> tuple[Path, Path]:
    """``sandbox.py`` and the one gymflow module it imports, copied where uid 65534 can read
    them (the checkout may be a 0700 temporary folder): ``(root for sys.path, sandbox.py)``."""
    import shutil

    from gymflow.core import failures

    root = folder / "readable"
    (root / "gymflow" / "core").mkdir(parents=True)
    for package in (root / "gymflow", root / "gymflow" / "core"):
        (package / "__init__.py").write_text("")
    shutil.copy(failures.__file__, root / "gymflow" / "core" / "failures.py")
    copied = shutil.copy(sandbox.__file__, root / "sandbox.py")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    for parent in root.parents:  # the temporary folders above it are 0700
        if parent == Path(parent.anchor) or parent.stat().st_mode & 0o001:
            break
        parent.chmod(parent.stat().st_mode | 0o001)
    return root, Path(copied)


@pytest.mark.skipif(not AS_ROOT or not os.path.exists("/usr/bin/python3"), reason="needs root")
def test_a_non_root_caller_gets_the_same_bwrap_sandbox(tmp_path):
    """As uid 65534 with the system Python: the user-namespace variant of the bwrap command."""
    if sandbox.works("bwrap"):
        pytest.skip(sandbox.works("bwrap"))
    root, path = _world_readable_copy(tmp_path)
    script = NON_ROOT_LAUNCH.format(root=str(root), path=str(path))
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run([*drop, "/usr/bin/python3", "-c", script], capture_output=True, text=True)
    seen = "65534 ['bin', 'dev', 'etc', 'lib', 'lib64', 'sandbox', 'sbin', 'tmp', 'usr']"
    seen += " ['ld.so.cache']"  # the loader's cache, bound alone
    assert done.stdout.strip() == seen, done.stderr
