"""Run ``gymflow ui`` as a real child process in a given project home (tests of the UIs)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from ports import free_port  # tests/ is on the path; ui_process.free_port for its importers

GYMFLOW = str(Path(sys.executable).parent / "gymflow")


# What Prefect's own client retries: its server answers 503 for errors a client should retry
# (a busy sqlite database while a flow run writes), 429 and 502 likewise.
RETRIED = {429, 502, 503}


def api(url: str, body: dict | None = None, attempts: int = 6):
    """JSON over HTTP (POST when ``body`` is given), retrying what Prefect's client retries."""
    data = json.dumps(body).encode() if body is not None else None
    method = "POST" if body is not None else "GET"
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            if error.code not in RETRIED or attempt == attempts - 1:
                raise
            time.sleep(2**attempt)


class UIProcess:
    """``gymflow ui`` on free ports; :attr:`lines` holds what it printed once both answer."""

    def __init__(self, home: Path, env: dict | None = None, timeout_s: float = 120.0) -> None:
        """``env``: the environment to start it in (default: this process's)."""
        self.prefect_port, self.mlflow_port = free_port(), free_port()
        env = (os.environ if env is None else env) | {"GYMFLOW_HOME": str(home)}
        self.proc = subprocess.Popen(
            [GYMFLOW, "ui", "--prefect-port",
             str(self.prefect_port), "--mlflow-port", str(self.mlflow_port)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        deadline = time.monotonic() + timeout_s
        while not any(line.startswith("both answering") for line in self.lines):
            line = self.proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("gymflow ui did not come up:\n" + "".join(self.lines) + line)
            self.lines.append(line)
        self.prefect = f"http://127.0.0.1:{self.prefect_port}"
        self.mlflow = f"http://127.0.0.1:{self.mlflow_port}"

    def ready_s(self) -> float:
        line = next(x for x in self.lines if x.startswith("both answering"))
        return float(re.search(r"after ([0-9.]+) s", line).group(1))

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout_s: float = 30.0) -> str:
        """Send ``sig``; the rest of the output once it exited."""
        self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=timeout_s)
        return out

    def __enter__(self) -> UIProcess:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.stop()
