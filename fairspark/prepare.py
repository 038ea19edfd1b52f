"""Loading checks and preparation: one prepared DataFrame that every audit consumes.

Everything here runs on Spark; the driver only receives aggregates (counts, minima,
maxima, distinct categories under a cap). See ``docs/architecture.md`` for the
columns of the prepared table; their names are declared in :mod:`fairspark.columns`.

:func:`prepare` runs in steps, each a short function over small state objects:

1. :func:`_plan_columns`: schema checks, the feature split (:class:`_ColumnPlan`);
2. :func:`_one_pass_groups`: ONE aggregation over the input, grouped by (kept, each
   sensitive view's value and flag, label, decision), with every check's counter;
   :func:`_stats_from_groups` merges it into :class:`InputStats` and
   :func:`_check_stats` raises for unusable input. Two checks need their own
   aggregation: the distinct values of categorical features (:func:`_distinct_counts`,
   over those columns only; per-group sketches would make the one pass interpreted
   and slower than both together) and a configured row key's repeats
   (:func:`_check_unique_keys`, a shuffle by key hash). Each runs only when an
   enabled audit needs it (:func:`_checks_needed`): a group-only run reads the
   input once;
3. :func:`_views_from_groups`: the observed values of each view (intersections
   formed on the driver) and the weighted confusion cells of every combination
   (``PreparedData.cells``, what the group audit reads; aggregated by
   :mod:`fairspark.group.cells`, beside the group audit);
4. on first use only: :func:`_persisted_base` (role, view and feature columns,
   persisted as ``base_df``) and :class:`_FeatureEncoder` (min-max scaling and
   one-hot encoding, ``PreparedData.df``), so a group-only run persists nothing.

With more than :data:`ONE_PASS_MAX_GROUPS` groups the staged flow runs instead
(:func:`_collect_stats`, the persisted rows, :func:`_attribute_info` per view).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairspark.columns import KEY, LABEL, PRED, WEIGHT, X, input_col, priv_col, value_col
from fairspark.errors import (
    ColumnTypeError,
    ConfigError,
    EmptyInputError,
    InvalidValueError,
    MissingColumnError,
)
from fairspark.group.cells import CELL_OF, cell_sums, cells_from_groups

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from fairspark.config import ColumnsConfig, Config, SensitiveConfig

# KEY ... X are re-exported for code that imported them from here; they are declared
# in fairspark.columns.
__all__ = ["AttributeInfo", "InputStats", "PreparedData", "prepare",
           "KEY", "LABEL", "PRED", "WEIGHT", "X"]

log = logging.getLogger("fairspark")

_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
_CATEGORICAL_OK = ("string", "boolean", "tinyint", "smallint", "int", "bigint", "date")
_FLOATING = ("float", "double")
#: the prepared role columns, in the order of the prepared table
_ROLE_COLUMNS = (KEY, LABEL, PRED, WEIGHT)
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
    Both are built on first use (``base_df`` persisted, ``df`` fitted and persisted),
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


# --------------------------------------------------------------------------- state


@dataclass(frozen=True)
class _ColumnPlan:
    """What the schema checks decided: column types and the features by kind."""

    types: dict[str, str]
    numeric: list[str]
    categorical: list[str]
    #: columns whose null drops the row: decision, sensitive, features, weight
    required: list[str]
    #: the decision column (prediction or score); NaN there also drops the row
    decision: str = ""
    #: an enabled audit encodes features: count categorical features' distinct values
    count_categories: bool = True
    #: an enabled audit joins rows by key: check the configured row key's nulls, repeats
    check_row_key: bool = False

    @property
    def floating(self) -> list[str]:
        """Numeric features of a floating type (they may hold NaN or infinity)."""
        return [c for c in self.numeric if self.types[c] in _FLOATING]

    @property
    def features(self) -> list[str]:
        """Every feature column, numeric ones first."""
        return [*self.numeric, *self.categorical]


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
        Categorical feature -> approximate distinct values among kept rows (empty
        when no enabled audit reads features: nothing encodes them).
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


@dataclass(frozen=True)
class _View:
    """A sensitive view before its values are counted (see :class:`AttributeInfo`)."""

    name: str
    value_col: str
    priv_col: str
    kind: str
    privileged_values: list[str]
    source_columns: list[str]


# --------------------------------------------------------------------------- schema


def _typename(dtype: Any) -> str:
    s = dtype.simpleString()
    return "decimal" if s.startswith("decimal") else s


def _literal(value: Any, dtype_name: str) -> Any:
    """Cast a YAML scalar to the column's type so comparisons need no implicit cast."""
    if dtype_name == "string":
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)
    if dtype_name == "boolean":
        if isinstance(value, str):
            if value.lower() in ("true", "1", "yes"):
                return True
            if value.lower() in ("false", "0", "no"):
                return False
            raise ConfigError(f"value {value!r} cannot be compared with a boolean column")
        return bool(value)
    if dtype_name in ("tinyint", "smallint", "int", "bigint"):
        try:
            f = float(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"value {value!r} cannot be compared with an integer column"
            ) from None
        return int(f) if f.is_integer() else f
    if dtype_name in ("float", "double", "decimal"):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"value {value!r} cannot be compared with a numeric column") from None
    return value


def _isin(column: str, dtype_name: str, values: list[Any], key: str) -> Column:
    """``col`` equals one of the configured ``values``, compared by type.

    A number configured for a string column also matches its other spellings
    (``positive: 1.0`` matches "1", "1.0" and "1.00"): the strings are compared as
    numbers, so a decision stored as "1.0" is not silently read as never positive.
    """

    try:
        lits = [_literal(v, dtype_name) for v in values]
    except ConfigError as err:
        raise ConfigError(
            f"config key '{key}': {err} (column {column!r} is {dtype_name})") from None
    cond = input_col(column).isin(lits)
    if dtype_name == "string":
        nums = [float(v) for v in values
                if isinstance(v, int | float) and not isinstance(v, bool)]
        if nums:
            cond = cond | input_col(column).try_cast("double").isin(nums)
    return cond


def _selected_features(cols: ColumnsConfig, types: dict[str, str]) -> list[str]:
    """The feature columns: ``all_others`` or the listed ones, checked against the roles."""
    sensitive_cols = [s.column for s in cols.sensitive]
    role_cols = set(sensitive_cols) | {cols.label.column, cols.decision_column}
    role_cols |= {c for c in (cols.weight, cols.row_key) if c}
    if cols.features == "all_others":
        return [c for c in types if c not in role_cols and c not in cols.exclude]
    feats = list(cols.features)
    for f in feats:
        if f in sensitive_cols:
            raise ConfigError(
                f"config key 'columns.features': {f!r} is a sensitive attribute; "
                "sensitive attributes are never features of the audit"
            )
        if f in role_cols:
            raise ConfigError(
                f"config key 'columns.features': {f!r} is the label, decision, weight "
                "or row key column, not a feature"
            )
        if f not in types:
            raise MissingColumnError(f, "feature", list(types))
    return feats


