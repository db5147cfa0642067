"""GGUF files as checkpoints: dequantized once through transformers, cached as a plain folder.

transformers reads a ``.gguf`` file (``from_pretrained(dir, gguf_file=...)``, with the ``gguf``
package) into a float model, which takes seconds (12.8 s for SmolLM2-135M here) and which it
then refuses to ``save_pretrained`` ("quantized with gguf and is not serializable"). So the
model is rebuilt from its config without the ``quantization_config``, given the loaded weights,
and saved with its tokenizer and chat template as safetensors under
``<cache>/gguf/<stem>-<sha256[:12]>-c<CONVERSION>/`` (a template that knows no tools gets them
rendered into the system prompt, :mod:`gymflow.policy.tool_template`): later loads take a
fraction of a second, and every backend, trainer and export sees an ordinary
``from_pretrained`` folder. The folder is written
beside its final name and renamed, so an interrupted conversion leaves nothing half-made.
"""

from __future__ import annotations

from pathlib import Path

from gymflow.core.failures import FailureKind, GymflowError
from gymflow.core.pinned_wheel import file_sha256
from gymflow.policy.cached_folder import build_once
from gymflow.policy.tool_template import knows_tools, with_tools

SOURCE_FILE = "gguf_source.json"
CONVERSION = 3
"""Part of the cache folder's name: a change to what a conversion writes makes new folders."""


def is_gguf(path: str | Path) -> bool:
    return str(path).lower().endswith(".gguf")


def materialize(gguf: Path, cache: Path) -> Path:
    """The ``from_pretrained`` folder of ``gguf`` (converted on first use); ``bad_request``
    for a missing file or an architecture transformers cannot read from GGUF."""
    gguf = Path(gguf)
    if not gguf.is_file():
        raise GymflowError(FailureKind.BAD_REQUEST, f"{gguf}: no such GGUF file")
    sha = file_sha256(gguf)
    folder = Path(cache) / "gguf" / f"{gguf.stem}-{sha[:12]}-c{CONVERSION}"
    return build_once(
        folder,
        SOURCE_FILE,
        lambda staging: {"gguf": str(gguf.resolve()), "sha256": sha, **_convert(gguf, staging)},
    )


def _convert(gguf: Path, out: Path) -> dict:
    """Write the folder; what was changed on the way, for ``gguf_source.json``."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    except (ValueError, KeyError, NotImplementedError) as exc:  # an architecture it cannot map
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"{gguf}: transformers {transformers.__version__} cannot load this GGUF "
            f"({str(exc).splitlines()[0][:200]}); convert it to a from_pretrained folder "
            "another way, or use a supported architecture (llama, qwen2, qwen3, mistral, …)",
        ) from None
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    plain = AutoModelForCausalLM.from_config(type(loaded.config).from_dict(config))
    plain.load_state_dict(loaded.state_dict())
    plain.save_pretrained(out)
    changes = {}
    if not knows_tools(tokenizer.chat_template):
        tokenizer.chat_template = with_tools(tokenizer.chat_template)
        changes["chat_template"] = "tools rendered into the system prompt (tool_template)"
    tokenizer.save_pretrained(out)
    return changes
