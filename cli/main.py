"""The ``gymflow`` command line. Imports stay lazy so ``gymflow --help`` starts fast."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gymflow.cli.commands import register_all
from gymflow.rollout.collection import CollectOptions  # light: the flags are its fields

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="The RLVR lifecycle for LLM agents."
)
env_app = typer.Typer(no_args_is_help=True, help="Environments: list, check, serve.")
app.add_typer(env_app, name="env")
policy_app = typer.Typer(no_args_is_help=True, help="Policies: serve one over an OpenAI API.")
app.add_typer(policy_app, name="policy")
rollouts_app = typer.Typer(no_args_is_help=True, help="Rollouts: collect, export.")
app.add_typer(rollouts_app, name="rollouts")


def _children_die_with_me() -> None:
    """Start the parent watchdog for a long-running command: a SIGKILL of this process then
    takes its servers, workers and pools with it (:mod:`gymflow.core.watchdog`)."""
    from gymflow.core.watchdog import start_watchdog

    start_watchdog()


@app.command()
def run(
    out: Path = typer.Option(None, help="Folder for run folders (default: <home>/runs)."),
    run_id: str = typer.Option(None, help="Resume this run id (re-runs only unfinished stages)."),
    config: Path = typer.Option(None, help="JSON file with LifecycleConfig fields to override."),
    smoke: bool = typer.Option(False, help="Reduced budget that still runs every stage (minutes)."),
    seed: int = typer.Option(None, help="Seed for demos, training and sampling."),
) -> None:
    """Run the whole lifecycle (the embedded default: a tiny model built here, on CPU)."""
    from gymflow.lifecycle.home import configure_prefect, project_home

    home = project_home()
    configure_prefect(home)
    from gymflow.core.failures import GymflowError
    from gymflow.core.ids import new_run_id
    from gymflow.lifecycle.run_config import read_overrides, run_config
    from gymflow.lifecycle.run_context import open_run
    from gymflow.lifecycle.summary import render_table

    run_id = run_id or new_run_id()
    run_dir = ((out or home / "runs") / run_id).resolve()
    saved = run_dir / "config.json"
    try:
        overrides = read_overrides(config) if config is not None else None
        cfg = run_config(saved, overrides, smoke, seed)
    except GymflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if saved.exists():
        changed = " with the changes asked for" if overrides or seed is not None else ""
        ignored = " (--smoke applies to new runs only)" if smoke else ""
        typer.echo(f"resuming run {run_id} with its saved config{changed}{ignored}")
    _children_die_with_me()
    ctx = open_run(home, run_dir, cfg)
    from gymflow.flows.lifecycle import lifecycle

    typer.echo(f"run {run_id}: folder {run_dir}")
    try:
        summary = lifecycle(ctx, cfg)
    except GymflowError as exc:
        typer.echo(f"run {run_id} stopped: {exc}", err=True)
        typer.echo(
            f"fix the cause and resume with: gymflow run --run-id {run_id}"
            " (add --config FIX.json to change settings of the saved config)",
            err=True,
        )
        raise typer.Exit(1) from None
    except Exception as exc:
        typer.echo(f"run {run_id} failed: {type(exc).__name__}: {exc}", err=True)
        typer.echo(f"resume with: gymflow run --run-id {run_id}", err=True)
        raise typer.Exit(1) from None
    typer.echo(render_table(summary))
    typer.echo(f"summary: {run_dir / 'summary.json'}, report: {run_dir / 'report.md'}")
    links = summary.get("links", {})
    for label, key in (("Prefect flow run", "prefect"), ("MLflow run", "mlflow")):
        if key in links:
            typer.echo(f"{label}: {links[key]}  (serve both UIs with `gymflow ui`)")


@app.command()
def verify(
    env: str = typer.Option(..., help="Environment whose verifier scores the responses."),
    tasks: Path = typer.Option(..., help="Tasks, JSONL (see --format)."),
    responses: Path = typer.Option(
        ..., help='JSONL rows: "task_id" and either "response" (text) or "output" (items).'
    ),
    out: Path = typer.Option(..., help="Scores, JSONL: one row per response, same order."),
    fmt: str = typer.Option(
        "gymflow", "--format", help="Task format: gymflow, or one the environment adds."
    ),
) -> None:
    """Score given responses with an environment's verifier, no model (checks a verifier)."""
    from gymflow.core.failures import GymflowError
    from gymflow.core.jsonl import InputFileError
    from gymflow.env.registry import get_env
    from gymflow.eval.verify_files import VerifierCrash, verify_files

    try:
        environment = get_env(env)
    except GymflowError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(2) from None
    try:
        scored = verify_files(environment, tasks, responses, out, fmt)
    except InputFileError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(2) from None
    except VerifierCrash as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    n = len(scored)
    mean = sum(row["reward"] for row in scored) / n if n else 0.0
    wins = sum(bool(row["success"]) for row in scored)
    typer.echo(f"{n} responses scored: mean reward {mean:.3f}, {wins} successes -> {out}")


