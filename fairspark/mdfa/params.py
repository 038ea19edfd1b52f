"""Config model of the ``mdfa`` audit (METHODS §2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from fairspark._params import AuditParams

__all__ = ["MDFAParams"]


class MDFAParams(AuditParams):
    """Parameters of the mdfa audit (METHODS §2); see ``docs/mdfa.md``.

    Attributes
    ----------
    features:
        Audit features (original column names); ``None`` means every feature of the
        prepared table. The auditor may leave out features the model used.
    sample_rows:
        Cap of the sample stratified by s x y that is collected to the driver.
    min_rows:
        Fewer sampled rows than this fail the attribute (too little data to split).
    target_group:
        Which side of the binary view is the paper's ``s = +1`` (the group whose
        over-representation among an outcome is searched): ``unprivileged`` (default,
        as in the paper's COMPAS study where s = +1 is African-American) or
        ``privileged``.
    auditor:
        Concept class of the certificate c (paper default for COMPAS: random forest
        with 100 trees of depth 2; Fig. 1 uses an RBF SVM).
    certificate_features:
        ``representation`` (reference code: the balancing net's 8-unit layer) or
        ``raw`` (the standardised audit features).
    certificate_tilt:
        fairspark option (default 0 = the paper's fit): when fitting the certificate
        for gamma, rows whose target r S Y is -1 weigh ``1 + certificate_tilt``. Where
        the outcome carries no information on S (a tie in expectation) c then says -1
        instead of fitting noise; those regions add nothing to gamma in expectation,
        so the tilt lowers the variance of gamma (and makes a fair classifier give
        about 0) without moving its expectation where the signal is clearer than the
        tilt. Same idea as the first step of Algorithm 1.
    balancing:
        ``mmd_net`` (paper) or ``uniform`` (no rebalancing, to show what it changes).
    mmd_kernel:
        Feature map of the MMD loss: ``quadratic`` (default: x plus all pairwise
        products, so second moments are matched too), ``linear`` (phi(x) = x, the
        paper's reference code) or ``gaussian`` (x plus 64 random Fourier features of a
        Gaussian kernel). The paper's balancing is ``mmd_kernel: linear``,
        ``mmd_features: standardised``, ``learning_rate: 0.001``.
    mmd_features:
        What the MMD compares: ``rank`` (default: each feature's normal scores of its
        ranks; bounded tails, so squares of heavy-tailed counts do not dominate) or
        ``standardised`` (the standardised audit features, the reference code). The net's input is
        the standardised features either way.
    epochs, batch_size, learning_rate, l2_grid, folds:
        Training of the balancing net: Adam (default learning rate 0.003; the reference
        code 0.001, too few steps for the quadratic MMD), ``epochs`` passes per candidate L2
        strength, the strength with the lowest held-out MMD on one of ``folds``
        folds is kept.
    splits:
        Number of random 70/30 train/test splits (paper: 100).
    test_fraction:
        Held-out share of each split.
    worst_violation:
        Run Algorithm 1 (worst violation) in every split.
    violation_outcome:
        Outcome value y of Algorithm 1: ``auto`` takes the y with the larger gamma in
        each split, ``favourable`` (+1) or ``unfavourable`` (-1).
    xi, alpha:
        Algorithm 1's weight step and minimum subgroup mass.
    wva_search:
        ``sequential`` (default, the paper's Algorithm 1) walks t = 1, 2, ... and
        stops at the first t whose subgroup mass is below alpha (capped by
        ``max_iterations``); ``bisection`` finds a t whose mass is >= alpha by
        doubling and bisection in O(log T) fits instead of T. Both give the same t
        only when the mass is non-increasing in t, which the default random forest
        does not guarantee, so bisection is an opt-in shortcut.
    max_iterations:
        Cap on t.
    rule_depth:
        Depth of the decision tree fitted to the certificate for readable rules.
    partitions:
        Spark tasks the splits are spread over (``None``: the default parallelism).
    null_draws:
        Decisions redrawn from ``P(Y | x)`` estimated without S (cross-fitted
        gradient boosting) for the verdict's null reference; split ``i`` evaluates draw
        ``i mod K``, ``K = min(null_draws, splits)``, at the cost of one more
        certificate fit per split. 0 turns the verdict off (see
        :mod:`fairspark.mdfa.null`).
    verdict_level:
        One-sided level of the verdict: "evidence" when the mean gamma_max is above the
        ``1 - verdict_level`` prediction bound of the null reference.
    """

    features: list[str] | None = None
    sample_rows: int = Field(50_000, ge=10)
    min_rows: int = Field(100, ge=10)
    target_group: Literal["unprivileged", "privileged"] = "unprivileged"
    auditor: Literal["random_forest", "svm_rbf", "linear_svm", "logistic_regression"] = (
        "random_forest"
    )
    certificate_features: Literal["representation", "raw"] = "representation"
    certificate_tilt: float = Field(0.0, ge=0.0, le=5.0)
    balancing: Literal["mmd_net", "uniform"] = "mmd_net"
    mmd_kernel: Literal["linear", "quadratic", "gaussian"] = "quadratic"
    mmd_features: Literal["standardised", "rank"] = "rank"
    epochs: int = Field(30, ge=1)
    batch_size: int = Field(512, ge=8)
    learning_rate: float = Field(3e-3, gt=0)
    l2_grid: list[float] = Field(default_factory=lambda: [1e-4, 1e-3, 1e-2])
    folds: int = Field(5, ge=2)
    splits: int = Field(100, ge=1)
    test_fraction: float = Field(0.3, gt=0, lt=1)
    worst_violation: bool = True
    violation_outcome: Literal["auto", "favourable", "unfavourable"] = "auto"
    xi: float = Field(0.05, gt=0)
    alpha: float = Field(0.025, gt=0, lt=1)
    wva_search: Literal["bisection", "sequential"] = "sequential"
    max_iterations: int = Field(400, ge=1)
    rule_depth: int = Field(3, ge=1, le=6)
    partitions: int | None = Field(None, ge=1)
    null_draws: int = Field(20, ge=0)
    verdict_level: float = Field(0.01, gt=0, lt=0.5)

    @field_validator("l2_grid")
    @classmethod
    def _grid(cls, v: list[float]) -> list[float]:
        if not v or any(x < 0 for x in v):
            raise ValueError("l2_grid needs at least one non-negative value")
        return v
