"""The outputs reference: what a run leaves on disk.

Generated from the code: the columns of every Parquet table from its pandera schema
(``gymflow/data/schemas.py``: type, nullable, checks, uniqueness) and the keys of
``summary.json`` from the function that builds it (``gymflow/lifecycle/summary.py``,
``build_summary``). What each column, key and folder means is text the code cannot hold; it sits
here (``COLUMNS``, ``SUMMARY_KEYS``, ``RUN_FOLDER``), keyed by the names the code uses. A column or
key the code has without its text is a problem (a build warning), and text for a name the code
no longer has is reported as unused.
"""

from __future__ import annotations

import ast
from functools import cache

from refgen import ROOT, cell, code, table

TABLES = {
    "TASKS": (
        "Task tables",
        "`runs/<run id>/data/tasks-{train,val,heldout}.parquet`, a collection's `tasks.parquet`",
        "One row per task; `gymflow eval --split FILE.parquet` and a resources server's "
        "`--tasks` read them.",
    ),
    "ROLLOUTS": (
        "Rollout tables",
        "`runs/<run id>/rollouts/part-<step>-<n>.parquet`, `eval/<split>-<label>/rollouts/`, "
        "a collection's `rollouts/`",
        "One row per episode; `gymflow rollouts export --in FOLDER` reads any such folder. A "
        "rollout retried with `--retry-failed` has a row per attempt; readers keep the latest.",
    ),
    "EVAL_ROWS": (
        "Evaluation rows",
        "`runs/<run id>/eval/val-current.parquet`, `eval/heldout-<policy>.parquet`",
        "One row per (policy, task, sample) an evaluation scored; the gate's statistics are "
        "computed from them.",
    ),
}
"""Schema name in ``gymflow.data.schemas`` -> (title, where the files are, what a row is)."""

COLUMNS: dict[str, dict[str, str]] = {
    "TASKS": {
        "task_id": "The task's id: `<env>-<12 hex digits of its content hash>`.",
        "env": "The environment that seeds and scores it.",
        "split": "`train`, `val` or `heldout`, drawn from the normalized prompt's hash.",
        "prompt": "The prompt messages (JSON list of `{role, content}`).",
        "tools": "The tools this task offers (JSON list of OpenAI function schemas); `[]` "
        "when the environment's own tools apply.",
        "ground_truth": "What the verifier scores against (JSON, the environment's own shape).",
        "generator": "What made it: the environment's generator and its version, an import "
        "format, or `llm_variant`.",
        "seed": "The generator seed that drew it.",
        "content_hash": "sha256 of the prompt and ground truth: the dataset hash is built "
        "from these.",
    },
    "ROLLOUTS": {
        "rollout_id": "Deterministic from run, iteration, task and sample: a re-run resumes "
        "without duplicates.",
        "run_id": "The run (or collection) that made it.",
        "iteration": "GRPO's step (0 for a collection or an evaluation).",
        "policy_version": "The policy's weights version when it was sampled.",
        "env": "The environment.",
        "env_version": "The environment's version.",
        "task_id": "The task (see the task table).",
        "group_id": "The group of G samples of one task it belongs to.",
        "sample_idx": "Its index in the group.",
        "dataset_hash": "The hash of the task data it was drawn from.",
        "trajectory": "The episode as Responses items (JSON): messages, `function_call`, "
        "`function_call_output`.",
        "prompt_ids": "Token ids of the first prompt (empty for message-level backends).",
        "completion_ids": "Token ids of everything after the prompt, tool outputs included.",
        "logprobs": "The sampling logprob of each completion token (0 on tool-output tokens).",
        "env_mask": "1 on tokens the model wrote, 0 on tokens the environment inserted.",
        "reward": "The verifier's reward; null when the episode never reached the verifier "
        "(`failure_kind` says why).",
        "reward_components": "The verifier's components (JSON), e.g. `tool`, `args`, `safe`.",
        "success": "The verifier's success verdict.",
        "failure_kind": "Why it did not succeed: a model mistake or an infrastructure fault "
        "(the [error kinds](errors.md)); null on success.",
        "used_for_training": "Whether GRPO trained on it (a zero-variance group is not).",
        "turns": "Model turns in the episode.",
        "tool_calls": "Tool calls the model made.",
        "tokens": "Tokens the model wrote.",
        "latency_s": "Wall seconds of the episode.",
        "seed": "The sampling seed of the episode.",
        "started_at": "Unix time the episode started.",
        "policy": "The policy spec that played it (`transformers:PATH`, `vllm:PATH`, …).",
        "failure_detail": "A sentence on the failure, when there is one.",
        "attempt": "0 for a rollout's first row; `--retry-failed` adds 1, 2, …",
    },
    "EVAL_ROWS": {
        "task_id": "The task.",
        "policy": "Which policy: in a run, `baseline`, `current`, `candidate`, `sft_control` or "
        "`champion`.",
        "sample_idx": "The sample (0 when greedy).",
        "reward": "The verifier's reward.",
        "success": "The verifier's success verdict.",
        "valid_json": "Whether every model turn was well-formed (a valid call or plain text).",
        "well_formed": "Whether every model turn was well-formed (a valid call or plain text).",
        "unsafe": "Whether the episode made an unsafe action (e.g. an email outside the "
        "allowed domain).",
        "failure_kind": "Why it did not succeed; null on success.",
        "completion_tokens": "Tokens the model wrote: the gate's latency measure.",
        "latency_s": "Wall seconds of the episode.",
    },
}
"""What each column holds, by schema and column name."""

