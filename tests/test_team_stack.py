"""A team's stack, real parts only: PostgreSQL, ``mlflow server`` (PostgreSQL backend,
``--serve-artifacts``, its basic-auth login), ``prefect server`` on PostgreSQL, a ``prefect
worker`` on a process pool — all started by ``gymflow stack up``'s library.

Home A is the worker's: ``gymflow deploy --pool`` registers the lifecycle with the pool and the
worker runs it; everything it tracks reaches the MLflow server (artifacts through it: A has no
``mlruns/``), its stage results land in the stack's result storage. Home B shares nothing with
A but the servers: its run starts from the champion A promoted (downloaded from the server),
gates against it and registers its own version; ``gymflow models list`` shows both from either
home, and a rollback on B moves the alias A sees. Bad addresses and logins are one line each,
and the MLflow password is never written anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from team_stack import (
    ADMIN_PASSWORD,
    AUTH_STRING,
    MICRO,
    client_env,
    gymflow,
    machine,
    run_deployment,
    seen_from,
    start_stack,
    stop_stack,
    wait_final,
)

pytestmark = pytest.mark.slow
MODEL = "gymflow-tool_call"


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    folder = tmp_path_factory.mktemp("team")
    stack, client = start_stack(folder, workers=1, login=True, auth=True, host="0.0.0.0")
    try:
        yield stack, client, folder
    finally:
        stop_stack(stack)


@pytest.fixture(scope="module")
def pool_run(team):
    """The micro lifecycle deployed to the pool and run by the stack's worker (home A)."""
    stack, client, _ = team
    home = stack.home
    env = client_env(client, home)
    deploy = gymflow(
        ["deploy", "--pool", stack.settings.pool, "--cron", "", "--eval-cron", "", *MICRO],
        env, home, 120,
    )  # fmt: skip
    assert deploy.returncode == 0, deploy.stderr
    api = stack.settings.prefect_api
    run = wait_final(api, run_deployment(api, "rlvr-lifecycle-scheduled/nightly"))
    assert run["state_type"] == "COMPLETED", run["state"]
    (run_dir,) = (home / "runs").iterdir()
    return run_dir, json.loads((run_dir / "summary.json").read_text()), deploy.stdout


