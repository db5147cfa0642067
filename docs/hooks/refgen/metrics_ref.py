"""The metrics reference: every metric name a run logs to MLflow, read from the code.

gymflow's own metrics are found by reading (``ast``) every ``log_metric``/``log_metrics`` call
of the product's code and the keys its argument is built from: string constants, f-strings
(their fields become ``<placeholders>``), dict literals and comprehensions, ``**`` expansions,
local dicts filled by ``d[key] = …``/``d |= {…}``, loops over constant tuples (expanded) and
calls of helper functions that return such a dict. The trainers' own metrics come through
``report_to="mlflow"`` from TRL and transformers: their names are read from those packages'
installed source, so a version bump shows up here.
"""

from __future__ import annotations

import ast
import contextlib
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from refgen import cell, code, rel, source_files, table

LOG_CALLS = {"log_metric", "log_metrics"}


@dataclass
class Site:
    """A function that logs metrics and the key templates it logs."""

    file: str
    function: str
    templates: list[str] = field(default_factory=list)


def _placeholder(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"<{node.id}>"
    if isinstance(node, ast.Attribute):
        return f"<{node.attr}>"
    if isinstance(node, ast.Call):
        if getattr(node.func, "attr", None) == "get" and node.args:  # d.get(key, key)
            return _placeholder(node.args[-1])
        return _placeholder(node.func)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return f"<{node.slice.value}>"
    return "<value>"


class _Resolver:
    """Key templates of an expression inside one function of one module."""

    def __init__(self, module: ast.Module, function: ast.FunctionDef, index: _Index) -> None:
        self.module = module
        self.function = function
        self.index = index
        self.parents: dict[int, ast.AST] = {}
        for node in ast.walk(function):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node

    def _loop_binding(self, name: ast.Name) -> ast.AST | None:
        """The iterable of the nearest loop or comprehension around ``name`` that binds it."""
        node: ast.AST | None = name
        while node is not None:
            node = self.parents.get(id(node))
            generators = getattr(node, "generators", None)
            loops = generators if generators is not None else [node]
            for loop in loops:
                if isinstance(loop, ast.For | ast.comprehension):
                    bound = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
                    if name.id in bound:
                        return (
                            loop.iter if isinstance(loop.target, ast.Name) else ast.Constant(None)
                        )
        return None

    def _constants_of(self, node: ast.AST) -> list[str]:
        values = self.index.constants_of(node)
        if values or not isinstance(node, ast.Name):
            return values
        for value in self._assigned(node.id):  # a local tuple of names
            values += self.index.constants_of(value)
        return values

    def strings(self, node: ast.AST, depth: int = 0) -> list[str]:
        """The strings ``node`` may evaluate to, with ``<x>`` for what is known at run time."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.JoinedStr):
            out = [""]
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out = [o + str(part.value) for o in out]
                else:
                    options = self.strings(part.value, depth + 1) or [_placeholder(part.value)]
                    out = [o + opt for o in out for opt in options]
            return out
        if isinstance(node, ast.IfExp):
            return self.strings(node.body, depth + 1) + self.strings(node.orelse, depth + 1)
        if isinstance(node, ast.Name):
            loop = self._loop_binding(node)
            if loop is not None:
                return self._constants_of(loop) or [f"<{node.id}>"]
            assigned = self._assigned(node.id)
            if assigned:
                return [s for value in assigned for s in self.strings(value, depth + 1)]
            constant = self.index.constant(node.id)
            if isinstance(constant, str):
                return [constant]
            return self._parameter(node.id, depth) or [f"<{node.id}>"]
        return []

    def _parameter(self, name: str, depth: int) -> list[str]:
        """The values a parameter of this function (or of one enclosing it) takes: its
        default, and what callers pass as constants (by keyword or position)."""
        fn: ast.AST | None = self.function
        while fn is not None:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                args = fn.args
                positional = [*args.posonlyargs, *args.args]
                names = [a.arg for a in [*positional, *args.kwonlyargs]]
                if name in names:
                    return self._argument_values(fn, name, positional, depth)
            fn = self.index.parent(self.module, fn)
        return []

    def _argument_values(self, fn, name: str, positional: list, depth: int) -> list[str]:
        """The default and every caller's constant; nothing (a placeholder) when some caller
        passes a value known only at run time."""
        args = fn.args
        names = [a.arg for a in positional]
        defaults = dict(zip(names[len(names) - len(args.defaults) :], args.defaults, strict=True))
        defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d}
        values = self.strings(defaults[name], depth + 1) if name in defaults else []
        index = names.index(name) if name in names else None
        for module, call in self.index.calls_of(fn.name):
            passed = [k.value for k in call.keywords if k.arg == name]
            if not passed and index is not None and index < len(call.args):
                passed = [call.args[index]]
            caller = self.index.enclosing_function(module, call)
            for value in passed:
                found = _Resolver(module, caller, self.index).strings(value, depth + 1) if (
                    caller is not None and depth < 4) else []  # fmt: skip
                if not found or any("<" in f for f in found):
                    return []  # known only at run time
                values += found
        return list(dict.fromkeys(values))

    def _assigned(self, name: str) -> list[ast.AST]:
        return [
            n.value
            for n in ast.walk(self.function)
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
        ]

    def keys(self, node: ast.AST, depth: int = 0) -> list[str]:
        """The metric-name templates of a dict-valued (or name-valued) expression."""
        if depth > 6:
            return []
        if isinstance(node, ast.Dict):
            out = []
            for k, v in zip(node.keys, node.values, strict=True):
                out += self.keys(v, depth + 1) if k is None else self._key(k)
            return out
        if isinstance(node, ast.DictComp):
            return self._key(node.key)
        if isinstance(node, ast.IfExp):
            return self.keys(node.body, depth + 1) + self.keys(node.orelse, depth + 1)
        if isinstance(node, ast.BinOp):  # a | b
            return self.keys(node.left, depth + 1) + self.keys(node.right, depth + 1)
        if isinstance(node, ast.Call):
            return self._call_keys(node, depth)
        if isinstance(node, ast.Name):
            return self._dict_variable(node.id, depth)
        return []

    def _key(self, node: ast.AST) -> list[str]:
        return self.strings(node) or [_placeholder(node)]

    def _dict_variable(self, name: str, depth: int) -> list[str]:
        """Keys of a local dict: its assignments, ``name[k] = …`` and ``name |= {…}``."""
        out: list[str] = []
        for n in ast.walk(self.function):
            if isinstance(n, ast.Assign):
                for target in n.targets:
                    if isinstance(target, ast.Name) and target.id == name:
                        out += self.keys(n.value, depth + 1)
                    for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                        if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                                and t.value.id == name):  # fmt: skip
                            out += self._key(t.slice)
            elif (isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
                  and n.target.id == name):  # fmt: skip
                out += self.keys(n.value, depth + 1)
        return out

    def _call_keys(self, node: ast.Call, depth: int) -> list[str]:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("items", "copy"):
            return self.keys(func.value, depth + 1)
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name == "dict" and node.keywords:
            return [k.arg for k in node.keywords if k.arg]
        target = self.index.function(name, self.module)
        if target is None:
            return []
        module, fn = target
        resolver = _Resolver(module, fn, self.index)
        out = []
        for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None):
            out += resolver.keys(ret.value, depth + 1)
        return out


class _Index:
    """Module-level string constants, tuples of strings and functions of the whole codebase."""

    def __init__(self, modules: dict[Path, ast.Module]) -> None:
        self.modules = modules
        self._parents: dict[int, dict[int, ast.AST]] = {}
        self.constants: dict[str, object] = {}
        self.functions: dict[str, list[tuple[ast.Module, ast.FunctionDef]]] = {}
        for tree in modules.values():
            for node in tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Name):
                        with contextlib.suppress(
                            ValueError, TypeError, SyntaxError, RecursionError
                        ):
                            self.constants[target.id] = ast.literal_eval(node.value)
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.functions.setdefault(node.name, []).append((tree, node))

    def parent(self, module: ast.Module, node: ast.AST) -> ast.AST | None:
        if id(module) not in self._parents:
            self._parents[id(module)] = {
                id(child): n for n in ast.walk(module) for child in ast.iter_child_nodes(n)
            }
        return self._parents[id(module)].get(id(node))

    def enclosing_function(self, module: ast.Module, node: ast.AST):
        """The innermost function around ``node``; None at module level."""
        while node is not None:
            node = self.parent(module, node)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return node
        return None

    def calls_of(self, name: str) -> list[tuple[ast.Module, ast.Call]]:
        """Every call of a function named ``name`` in the codebase."""
        return [
            (tree, n)
            for tree in self.modules.values()
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)
        ]

    def constant(self, name: str) -> object:
        return self.constants.get(name)

    def constants_of(self, node: ast.AST) -> list[str]:
        """The strings a loop iterates over, when they are constants (a tuple or a name)."""
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = self.constant(node.id) if isinstance(node, ast.Name) else None
        if isinstance(value, tuple | list) and all(isinstance(v, str) for v in value):
            return list(value)
        return []

    def function(self, name: str | None, module: ast.Module):
        candidates = self.functions.get(name or "", [])
        for tree, fn in candidates:  # the caller's module first
            if tree is module:
                return tree, fn
        return candidates[0] if len(candidates) == 1 else None


@cache
def logging_sites() -> tuple[Site, ...]:
    """Every function of the product's code that logs metrics, with the templates it logs."""
    modules = {p: ast.parse(p.read_text(encoding="utf-8")) for p in source_files()}
    index = _Index(modules)
    sites: list[Site] = []
    for path, tree in modules.items():
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            calls = [
                n for n in ast.walk(fn)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in LOG_CALLS and n.args
            ]  # fmt: skip
            if not calls:
                continue
            nested = {id(n) for inner in ast.walk(fn) if inner is not fn
                      and isinstance(inner, ast.FunctionDef) for n in ast.walk(inner)}  # fmt: skip
            resolver = _Resolver(tree, fn, index)
            site = Site(rel(path), fn.name)
            for call in calls:
                if id(call) in nested:
                    continue  # logged by the inner function: its own site
                arg = call.args[0]
                found = resolver.keys(arg) if call.func.attr == "log_metrics" else (
                    resolver.strings(arg) or [_placeholder(arg)])  # fmt: skip
                site.templates += [t for t in found if t not in site.templates]
            if site.templates:
                sites.append(site)
    return tuple(sites)


def gymflow_metrics() -> list[str]:
    """Every template gymflow's own code logs, sorted, each once."""
    return sorted({t for s in logging_sites() for t in s.templates})


_TRL_METRIC = re.compile(r"""_metrics\[(?:mode|["'](?:train|eval)["'])\]\[f?["']([^"']+)["']\]""")
_HF_LOG = re.compile(r"""logs\[["']([a-z_]+)["']\]""")


@cache
def trainer_metrics() -> dict[str, list[str]]:
    """Names TRL's GRPO and SFT trainers and transformers' ``Trainer`` log, from their source."""
    import transformers
    import trl

    trl_dir = Path(trl.__file__).parent / "trainer"
    out = {}
    for name in ("grpo_trainer.py", "sft_trainer.py"):
        text = (trl_dir / name).read_text(encoding="utf-8")
        found = {re.sub(r"\{[^}]*\}", "<reward function>", m) for m in _TRL_METRIC.findall(text)}
        out[f"trl {trl.__version__} trainer/{name}"] = sorted(found)
    text = (Path(transformers.__file__).parent / "trainer.py").read_text(encoding="utf-8")
    speed = [f"train_{s}" for s in ("runtime", "samples_per_second", "steps_per_second")]
    out[f"transformers {transformers.__version__} trainer.py"] = sorted(
        {*_HF_LOG.findall(text), *speed, "total_flos", "train_loss"}
    )
    return out


NOTES: dict[str, str] = {
    "stage_wall_s": "Wall seconds of the stage (every stage run).",
    "wall_s": "Wall seconds of the whole run (parent run).",
    "gate_passed": "1 when the gate promoted a candidate, else 0.",
    "heldout_delta_success": "Held-out success of the GRPO policy minus the start's.",
    "delta_success": "Held-out success of the GRPO policy minus the start's (gate stage run).",
    "grpo_minus_control": "Held-out success of the GRPO policy minus the SFT control's.",
    "grpo_minus_rft_control": "Held-out success of the GRPO policy minus the RFT control's.",
    "pass_at_k/<label>/greedy": "Greedy pass@1 of a policy (`baseline`, `grpo`, `sft_control`, "
    "`rft_control`) on the first `gate.pass_k_tasks` held-out tasks …",
    "pass_at_k/<label>/pass_at_<k>": "… and its pass@k there (k samples per task at temperature "
    "1, the unbiased estimator).",
    "pass_at_k/<label>/<env>/greedy": "The same per environment of a mix …",
    "pass_at_k/<label>/<env>/pass_at_<k>": "… and its pass@k.",
    "rft_control/val_greedy_success": "The RFT control's greedy validation success at each "
    "checkpoint the rule scores (step = its step).",
    "rft_control/chosen_step": "The step of the RFT control the checkpoint rule chose.",
    "rft_control/<k>": "The RFT control's compute: updates, samples generated, examples and "
    "tokens trained, wall seconds (gymflow.eval.arms.ArmCompute).",
    "registered_version": "The registry version the promote stage registered.",
    "heldout.success": "Held-out success of the registered candidate (promote stage run).",
    "heldout.well_formed": "Held-out rate of well-formed answers (the environment's format check) of the registered candidate.",
    "heldout.unsafe_rate": "Held-out unsafe-action rate of the registered candidate.",
    "<candidate>_minus_champion": "A candidate's held-out success minus the champion's "
    "(`grpo`, `sft_control`), when the registry has a champion.",
    "<env>/delta_success_<name>": "On a mix: a candidate's held-out gain over the start on one "
    "environment.",
    "<label>/<k>": "Every number of an evaluation's summary (`success`, `reward`, "
    "`well_formed`, `unsafe_rate`, `turns`, `tokens`, latencies, counts) for the policy `label`: "
    "in the gate, each policy it evaluated on held-out tasks (`baseline`, `candidate`, "
    "`sft_control`, the champion); in older runs also baseline_eval's `current`.",
    "<label>/<name>/<k>": "The same per environment `name` of a mix.",
    "current/<k>": "baseline_eval: every number of the current policy's validation summary "
    "(`well_formed` decides whether SFT runs).",
    "current/<name>/<k>": "The same per environment `name` of a mix.",
    "gate/tasks_used": "Held-out tasks the gate evaluated before it decided …",
    "gate/tasks_available": "… of the held-out tasks it had …",
    "gate/episodes_used": "… episodes it ran …",
    "gate/episodes_full": "… and the episodes a full evaluation of every policy would take.",
    "gate/<candidate>_tasks": "Held-out tasks the verdict on a candidate (`grpo`, "
    "`sft_control`) rests on.",
    "general/<name>/<label>_value": "A policy's success on a general-capability set "
    "(`gate.general_envs`, `gate.general_sets`) …",
    "general/<name>/<label>_delta": "… a candidate's paired difference from the start there …",
    "general/<name>/<label>_cs_lo": "… the bounds of that difference's confidence interval …",
    "general/<name>/<label>_cs_hi": "…",
    "general/<name>/<label>_tasks": "… and the tasks it rests on.",
    "drift/episodes": "verifier_drift: stored episodes of the champion scored again by today's "
    "verifiers …",
    "drift/flips": "… and how many of their verdicts changed (the stage stops the run past its "
    "threshold).",
    "sft_control/chosen_step": "The SFT control's step validation chose and handed to the gate.",
    "sft_control/val_greedy_success": "The SFT control's greedy validation success at each "
    "check (the same rule as GRPO's).",
    "profile_policy_share": "Share of the profiled samples drawn from the policy.",
    "<mix_env>/profile_policy_share": "The same per environment of a mix.",
    "verify_ms_<k>": "Verify latency in ms in the first of the two processes (`p50`, `p95`, …).",
    "<mix_env>/verify_ms_<k>": "The same per environment of a mix.",
    "profile_n": "Samples the verifier profile scored.",
    "profile_deterministic": "1 when every verdict was the same in both processes.",
    "profile_problems": "Problems the profile found (the stage stops on any).",
    "tasks_<k>": "Tasks per split after dedup (`train`, `val`, `heldout`).",
    "tasks_<name>_<split>": "On a mix: tasks per environment `name` and split.",
    "dedup_<k>": "Dedup counts: exact and near duplicates dropped, train tasks dropped near "
    "held-out, LLM-written variants by verdict.",
    "coverage_gaps": "Tools/templates held out but never trained on, and the reverse.",
    "rollouts/reward_mean": "GRPO step: mean reward of the episodes trained on.",
    "rollouts/success_rate": "GRPO step: success rate of the episodes generated.",
    "rollouts/generated": "GRPO step: episodes generated (refills of zero-variance groups "
    "included).",
    "rollouts/zero_variance_share": "GRPO step: share of groups whose samples all had one "
    "reward (they teach nothing; dynamic sampling replaces them).",
    "task_pool/<kind>": "GRPO step: tasks of the difficulty pool per class (new, learning, "
    "solved, failed); with the curriculum also the easiest and hardest level open.",
    "preflight/pass_at_1": "GRPO's preflight (`grpo.preflight`): the start's mean sampled "
    "success on a sample of the pool at GRPO's temperature …",
    "preflight/pass_at_k": "… pass@G, G the group size …",
    "preflight/zero_variance_share": "… the expected share of zero-variance groups on the "
    "whole pool …",
    "preflight/predicted_zero_variance_share": "… and on the levels the curriculum opens "
    "(the whole pool without one) …",
    "preflight/in_band": "… 1 when the start is inside the learnable band …",
    "preflight/wall_s": "… and the seconds the preflight took.",
    "rollouts/<name>/success_rate": "On a mix, per environment: success of the episodes "
    "generated …",
    "rollouts/<name>/groups_trained": "… groups trained on …",
    "rollouts/<name>/reward_mean": "… and mean reward of the episodes trained on.",
    "grpo/chosen_step": "The GRPO step validation chose and handed to the gate.",
    "grpo/val_greedy_success": "GRPO's greedy validation success at each check "
    "(`grpo.validate_every`).",
    "sft/val_sampled_success": "SFT's sampled validation success at each check "
    "(`sft.eval_every`); SFT stops at `sft.target_sampled_success`.",
    "dynamic_sampling/<k>": "GRPO's dynamic sampling totals (groups generated, replaced, rounds).",
    "<label>/<env>/success": "`gymflow eval` (its own MLflow run `eval-<eval id>`): success "
    "of the policy `label` (`policy`, `against`) on environment `env` (`overall` pooled); the "
    "same figures without the label on a registry version's logged model …",
    "<label>/<env>/reward": "… mean reward …",
    "<label>/<env>/well_formed": "… valid-format rate …",
    "<label>/<env>/unsafe_rate": "… unsafe-action rate …",
    "<label>/<env>/turns": "… mean turns per episode …",
    "<label>/<env>/tokens": "… mean tokens per episode …",
    "<label>/<env>/latency_p50": "… median seconds per episode …",
    "<label>/<env>/latency_p95": "… 95th percentile seconds per episode …",
    "<label>/<env>/success_ci95_lo": "… 95 % CI bounds of success …",
    "<label>/<env>/success_ci95_hi": "…",
    "<label>/<env>/reward_ci95_lo": "… and of reward …",
    "<label>/<env>/reward_ci95_hi": "…",
    "<label>/<env>/pass_at_<k>": "… pass@k for k = 1, 2, 4 … K with `--samples K` …",
    "<label>/<env>/right_tool": "… right-tool rate …",
    "<label>/<env>/arg_accuracy": "… argument accuracy …",
    "<label>/<env>/tool_execution": "… tool-execution success (where the verifier reports them) …",
    "<label>/<env>/cost_usd": "… and the cost, where the backend reports usage and "
    "`--price-prompt`/`--price-completion` are given.",
    "<env>/success": "The same figures logged on a registry version's logged model "
    "(`models:/` policies): success …",
    "<env>/reward": "…",
    "<env>/well_formed": "…",
    "<env>/unsafe_rate": "…",
    "<env>/turns": "…",
    "<env>/tokens": "…",
    "<env>/latency_p50": "…",
    "<env>/latency_p95": "…",
    "<env>/success_ci95_lo": "…",
    "<env>/success_ci95_hi": "…",
    "<env>/reward_ci95_lo": "…",
    "<env>/reward_ci95_hi": "…",
    "<env>/pass_at_<k>": "…",
    "<env>/right_tool": "…",
    "<env>/arg_accuracy": "…",
    "<env>/tool_execution": "…",
    "<env>/cost_usd": "…",
    "paired/<env>/delta_<name>": "`gymflow eval --against`: the paired difference of a figure.",
}
"""What each of gymflow's metric templates means (keyed as :func:`gymflow_metrics` spells them)."""


def problems() -> list[str]:
    """Templates the code logs without a note: the build fails on them."""
    found = set(gymflow_metrics())
    return [f"metric {t} has no note in NOTES" for t in sorted(found - set(NOTES))]


def unused() -> list[str]:
    """Notes for templates no code logs (yet, or any more): only reported."""
    found = set(gymflow_metrics())
    return [f"NOTES names metric {t}, which no code logs" for t in sorted(set(NOTES) - found)]


STAGE_ORDER = (
    "tasks/generate.py",
    "tasks/profile.py",
    "tasks/evaluate.py",
    "gymflow/train/sft.py",
    "tasks/train.py",
    "gymflow/train/checkpoint_choice.py",
    "tasks/gate.py",
    "tasks/promote.py",
    "gymflow/lifecycle/summary.py",
    "gymflow/lifecycle/run_context.py",
)
"""The lifecycle's files in the order its stages run; the page lists their metrics so."""

EVAL_FILES = ("gymflow/eval/mlflow_run.py",)
"""Files whose metrics belong to ``gymflow eval``'s own run, not to a lifecycle run."""


def _rows(sites: list[Site]) -> list[list[str]]:
    by_template: dict[str, list[str]] = {}
    for site in sites:
        for t in site.templates:
            by_template.setdefault(t, []).append(f"`{site.file}` `{site.function}`")
    return [[code(t), cell(NOTES.get(t, "")), "<br>".join(where)]
            for t, where in by_template.items()]  # fmt: skip


def page() -> str:
    """The markdown of ``reference/metrics.md``."""
    sites = list(logging_sites())
    rank = {f: i for i, f in enumerate(STAGE_ORDER)}
    run_sites = sorted((s for s in sites if s.file not in EVAL_FILES),
                       key=lambda s: rank.get(s.file, len(rank)))  # fmt: skip
    eval_sites = [s for s in sites if s.file in EVAL_FILES]
    header = ["metric", "what it is", "logged by"]
    parts = [
        "# Metrics",
        "",
        "_Generated when the docs are built: gymflow's own metrics from the "
        "`log_metric`/`log_metrics` calls of its code (placeholders in `<angle brackets>` are "
        "filled at run time), the trainers' from TRL's and transformers' installed source._",
        "",
        "A lifecycle run is one MLflow parent run (`lifecycle-<run id>`) with one nested run "
        "per stage; each metric is logged on the run of the stage that computes it (the "
        "summary's on the parent). Per-step metrics carry the training step.",
        "",
        "## A lifecycle run",
        "",
        "In the order the stages run.",
        "",
        table(header, _rows(run_sites)),
        "## The trainers' metrics",
        "",
        'The SFT and GRPO stages pass `report_to="mlflow"` to TRL (the SFT control beside '
        "GRPO does not log to MLflow), so their stage runs also hold what the trainers log "
        'each logging step. TRL documents them in its GRPO and SFT trainer guides ("Logged '
        'metrics"). `frac_reward_zero_std` is the share of zero-variance groups in the batch '
        "GRPO trains on, after dynamic sampling's refills; `rollouts/zero_variance_share` above "
        "is the share among the groups generated.",
        "",
    ]
    for source, names in trainer_metrics().items():
        parts += [f"From `{source}`:", "", ", ".join(code(n) for n in names), ""]
    parts += [
        "## `gymflow eval`",
        "",
        "An evaluation logs to its own MLflow run (`eval-<eval id>`, tag "
        "`gymflow.kind = evaluation`).",
        "",
        table(header, _rows(eval_sites)),
    ]
    return "\n".join(parts)
