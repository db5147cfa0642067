"""Adversarial answers for the code environment: each must score 0.

Two groups. *Fakes* try to pass without solving: print "PASSED", exit before the tests,
redefine ``check`` or ``AssertionError``, return an object equal to everything. *Attacks* carry
the correct function **and** do something the sandbox must refuse (a shell command, reading
``/etc/passwd`` or the project, writing outside the work dir, a fork bomb, a memory bomb, an
endless loop, a socket to 127.0.0.1, killing the parent): scoring 0 although the tests would
pass shows that a refused operation fails the answer even when the code catches the error.

Every probe costs a sandbox run (the endless loop a whole CPU limit), so a task carries a
rotating share of them (:data:`PROBES_PER_TASK`, chosen by its content hash); over a few dozen
tasks every probe runs many times. :func:`all_probes` gives the full list for tests.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.core.task_record import Task
from gymflow.env.environment import Probe

PROBES_PER_TASK = 3
PROJECT_FILE = str(Path(__file__).resolve())
"""A project file the answer must not read (this one)."""
OUTSIDE_FILE = str(Path(__file__).resolve().parents[2] / "gymflow-code-probe.txt")
"""Where the write probes try to leave a file: the project root, outside any work dir."""


def gold_code(truth: dict) -> str:
    """The gold function as a whole module (generated tasks keep a short form)."""
    return truth.get("gold_code") or truth["prompt"] + truth["canonical_solution"]


def _fenced(code: str) -> str:
    return f"```python\n{code}```"


def _attack(truth: dict, code: str) -> str:
    return _fenced(code + "\n\n" + gold_code(truth))


def _quietly(statement: str) -> str:
    return f"try:\n    {statement}\nexcept BaseException:\n    pass\n"


def all_probes(truth: dict) -> list[Probe]:
    """Every probe for a task with these HumanEval fields."""
    name = truth["entry_point"]
    stub = f"def {name}(*args, **kwargs):\n    return None\n"
    fakes = {
        "print_passed": _fenced(f"print('PASSED')\nprint('All tests passed.')\n{stub}"),
        "exit_before_tests": _fenced("import sys\nsys.exit(0)\n\n" + gold_code(truth)),
        "os_exit": _fenced(f"import os\n{stub}os._exit(0)\n"),
        "patch_check": _fenced(
            "import builtins\n\ndef check(candidate):\n    return True\n\n"
            "builtins.check = check\n"
            "builtins.AssertionError = type('Quiet', (Exception,), {})\n" + stub
        ),
        "always_equal": _fenced(
            "class AlwaysEqual:\n    def __eq__(self, other):\n        return True\n\n"
            "    def __ne__(self, other):\n        return False\n\n"
            f"def {name}(*args, **kwargs):\n    return AlwaysEqual()\n"
        ),
    }
    attacks = {
        "os_system": "import os\n" + _quietly(f"os.system({'echo pwned > ' + OUTSIDE_FILE!r})"),
        "read_passwd": _quietly("open('/etc/passwd').read()"),
        "read_project": _quietly(f"open({PROJECT_FILE!r}).read()"),
        "write_outside": _quietly(f"open({OUTSIDE_FILE!r}, 'w').write('pwned')"),
        "fork_bomb": "import os\nwhile True:\n    os.fork()\n",
        "memory_bomb": "hog = bytearray(1 << 40)\n",
        "infinite_loop": "while True:\n    pass\n",
        "socket_localhost": "import socket\n"
        + _quietly("socket.create_connection(('127.0.0.1', 22), timeout=1)"),
        "kill_parent": "import os, signal\n" + _quietly("os.kill(os.getppid(), signal.SIGKILL)"),
    }
    probes = [Probe(key, text, 0.0) for key, text in fakes.items()]
    probes += [Probe(key, _attack(truth, code), 0.0) for key, code in attacks.items()]
    return probes


def probes_for(task: Task) -> list[Probe]:
    """``empty`` and a rotating share of :func:`all_probes`, chosen by the task's hash."""
    probes = all_probes(task.ground_truth)
    start = int(task.content_hash[:8], 16) % len(probes)
    chosen = [probes[(start + i) % len(probes)] for i in range(PROBES_PER_TASK)]
    return [Probe("empty", "", 0.0), *chosen]