def _split_features(
    cols: ColumnsConfig, types: dict[str, str], feats: list[str]
) -> tuple[list[str], list[str]]:
    """Numeric and categorical features (``columns.categorical`` forces the latter)."""
    numeric, categorical = [], []
    for f in feats:
        t = types[f]
        if f in cols.categorical:
            if t not in _CATEGORICAL_OK:
                raise ColumnTypeError(
                    f"categorical feature {f!r} has type {t}; expected string, boolean, "
                    "integer or date"
                )
            categorical.append(f)
        elif t in _NUMERIC:
            numeric.append(f)
        elif t in ("string", "boolean"):
            categorical.append(f)
        else:
            raise ColumnTypeError(
                f"feature column {f!r} has type {t}, which fairspark cannot use as a "
                "feature (expected numeric, string or boolean); list it under "
                "'columns.exclude' or give 'columns.features' explicitly"
            )
    return numeric, categorical


def _resolve_features(config: Config, types: dict[str, str]) -> tuple[list[str], list[str]]:
    cols = config.columns
    part = config.input.partition_column
    if part and part not in types and config.window is not None:
        raise MissingColumnError(part, "partition column ('input.partition_column')", list(types))
    # the partition column (a date a day) is never a feature: it names where a row is
    feats = _selected_features(cols, {c: t for c, t in types.items() if c != part})
    for c in cols.categorical:
        if c not in feats:
            raise ConfigError(
                f"config key 'columns.categorical': {c!r} is not among the features {feats}"
            )
    numeric, categorical = _split_features(cols, types, feats)
    if not feats:
        raise ConfigError("no feature columns: 'columns.features' selects nothing")
    return numeric, categorical


def _check_roles(config: Config, types: dict[str, str]) -> None:
    cols = config.columns
    available = list(types)
    needed = [(cols.label.column, "label ('columns.label.column')")]
    if cols.prediction:
        needed.append((cols.prediction.column, "prediction ('columns.prediction.column')"))
    else:
        needed.append((cols.score.column, "score ('columns.score.column')"))  # type: ignore[union-attr]
    for i, s in enumerate(cols.sensitive):
        needed.append((s.column, f"sensitive attribute ('columns.sensitive[{i}].column')"))
    if cols.weight:
        needed.append((cols.weight, "weight ('columns.weight')"))
    if cols.row_key:
        needed.append((cols.row_key, "row key ('columns.row_key')"))
    for c in cols.exclude:
        if c not in types:
            raise MissingColumnError(c, "excluded column ('columns.exclude')", available)
    for c, role in needed:
        if c not in types:
            raise MissingColumnError(c, role, available)
    atomic = (*_NUMERIC, "string", "boolean", "date", "timestamp")
    for c, role in needed:
        if types[c] not in atomic:
            raise ColumnTypeError(f"column {c!r} ({role}) has type {types[c]}; expected a scalar")
    if cols.score and types[cols.score.column] not in _NUMERIC:
        raise ColumnTypeError(
            f"score column {cols.score.column!r} has type {types[cols.score.column]}; "
            "expected a numeric type"
        )
    if cols.weight and types[cols.weight] not in _NUMERIC:
        raise ColumnTypeError(
            f"weight column {cols.weight!r} has type {types[cols.weight]}; expected a numeric type"
        )



def _plan_columns(df: DataFrame, config: Config) -> _ColumnPlan:
    """Check the configured roles against the schema and split the features."""
    cols = config.columns
    types = {f.name: _typename(f.dataType) for f in df.schema.fields}
    _check_roles(config, types)
    numeric, categorical = _resolve_features(config, types)
    required = [cols.decision_column, *[s.column for s in cols.sensitive], *numeric,
                *categorical]
    if cols.weight:
        required.append(cols.weight)
    reads_features, joins_by_key = _checks_needed(config)
    return _ColumnPlan(types=types, numeric=numeric, categorical=categorical,
                       required=list(dict.fromkeys(required)), decision=cols.decision_column,
                       count_categories=reads_features,
                       check_row_key=bool(cols.row_key) and joins_by_key)


# --------------------------------------------------------------------------- statistics


def _any_null(plan: _ColumnPlan) -> Column:
    """True for a row that is dropped: a required column is null (the decision: or NaN)."""
    from pyspark.sql import functions as F

    any_null = F.lit(False)
    for c in plan.required:
        any_null = any_null | (_missing(c, plan.types) if c == plan.decision
                               else input_col(c).isNull())
    return any_null


def _count_where(cond: Column, alias: str) -> Column:
    from pyspark.sql import functions as F

    return F.sum(F.when(cond, 1).otherwise(0)).alias(alias)


def _check_counters(plan: _ColumnPlan, config: Config, keep: Column) -> list[Column]:
    """The input checks both preparation passes aggregate, read back by alias.

    Nulls per required column and row key, NaN labels, NaN/inf floats, minimum and
    maximum of numeric features and the score, negative or NaN weights, NaN scores;
    ``keep`` marks the rows that are audited (no missing required value).
    """
    from pyspark.sql import functions as F

    cols = config.columns
    aggs = [_count_where(_missing(c, plan.types) if c == plan.decision
                         else input_col(c).isNull(), f"null::{c}") for c in plan.required]
    if plan.check_row_key:  # else the key column is not read
        aggs.append(_count_where(input_col(cols.row_key).isNull(), "null::row_key"))
    aggs.append(_count_where(keep & _missing(cols.label.column, plan.types)
                             & input_col(cols.label.column).isNotNull(), "nan::label"))
    for c in plan.floating:
        bad = F.isnan(input_col(c)) | input_col(c).isin(float("inf"), float("-inf"))
        aggs.append(_count_where(bad, f"nan::{c}"))
    for c in plan.numeric:
        aggs.append(F.min(F.when(keep, input_col(c).cast("double"))).alias(f"min::{c}"))
        aggs.append(F.max(F.when(keep, input_col(c).cast("double"))).alias(f"max::{c}"))
    if cols.weight:
        w = input_col(cols.weight).cast("double")
        aggs.append(_count_where(w < 0, "neg::weight"))
        aggs.append(_count_where(F.isnan(w) | w.isin(float("inf")), "nan::weight"))
    if cols.score and plan.types[cols.score.column] in _FLOATING:
        aggs.append(_count_where(F.isnan(input_col(cols.score.column)), "nan::score"))
    if cols.prediction and plan.types[cols.prediction.column] in _FLOATING:
        aggs.append(_count_where(F.isnan(input_col(cols.prediction.column)), "nan::decision"))
    if cols.score:
        score = input_col(cols.score.column).cast("double")
        aggs += [F.min(F.when(keep, score)).alias("min::score"),
                 F.max(F.when(keep, score)).alias("max::score")]
    return aggs


