"""Config model of the ``correlation`` audit (Anahideh et al., 2021).

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from fairspark._params import AdvancedParams, AuditParams
from fairspark.constants import DEFAULT_INTERVAL_LEVEL

ModelName = Literal["logistic_regression", "random_forest", "knn", "linear_svm", "mlp"]
Scalar = str | int | float | bool | None


class CorrelationAdvanced(AdvancedParams):
    """Engine tuning of the correlation audit (``audits.correlation.advanced``): how the
    rounds are run on Spark.

    Attributes
    ----------
    max_attempts_per_round:
        Cap on numbered attempts in one round, a guard against a model family that is
        rarely accurate enough; a round that does not reach N accepted models within it
        is dropped and reported. ``None`` (default) means ``5 * n_samples``.
    partitions:
        Spark tasks the rounds are dealt to, at most one per round (``None`` = default
        parallelism x 4); under a time budget also the rounds of each wave.
    shipping:
        How the sample reaches the tasks: ``auto`` (a broadcast where the session has a
        SparkContext, else inside the task closure, e.g. Spark Connect), ``broadcast``
        or ``closure``.
    linear_fits:
        ``batched`` (default): a round's logistic regressions (L2 penalty, the
        default) are fitted together by Newton's method in numpy over the stack of
        bootstrap samples, their predictions one matrix product; the minimiser is
        scikit-learn's to about its ``tol`` (see correlation.md), so the correlations
        agree to that tolerance. ``per_model``: one scikit-learn fit per attempt. Other
        families always fit per model.
    """

    max_attempts_per_round: int | None = Field(None, ge=2)
    partitions: int | None = Field(None, ge=1)
    shipping: Literal["auto", "broadcast", "closure"] = "auto"
    linear_fits: Literal["batched", "per_model"] = "batched"


class CorrelationParams(AuditParams):
    """Parameters of the metric-correlation audit (Anahideh et al., 2021).

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
        L, estimation rounds: ``auto`` (default) adds rounds in waves until the
        Monte-Carlo standard error of the correlation matrix is at most
        ``target_se`` or the representatives are unchanged over ``stable_rounds``
        kept rounds (between ``rounds_min`` and ``rounds_max`` rounds); an integer
        runs exactly that many (the paper: 30).
    rounds_min:
        With ``rounds: auto``, the kept rounds needed before the stopping rule applies
        (the standard deviation over fewer rounds is too rough to stop on).
    rounds_max:
        With ``rounds: auto``, the most rounds run; the audit stops there with the
        standard error it reached (default 30, the paper's L, so that ``auto`` never
        costs more than the fixed default it replaces).
    target_se:
        With ``rounds: auto``, the target of the matrix's Monte-Carlo standard error:
        the largest over metric pairs of ``s_ij / sqrt(L_ij)``, ``s_ij`` the sample
        standard deviation over rounds of each round's Pearson r (see correlation.md).
    stable_rounds:
        With ``rounds: auto``, a second stopping rule: stop at the first kept round
        ``L >= rounds_min`` whose representatives (the clustering of r* over kept rounds
        ``1..L``) are the same as after each of the ``stable_rounds`` kept rounds before
        it, even if the standard error is still above ``target_se`` (which is then
        reported as reached, not met). ``None``: the standard-error rule only.
    k:
        K, size of each bootstrapped training sample.
    min_accuracy:
        Models with test accuracy below this are rejected (paper's alpha = 0.5).
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
        Catalogue metrics to correlate (``None`` = the 20 of Anahideh et al., 2021).
    advanced:
        Engine tuning (:class:`CorrelationAdvanced`): speed and memory only.
    """

    models: list[ModelName] = Field(default_factory=lambda: ["logistic_regression"])
    model_params: dict[ModelName, dict[str, Scalar]] = Field(default_factory=dict)
    n_samples: int = Field(1000, ge=2)
    rounds: int | Literal["auto"] = "auto"
    rounds_min: int = Field(10, ge=2)
    rounds_max: int = Field(30, ge=2)
    target_se: float = Field(0.05, gt=0, lt=1)
    stable_rounds: int | None = Field(5, ge=1)
    k: int = Field(1000, ge=10)
    min_accuracy: float = Field(0.5, ge=0, le=1)
    test_fraction: float = Field(0.3, gt=0, lt=1)
    sample_rows: int = Field(20000, ge=20)
    ci_level: float = Field(DEFAULT_INTERVAL_LEVEL, gt=0, lt=1)
    tau: float | None = Field(None, ge=-1, le=1)
    n_representatives: int | None = Field(None, ge=1)
    repeats: int = Field(50, ge=1)
    metrics: list[str] | None = None
    advanced: CorrelationAdvanced = Field(default_factory=CorrelationAdvanced)

    @model_validator(mode="after")
    def _check(self) -> CorrelationParams:
        if self.tau is not None and self.n_representatives is not None:
            raise ValueError("give 'tau' or 'n_representatives', not both")
        if self.tau is None and self.n_representatives is None:
            self.tau = 0.5  # the paper's figures use tau = 0.5
        cap = self.advanced.max_attempts_per_round
        if cap is not None and cap < self.n_samples:
            raise ValueError(
                f"advanced.max_attempts_per_round ({cap}) is below n_samples ({self.n_samples})"
            )
        if self.metrics is not None:
            from fairspark.metrics import CATALOGUE

            unknown = [m for m in self.metrics if m not in CATALOGUE]
            if unknown:
                raise ValueError(
                    f"unknown metrics {unknown}; the catalogue has {sorted(CATALOGUE)}"
                )
            if len(self.metrics) < 2:
                raise ValueError("'metrics' needs at least two metrics to correlate")
        if self.rounds != "auto" and self.rounds < 2:
            raise ValueError(f"'rounds' is 'auto' or an integer of at least 2, got {self.rounds}")
        if self.rounds_min > self.rounds_max:
            raise ValueError(
                f"rounds_min ({self.rounds_min}) is above rounds_max ({self.rounds_max})"
            )
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"'models' repeats a name: {self.models}")
        return self

    @property
    def attempt_cap(self) -> int:
        """The effective cap on attempts per round."""
        return self.advanced.max_attempts_per_round or 5 * self.n_samples

    @property
    def auto_rounds(self) -> bool:
        """Whether the rounds stop by the Monte-Carlo standard error (``rounds: auto``)."""
        return self.rounds == "auto"

    @property
    def max_rounds(self) -> int:
        """The most rounds run: ``rounds``, or ``rounds_max`` with ``rounds: auto``."""
        return self.rounds_max if self.rounds == "auto" else int(self.rounds)