SUMMARY_KEYS: dict[str, str] = {
    "run_id": "The run id (the run folder's name).",
    "run_dir": "The run folder.",
    "mlflow_run_id": "The MLflow parent run's id.",
    "links": "Addresses of the run in the Prefect and MLflow UIs.",
    "inputs": "What the outcome depends on (environment and version, dataset hash, champion "
    "version, config digest, code version) and their `fingerprint`: a scheduled run with the "
    "same fingerprint as a finished one is skipped.",
    "env": "The environment, or the mix's label.",
    "envs": "A mix's environments and their normalized weights.",
    "config_digest": "A hash of the resolved config.",
    "wall_s": "The run's wall seconds.",
    "machine": "CPU (model, widest vector unit), cores, memory, load, Python and PyTorch.",
    "stages": "Each stage's wall seconds.",
    "policy_start": "Where the start came from: `model_path`, the champion or the embedded model.",
    "sft_ran": "Whether SFT ran.",
    "sft_decision": "Whether SFT ran (`ran`) and why (`reason`): `sft.run`, or the baseline's "
    "rate of well-formed answers per environment against `format_threshold`.",
    "sft_decision.ran": "True when SFT ran before GRPO.",
    "sft_decision.reason": "The sentence that says why, as the terminal and `report.md` show it.",
    "format_check": "Each environment's format check (`Environment.well_formed`) in words: what "
    "the well-formed rate, the SFT decision and the gate's guardrail measure.",
    "heldout": "The held-out table: `n`, `baseline` and `candidate` rates with 95 % CIs, "
    "`delta_success` and its `ci95`, `per_env` for a mix.",
    "heldout.n": "Held-out tasks the gate evaluated.",
    "heldout.baseline": "The start's success, reward and well-formed rate with 95 % CIs.",
    "heldout.candidate": "The GRPO policy's rates.",
    "heldout.delta_success": "GRPO − start, paired, in success rate.",
    "heldout.ci95": "Its 95 % CI.",
    "heldout.per_env": "The same per environment of a mix.",
    "general": "The general-capability sets: per set and policy, the measure, paired gains "
    "with CIs, or why the set was skipped.",
    "gate": "The gate's decision: `passed`, `chosen`, `reason`, each candidate's verdict and "
    "confidence sequence, `grpo_minus_control_cs`, tasks and episodes used.",
    "registry": "What the registry did: model, version, whether `champion` moved, the "
    "previous champion, the registered candidate.",
    "grpo": "GRPO: `steps`, wall and training seconds, threads, processes, what it resumed "
    "from, dynamic sampling counts, the task pool, `stopped_by`, samples, "
    "`zero_variance_share`, the `preflight`.",
    "grpo.steps": "Optimizer steps.",
    "grpo.wall_s": "The stage's wall seconds.",
    "grpo.train_wall_s": "Training seconds (what the control is given).",
    "grpo.threads": "torch threads.",
    "grpo.processes": "Training processes (`train_processes`).",
    "grpo.resumed_from": "The checkpoint a resumed stage started from.",
    "grpo.dynamic_sampling": "Groups generated, zero-variance, refilled.",
    "grpo.pool": "The difficulty pool's state at the end.",
    "grpo.stopped_by": "What ended it: its step cap, its time budget, the run's budget.",
    "grpo.samples": "Completions sampled.",
    "grpo.zero_variance_share": "The share of groups whose rewards were all equal.",
    "grpo.episodes_by": "Who played GRPO's episodes: gymflow's agent loop, or the agent "
    "programs named (`grpo.rollout`, engine `agents`).",
    "grpo.preflight": "The RL-readiness preflight ([Will GRPO learn from this "
    "start?](../how-to/rl-readiness.md)).",
    "sft": "SFT, when it ran: `steps`, `wall_s`, `demos`, its validation `history`, "
    "`stopped_by`, `samples`, `processes`.",
    "rft_control": "The RFT control, when `controls` names it: `steps`, `wall_s`, `budget_s`, "
    "`stopped_by`, its `compute` (updates, samples generated, successes trained, tokens), its "
    "`heldout` rates, `grpo_minus_control` and its `ci95`.",
    "verdict": "Is RL worth it here: `verdict` (`rl_pays`, `cheaper_suffices`, `undecided`), "
    "the `margin`, the controls that `decided_by`, each control's `evidence` (GRPO − control, "
    "its confidence sequence, n) and the `sentence` reports print.",
    "pass_at_k": "Per policy (`baseline` and each arm), per environment: greedy pass@1 and "
    "pass@k (`k`, `n_tasks`, `greedy`, `pass_at`) on the first `gate.pass_k_tasks` held-out "
    "tasks.",
    "verifier_drift": "The drift sentinel's result, when the champion's verifier differs.",
    "sft_control": "The SFT control: `steps`, `wall_s`, `budget_s`, `beside_grpo`, "
    "`processes`, `stopped_by`, `samples`, its `heldout` rates, `grpo_minus_control` and "
    "its `ci95`.",
}
"""What each key of ``summary.json`` holds (``outer.inner`` for a nested dict literal)."""