def _stat_columns(plan: _ColumnPlan, config: Config) -> list[Column]:
    """The aggregations of the one pass; :meth:`InputStats` reads them back by alias."""
    from pyspark.sql import functions as F

    cols = config.columns
    any_null = _any_null(plan)
    keep = ~any_null
    aggs = [F.count(F.lit(1)).alias("n"), _count_where(any_null, "dropped")]
    aggs += _check_counters(plan, config, keep)
    w_kept = input_col(cols.weight).cast("double") if cols.weight else F.lit(1.0)
    aggs.append(F.sum(F.when(keep, w_kept)).alias("weight_total"))
    for c in plan.categorical:
        aggs.append(F.approx_count_distinct(F.when(keep, input_col(c))).alias(f"card::{c}"))
    aggs.append(_count_where(keep & _missing(cols.label.column, plan.types), "unlabelled"))
    known_label = keep & ~_missing(cols.label.column, plan.types)
    aggs.append(F.approx_count_distinct(F.when(known_label, input_col(cols.label.column)))
                .alias("card::label"))
    for role, column, pos in _binary_roles(config, plan.types):
        known = keep & ~_missing(column, plan.types)
        aggs.append(F.approx_count_distinct(F.when(known & ~pos, input_col(column)))
                    .alias(f"neg::{role}"))
        aggs.append(_count_where(known & pos, f"pos::{role}"))
    w_kept = input_col(cols.weight).cast("double") if cols.weight else F.lit(1.0)
    aggs.append(F.sum(F.when(keep, w_kept * w_kept)).alias("weight_sq_total"))
    return aggs


def _collect_stats(df: DataFrame, plan: _ColumnPlan, config: Config) -> InputStats:
    """Run the one aggregation pass and read its row into :class:`InputStats`."""
    row = df.agg(*_stat_columns(plan, config)).collect()[0].asDict()

    def count(alias: str) -> int:
        return int(row.get(alias) or 0)

    def number(alias: str) -> float:
        v = row[alias]
        return float(v) if v is not None else float("nan")

    def nonzero(prefix: str, names: list[str]) -> dict[str, int]:
        return {c: count(f"{prefix}::{c}") for c in names if row[f"{prefix}::{c}"]}

    return InputStats(
        rows=count("n"),
        dropped=count("dropped"),
        unlabelled=count("unlabelled"),
        nulls=nonzero("null", plan.required),
        non_finite=nonzero("nan", plan.floating),
        categories=({c: count(f"card::{c}") for c in plan.categorical}
                    if plan.count_categories else {}),
        feature_min={c: number(f"min::{c}") for c in plan.numeric},
        feature_max={c: number(f"max::{c}") for c in plan.numeric},
        negative_weights=count("neg::weight"),
        non_finite_weights=count("nan::weight"),
        nan_scores=count("nan::score"),
        null_row_keys=count("null::row_key"),
        weight_total=number("weight_total"),
        nan_labels=count("nan::label"),
        label_values=count("card::label"),
        score_min=number("min::score") if "min::score" in row else float("nan"),
        score_max=number("max::score") if "max::score" in row else float("nan"),
        negatives={role: min(count(f"neg::{role}"), 2)
                   for role, _, _ in _binary_roles(config, plan.types)},
        positive_rows={role: count(f"pos::{role}")
                       for role, _, _ in _binary_roles(config, plan.types)},
        weight_sq_total=number("weight_sq_total"),
        nan_decisions=count("nan::decision"),
    )


def _check_values(stats: InputStats, config: Config, src: str | None) -> None:
    """Raise for an empty input or NaN/infinite features, weights or scores."""
    cols = config.columns
    if stats.rows == 0:
        w = config.input.where
        where = f" after the filter 'input.where: {w}'" if w else ""
        raise EmptyInputError(f"input {src!r} has no rows{where}")
    if stats.non_finite:
        shown = ", ".join(f"{c!r} ({k} rows)" for c, k in stats.non_finite.items())
        raise InvalidValueError(
            f"feature columns hold NaN or infinite values: {shown}; fix the input or list "
            "these columns under 'columns.exclude'"
        )
    if cols.weight and (stats.negative_weights or stats.non_finite_weights):
        raise InvalidValueError(
            f"weight column {cols.weight!r} holds {stats.negative_weights} negative and "
            f"{stats.non_finite_weights} NaN/infinite values; weights must be finite and >= 0"
        )
    if stats.nan_scores:
        raise InvalidValueError(
            f"score column {cols.score.column!r} holds {stats.nan_scores} NaN values"  # type: ignore[union-attr]
        )


def _check_stats(stats: InputStats, config: Config) -> None:
    """Raise :class:`~fairspark.errors.FairsparkInputError` for input not fit to audit."""
    prep = config.preparation
    src = config.input.table or config.input.path
    _check_values(stats, config, src)
    n, dropped_total, dropped = stats.rows, stats.dropped, stats.nulls
    if stats.audited == 0:
        raise EmptyInputError(
            f"no rows left to audit in {src!r}: all {n} rows have a missing value "
            f"(nulls per column: {dropped})"
        )
    if config.columns.row_key and stats.null_row_keys:
        raise InvalidValueError(
            f"row key column {config.columns.row_key!r} ('columns.row_key') is null on "
            f"{stats.null_row_keys} rows; row keys must be unique and not null (or leave "
            "'columns.row_key' out to key rows by a hash of their values)"
        )
    if not stats.weight_total > 0:
        raise InvalidValueError(
            f"the weights of the {stats.audited} audited rows sum to {stats.weight_total:g} "
            f"(column {config.columns.weight!r}, 'columns.weight'); at least one row needs a "
            "positive weight"
        )
    if config.columns.weight and not (math.isfinite(stats.weight_total)
                                      and math.isfinite(stats.weight_sq_total)):
        which = ("sum" if not math.isfinite(stats.weight_total) else "sum of squares")
        raise InvalidValueError(
            f"the weights in column {config.columns.weight!r} ('columns.weight') overflow: "
            f"their {which} over the {stats.audited} audited rows is not a finite double "
            "(weights near 1e154 or above); rescale them, e.g. divide by their mean (rates "
            "and their intervals do not change)"
        )
    if dropped_total / n > prep.max_dropped_fraction:
        raise InvalidValueError(
            f"{dropped_total} of {n} rows ({dropped_total / n:.1%}) have a missing prediction, "
            f"sensitive value or feature, more than 'preparation.max_dropped_fraction' = "
            f"{prep.max_dropped_fraction}; nulls per column: {dropped}"
        )
    for c, card in stats.categories.items():
        if card > prep.max_categories:
            raise InvalidValueError(
                f"categorical feature {c!r} has about {card} distinct values, "
                f"more than 'preparation.max_categories' = {prep.max_categories}; exclude it or "
                "raise the limit"
            )


def _input_warnings(stats: InputStats, config: Config) -> list[str]:
    """Facts about the input that change the numbers without being errors."""
    cols = config.columns
    out = []
    if stats.nan_labels:
        out.append(f"{stats.nan_labels} rows have a NaN label in {cols.label.column!r}: "
                   "counted as unlabelled, like null")
    if stats.nan_decisions:
        d = cols.decision_column
        out.append(f"{stats.nan_decisions} rows have a NaN decision in {d!r}: dropped like a "
                   f"null one (counted in rows.dropped.null_{d})")
    if stats.label_values > 2:
        out.append(f"label column {cols.label.column!r} has about {stats.label_values} "
                   f"distinct values; every value other than {cols.label.positive} counts as "
                   "the negative label")
    if cols.score and cols.score.threshold == 0.5 and (
            stats.score_min < 0 or stats.score_max > 1):
        out.append(f"score column {cols.score.column!r} ranges over [{stats.score_min:g}, "
                   f"{stats.score_max:g}], outside [0, 1], while the threshold is the default "
                   "0.5; set 'columns.score.threshold' if the scores are not probabilities")
    return out


