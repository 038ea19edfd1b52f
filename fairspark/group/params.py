"""Parameters of the ``group`` audit (``audits.group`` in the config)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fairspark._params import AuditParams
from fairspark.constants import DEFAULT_INTERVAL_LEVEL

__all__ = ["GroupParams"]


class GroupParams(AuditParams):
    """Parameters of the group-metric audit (``group``).

    Attributes
    ----------
    ci_level:
        Confidence level of the intervals.
    min_group_size:
        Below this many rows in a rate's denominator the value is ``inconclusive``.
    multi_valued:
        Also compare every unprivileged value with the privileged group.
    weights:
        How row weights are read: ``sampling`` (inverse inclusion probabilities) or
        ``frequency`` (row counts).
    """

    ci_level: float = Field(DEFAULT_INTERVAL_LEVEL, gt=0, lt=1)
    min_group_size: int = Field(30, ge=1)
    multi_valued: bool = True
    weights: Literal["sampling", "frequency"] = "sampling"
