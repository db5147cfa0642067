"""Pick a policy backend from one spec string (``gymflow rollouts collect --policy SPEC`` ...).

* ``transformers:PATH`` or a bare ``PATH``: in-process transformers (CPU or GPU);
* ``vllm:PATH``: vLLM, in-process (GPU; ``pip install 'gymflow[gpu]'``) or as a ``vllm serve``
  process gymflow starts and stops (``make setup-vllm``; CPU or GPU);
* ``openai:http://127.0.0.1:8000/v1?model=NAME``: any OpenAI-compatible server;
* ``models:/NAME@ALIAS`` or ``models:/NAME/VERSION``: a version of the project home's MLflow
  registry (e.g. ``models:/gymflow-tool_call@champion``), downloaded once into the home's cache
  and run in-process with transformers (:mod:`gymflow.policy.registered`);
* ``scripted:ENV``: no model — replays environment ENV's gold turns for each task (a perfect
  policy). For smoke tests and benchmarks of the rollout engine and env servers only: it needs
  the tasks (``load_policy(spec, tasks=...)``) and it learns nothing.
  ``scripted:replies=FILE`` answers from a file of prepared replies instead
  (:meth:`~gymflow.policy.scripted.ScriptedPolicy.from_replies`; a test teacher to serve).

``openai`` options go in the query: ``model`` (required), ``timeout_s``, ``retries``,
``concurrency``, ``token_ids`` (``1`` asks a vLLM or gymflow server for token ids and logprobs)
``api_key_env``, and ``body.FIELD=VALUE`` for any other request field (VALUE read as JSON if it
parses, e.g. ``body.tool_choice=none`` for a vLLM serve started without a tool parser: it then
returns the model's text and the client parses the tool calls). The bearer token is read from the environment, never from the spec (specs
end up in logs and MLflow params): ``GYMFLOW_POLICY_API_KEY``, else ``OPENAI_API_KEY``, or the
variable ``api_key_env`` names. The key is sent only over https or to a loopback address;
``insecure_key=1`` sends it over plain http to another host too
(:func:`gymflow.policy.openai_backend.key_travels_safely`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from gymflow.core.failures import FailureKind, GymflowError

BACKENDS = ("transformers", "vllm", "openai", "scripted", "models")
OPENAI_OPTIONS = {
    "model", "timeout_s", "retries", "concurrency", "token_ids", "api_key_env", "insecure_key",
}  # fmt: skip
KEY_VARIABLES = ("GYMFLOW_POLICY_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class PolicySpec:
    backend: str
    target: str
    """A model folder, or the server's base URL (query removed)."""
    options: dict[str, str] = field(default_factory=dict)


def parse_spec(spec: str) -> PolicySpec:
    """Split a spec string; raises ``GymflowError(BAD_REQUEST)`` saying what is wrong.

    >>> parse_spec("openai:http://127.0.0.1:8000/v1?model=m")
    PolicySpec(backend='openai', target='http://127.0.0.1:8000/v1', options={'model': 'm'})
    >>> parse_spec("runs/x/policy").backend
    'transformers'
    """
    head, sep, rest = spec.partition(":")
    if not sep or head not in BACKENDS:
        if sep and head.isidentifier() and not Path(spec).exists():
            raise _bad(f"unknown policy backend {head!r} in {spec!r}; use one of {BACKENDS}")
        return PolicySpec("transformers", spec)  # a bare path
    if not rest:
        raise _bad(f"{spec!r} names no {'URL' if head == 'openai' else 'model folder'}")
    if head == "models":
        from gymflow.policy.registered import parse_registry_uri

        parse_registry_uri(rest)  # refuses a malformed one now, before any work
        return PolicySpec("models", rest)
    if head != "openai":
        return PolicySpec(head, rest)
    url = urlsplit(rest)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise _bad(f"{spec!r}: the openai backend needs an http(s) URL")
    options = dict(parse_qsl(url.query, keep_blank_values=True))
    if unknown := {k for k in options if not k.startswith("body.")} - OPENAI_OPTIONS:
        hint = " (put the key in GYMFLOW_POLICY_API_KEY)" if "api_key" in unknown else ""
        raise _bad(f"{spec!r}: unknown option(s) {sorted(unknown)}{hint}")
    if not options.get("model"):
        raise _bad(f"{spec!r}: say which model the server should run (?model=NAME)")
    base = urlunsplit((url.scheme, url.netloc, url.path, "", ""))
    return PolicySpec("openai", base, options)