def _binary_roles(config: Config, types: dict[str, str]) -> list[tuple[str, str, Column]]:
    """(role, column, "is a configured positive value") of the label and a prediction.

    A score column is thresholded, so it has no values to check. The flag is never
    null (a string that is not a number compares as null with a numeric positive).
    """
    from pyspark.sql import functions as F

    cols = config.columns
    lab = cols.label
    out = [("label", lab.column,
            _isin(lab.column, types[lab.column], lab.positive, "columns.label.positive"))]
    if cols.prediction:
        p = cols.prediction
        out.append(("decision", p.column,
                    _isin(p.column, types[p.column], p.positive, "columns.prediction.positive")))
    return [(role, column, F.coalesce(pos, F.lit(False))) for role, column, pos in out]


#: how many of a column's values an error message shows
_VALUES_SHOWN = 8


def _values_seen(df: DataFrame, plan: _ColumnPlan, column: str) -> tuple[list[Any], int]:
    """The most frequent known values of ``column`` among the kept rows, and how many.

    Runs only on the error path (a column that is not binary).
    """
    from pyspark.sql import functions as F

    known = df.where(~_any_null(plan) & ~_missing(column, plan.types)).select(
        input_col(column).alias("v"))
    top = (known.groupBy("v").count().orderBy(F.desc("count"), F.asc("v"))
           .limit(_VALUES_SHOWN).collect())
    return [r["v"] for r in top], int(known.distinct().count())


def _shown(values: list[Any], n: int) -> str:
    def one(v: Any) -> str:
        return f"{v:.6g}" if isinstance(v, float) else repr(v)

    more = f", ... ({n} distinct)" if n > len(values) else f" ({n} distinct)"
    return ", ".join(one(v) for v in values) + more


def _check_binary(stats: InputStats, df: DataFrame, plan: _ColumnPlan, config: Config) -> None:
    """A label or decision must hold the configured positive value(s) and one other value.

    Refused (exit 2, naming the values seen): a numeric column with two or more values
    besides the positive ones (scores or probabilities where a decision belongs, a
    third class), and any column with two or more values none of which is the
    configured positive value (``yes``/``no`` with ``positive: 1``). A string column
    with several non-positive values (``High`` against ``Low`` and ``Medium``) is a
    category against the rest and is kept.
    """
    cols = config.columns
    for role, column, _ in _binary_roles(config, plan.types):
        several = stats.negatives.get(role, 0) >= 2
        no_positive = stats.positive_rows.get(role, 0) == 0
        numeric = plan.types[column] in _NUMERIC
        if not several or not (numeric or no_positive):
            continue
        values, n = _values_seen(df, plan, column)
        what = cols.label if role == "label" else cols.prediction
        key = "columns.label" if role == "label" else "columns.prediction"
        pos = what.positive[0] if len(what.positive) == 1 else what.positive  # type: ignore[union-attr]
        head = f"{'label' if role == 'label' else 'decision'} column {column!r} ('{key}.column')"
        if no_positive and not numeric:
            raise InvalidValueError(
                f"{head} holds the values {_shown(values, n)}; none of them is the configured "
                f"positive value {pos!r} ('{key}.positive'); set '{key}.positive' to the "
                "value(s) as they appear in the column")
        hint = (f"if it holds scores or probabilities, configure 'columns.score: {{column: "
                f"{column}, threshold: <cut-off>}}' instead of 'columns.prediction'"
                if role == "decision" else
                f"list every favourable value under '{key}.positive' and map the others to "
                "one value upstream")
        none = " (none of them is)" if no_positive else ""
        raise InvalidValueError(
            f"{head} is not binary: it holds {_shown(values, n)}, where a "
            f"{'decision' if role == 'decision' else 'label'} holds the positive value "
            f"{pos!r} ('{key}.positive'){none} and one negative value; {hint}")


def _checks_needed(config: Config) -> tuple[bool, bool]:
    """Whether an enabled audit reads features, and whether one joins rows by key.

    The distinct values of categorical features matter only to an audit that
    one-hot encodes them, and a repeated row key only to one that joins by it (each
    audit's :class:`~fairspark.audits.spec.AuditSpec` says); a group-only run skips
    both scans and does not read the key column (its nulls are counted, and refused,
    only when an audit joins by key).
    """
    from fairspark.audits.registry import get_spec

    specs = [get_spec(name) for name in config.audits.enabled()]
    return any(s.reads_features for s in specs), any(s.joins_by_key for s in specs)


def _check_unique_keys(df: DataFrame, config: Config) -> None:
    """A configured row key must not repeat (one aggregation of key hashes; an example).

    Rows that share a key would be merged wherever an audit joins by key (HFM's
    nearest neighbours), silently changing the numbers.
    """
    from pyspark.sql import functions as F

    key = config.columns.row_key
    if not key:
        return
    # first by a 64-bit hash of the key (a shuffle of longs, not of strings); only when
    # two rows share a hash are the keys themselves compared, for the message's example
    clash = (df.where(input_col(key).isNotNull()).groupBy(F.xxhash64(input_col(key)).alias("_h"))
             .agg(F.count(F.lit(1)).alias("_n")).where(F.col("_n") > 1).limit(1).collect())
    if not clash:
        return
    rep = (df.where(input_col(key).isNotNull()).groupBy(input_col(key).alias("_k"))
           .agg(F.count(F.lit(1)).alias("_n"))
           .where(F.col("_n") > 1).limit(1).collect())
    if rep:
        raise InvalidValueError(
            f"row key column {key!r} ('columns.row_key') repeats: {rep[0]['_k']!r} is on "
            f"{rep[0]['_n']} rows; row keys must be unique (or leave 'columns.row_key' out "
            "to key rows by a hash of their values)"
        )


# --------------------------------------------------------------------------- columns


def _label_column(config: Config, types: dict[str, str]) -> Column:
    """1.0 for a favourable label, 0.0 for an unfavourable one, null when unknown."""
    from pyspark.sql import functions as F

    lab = config.columns.label
    label_pos = _isin(lab.column, types[lab.column], lab.positive, "columns.label.positive")
    label_fav = label_pos if config.columns.favourable == "positive" else ~label_pos
    return (
        F.when(_missing(lab.column, types), F.lit(None).cast("double"))
        .when(label_fav, F.lit(1.0))
        .otherwise(F.lit(0.0))
    )


def _missing(col: str, types: dict[str, str]) -> Column:
    """Null, or NaN in a floating column: both mean "value not known"."""
    from pyspark.sql import functions as F

    c = input_col(col)
    return (c.isNull() | F.isnan(c)) if types[col] in _FLOATING else c.isNull()


