"""Which reasoning-gym families the environment serves, with what configs: one typed config.

Defaults to a small mix of families that passed the self-check (``families_checked.json``).
Override with a JSON file named by ``GYMFLOW_REASONING_GYM_CONFIG`` (the resources server
builds the environment with no arguments, in its verifier workers too, so the setting travels
in the process environment), e.g.
``{"families": [{"name": "countdown", "config": {"min_numbers": 3}}], "dataset_size": 500}``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

CONFIG_VARIABLE = "GYMFLOW_REASONING_GYM_CONFIG"


class Family(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """A reasoning-gym dataset name (``reasoning_gym.factory.DATASETS``)."""
    config: dict = Field(default_factory=dict)
    """Keyword arguments of its config dataclass (difficulty knobs); {} = the library defaults."""
    weight: float = Field(1.0, gt=0)
    """Relative share of generated tasks."""


DEFAULT_FAMILIES = [
    Family(name=name)
    for name in (
        "basic_arithmetic",
        "chain_sum",
        "leg_counting",
        "gcd",
        "letter_counting",
        "spell_backward",
        "word_sorting",
        "number_sorting",
        "base_conversion",
        "simple_equations",
    )
]


class RGSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    families: list[Family] = Field(default_factory=lambda: list(DEFAULT_FAMILIES), min_length=1)
    """The task mix; every family must pass the self-check or generation is refused."""
    dataset_size: int = Field(1000, ge=1)
    """Entries of one (family, config, seed) dataset; task indices are drawn below it."""
    check_seed: int = 1234
    """Dataset seed of the self-check (the shipped table is measured with 1234)."""
    check_entries: int = Field(16, ge=1)
    """Entries the self-check draws per family (the shipped table: 16)."""

    @classmethod
    def from_env(cls) -> RGSettings:
        path = os.environ.get(CONFIG_VARIABLE)
        return cls.model_validate_json(Path(path).read_text()) if path else cls()
