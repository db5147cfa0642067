"""``gymflow policy serve``: a policy at an OpenAI-compatible ``/v1/chat/completions``."""

from __future__ import annotations

from pathlib import Path

import typer

from gymflow.cli.common import children_die_with_me, command_group, one_of

policy_app = command_group("Policies: serve one over an OpenAI-compatible API.")


@policy_app.command("serve")
def policy_serve(
    policy: str = typer.Option(
        None,
        "--policy",
        help="Model folder (transformers), a token backend spec (transformers:PATH, vllm:PATH) "
        "or a registered model (models:/NAME@ALIAS).",
    ),
    model: str = typer.Option(None, "--model", hidden=True),
    host: str = typer.Option("127.0.0.1", help="Bind address (loopback by default)."),
    port: int = typer.Option(8000, help="Port."),
    name: str = typer.Option(None, help="Model name clients send (default: the folder name)."),
    api_key_env: str = typer.Option(
        None, help="Require the bearer token held in this environment variable."
    ),
    insecure: bool = typer.Option(
        False, help="Allow a non-loopback bind without --api-key-env (anyone may use the model)."
    ),
    tasks: Path = typer.Option(
        None,
        "--tasks",
        help="scripted:ENV: the tasks it will be asked, whose gold answers it gives (JSONL, "
        "see --format); default: the environment's examples/tasks.jsonl.",
    ),
    fmt: str = typer.Option("gymflow", "--format", help="Format of the --tasks file."),
) -> None:
    """Serve a policy at /v1/chat/completions (OpenAI-compatible; tool calls structured).

    scripted:ENV serves the environment's gold answers (a successful episode for an agent
    program before any training).

    Example: gymflow policy serve --policy models:/gymflow-tool_call@champion --port 8000
    """
    import os

    from gymflow.cli.errors import fail, fail_with
    from gymflow.core.failures import GymflowError

    spec_text = one_of(policy, model, "--policy")
    if spec_text is None:
        fail("bad_request", "--policy is required (a model folder or a policy spec)")
    import uvicorn

    from gymflow.env.serve import check_bind
    from gymflow.policy.openai_server import build_openai_app
    from gymflow.policy.spec import load_policy, parse_spec

    try:
        spec = parse_spec(spec_text)
        if spec.backend == "openai":
            fail("bad_request", "--policy: serve a model folder, not another server")
        key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and not key:
            fail("bad_request", f"--api-key-env: {api_key_env} is not set")
        served = name or Path(spec.target).name
        check_bind(served, host, key, insecure, "--api-key-env VAR", "use the model")
        asked = None
        if tasks is not None:
            from gymflow.data.task_files import load_tasks
            from gymflow.env.registry import get_env

            if spec.backend != "scripted":
                fail("bad_request", "--tasks is for a scripted:ENV policy")
            asked = list(load_tasks(get_env(spec.target), tasks, fmt).values())
        loaded = load_policy(spec, asked)
    except GymflowError as exc:
        fail_with(exc)
    children_die_with_me()
    typer.echo(f"serving {served} at http://{host}:{port}/v1")
    uvicorn.run(
        build_openai_app(loaded, served, api_key=key), host=host, port=port, log_level="warning"
    )
