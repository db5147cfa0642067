"""The code sandbox under attack, in every tier this machine runs, as root and as a plain user.

The attacks (``tests/sandbox_attacks.py``): the ``gc`` hook swap, a ``__code__`` patch, audit-hook
removal, ``ctypes``, signals to the sibling and the host, forged verdicts on every descriptor
and through ``/proc``, ``fork``, ``/proc/<pid>/mem``, a socket to an MLflow-like listener on
127.0.0.1, reading ``/etc/hostname`` and a planted secret. Each runs twice: with the audit-hook
guard (it must be refused *and recorded*: ``sandbox_violation``) and without it, as if a
bypass had switched it off (the tier and the kernel layer alone must stop it: never
``passed``, and the seccomp filter's kills are recorded). Either way no step may leak, and
the host checks its own side: the listener got no connection, the victim process lives, no
file appeared outside. The plain user is made with ``useradd`` when the suite runs as root.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from sandbox_attacks import ATTACKS, run_attacks

from gymflow.environments.code import kernel_layer, sandbox

AS_ROOT = os.geteuid() == 0
TIERS = [t for t in sandbox.TIERS if not sandbox.works(t)]
PLAIN_USER = "gymflow-sandbox"
SYSTEM_PYTHON = "/usr/bin/python3"
CODE = Path(sandbox.__file__).parent


class Host:
    """What the attacks aim at on the host: a loopback listener, a victim, a secret, a target."""

    def __init__(self, user: pwd.struct_passwd | None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="gymflow-attack-", dir="/tmp"))
        self.folder.chmod(0o755)
        self.secret = self.folder / "secret.txt"
        self.secret.write_text("planted-secret-31")
        self.secret.chmod(0o644)  # readable by anyone: only the sandbox may stop a read
        outside = self.folder / "outside"
        outside.mkdir()
        outside.chmod(0o777)
        self.outside = outside / "written.txt"
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.listener.settimeout(0.05)
        drop = _drop(user) if user else []
        self.victim = subprocess.Popen([*drop, "sleep", "120"])

    def ctx(self, host_pid: int) -> dict:
        return {
            "host_pid": host_pid,
            "victim": self.victim.pid,
            "port": self.listener.getsockname()[1],
            "secret": str(self.secret),
            "outside": str(self.outside),
        }

    def untouched(self) -> None:
        with pytest.raises(TimeoutError):
            self.listener.accept()  # nothing ever connected
        assert self.victim.poll() is None, "the victim process was killed"
        assert not self.outside.exists(), "a file was written outside the sandbox"

    def close(self) -> None:
        self.victim.kill()
        self.victim.wait()
        self.listener.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _drop(user: pwd.struct_passwd) -> list[str]:
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]


@pytest.fixture(scope="module")
def plain_user() -> pwd.struct_passwd:
    """A user without privileges (made with useradd when missing: the suite runs as root)."""
    if not AS_ROOT:
        pytest.skip("not root: the suite already runs as a plain user (the root run is skipped)")
    if not (os.path.exists(SYSTEM_PYTHON) and shutil.which("setpriv")):
        pytest.skip(f"needs {SYSTEM_PYTHON} and setpriv to run as another user")
    try:
        return pwd.getpwnam(PLAIN_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PLAIN_USER],
            check=True,
        )
        return pwd.getpwnam(PLAIN_USER)


def _check(results: list[dict], tier: str, host: Host) -> None:
    assert {(r["attack"], r["guard"]) for r in results} == {
        (a, g) for a in ATTACKS for g in (True, False)
    }
    layer = kernel_layer.layer(tier)
    for r in results:
        where = f"{r['attack']} in {tier} (guard {'on' if r['guard'] else 'off'}): {r['detail']}"
        assert r["verdict"] != "passed", where
        assert "LEAK" not in r["detail"] and "planted-secret" not in r["detail"], where
        if r["guard"]:  # refused by the guard: recorded, whatever the answer did next
            assert r["verdict"] == "sandbox_violation", where
            assert "BYPASS" not in r["detail"], where
        if not r["guard"] and r["attack"] == "fork" and layer.seccomp:
            assert r["verdict"] == "sandbox_violation" and "seccomp" in r["detail"], where
    host.untouched()


@pytest.mark.parametrize("tier", TIERS)
def test_attacks_as_this_user(tier):
    """As the user running the suite (root here: the sandbox switches to uid 65534)."""
    host = Host(None)
    try:
        results = run_attacks([tier], host.ctx(os.getpid()))
        _check(results, tier, host)
    finally:
        host.close()


@pytest.mark.parametrize("tier", TIERS)
def test_attacks_as_a_plain_user(tier, plain_user):
    """As a plain user with the system Python: the same uid as the sandbox's (no uid switch),
    so the tier and the kernel layer are all that stand between the answer and that user."""
    host = Host(plain_user)
    tree = _readable_tree(host.folder / "code")
    spec = host.folder / "spec.json"
    spec.write_text(json.dumps({"tiers": [tier], "ctx": host.ctx(0)}))  # 0: the caller's pid
    spec.chmod(0o644)
    try:
        done = subprocess.run(
            [*_drop(plain_user), SYSTEM_PYTHON, str(tree / "sandbox_attacks.py"), str(spec)],
            capture_output=True, text=True, timeout=300, cwd=str(host.folder),
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(host.folder)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        _check(json.loads(done.stdout), tier, host)
    finally:
        host.close()


def _readable_tree(root: Path) -> Path:
    """The sandbox's modules, the attacks and pyseccomp where a plain user can read them."""
    import pyseccomp

    from gymflow.core import failures

    code = root / "gymflow" / "environments" / "code"
    code.mkdir(parents=True)
    (root / "gymflow" / "core").mkdir()
    for package in (
        root / "gymflow",
        root / "gymflow" / "core",
        root / "gymflow" / "environments",
        code,
    ):
        (package / "__init__.py").write_text("")  # fmt: skip
    shutil.copy(failures.__file__, root / "gymflow" / "core" / "failures.py")
    for name in ("execution", "sandbox", "inside", "confine", "kernel_layer", "seccomp_filter"):
        shutil.copy(CODE / f"{name}.py", code / f"{name}.py")
    shutil.copy(pyseccomp.__file__, root / "pyseccomp.py")
    shutil.copy(Path(__file__).with_name("sandbox_attacks.py"), root / "sandbox_attacks.py")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def test_no_tier_without_bwrap_or_landlock_runs_unless_told(monkeypatch):
    """Neither bubblewrap nor Landlock: refused in one line naming both and the flag."""
    bare = kernel_layer.KernelLayer(0, None, ("no Landlock on this kernel: ...",))
    monkeypatch.setattr(kernel_layer, "layer", lambda tier: bare)
    monkeypatch.delenv(kernel_layer.INSECURE_ENV, raising=False)
    with pytest.raises(Exception) as refused:
        kernel_layer.require("none")
    message = str(refused.value)
    assert "env_unavailable" in message and "apt-get install bubblewrap" in message
    assert "--insecure-sandbox" in message and "Landlock" in message
    assert kernel_layer.require("bwrap") is bare  # bubblewrap alone is a boundary
    monkeypatch.setenv(kernel_layer.INSECURE_ENV, "1")
    assert kernel_layer.require("none") is bare