def load_policy(spec: str | PolicySpec, tasks: list | None = None, home: Path | None = None):
    """The policy a spec names: a token-level ``Policy`` or a message-level ``ChatPolicy``.

    ``tasks`` are the tasks a ``scripted:ENV`` policy will be asked (the others ignore them);
    ``home`` is the project home whose registry a ``models:`` spec reads (default: the
    ``GYMFLOW_HOME`` rule).
    """
    spec = parse_spec(spec) if isinstance(spec, str) else spec
    if spec.backend == "scripted" and spec.target.startswith("replies="):
        from gymflow.policy.scripted import ScriptedPolicy

        return ScriptedPolicy.from_replies(Path(spec.target.removeprefix("replies=")))
    if spec.backend == "scripted":
        return _gold_replay(spec.target, tasks)
    if spec.backend == "models":
        from gymflow.policy.registered import resolve
        from gymflow.policy.transformers_backend import TransformersPolicy

        return TransformersPolicy.from_path(str(resolve(spec.target, home).path))
    if spec.backend == "transformers":
        check_model_path(spec)
        from gymflow.policy.transformers_backend import TransformersPolicy

        return TransformersPolicy.from_path(spec.target)
    if spec.backend == "vllm":
        from gymflow.policy.vllm_backend import load_vllm

        return load_vllm(spec.target)
    from gymflow.policy.openai_backend import OpenAIChatPolicy

    opts = spec.options
    try:
        return OpenAIChatPolicy(
            spec.target,
            opts["model"],
            api_key=api_key(opts.get("api_key_env")),
            timeout_s=float(opts.get("timeout_s", 60)),
            retries=int(opts.get("retries", 3)),
            max_concurrency=int(opts.get("concurrency", 32)),
            token_ids=opts.get("token_ids", "0").lower() in ("1", "true", "yes"),
            allow_insecure_key=opts.get("insecure_key", "0").lower() in ("1", "true", "yes"),
            extra_body={k[5:]: _json_or_text(v) for k, v in opts.items() if k.startswith("body.")},
        )
    except ValueError as exc:
        raise _bad(f"openai spec option is not a number: {exc}") from None


def check_model_path(spec: PolicySpec) -> None:
    """``bad_request`` when a ``transformers:`` spec names no model folder (before any work)."""
    if spec.backend != "transformers":
        return
    from gymflow.policy.checkpoints import CATALOG_PREFIX
    from gymflow.policy.gguf_checkpoint import is_gguf

    # a .gguf file and catalog:NAME are checkpoints too: from_path converts them once
    converted = spec.target.startswith(CATALOG_PREFIX) or is_gguf(spec.target)
    if not converted and not Path(spec.target).is_dir():
        raise _bad(f"no model folder at {spec.target!r}")


def _example_tasks(env) -> list:
    """The environment's own ``examples/tasks.jsonl`` (none when it ships no examples)."""
    from gymflow.data.task_files import load_tasks
    from gymflow.env.environment import examples_folder

    path = examples_folder(env) / "tasks.jsonl"
    return list(load_tasks(env, path).values()) if path.is_file() else []


def _gold_replay(env_name: str, tasks: list | None):
    """A :class:`ScriptedPolicy` saying each task's gold turns (found by the prompt's text)."""
    from gymflow.env.registry import get_env
    from gymflow.policy.scripted import ScriptedPolicy

    try:
        env = get_env(env_name)
    except GymflowError as exc:
        raise _bad(f"scripted:{env_name}: {exc.detail}") from None
    if tasks is None:
        tasks = _example_tasks(env)
    if not tasks:
        raise _bad(
            f"scripted:{env_name} needs the tasks it will be asked: give them (gymflow policy "
            f"serve --tasks FILE), or add examples/tasks.jsonl to the environment"
        )
    # Keyed as ScriptedPolicy sees a prompt; two tasks with one prompt get the first's turns.
    turns: dict[str, list[str]] = {}
    for task in tasks:
        turns.setdefault("\n".join(m["content"] for m in task.prompt), env.gold_turns(task))

    def respond(prompt: str, turn: int, observations: list[str]) -> str:
        gold = turns[prompt]
        return gold[min(turn, len(gold) - 1)]

    return ScriptedPolicy(respond)


def api_key(variable: str | None = None) -> str | None:
    """The bearer token from ``variable`` if given, else the first of ``KEY_VARIABLES`` set."""
    if variable:
        if not os.environ.get(variable):
            raise _bad(f"api_key_env={variable} but that environment variable is not set")
        return os.environ[variable]
    return next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)


def _json_or_text(value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _bad(message: str) -> GymflowError:
    return GymflowError(FailureKind.BAD_REQUEST, message)
