"""Config model of the ``correlation`` audit (METHODS §3)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from fairspark._params import AuditParams

ModelName = Literal["logistic_regression", "random_forest", "knn", "linear_svm", "mlp"]
Scalar = str | int | float | bool | None


class CorrelationParams(AuditParams):
    """Parameters of the metric-correlation audit (METHODS §3, seed 002).

    Attributes
    ----------
    models:
        Model families sampled by the oracle; one correlation matrix per family.
    model_params:
        Hyperparameters per family, passed to the scikit-learn estimator
        (e.g. ``{"random_forest": {"n_estimators": 50}}``); unknown names are errors.
    n_samples:
        N, accepted models per round (paper: 1000).
    rounds:
        L, estimation rounds (paper: 30).
    k:
        K, size of each bootstrapped training sample.
    min_accuracy:
        Models with test accuracy below this are rejected (paper's alpha = 0.5).
    max_attempts_per_round:
        Cap on numbered attempts in one round; a round that does not reach N accepted
        models within it is dropped and reported. ``None`` means ``5 * n_samples``.
    test_fraction:
        Share of each cell's rows put in the round's test set (stratified split).
    sample_rows:
        Cap on the rows of the stratified (label x privileged flags) sample that Spark
        draws from the prepared table and ships to the training tasks.
    ci_level:
        Confidence level of the intervals ``r* -/+ z s / sqrt(L)``.
    tau:
        Pivot-clustering threshold; used when ``n_representatives`` is not given.
    n_representatives:
        Number k of representative metrics wanted; tau is then searched.
    repeats:
        R, random pivot orders tried; the clustering with the fewest clusters is kept.
    metrics:
        Catalogue metrics to correlate (``None`` = the 20 of METHODS §3).
    partitions:
        Spark tasks the rounds are dealt to, at most one per round (``None`` = default
        parallelism x 4); under a time budget also the rounds of each wave.
    shipping:
        How the sample reaches the tasks: ``auto`` (a broadcast where the session has a
        SparkContext, else inside the task closure, e.g. Spark Connect), ``broadcast``
        or ``closure``.
    """

    models: list[ModelName] = Field(default_factory=lambda: ["logistic_regression"])
    model_params: dict[ModelName, dict[str, Scalar]] = Field(default_factory=dict)
    n_samples: int = Field(1000, ge=2)
    rounds: int = Field(30, ge=2)
    k: int = Field(1000, ge=10)
    min_accuracy: float = Field(0.5, ge=0, le=1)
    max_attempts_per_round: int | None = Field(None, ge=2)
    test_fraction: float = Field(0.3, gt=0, lt=1)
    sample_rows: int = Field(20000, ge=20)
    ci_level: float = Field(0.95, gt=0, lt=1)
    tau: float | None = Field(None, ge=-1, le=1)
    n_representatives: int | None = Field(None, ge=1)
    repeats: int = Field(50, ge=1)
    metrics: list[str] | None = None
    partitions: int | None = Field(None, ge=1)
    shipping: Literal["auto", "broadcast", "closure"] = "auto"

    @model_validator(mode="after")
    def _check(self) -> CorrelationParams:
        if self.tau is not None and self.n_representatives is not None:
            raise ValueError("give 'tau' or 'n_representatives', not both")
        if self.tau is None and self.n_representatives is None:
            self.tau = 0.5  # the paper's figures use tau = 0.5
        if self.max_attempts_per_round is not None and self.max_attempts_per_round < self.n_samples:
            raise ValueError(
                f"max_attempts_per_round ({self.max_attempts_per_round}) is below "
                f"n_samples ({self.n_samples})"
            )
        if self.metrics is not None:
            from fairspark.metrics._core import CATALOGUE

            unknown = [m for m in self.metrics if m not in CATALOGUE]
            if unknown:
                raise ValueError(
                    f"unknown metrics {unknown}; the catalogue has {sorted(CATALOGUE)}"
                )
            if len(self.metrics) < 2:
                raise ValueError("'metrics' needs at least two metrics to correlate")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"'models' repeats a name: {self.models}")
        return self

    @property
    def attempt_cap(self) -> int:
        """The effective cap on attempts per round."""
        return self.max_attempts_per_round or 5 * self.n_samples