def _decision_column(config: Config, types: dict[str, str]) -> Column:
    """1.0 for a favourable decision (prediction or thresholded score), else 0.0."""
    from pyspark.sql import functions as F

    cols = config.columns
    if cols.prediction:
        p = cols.prediction
        pred_pos = _isin(p.column, types[p.column], p.positive, "columns.prediction.positive")
    else:
        pred_pos = input_col(cols.score.column).cast("double") >= F.lit(float(cols.score.threshold))  # type: ignore[union-attr]
    pred_fav = pred_pos if cols.favourable == "positive" else ~pred_pos
    return F.when(pred_fav, F.lit(1.0)).otherwise(F.lit(0.0))


def _role_columns(df: DataFrame, config: Config, types: dict[str, str]) -> list[Column]:
    """Key, label, decision and weight, aliased to their prepared names."""
    from pyspark.sql import functions as F

    cols = config.columns
    weight_expr = input_col(cols.weight).cast("double") if cols.weight else F.lit(1.0)
    if cols.row_key:
        key_expr = input_col(cols.row_key).cast("string")
    else:
        key_expr = F.xxhash64(*[input_col(c) for c in df.columns]).cast("string")
    return [
        key_expr.alias(KEY),
        _label_column(config, types).alias(LABEL),
        _decision_column(config, types).alias(PRED),
        weight_expr.alias(WEIGHT),
    ]


def _predicate_view(df: DataFrame, i: int, s: SensitiveConfig) -> tuple[_View, Column, Column]:
    """An attribute defined by ``privileged_expr``: values ``privileged``/``unprivileged``."""
    from pyspark.sql import functions as F

    try:
        priv = F.expr(s.privileged_expr)
        df.select(priv).schema  # noqa: B018  (analyse now)
    except Exception as err:  # noqa: BLE001 - any analysis error is a config error
        raise ConfigError(
            f"config key 'columns.sensitive[{i}].privileged_expr': "
            f"{s.privileged_expr!r} is not a valid predicate: {str(err).splitlines()[0]}"
        ) from None
    priv = F.coalesce(priv.cast("boolean"), F.lit(False))
    value = F.when(priv, F.lit("privileged")).otherwise(F.lit("unprivileged"))
    view = _View(s.attr, value_col(i), priv_col(i), "predicate", ["privileged"], [s.column])
    return view, value, priv


def _values_view(i: int, s: SensitiveConfig, types: dict[str, str]) -> tuple[_View, Column, Column]:
    """An attribute defined by its privileged values."""

    tname = types[s.column]
    priv = _isin(s.column, tname, s.privileged, f"columns.sensitive[{i}].privileged")  # type: ignore[arg-type]
    value = input_col(s.column).cast("string")
    pvals = [str(_literal(v, tname)) for v in s.privileged]  # type: ignore[union-attr]
    if tname == "boolean":
        pvals = [str(v).lower() for v in pvals]
    view = _View(s.attr, value_col(i), priv_col(i), "values", pvals, [s.column])
    return view, value, priv


def _intersection_views(cols: ColumnsConfig) -> list[tuple[_View, Column, Column]]:
    """Each configured intersection: values joined by ``|``, privileged when all are.

    Their privileged values are only known once the values are counted
    (:func:`_attribute_info`).
    """
    from pyspark.sql import functions as F

    name_to_idx = {s.attr: i for i, s in enumerate(cols.sensitive)}
    out = []
    for j, combo in enumerate(cols.intersections):
        idx = [name_to_idx[a] for a in combo]
        value = F.concat_ws("|", *[F.col(value_col(i)) for i in idx])
        priv = F.lit(True)
        for i in idx:
            priv = priv & F.col(priv_col(i))
        src_cols = [cols.sensitive[i].column for i in idx]
        view = _View("*".join(combo), value_col(f"x{j}"), priv_col(f"x{j}"), "intersection",
                     [], src_cols)
        out.append((view, value, priv))
    return out


def _sensitive_views(df: DataFrame, config: Config,
                     types: dict[str, str]) -> list[tuple[_View, Column, Column]]:
    """Each configured attribute's view with its value and privileged-flag expressions."""
    return [_predicate_view(df, i, s) if s.privileged_expr is not None
            else _values_view(i, s, types) for i, s in enumerate(config.columns.sensitive)]


def _with_views(df: DataFrame, kept: DataFrame, config: Config,
                types: dict[str, str]) -> tuple[DataFrame, list[_View]]:
    """``kept`` with the role and sensitive-view columns; the views in output order."""
    cols = config.columns
    derived = _role_columns(df, config, types)
    views: list[_View] = []
    for view, value, priv in _sensitive_views(df, config, types):
        views.append(view)
        derived += [value.alias(view.value_col), priv.alias(view.priv_col)]
    with_roles = kept.select(*[input_col(c) for c in kept.columns], *derived)
    inter = _intersection_views(cols)
    if inter:
        with_roles = with_roles.select(
            "*", *[c for v, value, priv in inter
                   for c in (value.alias(v.value_col), priv.alias(v.priv_col))])
    return with_roles, views + [v for v, _, _ in inter]


def _attribute_info(base: DataFrame, view: _View, cap: int) -> AttributeInfo:
    """Count the observed values of ``view`` (at most ``cap`` of them)."""
    vcol, pcol = view.value_col, view.priv_col
    counts = base.groupBy(vcol, pcol).count().orderBy(vcol).limit(cap + 1).collect()
    if len(counts) > cap:
        raise InvalidValueError(
            f"sensitive attribute {view.name!r} has more than {cap} distinct values; "
            "is it an identifier column?"
        )
    values = {str(r[vcol]): int(r["count"]) for r in counts}
    pvals = view.privileged_values
    if view.kind == "intersection":
        pvals = sorted({str(r[vcol]) for r in counts if r[pcol]})
    return AttributeInfo(view.name, vcol, pcol, values, pvals, view.kind,
                         view.source_columns)


# --------------------------------------------------------------------------- one pass

#: column of the "row is kept" flag in the one pass (no input column is called so)
_KEEP = "_fs_keep"
#: the one pass brings back at most this many (kept, views, label, decision) groups;
#: with more, :func:`prepare` falls back to the staged flow (per-view counts on Spark)
ONE_PASS_MAX_GROUPS = 20_000


def _one_pass_columns(plan: _ColumnPlan, config: Config) -> list[Column]:
    """The aggregations of the one pass, per (kept, views, label, decision) group.

    Each merges over the groups on the driver: counts and sums add, minima and maxima
    combine. All are declarative (code-generated); an HLL sketch per group would turn
    the whole aggregation into an interpreted object-hash aggregation (2.3x slower
    on 2M rows; slower than this pass plus a separate global count), so distinct
    values are counted by :func:`_distinct_counts`. Every aggregation buffer is
    fixed-width (no string minimum or maximum), so Spark runs a hash aggregation,
    not a sort of every row. The minimum and maximum of the raw label's 64-bit hash
    per group count its values (up to a hash collision) when no group holds two.
    """
    from pyspark.sql import functions as F

    cols = config.columns
    keep = F.col(_KEEP)
    aggs = cell_sums(F.col(WEIGHT))  # the group audit's: n, w, w2 per group
    aggs += _check_counters(plan, config, keep)
    # a 64-bit hash of the raw label, not its text: a string minimum or maximum has no
    # fixed-width buffer and turns the whole pass into a sort aggregation (4x slower)
    label = input_col(cols.label.column)
    # a NaN label is unknown (counted by nan::label), not a value of the label
    raw_label = F.when(keep & ~_missing(cols.label.column, plan.types), F.xxhash64(label))
    aggs += [F.min(raw_label).alias("lo::label"), F.max(raw_label).alias("hi::label")]
    if cols.prediction:  # the decision's raw values, to tell a decision from a score
        raw_pred = F.when(keep, F.xxhash64(input_col(cols.prediction.column)))
        aggs += [F.min(raw_pred).alias("lo::decision"), F.max(raw_pred).alias("hi::decision")]
    return aggs


