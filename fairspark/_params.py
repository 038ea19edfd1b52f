"""Base class for every config model: unknown keys and wrong types are errors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StrictModel(BaseModel):
    """A pydantic model that rejects unknown keys and does not coerce types loosely."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=False)


class AuditParams(StrictModel):
    """Parameters every audit shares.

    Attributes
    ----------
    enabled:
        Run this audit (default true when its section is present).
    max_rows:
        Cap on the rows this audit reads from the prepared table (a seeded random
        sample is drawn when the table is larger); ``None`` means no cap.
    attributes:
        Sensitive attributes this audit looks at (at least one); ``None`` means all
        configured ones.
    timeout_s:
        Time budget in seconds; past it the audit ends as ``timed_out`` with what it
        had (its last partial result) and the run goes on. ``None``: no budget.
    """

    enabled: bool = True
    max_rows: int | None = Field(None, ge=1)
    attributes: list[str] | None = Field(None, min_length=1)
    timeout_s: float | None = Field(None, gt=0)

    def check_files(self) -> None:
        """Check the local files these params name; raise ``ConfigError`` naming the key.

        Called when a config file is loaded and again when a run starts, so a run
        built in code fails the same way (exit 2, nothing written). Nothing to check
        by default.
        """
