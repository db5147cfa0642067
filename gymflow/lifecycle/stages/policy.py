"""Stage 0: resolve the policy the run starts from: a given path, the champion, or the embedded model."""

from __future__ import annotations

from pathlib import Path

from gymflow.lifecycle.config import LifecycleConfig
from gymflow.lifecycle.embedded_corpus import corpus_key, embedded_corpus
from gymflow.lifecycle.model_registry import champion_version, download_version
from gymflow.lifecycle.run_context import RunContext, stage
from gymflow.lifecycle.stage_results import ResolvedPolicy
from gymflow.policy.checkpoints import REGISTRY_PREFIX, checkpoint_folder
from gymflow.policy.registered import resolve
from gymflow.policy.tiny_model import ensure_tiny_model


def resolve_policy(run: RunContext, cfg: LifecycleConfig) -> ResolvedPolicy:
    """The current policy: ``cfg.model_path`` if set (a folder, a checkpoint file, or a
    ``models:/NAME@ALIAS`` registry spec), else the champion, else a fresh tiny model."""
    import mlflow

    with stage(run, "resolve_policy") as info:
        name = cfg.model_name
        if cfg.model_path and cfg.model_path.startswith(REGISTRY_PREFIX):
            # a registered version, from wherever the registry is (a team's server included)
            found = resolve(cfg.model_path.removeprefix(REGISTRY_PREFIX), Path(run.home))
            path, version = found.path, found.version if found.name == name else None
            own = version is not None and found.alias == "champion"
            source = f"champion v{version}" if own else f"registry {found.pinned_spec}"
        elif cfg.model_path:
            # a folder as is; a .gguf file or catalog:NAME converted once into the cache
            path = checkpoint_folder(cfg.model_path, run.cache_dir)
            source, version = f"path {cfg.model_path}", None
        elif (version := champion_version(name)) is not None:
            path = download_version(name, version, run.dir / "policies" / f"champion-v{version}")
            source = f"champion v{version}"
        else:
            path = ensure_tiny_model(
                run.cache_dir, corpus_key(cfg), lambda: embedded_corpus(cfg), cfg.tiny_model
            )
            source = "embedded tiny model (random init)"
        mlflow.log_params({"policy_source": source, "policy_path": str(path)})
    return ResolvedPolicy(path=str(path), source=source, champion_version=version, stage=info)