@env_app.command("list")
def env_list() -> None:
    """List the environments: environments/ and installed plugins (name, version, tools, source)."""
    from gymflow.core.failures import GymflowError
    from gymflow.env.registry import env_source, get_env, list_envs

    try:
        for name in list_envs():
            env = get_env(name)
            typer.echo(
                f"{name}\tv{env.version}\t{len(env.tool_specs)} tools\t"
                f"max_turns={env.max_turns}\t{env_source(name)}"
            )
    except GymflowError as exc:  # two environments with one name, a plugin that fails to import
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from None


@env_app.command("check")
def env_check(name: str, n: int = typer.Option(200, help="Generated tasks to check.")) -> None:
    """Every gold episode scores 1.0 and every adversarial probe scores at most its ceiling."""
    from gymflow.core.failures import GymflowError
    from gymflow.env.registry import get_env
    from gymflow.rollout.env_check import check_environment

    try:
        env = get_env(name)
    except GymflowError as exc:  # unknown name (the message lists the known ones)
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(2) from None
    try:
        golds, probes, problems = check_environment(env, n)
    except GymflowError as exc:  # e.g. a judge environment with no judge configured
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{name}: {golds} gold episodes, {probes} probes, {len(problems)} problems")
    for line in problems[:20]:
        typer.echo(f"  {line}")
    if problems:
        raise typer.Exit(1)


@env_app.command("serve")
def env_serve(
    name: str,
    host: str = typer.Option("127.0.0.1", help="Bind address (loopback by default)."),
    port: int = typer.Option(8765, help="Port (workers use port … port+N-1)."),
    workers: int = typer.Option(1, min=1, help="Processes; sessions stick to their worker."),
    token: str = typer.Option(
        None, envvar="GYMFLOW_ENV_TOKEN", help="Require 'Authorization: Bearer TOKEN'."
    ),
    insecure: bool = typer.Option(
        False, help="Allow a non-loopback bind without a token (anyone may call the tools)."
    ),
    client_session_ids: bool = typer.Option(
        False,
        help="Let clients choose session ids (1-128 chars of [A-Za-z0-9_.:-]); by default "
        "the server issues random ones.",
    ),
    ray: int = typer.Option(
        0, min=0, help="Replicas as Ray actors (ports port … port+N-1) instead of --workers."
    ),
    ray_address: str = typer.Option(
        None,
        help="With --ray or --verify-on ray: a running Ray cluster (default: a local one "
        "started here).",
    ),
    verify_on: str = typer.Option(
        "local", help="Heavy verifiers (math, code) run in a local process pool or on Ray actors."
    ),
    verify_workers: int = typer.Option(
        None, min=1, help="Verify processes (or Ray actors) per worker (default: cores, <= 4)."
    ),
) -> None:
    """Serve an environment's resources server over HTTP."""
    from gymflow.core.failures import FailureKind, GymflowError
    from gymflow.env.registry import get_env
    from gymflow.env.serve import VerifyOn, serve

    try:
        get_env(name)  # fail here, in one line, rather than in every worker
    except GymflowError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(2) from None
    _children_die_with_me()
    try:
        if ray:
            from gymflow.env.ray_replicas import serve_on_ray

            if verify_on != "local":
                raise GymflowError(
                    FailureKind.BAD_REQUEST,
                    "--verify-on ray is for --workers servers: --ray replicas verify in a "
                    "process pool on their own node",
                )
            status = serve_on_ray(
                name, host, port, ray, token, insecure, client_session_ids, ray_address
            )
        else:
            verify = VerifyOn(verify_on, verify_workers, ray_address)
            status = serve(name, host, port, workers, token, insecure, client_session_ids, verify)
    except GymflowError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(status)


@policy_app.command("serve")
def policy_serve(
    model: str = typer.Option(
        ...,
        help="Model folder (transformers), or a token backend spec: transformers:PATH, vllm:PATH.",
    ),
    host: str = typer.Option("127.0.0.1", help="Bind address (loopback by default)."),
    port: int = typer.Option(8000),
    name: str = typer.Option(None, help="Model name clients send (default: the folder name)."),
    api_key_env: str = typer.Option(
        None, help="Require the bearer token held in this environment variable."
    ),
) -> None:
    """Serve a policy at /v1/chat/completions (OpenAI-compatible; tool calls structured)."""
    import os

    import uvicorn

    from gymflow.core.failures import GymflowError
    from gymflow.policy.openai_server import build_openai_app
    from gymflow.policy.spec import load_policy, parse_spec

    try:
        spec = parse_spec(model)
        if spec.backend == "openai":
            raise typer.BadParameter(
                "serve a model folder, not another server", param_hint="--model"
            )
        key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and not key:
            raise typer.BadParameter(f"{api_key_env} is not set", param_hint="--api-key-env")
        policy = load_policy(spec)
    except GymflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    served = name or Path(spec.target).name
    _children_die_with_me()
    typer.echo(f"serving {served} at http://{host}:{port}/v1")
    uvicorn.run(
        build_openai_app(policy, served, api_key=key), host=host, port=port, log_level="warning"
    )


