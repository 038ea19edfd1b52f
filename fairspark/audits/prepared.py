"""What preparation returns: :class:`PreparedData`, :class:`AttributeInfo`, :class:`InputStats`.

Plain containers (no Spark job runs here): the prepared table's builders, the audited
views and the input checks' counters, as :func:`fairspark.prepare.prepare` fills them.
They are the contract's: every audit reads them (``ctx.prepared``), the preparation
above them writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairspark.columns import KEY

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["AttributeInfo", "InputStats", "PreparedData"]


#: rank column of the capped sample (dropped again); no input column is called so
_CAP_RANK = "_fs_cap_rank"


@dataclass
class AttributeInfo:
    """One audited sensitive view (a configured attribute or an intersection).

    Attributes
    ----------
    name:
        Name in the outputs (``sex``, ``race``, ``sex*race``).
    value_col, priv_col:
        Prepared-table columns with the value (string) and the privileged flag.
    values:
        Observed value -> row count (audited rows).
    privileged_values:
        The values that are privileged (for predicate attributes: ``["privileged"]``).
    kind:
        ``values``, ``predicate`` or ``intersection``.
    source_columns:
        The input columns this view is built from.
    """

    name: str
    value_col: str
    priv_col: str
    values: dict[str, int]
    privileged_values: list[str]
    kind: str
    source_columns: list[str]

    @property
    def n_privileged(self) -> int:
        """Rows in the privileged group."""
        return sum(n for v, n in self.values.items() if v in self.privileged_values)

    @property
    def n_unprivileged(self) -> int:
        """Rows outside the privileged group."""
        return sum(n for v, n in self.values.items() if v not in self.privileged_values)


@dataclass
class PreparedData:
    """The prepared table and what is known about it (see ``docs/architecture.md``).

    ``base_df`` has every column but the encoded feature vector; ``df`` adds ``_fs_x``.
    Both are built on first use (``base_df`` persisted, ``df`` encoded, and persisted
    when more than one enabled audit reads it; a single reader's jobs compute it),
    so a run whose audits never read rows (the group audit alone, which reads
    ``cells``) reads the input once, in :func:`prepare`'s one aggregation, and
    persists nothing.
    """

    base_df: DataFrame | None
    attributes: list[AttributeInfo]
    numeric_features: list[str]
    categorical_features: list[str]
    feature_min: dict[str, float]
    feature_max: dict[str, float]
    rows_read: int
    rows_audited: int
    rows_unlabelled: int
    dropped: dict[str, int] = field(default_factory=dict)
    label_column: str = ""
    decision_column: str = ""
    weighted: bool = False
    build_features: Callable[[], tuple[DataFrame, list[str]]] | None = None
    warnings: list[str] = field(default_factory=list)
    #: builds (and persists) ``base_df`` when it is ``None``
    build_base: Callable[[], DataFrame] | None = None
    #: weighted confusion cells per combination of every view's value (pandas, the
    #: layout of :func:`fairspark.metrics.cell_counts`), from the one aggregation
    cells: Any = None
    #: with ``columns.baseline``: ``cells`` split further by the baseline decision (a
    #: ``_fs_base`` column, 1.0/0.0), from the same aggregation; ``None`` without one
    joint_cells: Any = None
    #: the baseline decision's column (``columns.baseline.column``), "" without one
    baseline_column: str = ""
    #: seconds of the steps of :func:`prepare` (``scan``, ``row keys``)
    timings: dict[str, float] = field(default_factory=dict)
    #: raw source columns of ``privileged_expr`` attributes (neither features nor
    #: flipped), kept in ``base_df`` and ``df`` for a model that reads them (HFM's DR)
    context_columns: list[str] = field(default_factory=list)
    #: feature column -> its Spark type in the input (``int``, ``string``, ...)
    feature_types: dict[str, str] = field(default_factory=dict)
    #: the one aggregation's groups (``None`` after the staged flow): what a partition's
    #: state stores (:mod:`fairspark.nightly.window`); they merge by concatenation
    groups: list[dict[str, Any]] | None = None
    _features: tuple[DataFrame, list[str]] | None = field(default=None, repr=False)

    def rows(self) -> DataFrame:
        """``base_df``, built and persisted on first use."""
        if self.base_df is None:
            if self.build_base is None:
                raise RuntimeError("this PreparedData has no table builder")
            self.base_df = self.build_base()
        return self.base_df

    def _ensure_features(self) -> tuple[DataFrame, list[str]]:
        if self._features is None:
            if self.build_features is None:
                raise RuntimeError("this PreparedData has no feature builder")
            self._features = self.build_features()
        return self._features

    @property
    def df(self) -> DataFrame:
        """The prepared rows with the encoded feature vector ``_fs_x``."""
        return self._ensure_features()[0]

    @property
    def feature_names(self) -> list[str]:
        """Names of the entries of ``_fs_x`` (``col`` or ``col=value``)."""
        return self._ensure_features()[1]

    @property
    def raw_feature_cols(self) -> list[str]:
        """The original (unscaled) feature columns, kept in ``df``."""
        return self.numeric_features + self.categorical_features

    def attribute(self, name: str) -> AttributeInfo:
        """The attribute called ``name``."""
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(f"no sensitive attribute {name!r}; have {[a.name for a in self.attributes]}")

    def capped_df(self, *, max_rows: int | None, seed: int, features: bool = True) -> DataFrame:
        """The prepared rows, or a seeded hash sample of about ``max_rows``.

        The sample is :func:`fairspark.sampling.stratified_sample` with one stratum and
        ``exact=False``: a row is kept when ``pmod(xxhash64(key, seed), 2^30)`` falls
        below ``max_rows / rows_audited`` of the range, so it does not depend on the
        partitioning. ``features=False`` gives rows without ``_fs_x`` (no encoding
        needed).
        """
        from fairspark.sampling import stratified_sample

        df = self.df if features else self.rows()
        if max_rows is None or max_rows >= self.rows_audited:
            return df
        sample = stratified_sample(
            df, strata=[], key_col=KEY, cap=max_rows, seed=seed, exact=False,
            counts={(): self.rows_audited}, rank_col=_CAP_RANK,
        )
        return sample.drop(_CAP_RANK)

    def unpersist(self) -> None:
        """Release the cached frames."""
        if self.base_df is not None:
            self.base_df.unpersist()
        if self._features is not None:
            self._features[0].unpersist()

    def input_schema(self) -> dict[str, Any]:
        """The resolved features as the audits see them: part of the comparability key.

        ``features`` lists every feature column in order with its input type and kind
        (``numeric`` or ``categorical``, i.e. one-hot encoded); ``encoded_dimension``
        is the length of ``_fs_x`` once an audit has encoded the features (``None``
        before, or when no audit reads them). Two runs whose schemas differ are not
        compared (:func:`fairspark.nightly.history.schema_change`).
        """
        kinds = [(c, "numeric") for c in self.numeric_features]
        kinds += [(c, "categorical") for c in self.categorical_features]
        return {
            "features": [{"column": c, "type": self.feature_types.get(c, "unknown"), "kind": k}
                         for c, k in kinds],
            "encoded_dimension": len(self._features[1]) if self._features else None,
        }

    def summary(self) -> dict[str, Any]:
        """Row counts and feature facts for ``summary.json``."""
        return {
            "read": self.rows_read,
            "audited": self.rows_audited,
            "unlabelled": self.rows_unlabelled,
            "dropped": dict(self.dropped),
            "weighted": self.weighted,
            "features": {
                "numeric": self.numeric_features,
                "categorical": self.categorical_features,
                "encoded_dimension": len(self._features[1]) if self._features else None,
            },
            "attributes": {
                a.name: {"values": a.values, "privileged": a.privileged_values, "kind": a.kind}
                for a in self.attributes
            },
        }


@dataclass(frozen=True)
class InputStats:
    """The one aggregation pass over the input table, as plain numbers.

    Attributes
    ----------
    rows:
        Rows read (after ``input.where``).
    dropped:
        Rows with a null in a required column (dropped before the audits).
    unlabelled:
        Kept rows whose label is null.
    nulls:
        Required column -> rows where it is null (columns with none left out).
    non_finite:
        Floating feature -> rows where it is NaN or infinite (none left out).
    categories:
        Categorical feature -> distinct values among kept rows (empty when no
        enabled audit reads features: nothing encodes them): exact, counted up to
        ``max_categories + 1``, after the one aggregation; exact after a window's
        merge; approximate after the staged flow.
    feature_min, feature_max:
        Numeric feature -> its minimum and maximum over kept rows (NaN when none).
    negative_weights, non_finite_weights:
        Rows with a negative resp. NaN/infinite weight (0 without a weight column).
    nan_scores:
        Rows with a NaN score (0 without a floating score column).
    """

    rows: int
    dropped: int
    unlabelled: int
    nulls: dict[str, int]
    non_finite: dict[str, int]
    categories: dict[str, int]
    feature_min: dict[str, float]
    feature_max: dict[str, float]
    negative_weights: int = 0
    non_finite_weights: int = 0
    nan_scores: int = 0
    null_row_keys: int = 0
    weight_total: float = float("nan")
    nan_labels: int = 0
    label_values: int = 0
    score_min: float = float("nan")
    score_max: float = float("nan")
    #: role (``label``, ``decision``) -> distinct non-positive values among the kept,
    #: known values (2 means "two or more"); the decision only for a prediction column
    negatives: dict[str, int] = field(default_factory=dict)
    #: role -> kept rows whose value is one of the configured positive values
    positive_rows: dict[str, int] = field(default_factory=dict)
    #: sum of the squared weights of the kept rows (inf: the weights overflow)
    weight_sq_total: float = 0.0
    #: rows with a NaN prediction (dropped, like a null one)
    nan_decisions: int = 0

    @property
    def audited(self) -> int:
        """Rows left to audit."""
        return self.rows - self.dropped