RUN_FOLDER: dict[str, str] = {
    "config.json": "The resolved config (a resumed run starts from it).",
    "summary.json": "Every figure of the printed table, the gate, the registry, the machine "
    "(keys below).",
    "report.md": "The same for a person, with links to both UIs.",
    "plots/": "PNG plots: held-out success with CIs, SFT and GRPO curves, reward histograms.",
    "data/": "`tasks-{train,val,heldout}.parquet`, the held-out prompts, dropped "
    "near-duplicates, LLM-written variants.",
    "reports/": "Coverage, the verifier profile and its samples, verifier drift.",
    "eval/": "Evaluation rows (`val-current.parquet`, `heldout-<policy>.parquet`) and their "
    "episodes as rollout folders.",
    "sft/": "SFT's trainer checkpoints (the newest two) and `best/`, the step validation picked.",
    "sft_control/": "The control's trainer checkpoints, `best/` (the step the one checkpoint "
    "rule picked) and `validation.json`.",
    "grpo/": "GRPO's trainer checkpoints, `final/` (the GRPO policy), `validation.json`, "
    "`preflight.json`, `task_pool.parquet` (the task pool's ledger), `finished.json`.",
    "rollouts/": "GRPO's rollouts, `part-<step>-<n>.parquet`, and their `tasks.parquet`.",
    "tasks.parquet": "The tasks GRPO's rollouts refer to: the run folder read as a rollout folder.",
}
"""The run folder ``runs/<run id>/``: each entry and what it holds."""


def _schemas() -> dict:
    from gymflow.data import schemas

    return {name: getattr(schemas, name) for name in TABLES}


def _check_text(check) -> str:
    stats = getattr(check, "statistics", None) or {}
    name = check.name
    if name == "in_range":
        return f"in [{stats['min_value']:g}, {stats['max_value']:g}]"
    if name in ("ge", "greater_than_or_equal_to"):
        return f"≥ {stats.get('min_value')}"
    if name in ("lt", "less_than"):
        return f"< {stats.get('max_value')}"
    if name == "isin":
        values = list(stats.get("allowed_values", []))
        return "one of " + (", ".join(f"`{v}`" for v in values) if len(values) <= 6 else
                            f"{len(values)} values")  # fmt: skip
    if name == "str_length":
        return f"at least {stats.get('min_value')} character"
    if name == "str_matches":
        return f"matches `{stats.get('pattern')}`"
    return check.error or name


