"""Config model of the ``mdfa`` audit (METHODS §2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fairspark._params import AuditParams


class MDFAParams(AuditParams):
    """Parameters of the mdfa audit; see ``docs/config.md``."""

    features: list[str] | None = None
    sample_rows: int = Field(50_000, ge=10)
    auditor: Literal["random_forest", "svm_rbf", "linear_svm", "logistic_regression"] = (
        "random_forest"
    )
    balancing: Literal["mmd_net", "uniform"] = "mmd_net"
    splits: int = Field(100, ge=1)
    xi: float = Field(0.05, gt=0)
    alpha: float = Field(0.025, gt=0, lt=1)
