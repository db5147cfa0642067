"""The error-kind reference: every ``FailureKind`` (``gymflow/core/failures.py``), grouped as
its source groups them, with its docstring, where the code raises or returns it, the bucket
``gymflow eval`` reports it under, and what to do about it (the ``ADVICE`` below)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache

from refgen import ROOT, cell, code, rel, source_files, table

ADVICE: dict[str, str] = {
    # the model's output (scored outcomes: a row with its kind, never a crash)
    "invalid_json": "The model's reply is not one well-formed call. Before training this is "
    "expected; after it, train longer on the format (SFT runs when the baseline's valid-JSON "
    "rate is under `format_threshold`) or check that the checkpoint's chat template renders "
    "tools as gymflow reads them (see [Your checkpoint](../how-to/your-checkpoint.md#2-the-checkpoint)).",
    "no_tool_call": "The model answered in prose where a tool call was due. As for "
    "`invalid_json`: more SFT on the format, or a template that shows the tools.",
    "multiple_calls": "The task wants exactly one call and the reply held several. A format "
    "mistake of the model: SFT demonstrations teach one call per turn.",
    "unknown_tool": "The model called a tool the environment does not have (a hallucinated "
    "tool). Check the tool list the prompt shows (`GET /tools`); train on the environment.",
    "wrong_tool": "A real tool, not the one the task needs: a model mistake that GRPO's "
    "reward (right tool +0.4 in `tool_call`) is there to reduce.",
    "bad_arguments": "Right tool, wrong or badly typed arguments (types are checked strictly). "
    "The most common failure after SFT; look at the examples in the eval report.",
    "unsafe_action": "The call broke the environment's safety rule (`tool_call`: e-mail "
    "outside `acme.com`; `workplace`: changes the task did not ask for). The gate refuses a "
    "candidate whose unsafe rate rises by more than `gate.max_unsafe_increase`.",
    "truncated": "The episode hit its token limit before an answer. Raise `max_new_tokens` "
    "(evaluation), `grpo.max_new_tokens` or `gymflow eval --max-new-tokens`, or teach shorter "
    "answers.",
    "invalid_trajectory": "The items sent to `/verify` (or given to `gymflow verify` as "
    "`output`) are not Responses-style items. Scored as the answer's fault; fix whatever "
    "produced the items.",
    "syntax_error": "`code`: the answer does not parse as Python. A model mistake.",
    "missing_entry_point": "`code`: the answer lacks the function the tests call. A model "
    "mistake (often a renamed function).",
    "runtime_error": "`code`: the answer raised while the hidden tests ran. A model mistake.",
    "test_failed": "`code`: the answer ran and failed a hidden test. A model mistake.",
    "memory_limit": "`code`: the answer went over the sandbox's memory limit. A model mistake "
    "(or a limit too tight for the task: see `environments/code/`).",
    "sandbox_violation": "`code`: the answer tried what the sandbox forbids (network, "
    "processes, files outside its folder). Counted as unsafe; look at the episode.",
    "no_answer": "The reply holds nothing to grade (empty, or not in the asked format, e.g. no "
    "`\\boxed{}` for `math`). A model mistake.",
    "wrong_answer": "An answer was graded and scored below the top. A model mistake.",
    "answer_too_long": "The reply or its extracted answer is over the verifier's size cap. A "
    "model mistake (rambling, answer-stuffing).",
    "answer_uncheckable": "The checker refused the answer (outside its LaTeX allow-list, or "
    "over its CPU budget). Scored 0 as the answer's fault; if gold answers hit it, the task "
    "is at fault (run `gymflow env check math`).",
    # requests and infrastructure (raised or answered with a kind)
    "bad_request": "A request or input did not validate; the message names the field. Fix the "
    "caller's input (for a task at `/seed_session`: the task's ground truth).",
    "unknown_task": "`gymflow verify`: a response line names a `task_id` the tasks file does "
    "not hold. The line gets no reward (it is not in the mean) and the command exits 2 naming "
    "the lines; check `--tasks` and `--format`, or the ids your harness wrote.",
    "unknown_session": "The session id is not on this server (never seeded, or the server or "
    "its replica restarted and lost it). Seed a new session; a collection completes such rows "
    "with `gymflow rollouts collect ... --retry-failed`.",
    "session_closed": "A call on a session that was closed. Seed a new one; from your own "
    "client this is a bug in its order of calls.",
    "session_expired": "The session outlived its TTL (`build_app(ttl_s=...)`, 600 s by "
    "default). Episodes that long need a longer TTL; otherwise a client left a session idle.",
    "session_limit": "The server holds its maximum of live sessions (or bytes of session "
    'state). Close sessions (`/verify` with `"close": true`), lower the concurrency, or '
    "add replicas (`gymflow env serve --workers N`).",
    "session_exists": "A client-chosen session id that is live or was used before "
    "(`--client-session-ids`). Use fresh ids, or let the server issue them.",
    "unauthorized": "A missing or wrong bearer token. Set the same `GYMFLOW_ENV_TOKEN` where "
    "the server and its clients run (for `gymflow policy serve`: the variable named by "
    "`--api-key-env`, read by the `openai:` backend from `GYMFLOW_POLICY_API_KEY`). For an "
    "MLflow server with a login: set `MLFLOW_TRACKING_USERNAME` and "
    "`MLFLOW_TRACKING_PASSWORD` to an account of that server.",
    "wrong_worker": "The call reached a worker that does not hold the session; the message "
    "names the right URL. Give `EnvClient` the server's base URL (or every replica's): it "
    "routes each session's calls itself.",
    "payload_too_large": "A request body over the server's limit (1 MiB by default, "
    "`build_app(max_body_bytes=...)`). Send shorter trajectories or raise the limit.",
    "not_utf8": "A request body or a file line is not UTF-8; the message names the byte, or "
    "the file and line. Re-encode the input as UTF-8.",
    "tool_error": "A tool raised on valid arguments. The model sees it as an observation; the "
    "environment has a bug to fix (its tests should cover that input).",
    "verifier_error": "The verifier raised on a well-formed trajectory: a bug in the "
    "environment, not retried. Reproduce with `gymflow env check NAME` and fix its `verify`.",
    "verify_timeout": "The verifier did not answer within the server's per-call limit (60 s "
    "by default); the server stays free. Make `verify` faster, mark it `heavy_verify = True` "
    "(a process pool), or raise the limit.",
    "internal_error": "A server bug on a well-formed request; reported, not retried. The "
    "message and the server's log say where: file an issue with both.",
    "disk_full": "No space left where the named folder lives. Free space, then resume "
    "(`gymflow rerun RUN_ID`, or the same `rollouts collect` command): what was written stays "
    "intact.",
    "env_unavailable": "The environment server could not be reached after capped retries "
    "(down, wrong `--env-url`, replica killed). Start it (`gymflow env serve NAME`), then "
    "`--retry-failed` (collections) or `gymflow rerun RUN_ID` (runs).",
    "agent_unavailable": "An agent server (or the proxy that captures an external agent's "
    "model calls) could not be reached or kept failing after capped retries. Start it, check "
    "its URL and token, then resume.",
    "timeout": "A call to the environment or the policy took longer than its timeout, after "
    "capped retries. Look at the server's load; raise the timeout where the backend takes one.",
    "tracking_unavailable": "No MLflow tracking server answers at `MLFLOW_TRACKING_URI` (or "
    "the run config's `tracking.uri`). Start it (`gymflow stack up` for a stack of your own), "
    "check the address with `gymflow stack check`, or unset the variable to use the home's "
    "store. During a run MLflow's client waits for a server that went away (bounded retries, "
    "each logged); see [Run it for a team](../how-to/team.md#faults).",
    "orchestrator_unavailable": "No Prefect server answers at `PREFECT_API_URL`, or it refuses "
    "`PREFECT_API_AUTH_STRING`. Start it (`gymflow stack up`), check it with `gymflow stack "
    "check`, or unset `PREFECT_API_URL` to run on a temporary server of the home.",
    "version_mismatch": "A server (MLflow or Prefect) runs another major.minor release than "
    "this machine's client. Install the server's release here (`pip install mlflow==X.Y.*`), "
    "or upgrade the server; `gymflow stack check` names both.",
    "policy_unavailable": "The policy server could not be reached or kept failing (5xx, 429) "
    "after capped retries. Start it (`gymflow policy serve`, `vllm serve`) and check the URL "
    "of the `openai:` spec.",
    "policy_error": "The policy server answered, but not with a usable completion (4xx, not "
    "JSON, no choice). Check the `?model=` name, the API key and the server's log.",
    "backend_unavailable": "A policy backend whose package or hardware is missing (`vllm:` "
    "without `pip install -e '.[gpu]'` and a CUDA GPU; Ray workers all gone). Install it, or "
    "use `transformers:PATH`.",
    "no_token_view": "Training was asked of episodes without token ids (a message-level "
    "backend). Train with `transformers:`/`vllm:`, or an `openai:` server that returns ids "
    "(`&token_ids=1` on vLLM or `gymflow policy serve`).",
    "schema_violation": "A Parquet table, task file or trace row does not match its schema; "
    "the message names the file and column. Fix or regenerate the file.",
    "corrupt_file": "A file that cannot be read (truncated Parquet, broken JSONL); the message "
    "names it. Delete it and re-run what wrote it: collections and runs resume without it.",
    "bad_config": "A config key that does not exist (with a did-you-mean), a value out of "
    "range, or a file that is not JSON; the line names the field. See the [configuration "
    "reference](config.md).",
    "unusable_checkpoint": "A model folder gymflow cannot drive (no chat template, no EOS, "
    "tool calls in a foreign format); the line says what to change. See [Your "
    "checkpoint](../how-to/your-checkpoint.md#2-the-checkpoint).",
    "verifier_nondeterministic": "`profile_verifier` scored the same trajectory differently in "
    "two processes: the verifier reads per-process state (a random draw, hash order, the "
    "clock). Make `verify` a pure function; the run's `reports/verifier_profile.json` names "
    "the samples.",
    "probe_rewarded": "An adversarial probe (empty, repeated, answer-stuffed…) scored above "
    "its ceiling: a verifier GRPO would learn to game. Parse strictly; see the samples in "
    "`reports/verifier_samples.md`.",
    "gold_rejected": "A gold answer scores below the top: the verifier or the task is wrong. "
    "`gymflow env check NAME` shows which tasks.",
    "data_leakage": "A held-out task, or a near-duplicate of one, is in the training data; the "
    "message names the pairs. Remove them from `task_data.train_files`, or check the held-out "
    "sets earlier runs recorded (`task_data.recorded_heldout`).",
    "verifier_drift": "An environment's verifier now scores the champion's stored episodes "
    "differently than when they were scored (a changed verifier, or one that depends on "
    "something outside the episode). The run's `reports/verifier_drift.md` lists the flips: "
    "fix the verifier, or accept the change knowingly before training on it.",
    "injected_failure": "`GYMFLOW_FAIL_AT` is set: a rehearsal of a failed run. Unset it and "
    "resume with `gymflow rerun RUN_ID`.",
    "folder_busy": "Another process is writing that folder (two collectors into one "
    "`--out`); the message names its pid. Wait for it, or use another folder.",
    "stage_abandoned": "The SFT control stopped because GRPO, beside it, failed (or the run's "
    "process died). Fix GRPO's failure and resume: both resume from their checkpoints.",
    "start_not_learnable": 'GRPO\'s preflight (`grpo.preflight`, `on_outside: "refuse"`) '
    "found the start outside the learnable band; the message has its pass@1, pass@G and "
    "expected zero-variance share. Too easy: hand over from SFT earlier, raise "
    "`grpo.temperature`, or harder tasks; too hard: more SFT first, or easier tasks. See "
    "[RL readiness](../how-to/rl-readiness.md).",
    # an LLM judge as verifier, and third-party scorers
    "judge_not_configured": "The `judge` environment needs a judge: set `GYMFLOW_JUDGE_URL` "
    "(an OpenAI-compatible server).",
    "judge_unavailable": "The judge server could not be reached or kept failing after capped "
    "retries. Check `GYMFLOW_JUDGE_URL`, `GYMFLOW_JUDGE_API_KEY` and the server.",
    "judge_timeout": "The judge did not answer in time, after capped retries. Raise "
    "`GYMFLOW_JUDGE_TIMEOUT_S` or give the judge more capacity.",
    "judge_bad_verdict": "The judge answered, but not with a verdict in the asked format or "
    "range. Use a stronger judge model, or raise `GYMFLOW_JUDGE_VERDICT_RETRIES`.",
    "scorer_refused": "A `reasoning_gym` family whose scorer failed its self-check (it "
    "rewards garbage or lacks answers). Choose other families "
    "(`GYMFLOW_REASONING_GYM_CONFIG`).",
}
"""What to do about each kind, for a person reading the one error line."""

_GROUP_COMMENT = re.compile(r"^\s*#\s*(.+?)\s*$")


@dataclass(frozen=True)
class ErrorKind:
    """One failure kind as the code defines it."""

    name: str  # the enum member, e.g. BAD_CONFIG
    value: str  # the stable string, e.g. bad_config
    group: str  # the comment heading it in the enum's source
    doc: str  # its attribute docstring, if any


@cache
def error_kinds() -> tuple[ErrorKind, ...]:
    """Every member of ``FailureKind``, read from its source so the groups' comments count."""
    path = ROOT / "gymflow" / "core" / "failures.py"
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    cls = next(
        n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == "FailureKind"
    )
    out: list[ErrorKind] = []
    body = cls.body
    for i, node in enumerate(body):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)):
            continue
        group = ""
        for line in reversed(lines[cls.lineno : node.lineno - 1]):
            match = _GROUP_COMMENT.match(line)
            if match:
                group = match.group(1)
                break
        doc = ""
        following = body[i + 1] if i + 1 < len(body) else None
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
            doc = " ".join(str(following.value.value).split())
        out.append(ErrorKind(node.targets[0].id, node.value.value, group, doc))
    return tuple(out)