def _distinct_counts(df: DataFrame, plan: _ColumnPlan, config: Config,
                     columns: list[str]) -> dict[str, int]:
    """``approx_count_distinct`` of ``columns`` over the kept rows (as the statistics pass).

    One global aggregation over these columns only, run when there are categorical
    features (their ``max_categories`` check) or a label group with two raw values.
    """
    from pyspark.sql import functions as F

    if not columns:
        return {}
    keep = ~_any_null(plan)
    row = df.agg(*[F.approx_count_distinct(F.when(keep, input_col(c))).alias(f"c{k}")
                   for k, c in enumerate(columns)]).collect()[0]
    return {c: int(row[f"c{k}"] or 0) for k, c in enumerate(columns)}


def _label_values(groups: list[dict[str, Any]]) -> int | None:
    """Distinct raw labels among the kept rows, exactly; ``None`` when a group has two."""
    seen: set[str] = set()
    for r in groups:
        if r[_KEEP] and r["lo::label"] is not None:
            if r["lo::label"] != r["hi::label"]:
                return None
            seen.add(r["lo::label"])
    return len(seen)


def _one_pass_groups(df: DataFrame, plan: _ColumnPlan, config: Config,
                     views: list[tuple[_View, Column, Column]]) -> list[dict[str, Any]] | None:
    """Run the one aggregation; its groups as dicts, or ``None`` past the group cap.

    Groups the rows by (kept, each configured sensitive view's value and flag, label,
    decision); a dropped row's keys are all null, so the dropped rows form one group.
    """
    from pyspark.sql import functions as F

    cols = config.columns
    weight = input_col(cols.weight).cast("double") if cols.weight else F.lit(1.0)
    staged = df.select("*", (~_any_null(plan)).alias(_KEEP),
                       _label_column(config, plan.types).alias(LABEL),
                       _decision_column(config, plan.types).alias(PRED),
                       weight.alias(WEIGHT))
    kept = F.col(_KEEP)
    keys = [kept]
    for v, value, priv in views:
        keys += [F.when(kept, value).alias(v.value_col), F.when(kept, priv).alias(v.priv_col)]
    # 0/1 as bytes, not doubles: a floating key is NaN-normalised on every row
    keys += [F.when(kept, F.col(LABEL).cast("tinyint")).alias(LABEL),
             F.when(kept, F.col(PRED).cast("tinyint")).alias(PRED)]
    rows = (staged.groupBy(*keys).agg(*_one_pass_columns(plan, config))
            .limit(ONE_PASS_MAX_GROUPS + 1).collect())
    if len(rows) > ONE_PASS_MAX_GROUPS:
        return None
    return [r.asDict() for r in rows]


def _stats_from_groups(distinct: Callable[[list[str]], dict[str, int]],
                       groups: list[dict[str, Any]], plan: _ColumnPlan,
                       config: Config, timings: dict[str, float] | None = None) -> InputStats:
    """:class:`InputStats` merged from the groups of the one pass (plus distinct counts).

    ``distinct`` gives the distinct values of columns over the kept rows (a Spark
    aggregation, or the merged per-partition value counts of a window).
    """
    import time

    cols = config.columns

    def total(alias: str, rows: list[dict[str, Any]] = groups) -> int:
        return int(sum(r[alias] or 0 for r in rows))

    def extreme(alias: str, fn: Callable[..., float]) -> float:
        vals = [float(r[alias]) for r in groups if r[alias] is not None]
        return fn(vals) if vals else float("nan")

    kept = [r for r in groups if r[_KEEP]]
    required_nulls = {c: total(f"null::{c}") for c in plan.required}
    label_values = _label_values(groups)
    label = cols.label.column
    categorical = plan.categorical if plan.count_categories else []
    t0 = time.perf_counter()
    cards = distinct([*categorical, *([label] if label_values is None else [])])
    if cards and timings is not None:
        timings["distinct values"] = round(time.perf_counter() - t0, 3)
    if label_values is None:
        label_values = cards.pop(label)
    return InputStats(
        rows=total("n"),
        dropped=total("n", [r for r in groups if not r[_KEEP]]),
        unlabelled=total("n", [r for r in kept if r[LABEL] is None]),
        nulls={c: k for c, k in required_nulls.items() if k},
        non_finite={c: k for c in plan.floating if (k := total(f"nan::{c}"))},
        categories={c: cards[c] for c in categorical},
        feature_min={c: extreme(f"min::{c}", min) for c in plan.numeric},
        feature_max={c: extreme(f"max::{c}", max) for c in plan.numeric},
        negative_weights=total("neg::weight") if cols.weight else 0,
        non_finite_weights=total("nan::weight") if cols.weight else 0,
        nan_scores=(total("nan::score") if cols.score and plan.types[cols.score.column]
                    in _FLOATING else 0),
        null_row_keys=total("null::row_key") if plan.check_row_key else 0,
        weight_total=(float(sum(r["w"] for r in kept if r["w"] is not None))
                      if kept else float("nan")),
        nan_labels=total("nan::label"),
        label_values=label_values,
        score_min=extreme("min::score", min) if cols.score else float("nan"),
        score_max=extreme("max::score", max) if cols.score else float("nan"),
        **_binary_sides(kept, config),
        nan_decisions=(total("nan::decision") if cols.prediction and
                       plan.types[cols.prediction.column] in _FLOATING else 0),
        weight_sq_total=float(sum(float(r["w2"]) for r in kept if r["w2"] is not None)),
    )


def _binary_sides(kept: list[dict[str, Any]], config: Config) -> dict[str, dict[str, int]]:
    """``negatives`` and ``positive_rows`` of :class:`InputStats` from the one pass's groups.

    A group's label (decision) key is 1 for a favourable value, so its raw values are
    all positive or all non-positive ones; the non-positive values are counted by the
    minimum and maximum of their 64-bit hashes (exact up to a hash collision).
    """
    cols = config.columns
    pos_code = 1 if cols.favourable == "positive" else 0
    negatives: dict[str, int] = {}
    positives: dict[str, int] = {}
    roles = [("label", LABEL)] + ([("decision", PRED)] if cols.prediction else [])
    for role, key in roles:
        seen: set[int] = set()
        several = False
        positives[role] = 0
        for r in kept:
            if r[key] is None or r[f"lo::{role}"] is None:
                continue
            if r[key] == pos_code:
                positives[role] += int(r["n"])
                continue
            several = several or r[f"lo::{role}"] != r[f"hi::{role}"]
            seen.add(r[f"lo::{role}"])
        negatives[role] = 2 if several else min(len(seen), 2)
    return {"negatives": negatives, "positive_rows": positives}


