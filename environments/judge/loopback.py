"""Serve an ASGI app on 127.0.0.1 in a background thread: a judge for tests and examples.

uvicorn on a socket bound to port 0 (the OS picks a free port, so parallel runs never clash),
stopped and joined on exit.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn


@contextmanager
def serve_on_loopback(app, start_timeout_s: float = 10.0) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT``) while ``app`` is served."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    try:
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(start_timeout_s)
        sock.close()