@cache
def _where() -> dict[str, list[str]]:
    """Files (not tests) that name each kind, as ``FailureKind.NAME``/``K.NAME`` or its string."""
    kinds = error_kinds()
    out: dict[str, list[str]] = {k.value: [] for k in kinds}
    for path in source_files():
        if path.name == "failures.py":
            continue
        text = path.read_text(encoding="utf-8")
        for k in kinds:
            if re.search(rf"\.{k.name}\b|[\"']{k.value}[\"']", text):
                out[k.value].append(rel(path))
    return out


def _bucket(value: str) -> str:
    from gymflow.eval.metrics import category

    return category(value)


def problems() -> list[str]:
    """Kinds without advice: the build fails on them."""
    values = {k.value for k in error_kinds()}
    return [f"error kind {v} has no advice in ADVICE" for v in sorted(values - set(ADVICE))]


def unused() -> list[str]:
    """Advice for kinds the code does not have (yet, or any more): only reported."""
    values = {k.value for k in error_kinds()}
    return [f"ADVICE names {v}, which is no FailureKind" for v in sorted(set(ADVICE) - values)]


def page() -> str:
    """The markdown of ``reference/errors.md``."""
    kinds = error_kinds()
    where = _where()
    parts = [
        "# Error kinds",
        "",
        "_Generated from `gymflow/core/failures.py` (the kinds, their groups and docstrings) "
        "and the code that names each kind, when the docs are built._",
        "",
        "Every outcome that is not a success carries one of these kinds, so nothing hides as a "
        "silent reward 0. The model's mistakes are **scored**: the episode's row keeps its "
        "kind and its reward, and `gymflow eval` counts it in a failure bucket. Everything "
        "else is an **error**: one line `[kind] what and where` (or an HTTP answer "
        '`{"error": {"kind", "message"}}` from a resources server), after capped retries '
        "where retrying can help.",
        "",
        f"{len(kinds)} kinds.",
        "",
    ]
    groups: dict[str, list[ErrorKind]] = {}
    for k in kinds:
        groups.setdefault(k.group, []).append(k)
    for group, members in groups.items():
        parts += [f"## {group[:1].upper() + group[1:]}" if group else "## Other", ""]
        rows = []
        for k in members:
            meaning = f"{k.doc} " if k.doc else ""
            files = where[k.value]
            named = ", ".join(code(p) for p in files[:2])
            if len(files) > 2:
                named += f" and {len(files) - 2} more"
            rows.append(
                [
                    f"`{k.value}`",
                    cell(meaning + ADVICE.get(k.value, "")),
                    cell(_bucket(k.value)),
                    named,
                ]
            )
        parts.append(
            table(["kind", "what it means and what to do", "eval bucket", "named in"], rows)
        )
    return "\n".join(parts)
