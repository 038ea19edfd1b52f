"""Config model of the ``mdfa`` audit (Gitiaux and Rangwala, 2019).

References
----------
.. [1] X. Gitiaux and H. Rangwala, "Multi-Differential Fairness Auditor for Black Box
   Classifiers", arXiv:1903.07609, 2019.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from fairspark._params import AdvancedParams, AuditParams

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.mdfa.balance import BalancingOptions

__all__ = ["MDFAAdvanced", "MDFAParams"]


class MDFAAdvanced(AdvancedParams):
    """Engine tuning of the mdfa audit (``audits.mdfa.advanced``): how its splits are
    spread over Spark; the results do not depend on it.

    Attributes
    ----------
    partitions:
        Spark tasks a wave of splits is spread over (``None``: one task per split, so
        that the status tracker counts finished splits for the progress lines).
    """

    partitions: int | None = Field(None, ge=1)


class MDFAParams(AuditParams):
    """Parameters of the mdfa audit (Gitiaux and Rangwala, 2019); see ``docs/mdfa.md``.

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
    forest:
        The library that grows ``random_forest`` (:mod:`fairspark.mdfa.auditors`):
        ``lightgbm`` (default; its random-forest mode on 63 histogram bins, the same
        vote as scikit-learn's forest, about a tenth of the cost) or ``sklearn``
        (:class:`~sklearn.ensemble.RandomForestClassifier`, exact thresholds).
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
    balancing_nets, view_nets:
        ``view`` (default): ``view_nets`` (4) balancing nets per attribute view, those
        of its first splits (the L2 grid searched on the first one's folds), trained
        once on the driver; split ``i`` and its null draws reuse the weights and
        representation of net ``i mod view_nets`` on their own train/test cut
        (:func:`fairspark.mdfa.certify.prepare_view`), so a split trains no net. One
        net would do for gamma, but Algorithm 1's subgroup then rests on one net's
        representation and varies with it from audit to audit. ``split``: every split
        trains its own net (the paper's reference code), at about 5 CPU-s a split on
        50,000 rows.
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
    l2, l2_selection:
        ``l2`` fixes the L2 strength of the balancing net (one net per split). With
        ``l2: null`` (default) it is chosen from ``l2_grid``: ``l2_selection: once``
        (default: one grid search a view instead of one a split) on the first split's
        folds, before the splits run, and reused by every split of the view (the first
        split's net is then the one the grid search kept); ``per_split`` (the paper's
        reference code) searches the grid in every split, at ``len(l2_grid)`` times the
        balancing cost.
    splits:
        Number of random 70/30 train/test splits (paper: 100), or ``auto``
        (default): splits run in waves of ``splits_wave`` until one more wave
        would narrow the 95% interval of the reported gamma_max by less than
        ``splits_tolerance`` (predicted from the variance components of the splits so
        far, ``fairspark.mdfa.null.predicted_half_width``), at most ``splits_max``.
        The interval's sampling term ``n_test / n_train`` does not shrink with more
        splits, so the first wave of 20 is usually enough (``docs/mdfa.md``, "How many
        splits"); the summary and the report state the splits used and why it stopped.
    splits_wave, splits_max, splits_tolerance:
        Wave size (default 20; K = min(null_draws, splits_wave) draws, each seen in
        ``null_per_split`` splits of a wave), the most splits, and the smallest relative
        narrowing of the interval that another wave must promise, of ``splits: auto``.
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
    violation_trees:
        Trees of Algorithm 1's random forest (``auditor: random_forest``; default 30,
        the paper 100; the certificate for gamma keeps 100). Algorithm 1 refits the
        forest at every step t (T + 2 fits per split), which made it as costly as the
        balancing; 30 trees recovered the planted subgroup as well as 100 at 0.3x the
        cost (``docs/mdfa.md``, "Cost").
    violation_regrow:
        How often Algorithm 1's random forest is grown: ``1`` refits it at every step
        t (the paper); ``k > 1`` (default 5) grows it at t = 0, k, 2k, ... and in the
        steps between keeps its trees and re-estimates each leaf's vote from the step's
        weights (every training row in the leaf); ``0`` grows it once (cheapest, but
        its fixed trees cannot carve the subgroup as finely: a larger mass and a
        smaller delta, ``docs/mdfa.md``, "Cost"). Other auditors refit at every step.
    violation_splits:
        Algorithm 1 runs in the first ``violation_splits`` splits of a view (None: in
        every split). It describes the worst-treated subgroup (delta, outcome ratio,
        mass, rules: means and percentiles over the splits that ran it); gamma, its
        interval and the verdict use every split.
    rule_depth:
        Depth of the decision tree fitted to the certificate for readable rules.
    null_draws:
        Decisions redrawn from ``P(Y | x)`` estimated without S (cross-fitted
        gradient boosting) for the verdict's null reference; the splits cycle through
        ``K = min(null_draws, splits)`` of them (``K = min(null_draws, splits_wave)``
        with ``splits: auto``), ``null_per_split`` draws a split. 0 turns the verdict
        off (see :mod:`fairspark.mdfa.null`).
    null_per_split:
        Null draws each split evaluates (default 2, one more cheap certificate fit
        each): split ``i`` evaluates draws ``(i + r c) mod K`` for ``r < null_per_split``
        (``c`` coprime to K, :func:`fairspark.mdfa.null.draws_of_split`), so that with
        ``splits = K`` every draw is seen in two splits and the split-to-split variance
        is estimated inside the draws.
    null_model:
        The library of the null model ``P(Y = +1 | x)``
        (:func:`fairspark.mdfa.null.fit_null_model`):
        ``lightgbm`` (default: depth 3, 100 rounds, at least 20 rows a leaf, one
        thread, deterministic; 2.0 CPU-s on Adult's 32,561 rows) or ``sklearn``
        (``HistGradientBoostingClassifier`` with the same settings, 11.4 CPU-s). The
        null calibration and the recovery hold with either (docs/mdfa_validation.md).
    verdict_level:
        One-sided level of the verdict: "evidence" when the mean gamma_max is above the
        ``1 - verdict_level`` prediction bound of the null reference.
    advanced:
        Engine tuning (:class:`MDFAAdvanced`): speed only, never the numbers.
    """

    features: list[str] | None = None
    sample_rows: int = Field(50_000, ge=10)
    min_rows: int = Field(100, ge=10)
    target_group: Literal["unprivileged", "privileged"] = "unprivileged"
    auditor: Literal["random_forest", "svm_rbf", "linear_svm", "logistic_regression"] = (
        "random_forest"
    )
    forest: Literal["lightgbm", "sklearn"] = "lightgbm"
    certificate_features: Literal["representation", "raw"] = "representation"
    certificate_tilt: float = Field(0.0, ge=0.0, le=5.0)
    balancing: Literal["mmd_net", "uniform"] = "mmd_net"
    balancing_nets: Literal["view", "split"] = "view"
    view_nets: int = Field(4, ge=1)
    mmd_kernel: Literal["linear", "quadratic", "gaussian"] = "quadratic"
    mmd_features: Literal["standardised", "rank"] = "rank"
    epochs: int = Field(30, ge=1)
    batch_size: int = Field(512, ge=8)
    learning_rate: float = Field(3e-3, gt=0)
    l2_grid: list[float] = Field(default_factory=lambda: [1e-4, 1e-3, 1e-2])
    folds: int = Field(5, ge=2)
    l2: float | None = Field(None, ge=0)
    l2_selection: Literal["once", "per_split"] = "once"
    splits: int | Literal["auto"] = "auto"
    splits_wave: int = Field(20, ge=1)
    splits_max: int = Field(100, ge=1)
    splits_tolerance: float = Field(0.05, gt=0, lt=1)
    test_fraction: float = Field(0.3, gt=0, lt=1)
    worst_violation: bool = True
    violation_outcome: Literal["auto", "favourable", "unfavourable"] = "auto"
    xi: float = Field(0.05, gt=0)
    alpha: float = Field(0.025, gt=0, lt=1)
    wva_search: Literal["bisection", "sequential"] = "sequential"
    max_iterations: int = Field(400, ge=1)
    violation_trees: int = Field(30, ge=1)
    violation_splits: int | None = Field(None, ge=1)
    violation_regrow: int = Field(5, ge=0)
    rule_depth: int = Field(3, ge=1, le=6)
    null_draws: int = Field(20, ge=0)
    null_per_split: int = Field(2, ge=1)
    null_model: Literal["lightgbm", "sklearn"] = "lightgbm"
    verdict_level: float = Field(0.01, gt=0, lt=0.5)
    advanced: MDFAAdvanced = Field(default_factory=MDFAAdvanced)

    @field_validator("splits")
    @classmethod
    def _splits(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"splits must be 'auto' or at least 1, got {v}")
        return v

    def planned_splits(self) -> int:
        """The splits a run may use: ``splits``, or ``splits_max`` with ``auto``."""
        return self.splits_max if self.splits == "auto" else int(self.splits)

    def balancing_options(self) -> BalancingOptions:
        """How the balancing net of a split is trained, from these options."""
        from fairspark.mdfa.balance import BalancingOptions

        return BalancingOptions(
            kernel=self.mmd_kernel, feature_map=self.mmd_features, epochs=self.epochs,
            batch_size=self.batch_size, learning_rate=self.learning_rate,
            l2_grid=tuple(float(v) for v in self.l2_grid), folds=self.folds,
        )

    def null_k(self) -> int:
        """K, the null draws the splits cycle through
        (:func:`fairspark.mdfa.null.draws_of_split`): ``min(null_draws, splits)``, or
        ``min(null_draws, splits_wave)`` with ``auto`` (every wave then holds each draw
        as often)."""
        per = self.splits_wave if self.splits == "auto" else int(self.splits)
        return max(0, min(int(self.null_draws), per))

    @field_validator("l2_grid")
    @classmethod
    def _grid(cls, v: list[float]) -> list[float]:
        if not v or any(x < 0 for x in v):
            raise ValueError("l2_grid needs at least one non-negative value")
        return v
