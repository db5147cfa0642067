"""Free loopback ports for the tests' servers, picked below the kernel's ephemeral range.

Why not ``bind(("127.0.0.1", 0))``: that port lies in the range the kernel also hands out as
the local port of every outgoing connection. A test that kills a server and starts it again on
its port (a Ray replica restarted, an env server killed mid-batch) can find the port taken by
another test's connection in the meantime, and the bind refused until that connection and its
TIME_WAIT are over: the full suite saw a restarted replica not answer within 60 s. Below the
range no connection is given the port. Ports are drawn at random from the operating system's
entropy, not from ``random``'s global generator: training tests seed that one (transformers'
``set_seed``), so after them two xdist workers can draw the same sequence of ports. That is
the likely cause, not a proven one, of a Prefect UI that found its port in use in a full run
(2026-11-29). No port is handed out twice by one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 20000
_given: set[int] = set()
_draw = random.SystemRandom()  # unaffected by random.seed() anywhere in the process


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pair() -> int:
    """``port`` with ``port`` and ``port + 1`` free (for servers with two workers or replicas)."""
    top = _ephemeral_start() - 2
    for _ in range(200):
        port = _draw.randrange(_LOWEST, top) if top > _LOWEST else _any_port()
        pair = (port, port + 1)
        if not _given.intersection(pair) and all(_free(p) for p in pair):
            _given.update(pair)
            return port
    raise RuntimeError("no two consecutive free ports")


def free_port() -> int:
    """One free port."""
    return free_port_pair()


def _any_port() -> int:  # a kernel whose ephemeral range starts too low to pick below it
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
