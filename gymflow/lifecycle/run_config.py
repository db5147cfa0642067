"""Which configuration a run uses, refused in one line before any work when it is wrong.

A new run starts from the default (or ``--smoke``) config; a resumed run (its folder holds
``config.json``) from the config it was started with. Overrides (a JSON file of
:class:`~gymflow.lifecycle.config.LifecycleConfig` fields, nested settings merged field by field),
then dotted ``--set KEY=VALUE`` overrides (:func:`parse_sets`), then a seed go on top either
way, so ``gymflow run --run X --config fix.json`` resumes X with the fix rather than starting
over or falling back into the saved mistake. The command line (``run``, ``rerun``, ``deploy``,
``config show``) and the scheduled deployment all come here.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.lifecycle.config import LifecycleConfig
from gymflow.train.grpo_settings import nested_grpo


def read_overrides(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``bad_config`` for a missing file, bad JSON or a non-object."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GymflowError(FailureKind.BAD_CONFIG, f"{path}: cannot read it ({exc})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GymflowError(
            FailureKind.BAD_CONFIG,
            f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
        ) from None
    if not isinstance(value, dict):
        raise GymflowError(
            FailureKind.BAD_CONFIG,
            f"{path}: a JSON object of config fields is expected, got {type(value).__name__}",
        )
    return value


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["grpo.learning_rate=1e-4", "gate.general_sets=[bfcl:simple_python]"]`` as nested
    overrides. A value is JSON when it parses (``1e-4``, ``true``, ``null``, ``["a"]``,
    ``{"k": 1}``), ``[a,b]`` a list of strings, anything else a string; ``bad_config`` for an
    item that is not ``KEY=VALUE`` or sets one key twice."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        path = key.strip().split(".")
        if not sep or not all(part.strip() for part in path):
            raise GymflowError(
                FailureKind.BAD_CONFIG,
                f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. "
                "--set grpo.learning_rate=1e-4",
            )
        node = out
        for depth, part in enumerate(path[:-1]):
            node = node.setdefault(part.strip(), {})
            if not isinstance(node, dict):
                where = ".".join(path[: depth + 1])
                raise GymflowError(FailureKind.BAD_CONFIG, f"--set {item!r}: {where} is set twice")
        if path[-1].strip() in node:
            raise GymflowError(FailureKind.BAD_CONFIG, f"--set {item!r}: {key} is set twice")
        node[path[-1].strip()] = _set_value(raw.strip())
    return out


def _set_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    if raw.startswith("[") and raw.endswith("]"):  # [a,b]: the shell ate the quotes
        return [_set_value(part.strip()) for part in raw[1:-1].split(",") if part.strip()]
    return raw


def run_config(
    saved: Path | None = None,
    overrides: dict[str, Any] | None = None,
    smoke: bool = False,
    seed: int | None = None,
    sets: dict[str, Any] | None = None,
) -> LifecycleConfig:
    """The config of a run: ``saved`` (a resumed run's ``config.json``) or the default/smoke
    base, with ``overrides`` (a file's), ``sets`` (``--set``'s, :func:`parse_sets`) and
    ``seed`` on top; ``bad_config`` naming the field (and where it came from) otherwise."""
    try:
        if saved is not None and saved.exists():
            raw = json.loads(saved.read_text(encoding="utf-8"))
            cfg = LifecycleConfig.model_validate(migrate_saved(raw))
        else:
            cfg = LifecycleConfig.smoke() if smoke else LifecycleConfig()
        if overrides:
            cfg = cfg.overridden(overrides)
    except ValidationError as exc:
        source = f"{saved}: " if saved is not None and saved.exists() and not overrides else ""
        raise GymflowError(FailureKind.BAD_CONFIG, source + describe(exc)) from None
    try:
        if sets:
            cfg = cfg.overridden(sets)
        if seed is not None:
            cfg = cfg.overridden({"seed": seed})
    except ValidationError as exc:
        raise GymflowError(FailureKind.BAD_CONFIG, "--set " + describe(exc)) from None
    check_env(cfg.env)
    check_devices(cfg)
    check_vllm(cfg)
    if cfg.model_path:  # an unusable checkpoint is refused before any stage runs
        from gymflow.policy.checkpoints import check_checkpoint

        check_checkpoint(cfg.model_path)
    return cfg


def check_devices(cfg: LifecycleConfig) -> None:
    """A trainer set to ``"cuda"`` on a machine whose torch sees no GPU is refused before any
    stage (``"auto"`` always resolves, and needs no torch import here)."""
    from gymflow.policy.device import torch_device

    for field, device in (("sft.device", cfg.sft.device), ("grpo.device", cfg.grpo.device)):
        if device != "auto":
            try:
                torch_device(device)
            except GymflowError as exc:
                raise GymflowError(FailureKind.BAD_CONFIG, f"{field}: {exc.detail}") from None


def check_vllm(cfg: LifecycleConfig) -> None:
    """A run that uses vLLM (``eval_engine``, GRPO's managed engine) is refused before any
    stage when there is no vLLM environment, or when, on a CPU, the model's attention heads are
    narrower than vLLM's CPU build runs (the embedded model's, or a ``model_path`` folder's)."""
    from gymflow.policy.vllm_engine import MIN_CPU_HEAD_SIZE, head_size, on_cuda, vllm_python

    uses = [f'{field} "{value}"' for field, value, on in (
        ("eval_engine", cfg.eval_engine, cfg.eval_engine == "vllm"),
        ("grpo.rollout.engine", cfg.grpo.rollout.engine, cfg.grpo.rollout.engine == "vllm"),
    ) if on]  # fmt: skip
    if not uses:
        return
    try:
        vllm_python()
    except GymflowError as exc:
        raise GymflowError(FailureKind.BAD_CONFIG, f"{uses[0]}: {exc.detail}") from None
    if on_cuda():
        return
    folder = Path(cfg.model_path) if cfg.model_path else None
    if folder is not None and (folder / "config.json").exists():
        size, which = head_size(json.loads((folder / "config.json").read_text())), str(folder)
    elif folder is None:
        shape = cfg.tiny_model
        size, which = shape.hidden_size // shape.num_heads, "the embedded model"
    else:  # a .gguf file or catalog:NAME: known once converted
        return
    if size < MIN_CPU_HEAD_SIZE:
        raise GymflowError(
            FailureKind.BAD_CONFIG,
            f"{uses[0]}: {which} has attention heads {size} wide and vLLM's CPU build needs "
            f"{MIN_CPU_HEAD_SIZE} or more (head width: hidden_size / num_heads)",
        )


def check_env(name: str) -> None:
    """``bad_config`` listing the known environments when ``name`` is none of them."""
    from gymflow.env.registry import list_envs

    known = list_envs()
    if name not in known:
        raise GymflowError(
            FailureKind.BAD_CONFIG, f"env: no environment {name!r} (known: {', '.join(known)})"
        )


def describe(exc: ValidationError) -> str:
    """Every problem of a validation error on one line: ``field.path: what is wrong``."""
    return "; ".join(_problem(error) for error in exc.errors())


RENAMED = {
    "gate.max_valid_json_drop": "gate.max_well_formed_drop",
}
"""Config keys that changed name: old path -> new path (a saved config says which to write)."""

REPLACED = {
    "sft_control": 'replaced by controls: ["sft"] (the SFT control), ["sft", "rft"], or [] for '
    "GRPO alone",
}
"""Config keys that became another setting: old path -> what to write instead."""


def migrate_saved(raw: dict) -> dict:
    """A run's saved ``config.json`` written by an earlier version, in today's keys (its
    meaning kept): ``gymflow rerun`` resumes runs saved before a key changed."""
    raw = dict(raw)
    if "sft_control" in raw:
        raw["controls"] = ["sft"] if raw.pop("sft_control") else []
    if isinstance(raw.get("grpo"), dict):
        raw["grpo"] = nested_grpo(raw["grpo"])
    gate = raw.get("gate")
    if isinstance(gate, dict) and "max_valid_json_drop" in gate:
        raw["gate"] = {**gate, "max_well_formed_drop": gate["max_valid_json_drop"]}
        del raw["gate"]["max_valid_json_drop"]
    return raw


def _problem(error: dict) -> str:
    loc = error["loc"]
    if "rollout" in loc[:-1]:  # pydantic puts the engine's tag in the path: rollout.ray.workers
        at = loc.index("rollout") + 1
        error = {**error, "loc": loc[:at] + loc[at + 1 :], "engine": loc[at]}
    where = ".".join(str(part) for part in error["loc"]) or "config"
    if error["type"] == "extra_forbidden" and where in RENAMED:
        return f"{where}: renamed {RENAMED[where]}; write that key instead"
    if error["type"] == "extra_forbidden" and where in REPLACED:
        return f"{where}: {REPLACED[where]}"
    if error["type"] == "extra_forbidden" and "engine" in error:
        return f'{where}: not a setting of rollout engine "{error["engine"]}"'
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown key{_suggestion(error['loc'])}"
    if error["type"] == "value_error":  # a model validator's own sentence
        return f"{where}: {error['msg'].removeprefix('Value error, ')}"
    return f"{where}: {error['msg'].lower()} (got {error['input']!r})"


def _suggestion(loc: tuple) -> str:
    """`` (did you mean 'x'?)`` from the fields of the model the unknown key sits in."""
    model: type[BaseModel] = LifecycleConfig
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        model = annotation
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return (
        f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(model.model_fields)})"
    )