@cache
def summary_keys() -> tuple[str, ...]:
    """The keys of ``summary.json`` as ``build_summary`` writes them: the literal's keys, the
    keys of dict literals nested one level, and keys assigned afterwards."""
    source = (ROOT / "gymflow" / "lifecycle" / "summary.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                and n.name == "build_summary")  # fmt: skip
    keys: list[str] = []

    def literal_keys(node: ast.Dict, prefix: str) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # **(...) : the dict literals inside it
                for inner in ast.walk(value):
                    if isinstance(inner, ast.Dict) and inner is not value:
                        literal_keys(inner, prefix)
                        break
                continue
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                keys.append(prefix + key.value)
                if isinstance(value, ast.Dict) and not prefix:
                    literal_keys(value, key.value + ".")

    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id == "summary":
                if isinstance(node.value, ast.Dict):
                    literal_keys(node.value, "")
            elif (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                  and target.value.id == "summary" and isinstance(target.slice, ast.Constant)):  # fmt: skip
                keys.append(target.slice.value)
    return tuple(dict.fromkeys(keys))


def problems() -> list[str]:
    out = []
    for name, schema in _schemas().items():
        for column in schema.columns:
            if column not in COLUMNS.get(name, {}):
                out.append(
                    f"column {column} of {name} (gymflow/data/schemas.py) has no description"
                )
    for key in summary_keys():
        if key not in SUMMARY_KEYS:
            out.append(f"summary.json key {key} (gymflow/lifecycle/summary.py) has no description")
    return out


def unused() -> list[str]:
    out = []
    for name, schema in _schemas().items():
        for column in COLUMNS.get(name, {}):
            if column not in schema.columns:
                out.append(f"COLUMNS[{name}][{column}] describes a column the schema lacks")
    keys = set(summary_keys())
    out += [f"SUMMARY_KEYS[{key}] describes a key summary.json lacks" for key in SUMMARY_KEYS
            if key not in keys]  # fmt: skip
    return out


def _table_section(name: str, schema) -> str:
    title, where, row = TABLES[name]
    rows = []
    for column, spec in schema.columns.items():
        facts = [str(spec.dtype)]
        if spec.nullable:
            facts.append("nullable")
        if not spec.required:
            facts.append("optional")
        if spec.unique:
            facts.append("unique")
        facts += [_check_text(c) for c in spec.checks]
        rows.append([code(column), cell("; ".join(facts)), cell(COLUMNS[name].get(column, ""))])
    unique = (
        f" Unique together: {', '.join(code(c) for c in schema.unique)}." if schema.unique else ""
    )
    strict = " No other columns are allowed." if schema.strict is True else ""
    return (
        f"## {title}\n\nWhere: {where}. {row}{unique}{strict} Written and read through "
        f"`gymflow.data.schemas.write_table` / `read_table`, which validate every file "
        f"(schema `{name}`).\n\n" + table(["column", "type and checks", "what it holds"], rows)
    )


def page() -> str:
    parts = [
        "# Outputs\n\n"
        "What a run leaves on disk. Generated from the code when the site is built: the Parquet "
        "columns from the pandera schemas in `gymflow/data/schemas.py`, the keys of "
        "`summary.json` from `gymflow/lifecycle/summary.py`. Everything lives under the project "
        "home (`GYMFLOW_HOME`, else the current folder): `runs/` (one folder per run), "
        "`evals/` (`gymflow eval`), `mlruns/` (MLflow), `.prefect/` (Prefect's database), "
        "`.cache/` (built models, converted checkpoints, fetched data).\n",
        "## The run folder\n\n`runs/<run id>/`:\n\n"
        + table(["entry", "what it holds"], [[code(k), cell(v)] for k, v in RUN_FOLDER.items()])
        + "\nA run folder is also a rollout folder: `gymflow rollouts export --in runs/<run id>` "
        "reads its training rollouts, and each `eval/<split>-<label>/` is one too.\n",
        "## summary.json\n\n"
        + table(
            ["key", "what it holds"],
            [[code(k), cell(SUMMARY_KEYS.get(k, ""))] for k in summary_keys()],
        ),
    ]
    parts += [_table_section(name, schema) for name, schema in _schemas().items()]
    return "\n".join(parts)