def _views_from_groups(
    groups: list[dict[str, Any]], views: list[_View], config: Config, cap: int,
) -> tuple[list[AttributeInfo], Any]:
    """Every view's observed values and the confusion cells per combination of views.

    The cells are the group audit's (:func:`fairspark.group.cells.cells_from_groups`,
    which forms the intersections from their attributes' values, joined by ``|`` and
    privileged when all are, as :func:`_intersection_views` forms them on Spark); each
    view's values are counted from them.

    Returns
    -------
    (attributes, cells)
        ``cells`` has one row per combination of the configured views' values: every
        view's value and flag column (intersections too) and :data:`CELL_STATS`, in the
        layout of :func:`fairspark.metrics.cell_counts`.
    """
    cells = cells_from_groups([r for r in groups if r[_KEEP]], views,
                              config.columns.intersections)
    attributes = []
    for v in views:
        n_rows = cells[[f"{c}_n" for c in CELL_OF.values()]].sum(axis=1)
        counts = n_rows.groupby(cells[v.value_col].astype(str), sort=True).sum()
        if len(counts) > cap:
            raise InvalidValueError(
                f"sensitive attribute {v.name!r} has more than {cap} distinct values; "
                "is it an identifier column?"
            )
        pvals = v.privileged_values
        if v.kind == "intersection":
            pvals = sorted(set(cells.loc[cells[v.priv_col], v.value_col].astype(str)))
        attributes.append(AttributeInfo(v.name, v.value_col, v.priv_col,
                                        {str(k): int(n) for k, n in counts.items()}, pvals,
                                        v.kind, v.source_columns))
    return attributes, cells


# --------------------------------------------------------------------------- features


@dataclass
class _FeatureEncoder:
    """Builds ``PreparedData.df``: min-max scaled numeric features (constant -> 0) and
    one-hot categorical ones, assembled into ``_fs_x`` (fitted on Spark)."""

    #: the prepared rows without features (``PreparedData.rows``)
    base: Callable[[], DataFrame]
    numeric: list[str]
    categorical: list[str]
    feature_min: dict[str, float]
    feature_max: dict[str, float]
    #: the sensitive-view columns carried into the encoded table, in order
    view_cols: list[str]
    #: raw columns carried unchanged (``PreparedData.context_columns``)
    context: list[str] = field(default_factory=list)

    def _scaled(self) -> tuple[DataFrame, list[str]]:
        from pyspark.sql import functions as F

        names, exprs = [], []
        for k, c in enumerate(self.numeric):
            lo, hi = self.feature_min[c], self.feature_max[c]
            x = input_col(c).cast("double")
            e = (x - F.lit(lo)) / F.lit(hi - lo) if hi > lo else F.lit(0.0)
            exprs.append(e.alias(f"_fs_num_{k}"))
            names.append(f"_fs_num_{k}")
        return self.base().select("*", *exprs), names

    def _one_hot_stages(self, staged: DataFrame) -> tuple[DataFrame, list[Any], list[str]]:
        """Categorical features as strings, indexed alphabetically and one-hot encoded."""
        from pyspark.ml.feature import OneHotEncoder, StringIndexer

        k_range = range(len(self.categorical))
        cat_cols = [f"_fs_cat_{k}" for k in k_range]
        idx_cols = [f"_fs_idx_{k}" for k in k_range]
        ohe_cols = [f"_fs_ohe_{k}" for k in k_range]
        staged = staged.select(
            "*", *[input_col(c).cast("string").alias(a)
                   for c, a in zip(self.categorical, cat_cols, strict=True)])
        stages = [StringIndexer(inputCols=cat_cols, outputCols=idx_cols,
                                stringOrderType="alphabetAsc", handleInvalid="error"),
                  OneHotEncoder(inputCols=idx_cols, outputCols=ohe_cols, dropLast=False)]
        return staged, stages, ohe_cols

    def __call__(self) -> tuple[DataFrame, list[str]]:
        """The persisted encoded table and the names of the entries of ``_fs_x``."""
        from pyspark import StorageLevel
        from pyspark.ml import Pipeline
        from pyspark.ml.feature import VectorAssembler
        from pyspark.ml.functions import vector_to_array
        from pyspark.sql import functions as F

        staged, assembler_inputs = self._scaled()
        names = list(self.numeric)
        stages: list[Any] = []
        if self.categorical:
            staged, stages, ohe_cols = self._one_hot_stages(staged)
            assembler_inputs += ohe_cols
        stages.append(VectorAssembler(inputCols=assembler_inputs, outputCol="_fs_vec"))
        model = Pipeline(stages=stages).fit(staged)
        if self.categorical:
            for c, labels in zip(self.categorical, model.stages[0].labelsArray, strict=True):
                names += [f"{c}={v}" for v in labels]
        encoded = model.transform(staged).select(
            *_ROLE_COLUMNS, vector_to_array(F.col("_fs_vec")).alias(X), *self.view_cols,
            *[input_col(c) for c in (*self.numeric, *self.categorical, *self.context)],
        ).persist(StorageLevel.MEMORY_AND_DISK)
        log.info("features encoded: %d columns -> %d dimensions",
                 len(self.numeric) + len(self.categorical), len(names))
        return encoded, names


# --------------------------------------------------------------------------- prepare


def _persisted_base(df: DataFrame, plan: _ColumnPlan, config: Config) -> DataFrame:
    """The prepared rows without features (role, view and raw feature columns), persisted."""
    from pyspark import StorageLevel

    kept = df.where(~_any_null(plan))
    with_views, views = _with_views(df, kept, config, plan.types)
    view_cols = [c for v in views for c in (v.value_col, v.priv_col)]
    return with_views.select(*_ROLE_COLUMNS, *view_cols,
                             *[input_col(c) for c in (*plan.features,
                                                      *_context_columns(plan, config))]
                             ).persist(StorageLevel.MEMORY_AND_DISK)


def _context_columns(plan: _ColumnPlan, config: Config) -> list[str]:
    """The source columns of ``privileged_expr`` attributes that are not features.

    A model fitted on them (HFM's discriminative risk) needs them as they are.
    """
    return list(dict.fromkeys(s.column for s in config.columns.sensitive
                              if s.privileged_expr is not None and s.column in plan.types
                              and s.column not in plan.features))


def _checked(stats: InputStats, df: DataFrame, plan: _ColumnPlan, config: Config,
             timings: dict[str, float], *, row_keys: bool = True) -> list[str]:
    """Raise for unusable input (the statistics, then the row keys); the warnings."""
    import time

    _check_stats(stats, config)
    _check_binary(stats, df, plan, config)
    if plan.check_row_key and row_keys:
        t0 = time.perf_counter()
        _check_unique_keys(df, config)
        timings["row keys"] = round(time.perf_counter() - t0, 3)
    warnings = _input_warnings(stats, config)
    for w in warnings:
        log.warning("%s", w)
    return warnings


