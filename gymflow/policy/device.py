"""Where a local model runs: ``"auto"`` (CUDA when torch sees a GPU, else the CPU), ``"cpu"`` or
``"cuda"``; a bad name or ``"cuda"`` without a GPU is a one-line ``bad_request``."""

from __future__ import annotations

from typing import Literal

from gymflow.core.failures import FailureKind, GymflowError

DEVICES = ("auto", "cpu", "cuda")
Device = Literal["auto", "cpu", "cuda"]
"""A device setting's type (settings models use it; :func:`torch_device` resolves it)."""


def torch_device(name: str = "auto"):
    """The ``torch.device`` that ``name`` picks on this machine."""
    import torch

    if name not in DEVICES:
        raise GymflowError(
            FailureKind.BAD_REQUEST, f"device {name!r}: use one of {', '.join(DEVICES)}"
        )
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise GymflowError(
            FailureKind.BAD_REQUEST,
            f"device 'cuda': torch {torch.__version__} sees no CUDA GPU here; "
            "use device 'cpu' or 'auto', or install a CUDA build of torch",
        )
    return torch.device(name)


def model_device(model):
    """The device a model's weights are on (its first parameter's)."""
    return next(model.parameters()).device


def trains_on_cpu(name: str) -> bool:
    """TRL's ``use_cpu`` for a trainer set to ``name`` (accelerate puts the model on CUDA
    otherwise)."""
    return torch_device(name).type == "cpu"
