"""Settings of the task data a run trains and is judged on: dedup, leakage, added task files."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gymflow.data.dedup import NearDupSettings


class TaskDataSettings(BaseModel):
    """What ``generate_tasks`` does beyond generating: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    near_dup: NearDupSettings = Field(default_factory=NearDupSettings)
    train_files: list[str] = Field(
        default_factory=list,
        description="Task files (gymflow JSONL) added to the train split as they are; a task "
        "that is a held-out task or a near-duplicate of one stops the run (data_leakage).",
    )
    heldout_files: list[str] = Field(
        default_factory=list,
        description="Task files added to the held-out split (e.g. from `gymflow tasks "
        "import-traces`); generated train tasks near them are dropped.",
    )
    recorded_heldout: bool = Field(
        True,
        description="Also keep training clear of the held-out sets that earlier runs of the "
        "same environment recorded in MLflow.",
    )
