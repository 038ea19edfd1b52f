"""Config model of the ``correlation`` audit (METHODS §3)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fairspark._params import AuditParams


class CorrelationParams(AuditParams):
    """Parameters of the metric-correlation audit; see ``docs/config.md``."""

    models: list[
        Literal["logistic_regression", "random_forest", "knn", "linear_svm", "mlp"]
    ] = ["logistic_regression"]
    n_samples: int = Field(1000, ge=2)
    rounds: int = Field(30, ge=2)
    k: int = Field(1000, ge=10)
    min_accuracy: float = Field(0.5, ge=0, le=1)
    ci_level: float = Field(0.95, gt=0, lt=1)
    tau: float | None = None
    n_representatives: int | None = None
