"""The kernel layer of the code sandbox: Landlock and seccomp, probed once per tier.

Without bubblewrap (the ``unshare`` and ``none`` tiers) the barrier must still sit outside the
reach of the code it guards: an audit hook in the answer's own interpreter can be switched off
from inside. So each sandboxed interpreter confines itself with Landlock and a seccomp filter
(``confine.py``) before any untrusted code runs. :func:`layer` says what this host gives a tier
(proved by a real launch in that tier, once per process); :func:`require` refuses a tier with
neither bubblewrap nor Landlock unless the operator accepted that with
``GYMFLOW_CODE_INSECURE_SANDBOX=1`` (``gymflow env serve --insecure-sandbox``).
"""

from __future__ import annotations

import functools
import logging
import marshal
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.environments.code import confine, sandbox, seccomp_filter

INSECURE_ENV = "GYMFLOW_CODE_INSECURE_SANDBOX"
"""Set to 1 to run answers in a tier with neither bubblewrap nor Landlock (an audit hook and
rlimits only)."""
SYSTEM_READ = (
    "/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/etc/ld.so.cache",
    "/usr/share/zoneinfo", "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random",
)  # fmt: skip
"""What a confined interpreter may read besides its stdlib: shared libraries the stdlib's
extension modules load, time zones, harmless devices."""
LANDLOCK_HOWTO = (
    "Landlock needs Linux >= 5.13 with landlock in the active LSMs (lsm=landlock,... on the "
    "kernel command line; /sys/kernel/security/lsm lists them)"
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KernelLayer:
    """What confines a tier's interpreters besides the tier itself."""

    landlock_abi: int
    """0: no Landlock; 4+: TCP rules too; 6+: signal and abstract-socket scoping too."""
    seccomp: bytes | None
    """The filter the interpreters load, or ``None`` without libseccomp/pyseccomp."""
    missing: tuple[str, ...] = ()
    """What is missing, each with how to get it (logged once)."""

    def plan(self, write_work_dir: bool) -> dict:
        """What ``inside.py`` hands to ``confine.confine`` (it adds its stdlib and work dir)."""
        return {
            "landlock_abi": self.landlock_abi,
            "system_read": list(SYSTEM_READ),
            "write_work_dir": write_work_dir,
            "seccomp": self.seccomp,
        }


def insecure_allowed() -> bool:
    return os.environ.get(INSECURE_ENV, "").strip().lower() in ("1", "true", "yes")


@functools.cache
def layer(tier: sandbox.Isolation) -> KernelLayer:
    """Landlock and seccomp as this host offers them to ``tier`` (a real launch proves it)."""
    abi = confine.landlock_abi()
    program, why_not = seccomp_filter.program()
    missing = []
    if abi == 0:
        missing.append(f"no Landlock on this kernel: {LANDLOCK_HOWTO}")
    elif abi < 4:
        missing.append(f"Landlock ABI {abi}: no TCP rules (ABI 4, Linux 6.7)")
    elif abi < 6:
        missing.append(f"Landlock ABI {abi}: no signal scoping (ABI 6, Linux 6.12)")
    if program is None:
        missing.append(why_not)
    if abi or program:
        problem = _try(tier, abi, program)
        if problem:
            missing.append(f"the kernel layer does not work in the {tier} tier: {problem}")
            abi, program = 0, None
    return KernelLayer(abi, program, tuple(missing))


def require(tier: sandbox.Isolation) -> KernelLayer:
    """The layer of ``tier``; raise where neither bubblewrap nor Landlock confines it."""
    found = layer(tier)
    if tier == "bwrap" or found.landlock_abi:
        _warn_once(tier, found.missing)
        return found
    if insecure_allowed():
        _warn_once(tier, (*found.missing, f"running answers anyway ({INSECURE_ENV}=1)"))
        return found
    raise GymflowError(
        FailureKind.ENV_UNAVAILABLE,
        f"refusing to run model-written code in the {tier!r} tier: "
        f"{sandbox.works('bwrap') or 'bubblewrap is not the chosen tier'}, and "
        f"{'; '.join(found.missing) or 'no Landlock'}. Install bubblewrap (apt-get install "
        "bubblewrap) or use a kernel with Landlock, or accept an in-process guard only with "
        f"--insecure-sandbox ({INSECURE_ENV}=1)",
    )


@functools.cache
def _warn_once(tier: str, missing: tuple[str, ...]) -> None:
    if missing:
        log.warning("code sandbox (%s tier): %s", tier, "; ".join(missing))


PROBE = """
import os, sys
read = [p for p in sys.path if p]
if ABI:
    landlock(ABI, read, [])
if BPF:
    seccomp(BPF)
try:
    os.listdir("/")
except PermissionError:
    pass
else:
    if ABI:
        raise SystemExit("Landlock did not refuse a read outside its rules")
print("confined")
"""


def _try(tier: sandbox.Isolation, abi: int, program: bytes | None) -> str | None:
    """``None`` if an interpreter in ``tier`` confines itself with these, else why not."""
    if sandbox.works(tier):
        return sandbox.works(tier)
    probe = PROBE.replace("ABI", str(abi)).replace("BPF", repr(program))
    source = Path(confine.__file__).read_text() + probe
    code = marshal.dumps(compile(source, "<confine probe>", "exec"))
    argv = [*sandbox.launch_command(tier, sandbox.Interpreter.current(), sandbox.Limits())]
    try:
        done = subprocess.run(
            [*argv, "-c", sandbox.BOOTSTRAP], input=code, capture_output=True, timeout=30, cwd="/"
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0 or done.stdout.strip() != b"confined":
        return f"status {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]}"
    return None
