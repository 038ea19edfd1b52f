"""The ``group`` audit's result type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["GroupResult"]


@dataclass(frozen=True)
class GroupResult:
    """What the report section needs: the audit's long rows and its thresholds."""

    rows: list[dict[str, Any]]
    ci_level: float
    min_group_size: int
