"""The environment-variable reference: every ``GYMFLOW_*`` name in the product's code (code and
docstrings, tests excluded), where it is named, and what it does (``NOTES`` below)."""

from __future__ import annotations

import re
from functools import cache

from refgen import cell, code, rel, source_files, table

NAME = re.compile(r"\bGYMFLOW_[A-Z0-9_]+")

NOT_VARIABLES: dict[str, str] = {
    "GYMFLOW_FIELDS": "a Python constant (the row keys gymflow adds to NeMo Gym rows)",
    "GYMFLOW_REPLY_7": "a probe string the chat-template check renders",
    "GYMFLOW_OUTPUT_1": "a probe string the chat-template check renders",
    "GYMFLOW_OUTPUT_2": "a probe string the chat-template check renders",
}
"""``GYMFLOW_*`` names in the code that are not environment variables."""

NOTES: dict[str, str] = {
    "GYMFLOW_ENV_PATH": "Folders where gymflow looks for environment projects (a folder with a "
    "`pyproject.toml` declaring the `gymflow.environments` entry point, as `gymflow env new` "
    "writes), `:`-separated: each a project folder or a folder of them. The home's "
    "sub-folders are always looked in; nothing needs installing.",
    "GYMFLOW_SUPERVISED": "Set by `gymflow run` and `gymflow rerun` in the child process that "
    "runs the lifecycle (so Ctrl-C reaches it only through the command, which stops it within "
    "seconds). Not for users to set.",
    "GYMFLOW_HOME": "The project home: `mlruns/` (MLflow), `.prefect/`, `.cache/`, `runs/` and "
    "`evals/` live under it. Default: the current directory. Every command and both UIs of "
    "one home see the same runs.",
    "GYMFLOW_FAIL_AT": "Fail a run on purpose, once per point, to rehearse a retry: `grpo` "
    "(the stage fails on entry), `sft@step15` (right after SFT's first checkpoint at or after "
    "step 15); several comma-separated. Never set it for real work.",
    "GYMFLOW_ENV_TOKEN": "Bearer token of the resources servers: `gymflow env serve` requires "
    "it (same as `--token`), and `EnvClient` sends it. Needed when a server binds beyond "
    "loopback.",
    "GYMFLOW_POLICY_API_KEY": "API key the `openai:` policy backend sends (else "
    "`OPENAI_API_KEY`); never put a key in the spec string.",
    "GYMFLOW_JUDGE_URL": "The `judge` environment's OpenAI-compatible judge server; without "
    "it the environment answers `judge_not_configured`.",
    "GYMFLOW_JUDGE_MODEL": "Model name sent to the judge (default `judge`).",
    "GYMFLOW_JUDGE_TIMEOUT_S": "Seconds per judge request (default 30).",
    "GYMFLOW_JUDGE_RETRIES": "Transport retries per judge request (default 2).",
    "GYMFLOW_JUDGE_VERDICT_RETRIES": "New asks after a malformed verdict (default 1).",
    "GYMFLOW_JUDGE_MAX_TOKENS": "Tokens the judge may write per verdict (default 256).",
    "GYMFLOW_JUDGE_API_KEY": "Bearer token sent to the judge (read from the environment only, "
    "never logged).",
    "GYMFLOW_REASONING_GYM_CONFIG": "A JSON file choosing the `reasoning_gym` environment's "
    "families and their configs (default: the self-checked mix shipped with it).",
    "GYMFLOW_RG_CACHE": "Where the `reasoning_gym` self-check caches its verdicts (default "
    "`~/.cache/gymflow/reasoning_gym_selfcheck.json`).",
    "GYMFLOW_CODE_ISOLATION": "The `code` environment's sandbox tier: `auto` (default: "
    "bubblewrap if installed, else a network namespace), `bwrap`, `unshare` or `none`.",
    "GYMFLOW_AGENT_TOKEN": "Bearer token of an agent server (`--token` of its serve "
    "command); its client sends it. Needed when the server binds beyond loopback.",
    "GYMFLOW_PROGRESS": "How long jobs report progress: `bar` (a terminal), `lines` (plain "
    "lines, e.g. in CI logs) or `quiet`. Commands set it for the processes they start; set "
    "it yourself to force a mode.",
    "GYMFLOW_PROGRESS_EVERY": "Seconds between progress lines in `lines` mode (default 10).",
    "GYMFLOW_VLLM_ENV": "A virtual environment holding vLLM, used instead of the repository's "
    "`.venv-vllm`.",
    "GYMFLOW_CODE_INSECURE_SANDBOX": "`1` lets the `code` environment run answers when "
    "neither bubblewrap nor Landlock is available (`gymflow env serve --insecure-sandbox`); "
    "without it such a machine runs no answer. Only for code you trust.",
    "GYMFLOW_PREFECT_UI": "Address runs link to for the Prefect UI (default: what `gymflow ui` "
    "serves, else `http://127.0.0.1:4200`).",
    "GYMFLOW_HOME_TRACKING_URI": "Set by gymflow, never by hand: the home store's URI it "
    "exported as `MLFLOW_TRACKING_URI`, so a child process of another home does not take it "
    "for the user's choice. A `MLFLOW_TRACKING_URI` you set yourself (a team's server) wins "
    "over the home's store; see [Run it for a team](../how-to/team.md).",
    "GYMFLOW_MLFLOW_UI": "Address runs link to for the MLflow UI (default: what `gymflow ui` "
    "serves, else `http://127.0.0.1:5000`).",
}
"""What each variable does."""


