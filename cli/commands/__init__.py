"""The ``gymflow`` commands, one module per concern, and the table that names them.

:data:`COMMANDS` maps a command's name to ``module:attribute`` (a ``typer.Typer`` in a module
of this package) and its one-line help, in the order ``gymflow --help`` lists them. The table is
all :class:`gymflow.cli.lazy_group.LazyGroup` reads to list the commands, so a module is
imported only when its command runs (or its ``--help`` is asked). A new command is a new module
plus one row here; ``tests/test_cli_front_door.py`` checks that each row's help is the
command's own.
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    target: str
    """``module:attribute`` of the command's ``typer.Typer``, module relative to this package."""
    help: str
    """The first paragraph of the command's help (what ``gymflow --help`` shows)."""
    hidden: bool = False


COMMANDS: dict[str, Entry] = {
    "run": Entry("run:run_app", "Run the whole lifecycle: data, SFT, GRPO, gate, registry."),
    "rerun": Entry("runs:rerun_app", "Resume a run: finished stages are reused, the rest run."),
    "runs": Entry("runs:runs_app", "Lifecycle runs: list them."),
    "config": Entry("config:config_app", "Run config: the resolved one with defaults, its schema."),
    "eval": Entry("evaluate:eval_app", "Evaluate a policy, alone or paired against another."),
    "verify": Entry("verify:verify_app", "Score given responses with a verifier, no model."),
    "env": Entry("env:env_app", "Environments: list, check, serve, scaffold a new one."),
    "tasks": Entry("tasks:tasks_app", "Task data: generate, import traces, fetch benchmarks."),
    "rollouts": Entry("rollouts:rollouts_app", "Rollouts: collect, export."),
    "policy": Entry("policy:policy_app", "Policies: serve one over an OpenAI-compatible API."),
    "agent": Entry("agent:agent_app", "Agents as services: the /run episode driver, a capturing proxy."),
    "models": Entry("models:models_app", "Model registry: list versions; fetch checkpoints."),
    "promote": Entry("models:promote_app", "Make VERSION the champion (the old one: previous_champion)."),
    "rollback": Entry("models:rollback_app", "Move champion back to previous_champion."),
    "ui": Entry("ui:ui_app", "Serve this project's Prefect and MLflow UIs."),
    "deploy": Entry("deploy:deploy_app", "Schedule the flows and keep them running."),
    "stack": Entry("stack:stack_app", "A team's stack: PostgreSQL, Prefect and MLflow servers, workers."),
    "completion": Entry("completion:completion_app", "Print the shell completion script (bash, zsh, fish)."),
}  # fmt: skip