def _collect_flag(field: str) -> str:
    return {"fmt": "--format"}.get(field, "--" + field.replace("_", "-"))


def _collect_option(field: str, *flags: str) -> typer.models.OptionInfo:
    """The flag of one ``CollectOptions`` field: its default and help come from the model."""
    info = CollectOptions.model_fields[field]
    default = ... if info.is_required() else info.default
    return typer.Option(default, *flags, help=info.description)


@rollouts_app.command("collect")
def rollouts_collect(
    env: str = _collect_option("env"),
    tasks: Path = _collect_option("tasks"),
    fmt: str = _collect_option("fmt", _collect_flag("fmt")),
    policy: str = _collect_option("policy"),
    out: Path = _collect_option("out"),
    num_repeats: int = _collect_option("num_repeats"),
    concurrency: int = _collect_option("concurrency"),
    run_id: str = _collect_option("run_id"),
    env_url: str = _collect_option("env_url"),
    iteration: int = _collect_option("iteration"),
    policy_version: int = _collect_option("policy_version"),
    seed: int = _collect_option("seed"),
    temperature: float = _collect_option("temperature"),
    max_new_tokens: int = _collect_option("max_new_tokens"),
    max_completion_tokens: int = _collect_option("max_completion_tokens"),
    progress: bool = _collect_option("progress"),
    retry_failed: bool = _collect_option("retry_failed", "--retry-failed"),
    engine: str = _collect_option("engine"),
    ray_address: str = _collect_option("ray_address"),
    ray_workers: int = _collect_option("ray_workers"),
) -> None:
    """Collect G rollouts per task into Parquet; re-running resumes without loss or duplicates.

    With --retry-failed, rollouts whose latest row has no reward (env_unavailable, timeout ...;
    not scored mistakes) are run again: a new row per rollout (attempt + 1), old rows kept for
    audit; readers and exports see the latest attempt.
    """
    from pydantic import ValidationError

    from gymflow.core.failures import GymflowError
    from gymflow.rollout.collection import run_collect

    try:
        options = CollectOptions(
            env=env,
            tasks=tasks,
            fmt=fmt,
            policy=policy,
            out=out,
            num_repeats=num_repeats,
            concurrency=concurrency,
            run_id=run_id,
            env_url=env_url,
            iteration=iteration,
            policy_version=policy_version,
            seed=seed,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            max_completion_tokens=max_completion_tokens,
            progress=progress,
            retry_failed=retry_failed,
            engine=engine,
            ray_address=ray_address,
            ray_workers=ray_workers,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{_collect_flag(str(e['loc'][0]))}: {e['msg']} (got {e['input']!r})"
            for e in exc.errors()
        )
        typer.echo(f"error: {problems}", err=True)
        raise typer.Exit(2) from None
    _children_die_with_me()
    try:
        report = run_collect(options)
    except GymflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    retried = (
        f"{report.retried} retried ({report.still_failed} still without a reward), "
        if retry_failed
        else ""
    )
    typer.echo(
        f"run {report.run_id}: {report.collected} collected, {report.already_on_disk} already on "
        f"disk, {retried}{report.unscored} without a reward, failures {report.failures}; "
        f"{report.rollouts_per_s} rollouts/s, {report.tokens_per_s} tokens/s -> {out}"
    )
    if report.engine["name"] == "ray":
        e = report.engine
        typer.echo(
            f"ray: {e['workers']} workers (started in {e['workers_start_s']} s, cluster in "
            f"{e['cluster_start_s']} s), {e['shards']} shards, {e['worker_restarts']} worker "
            f"restarts, {e['rollouts_run_again']} rollouts run again"
        )


@rollouts_app.command("export")
def rollouts_export(
    src: Path = typer.Option(
        ...,
        "--in",
        help="A rollout folder: a lifecycle run (runs/<id>), a collection, an evaluation "
        "(runs/<id>/eval/<name>), or the rollouts/ folder of one.",
    ),
    fmt: str = typer.Option(..., "--format", help="hf, nemo_gym, sft or dpo."),
    out: Path = typer.Option(..., help="Where to write (a folder for hf, else a JSONL file)."),
    min_reward: float = typer.Option(1.0, help="sft: best of a group must reach this reward."),
    tokenizer: Path = typer.Option(None, help="sft/dpo: render prompts with this chat template."),
) -> None:
    """Export rollouts (training, evaluation or collection): HF datasets, NeMo Gym rollouts, SFT
    demos or DPO pairs."""
    from gymflow.core.failures import GymflowError
    from gymflow.rollout.export import export

    try:
        n = export(src, fmt, out, min_reward=min_reward, tokenizer=tokenizer)
    except GymflowError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{n} rows ({fmt}) -> {out}")


register_all(app)


def main() -> None:  # pragma: no cover
    sys.exit(app())