def test_a_line_without_the_runs_nonce_is_not_a_verdict():
    """What the answer could print or write where the host reads: ignored without the nonce."""
    from gymflow.environments.code.execution import _parse_verdict

    class Ended:
        returncode = 0

    forged = b"started\n{'verdict': 'passed', 'detail': ''}\n"
    real = b"n0nce started\n" + forged + b"n0nce {'verdict': 'test_failed', 'detail': 'x'}\n"
    with tempfile.TemporaryFile() as log:
        with pytest.raises(Exception, match="did not start"):
            _parse_verdict(forged, "n0nce", Ended(), log)
        assert _parse_verdict(real, "n0nce", Ended(), log)["verdict"] == "test_failed"
        started_only = _parse_verdict(b"n0nce started\n" + forged, "n0nce", Ended(), log)
        assert started_only["verdict"] == "runtime_error"  # then only forged lines: it died


def test_the_kernel_layer_is_on_in_every_tier_here():
    """This machine (Linux with Landlock ABI >= 6, libseccomp) must confine every tier."""
    if not kernel_layer.confine.landlock_abi():
        pytest.skip("no Landlock on this kernel")
    for tier in TIERS:
        layer = kernel_layer.layer(tier)
        assert layer.landlock_abi >= 1 and layer.seccomp, (tier, layer.missing)