def _staged(df: DataFrame, plan: _ColumnPlan, config: Config, cap: int,
            timings: dict[str, float]) -> tuple[InputStats, list[str], DataFrame,
                                                list[AttributeInfo]]:
    """The flow for too many groups: statistics pass, persisted rows, counts per view."""
    import time

    t0 = time.perf_counter()
    stats = _collect_stats(df, plan, config)
    timings["scan"] = round(time.perf_counter() - t0, 3)
    warnings = _checked(stats, df, plan, config, timings)
    base = _persisted_base(df, plan, config)
    views = [v for v, _, _ in _sensitive_views(df, config, plan.types)]
    views += [v for v, _, _ in _intersection_views(config.columns)]
    return stats, warnings, base, [_attribute_info(base, v, cap) for v in views]


@dataclass(frozen=True)
class MergedGroups:
    """A window's one-aggregation groups, merged from its partitions' states.

    Attributes
    ----------
    groups:
        Every partition's groups, concatenated (counts add, extremes combine).
    categories:
        Categorical feature -> value -> kept rows, summed over the partitions (each
        partition keeps at most ``max_categories + 1`` values).
    label_hashes:
        64-bit hashes of the raw labels of the partitions whose groups hold two label
        values (``None``: none did).
    """

    groups: list[dict[str, Any]]
    categories: dict[str, dict[str, int]] = field(default_factory=dict)
    label_hashes: list[int] | None = None

    def distinct(self, label: str) -> Callable[[list[str]], dict[str, int]]:
        """Distinct values per column, exactly, from the merged states."""

        def count(columns: list[str]) -> dict[str, int]:
            out = {}
            for c in columns:
                if c == label:
                    single = {r["lo::label"] for r in self.groups if r[_KEEP] and
                              r["lo::label"] is not None and r["lo::label"] == r["hi::label"]}
                    out[c] = len(single | set(self.label_hashes or ()))
                else:
                    out[c] = len(self.categories.get(c, {}))
            return out

        return count


def partition_extras(df: DataFrame, *, config: Config,
                     groups: list[dict[str, Any]]) -> tuple[dict[str, dict[str, int]],
                                                             list[int] | None]:
    """What a partition's state needs besides its groups: category and label values.

    Returns
    -------
    (categories, label_hashes)
        Categorical feature -> value -> kept rows (at most ``max_categories + 1``
        values each; only when an enabled audit encodes features), and the raw label
        hashes when a group of ``groups`` holds two label values (else ``None``).
    """
    from pyspark.sql import functions as F

    plan = _plan_columns(df, config)
    keep = ~_any_null(plan)
    cats: dict[str, dict[str, int]] = {}
    if plan.categorical and plan.count_categories:
        cap = config.preparation.max_categories + 1
        pairs = F.explode(F.array(*[F.struct(F.lit(c).alias("c"),
                                             input_col(c).cast("string").alias("v"))
                                    for c in plan.categorical]))
        rows = (df.where(keep).select(pairs.alias("p")).groupBy("p.c", "p.v").count()
                .collect())
        for r in rows:
            cats.setdefault(r["c"], {})[r["v"]] = int(r["count"])
        cats = {c: dict(sorted(v.items(), key=lambda kv: -kv[1])[:cap]) for c, v in cats.items()}
    hashes = None
    if _label_values(groups) is None:
        label = config.columns.label.column
        ok = keep & ~_missing(label, plan.types)
        hashes = [int(r[0]) for r in df.where(ok).select(F.xxhash64(input_col(label)))
                  .distinct().limit(1001).collect()]
    return cats, hashes


def prepare(df: DataFrame, *, config: Config, merged: MergedGroups | None = None) -> PreparedData:
    """Check the input and count its groups in one aggregation; rows and features lazily.

    One aggregation over the input, grouped by (kept, each sensitive view, label,
    decision), gives every input check's counters and the weighted confusion cells of
    every group and intersection (:attr:`PreparedData.cells`). The prepared rows
    (``base_df``) and the encoded features (``df``) are built and persisted only when
    an audit reads them. With more than :data:`ONE_PASS_MAX_GROUPS` groups the staged
    flow runs instead (a statistics pass, the persisted rows, one count per view),
    which names the view with too many values.

    Parameters
    ----------
    df:
        The input table (already filtered by ``input.where``).
    config:
        The run configuration.
    merged:
        A window's groups merged from its partitions' states: no aggregation runs
        (``df`` is read only by an audit that reads rows, or to name bad values);
        the row keys are checked per partition when its state is written.

    Returns
    -------
    PreparedData
        In the layout of ``docs/architecture.md``.

    Raises
    ------
    FairsparkInputError
        (exit code 2) for a missing column, a column of the wrong type, NaN or
        infinite feature values, negative weights, too many dropped rows, a
        categorical column with too many values, a repeated row key, a sensitive
        attribute with too many values, or no rows to audit.
    """
    import time

    cols = config.columns
    timings: dict[str, float] = {}
    plan = _plan_columns(df, config)
    views = _sensitive_views(df, config, plan.types)
    all_views = [v for v, _, _ in views] + [v for v, _, _ in _intersection_views(cols)]
    cap = max(config.preparation.max_categories, 1000)
    t0 = time.perf_counter()
    groups = merged.groups if merged is not None else _one_pass_groups(df, plan, config, views)
    base: DataFrame | None = None
    cells = None
    if groups is None:
        log.info("more than %d groups: the staged preparation runs", ONE_PASS_MAX_GROUPS)
        stats, warnings, base, attributes = _staged(df, plan, config, cap, timings)
    else:
        if merged is None:
            timings["scan"] = round(time.perf_counter() - t0, 3)
            distinct = lambda columns: _distinct_counts(df, plan, config, columns)
        else:
            distinct = merged.distinct(cols.label.column)
        stats = _stats_from_groups(distinct, groups, plan, config, timings)
        warnings = _checked(stats, df, plan, config, timings, row_keys=merged is None)
        attributes, cells = _views_from_groups(groups, all_views, config, cap)
    view_cols = [c for v in all_views for c in (v.value_col, v.priv_col)]
    fmin = {c: stats.feature_min[c] for c in plan.numeric}
    fmax = {c: stats.feature_max[c] for c in plan.numeric}
    prepared = PreparedData(
        base_df=base,
        build_base=lambda: _persisted_base(df, plan, config),
        cells=cells,
        groups=groups,
        timings=timings,
        attributes=attributes,
        numeric_features=plan.numeric,
        categorical_features=plan.categorical,
        feature_min=fmin,
        feature_max=fmax,
        rows_read=stats.rows,
        rows_audited=stats.audited,
        rows_unlabelled=stats.unlabelled,
        dropped={"total": stats.dropped, **{f"null_{c}": k for c, k in stats.nulls.items()}},
        label_column=cols.label.column,
        decision_column=cols.decision_column,
        weighted=cols.weight is not None,
        warnings=warnings,
        context_columns=_context_columns(plan, config),
        feature_types={c: plan.types[c] for c in plan.features},
    )
    prepared.build_features = _FeatureEncoder(prepared.rows, plan.numeric, plan.categorical,
                                              fmin, fmax, view_cols=view_cols,
                                              context=prepared.context_columns)
    log.info(
        "prepared %d of %d rows (%d dropped, %d unlabelled); %d features",
        stats.audited, stats.rows, stats.dropped, stats.unlabelled, len(plan.features),
    )
    return prepared
