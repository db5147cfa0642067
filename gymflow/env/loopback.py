"""Serve an ASGI app on 127.0.0.1 in a background thread (tests, examples, notebooks).

uvicorn on a socket bound to port 0 (the OS picks a free port, so parallel runs never clash),
stopped and joined on exit. The socket is made with ``IPPROTO_TCP`` because asyncio sets
``TCP_NODELAY`` only on such sockets (without it, a request waits ~40 ms on Nagle's algorithm).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn


class LoopbackServer:
    """``with LoopbackServer(app) as server: ... server.url ...``"""

    def __init__(self, app, start_timeout_s: float = 10.0) -> None:
        self.app, self.start_timeout_s = app, start_timeout_s
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="critical", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(self.start_timeout_s)
        self.sock.close()


@contextmanager
def serve_on_loopback(app, start_timeout_s: float = 10.0) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT``) while ``app`` is served."""
    with LoopbackServer(app, start_timeout_s) as server:
        yield server.url
