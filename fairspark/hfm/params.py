"""Config model of the ``hfm`` audit (METHODS §1)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fairspark._params import AuditParams


class HFMParams(AuditParams):
    """Parameters of the HFM audit; see ``docs/config.md``."""

    method: Literal["exact", "approx", "pointwise", "certified"] = "certified"
    view: Literal["binary", "any_other_value"] = "binary"
    m1: int = Field(25, ge=1)
    m2: int | None = Field(None, ge=1)
    sampler: Literal["uniform_l1", "reference_sequential"] = "uniform_l1"