def _server_client(client):
    """A client of the stack's server, its registry named too (MLflow would otherwise take the
    registry this test process last pointed it at)."""
    from mlflow import MlflowClient

    uri = client["MLFLOW_TRACKING_URI"]
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def test_stack_status_says_every_part_runs(team):
    stack, client, folder = team
    settings = folder / "stack.json"
    settings.write_text(stack.settings.model_dump_json())
    done = gymflow(["stack", "status", "--settings", str(settings)], client_env({}, stack.home),
                   folder, 120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    parts = [line.split(":", 1)[0] for line in done.stdout.splitlines()]
    assert parts == ["postgres", "prefect", "mlflow", "worker-1"]


def test_bad_servers_and_logins_are_one_line_each(team, tmp_path):
    from ports import free_port

    stack, client, _ = team
    dead = f"http://127.0.0.1:{free_port()}"
    cases = {
        "tracking_unavailable": (["models", "list"], {"MLFLOW_TRACKING_URI": dead}),
        "unauthorized": (["models", "list"], {"MLFLOW_TRACKING_PASSWORD": "wrong"}),
        "bad_config": (["models", "list"], {"MLFLOW_REGISTRY_URI": "s3://bucket/registry"}),
        "bad_request": (["stack", "check", "--pool", "no-such-pool"], {}),
        "orchestrator_unavailable": (["stack", "check"], {"PREFECT_API_URL": f"{dead}/api"}),
    }
    refused = (["stack", "check"], {"PREFECT_API_AUTH_STRING": "team:wrong"})
    for kind, (args, changes) in [*cases.items(), ("orchestrator_unavailable", refused)]:
        done = gymflow(args, client_env(client, tmp_path) | changes, tmp_path, 120)
        errors = [line for line in done.stderr.splitlines() if line.startswith("error: [")]
        assert done.returncode != 0 and len(errors) == 1, (kind, done.stdout, done.stderr)
        assert errors[0].startswith(f"error: [{kind}] "), (kind, errors)
        assert "Traceback" not in done.stderr and "wrong" not in done.stderr, done.stderr
    good = gymflow(["stack", "check", "--pool", stack.settings.pool], client_env(client, tmp_path),
                   tmp_path, 120)  # fmt: skip
    assert good.returncode == 0, good.stderr
    assert good.stdout.count("ok: ") == 3, good.stdout


def test_the_pool_run_tracks_everything_on_the_server(team, pool_run):
    stack, client, _ = team
    run_dir, summary, deployed = pool_run
    assert f"-> pool {stack.settings.pool}" in deployed
    home = stack.home
    assert not (home / "mlruns").exists()  # nothing tracked in the worker's home
    with pytest.MonkeyPatch.context() as env:
        for key, value in client.items():
            env.setenv(key, value)
        server = _server_client(client)
        runs = server.search_runs(
            [server.get_experiment_by_name("gymflow").experiment_id],
            filter_string=f"tags.`gymflow.run_id` = '{run_dir.name}' and tags.`gymflow.kind` = 'lifecycle'",
        )  # fmt: skip
        assert [r.info.run_id for r in runs] == [summary["mlflow_run_id"]]
        parent = summary["mlflow_run_id"]
        assert runs[0].info.artifact_uri.startswith("mlflow-artifacts:")
        listed = {a.path for a in server.list_artifacts(parent)}
        assert {"config.json", "report.md", "plots"} <= listed, listed
        versions = server.search_model_versions(f"name = '{MODEL}'")
    assert [v.version for v in versions] == ["1"]
    stored = stack.root / "artifacts"
    assert any(stored.rglob("config.json")) and any(stored.rglob("model.safetensors"))
    # stage results and cache records in the stack's storage, not the worker's home
    assert any(stack.settings.results_path(home).iterdir())
    assert not any((home / ".prefect" / "storage").glob("*"))


def test_a_second_home_starts_from_the_champion_and_shares_the_registry(team, pool_run):
    stack, client, folder = team
    home_a, home_b = stack.home, folder / "home-b"
    home_b.mkdir()
    with machine("a", 1) as (in_a, seen_by_a), machine("b", 2) as (in_b, seen_by_b):
        env_a = client_env(seen_from(client, seen_by_a), home_a)
        env_b = client_env(seen_from(client, seen_by_b), home_b)
        _two_machines(home_a, home_b, env_a, env_b, in_a, in_b)
    # models:/ resolves from the server into B's own cache
    from gymflow.policy.registered import resolve

    with pytest.MonkeyPatch.context() as env:
        for key, value in client_env(client, home_b).items():
            env.setenv(key, value)
        env.delenv("GYMFLOW_HOME_TRACKING_URI", raising=False)  # this process's own home's
        found = resolve(f"/{MODEL}@champion", home_b)
    assert found.version == "1" and (found.path / "config.json").is_file()
    assert found.path.is_relative_to(home_b / ".cache" / "registry")


def _two_machines(home_a, home_b, env_a, env_b, in_a, in_b):
    """A (the worker's home) promotes its version; B, on another network, trains from it."""
    promoted = gymflow(["promote", "1", "--name", MODEL, "--force"], env_a, home_a, 120, in_a)
    assert promoted.returncode == 0, promoted.stderr
    start = ["--set", f"model_path=models:/{MODEL}@champion"]  # named, not implied
    run_b = gymflow(["run", *MICRO, *start, "--run", "b1", "--quiet"], env_b, home_b, 900, in_b)
    assert run_b.returncode == 0, run_b.stdout[-2000:] + run_b.stderr[-2000:]
    summary = json.loads((home_b / "runs" / "b1" / "summary.json").read_text())
    assert summary["policy_start"] == "champion v1", summary["policy_start"]
    assert not (home_b / "mlruns").exists()
    # downloaded from the server's artifact store into B's own cache
    assert (home_b / ".cache" / "registry" / MODEL / "v1" / "config.json").is_file()
    for env, home, inside in ((env_a, home_a, in_a), (env_b, home_b, in_b)):
        listed = gymflow(["models", "list", "--name", MODEL], env, home, 120, inside)
        assert listed.returncode == 0, listed.stderr
        lines = [line for line in listed.stdout.splitlines() if line.startswith("  v")]
        assert [line.split("\t")[0].strip() for line in lines] == ["v2", "v1"], listed.stdout
        assert "run b1" in lines[0] and "run sched-" in lines[1]
    # B promotes its version, then rolls back: the champion A sees moves back to v1
    promote_b = gymflow(["promote", "2", "--name", MODEL, "--force"], env_b, home_b, 120, in_b)
    assert promote_b.returncode == 0, promote_b.stderr
    rolled = gymflow(["rollback", "--name", MODEL], env_b, home_b, 120, in_b)
    assert rolled.returncode == 0 and "champion v1 (was v2)" in rolled.stdout, rolled.stdout
    seen = gymflow(["models", "list", "--name", MODEL], env_a, home_a, 120, in_a).stdout
    assert "v1\t[champion" in seen and "[previous_champion]" not in seen.split("v1\t")[0]


def test_no_secret_is_written_anywhere(team, pool_run):
    stack, client, folder = team
    secrets = (ADMIN_PASSWORD.encode(), AUTH_STRING.encode())
    leaked = [
        str(path)
        for path in Path(folder).rglob("*")
        if path.is_file() and any(s in path.read_bytes() for s in secrets)
    ]
    assert not leaked, leaked
    with pytest.MonkeyPatch.context() as env:
        for key, value in client.items():
            env.setenv(key, value)
        server = _server_client(client)
        experiment = server.get_experiment_by_name("gymflow").experiment_id
        for run in server.search_runs([experiment], max_results=500):
            values = [*run.data.params.values(), *run.data.tags.values()]
            assert not any(ADMIN_PASSWORD in v or AUTH_STRING in v for v in map(str, values))
        for version in server.search_model_versions(f"name = '{MODEL}'"):
            assert not any(ADMIN_PASSWORD in str(v) for v in version.tags.values())
