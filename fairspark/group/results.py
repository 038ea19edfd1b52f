"""The ``group`` audit's result type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["HEADLINE_METRICS", "GroupResult"]

#: the handful of comparisons the section ranks first for every attribute
#: (``SPEC.headline_metrics``)
HEADLINE_METRICS: tuple[str, ...] = (
    "statistical_parity_difference", "disparate_impact", "tpr_difference",
    "fpr_difference", "ppv_difference")


@dataclass(frozen=True)
class GroupResult:
    """What the report section needs: the audit's long rows and its thresholds."""

    rows: list[dict[str, Any]]
    ci_level: float
    min_group_size: int
    #: with ``columns.baseline``: the paired-difference rows (challenger minus baseline)
    comparison: list[dict[str, Any]] = field(default_factory=list)