@cache
def variables() -> dict[str, tuple[str, ...]]:
    """Every ``GYMFLOW_*`` environment variable the code names, with the files naming it.
    A name ending in ``_`` (``GYMFLOW_JUDGE_*`` in prose) is a family, not a variable."""
    found: dict[str, list[str]] = {}
    for path in source_files():
        for name in set(NAME.findall(path.read_text(encoding="utf-8"))):
            if name.endswith("_") or name in NOT_VARIABLES:
                continue
            found.setdefault(name, []).append(rel(path))
    return {name: tuple(files) for name, files in sorted(found.items())}


def problems() -> list[str]:
    """Variables without a note: the build fails on them."""
    names = set(variables())
    return [f"environment variable {n} has no note in NOTES" for n in sorted(names - set(NOTES))]


def unused() -> list[str]:
    """Notes for names the code does not have (yet, or any more): only reported."""
    names = set(variables())
    return [f"NOTES names {n}, which the code does not" for n in sorted(set(NOTES) - names)]


def page() -> str:
    """The markdown of ``reference/environment-variables.md``."""
    rows = []
    for name, files in variables().items():
        where = ", ".join(code(f) for f in files[:3]) + (
            f" and {len(files) - 3} more" if len(files) > 3 else ""
        )
        rows.append([f"`{name}`", cell(NOTES.get(name, "")), where])
    return "\n".join(
        [
            "# Environment variables",
            "",
            "_Generated when the docs are built from every `GYMFLOW_*` name in the code._",
            "",
            "gymflow reads these from the process environment; none is needed for "
            "`make run`. Prefect's own settings (`PREFECT_HOME` and the rest) are set by "
            "gymflow from the home before Prefect is imported, and MLflow's store is "
            "`<home>/mlruns/` unless `MLFLOW_TRACKING_URI` names a team's server.",
            "",
            "MLflow's and Prefect's own variables that gymflow honours for a team "
            "([Run it for a team](../how-to/team.md)): `MLFLOW_TRACKING_URI` and "
            "`MLFLOW_REGISTRY_URI` (where runs and the registry are), "
            "`MLFLOW_TRACKING_USERNAME` / `MLFLOW_TRACKING_PASSWORD` (the server's login, "
            "never logged), `PREFECT_API_URL` and `PREFECT_API_AUTH_STRING` (the Prefect "
            "server), `PREFECT_RESULTS_LOCAL_STORAGE_PATH` or "
            "`PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK` (where stage results and caches live); "
            "`gymflow stack up` reads `MLFLOW_AUTH_ADMIN_PASSWORD` and "
            "`PREFECT_SERVER_API_AUTH_STRING`.",
            "",
            table(["variable", "what it does", "named in"], rows),
        ]
    )
