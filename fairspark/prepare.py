"""Loading checks and preparation: one prepared DataFrame that every audit consumes.

Everything here runs on Spark; the driver only receives aggregates (counts, minima,
maxima, distinct categories under a cap). See ``docs/architecture.md`` for the
columns of the prepared table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairspark.errors import (
    ColumnTypeError,
    ConfigError,
    EmptyInputError,
    InvalidValueError,
    MissingColumnError,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from fairspark.config import Config

__all__ = ["AttributeInfo", "PreparedData", "prepare", "KEY", "LABEL", "PRED", "WEIGHT", "X"]

log = logging.getLogger("fairspark")

KEY = "_fs_key"
LABEL = "_fs_label"
PRED = "_fs_pred"
WEIGHT = "_fs_w"
X = "_fs_x"

_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
_CATEGORICAL_OK = ("string", "boolean", "tinyint", "smallint", "int", "bigint", "date")


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

    ``base_df`` (persisted) has every column but the encoded feature vector; ``df``
    adds ``_fs_x`` and is built, fitted and persisted on first use, so a run whose
    audits never read the features (the group audit alone) never pays for encoding.
    """

    base_df: DataFrame
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
    _features: tuple[DataFrame, list[str]] | None = field(default=None, repr=False)

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
        """The prepared rows, or a seeded Bernoulli sample of about ``max_rows``.

        The sample keeps a row when a hash of its key and the seed falls below
        ``max_rows / rows_audited``, so it does not depend on the partitioning.
        ``features=False`` gives rows without ``_fs_x`` (no encoding needed).
        """
        from pyspark.sql import functions as F

        df = self.df if features else self.base_df
        if max_rows is None or max_rows >= self.rows_audited:
            return df
        p = max_rows / self.rows_audited
        bucket = F.pmod(F.xxhash64(F.col(KEY), F.lit(int(seed))), F.lit(1 << 30))
        return df.where(bucket < F.lit(int(p * (1 << 30))))

    def unpersist(self) -> None:
        """Release the cached frames."""
        self.base_df.unpersist()
        if self._features is not None:
            self._features[0].unpersist()

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


def _isin(col: str, dtype_name: str, values: list[Any], key: str) -> Column:
    from pyspark.sql import functions as F

    try:
        lits = [_literal(v, dtype_name) for v in values]
    except ConfigError as err:
        raise ConfigError(f"config key '{key}': {err} (column {col!r} is {dtype_name})") from None
    return F.col(col).isin(lits)


def _resolve_features(config: Config, types: dict[str, str]) -> tuple[list[str], list[str]]:
    cols = config.columns
    sensitive_cols = [s.column for s in cols.sensitive]
    role_cols = set(sensitive_cols) | {cols.label.column, cols.decision_column}
    role_cols |= {c for c in (cols.weight, cols.row_key) if c}
    if cols.features == "all_others":
        feats = [c for c in types if c not in role_cols and c not in cols.exclude]
    else:
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
    for c in cols.categorical:
        if c not in feats:
            raise ConfigError(
                f"config key 'columns.categorical': {c!r} is not among the features {feats}"
            )
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


def prepare(df: DataFrame, *, config: Config) -> PreparedData:
    """Check the schema, drop rows with missing values, encode and scale the features.

    Parameters
    ----------
    df:
        The input table (already filtered by ``input.where``).
    config:
        The run configuration.

    Returns
    -------
    PreparedData
        With a persisted DataFrame in the layout of ``docs/architecture.md``.

    Raises
    ------
    FairsparkInputError
        (exit code 2) for a missing column, a column of the wrong type, NaN or
        infinite feature values, negative weights, too many dropped rows, a
        categorical column with too many values, or no rows to audit.
    """
    from pyspark import StorageLevel
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import OneHotEncoder, StringIndexer, VectorAssembler
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    cols = config.columns
    prep = config.preparation
    types = {f.name: _typename(f.dataType) for f in df.schema.fields}
    _check_roles(config, types)
    numeric, categorical = _resolve_features(config, types)
    src = config.input.table or config.input.path

    # ---- one aggregation pass: counts, nulls, NaN/inf, min/max, cardinalities ----
    sens_cols = [s.column for s in cols.sensitive]
    required = [cols.decision_column, *sens_cols, *numeric, *categorical]
    if cols.weight:
        required.append(cols.weight)
    required = list(dict.fromkeys(required))
    any_null = F.lit(False)
    for c in required:
        any_null = any_null | F.col(c).isNull()
    keep = ~any_null
    aggs = [F.count(F.lit(1)).alias("n"), F.sum(F.when(any_null, 1).otherwise(0)).alias("dropped")]
    for c in required:
        aggs.append(F.sum(F.when(F.col(c).isNull(), 1).otherwise(0)).alias(f"null::{c}"))
    floaty = [c for c in numeric if types[c] in ("float", "double")]
    for c in floaty:
        bad = F.isnan(F.col(c)) | F.col(c).isin(float("inf"), float("-inf"))
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias(f"nan::{c}"))
    for c in numeric:
        aggs.append(F.min(F.when(keep, F.col(c).cast("double"))).alias(f"min::{c}"))
        aggs.append(F.max(F.when(keep, F.col(c).cast("double"))).alias(f"max::{c}"))
    for c in categorical:
        aggs.append(F.approx_count_distinct(F.when(keep, F.col(c))).alias(f"card::{c}"))
    if cols.weight:
        w = F.col(cols.weight).cast("double")
        aggs.append(F.sum(F.when(w < 0, 1).otherwise(0)).alias("neg::weight"))
        aggs.append(F.sum(F.when(F.isnan(w) | w.isin(float("inf")), 1).otherwise(0))
                    .alias("nan::weight"))
    if cols.score and types[cols.score.column] in ("float", "double"):
        aggs.append(F.sum(F.when(F.isnan(F.col(cols.score.column)), 1).otherwise(0))
                    .alias("nan::score"))
    aggs.append(F.sum(F.when(keep & F.col(cols.label.column).isNull(), 1).otherwise(0))
                .alias("unlabelled"))
    stats = df.agg(*aggs).collect()[0].asDict()

    n = int(stats["n"] or 0)
    if n == 0:
        w = config.input.where
        where = f" after the filter 'input.where: {w}'" if w else ""
        raise EmptyInputError(f"input {src!r} has no rows{where}")
    bad = {c: int(stats[f"nan::{c}"]) for c in floaty if stats[f"nan::{c}"]}
    if bad:
        shown = ", ".join(f"{c!r} ({k} rows)" for c, k in bad.items())
        raise InvalidValueError(
            f"feature columns hold NaN or infinite values: {shown}; fix the input or list "
            "these columns under 'columns.exclude'"
        )
    if cols.weight and (stats["neg::weight"] or stats["nan::weight"]):
        raise InvalidValueError(
            f"weight column {cols.weight!r} holds {int(stats['neg::weight'])} negative and "
            f"{int(stats['nan::weight'])} NaN/infinite values; weights must be finite and >= 0"
        )
    if stats.get("nan::score"):
        raise InvalidValueError(
            f"score column {cols.score.column!r} holds {int(stats['nan::score'])} NaN values"  # type: ignore[union-attr]
        )
    dropped_total = int(stats["dropped"] or 0)
    dropped = {c: int(stats[f"null::{c}"]) for c in required if stats[f"null::{c}"]}
    if n - dropped_total == 0:
        raise EmptyInputError(
            f"no rows left to audit in {src!r}: all {n} rows have a missing value "
            f"(nulls per column: {dropped})"
        )
    if dropped_total / n > prep.max_dropped_fraction:
        raise InvalidValueError(
            f"{dropped_total} of {n} rows ({dropped_total / n:.1%}) have a missing prediction, "
            f"sensitive value or feature, more than 'preparation.max_dropped_fraction' = "
            f"{prep.max_dropped_fraction}; nulls per column: {dropped}"
        )
    for c in categorical:
        if int(stats[f"card::{c}"] or 0) > prep.max_categories:
            raise InvalidValueError(
                f"categorical feature {c!r} has about {int(stats[f'card::{c}'])} distinct values, "
                f"more than 'preparation.max_categories' = {prep.max_categories}; exclude it or "
                "raise the limit"
            )

    # ---- derived columns ----
    kept = df.where(keep)
    lab = cols.label
    fav_is_pos = cols.favourable == "positive"
    label_pos = _isin(lab.column, types[lab.column], lab.positive, "columns.label.positive")
    label_fav = label_pos if fav_is_pos else ~label_pos
    label_expr = (
        F.when(F.col(lab.column).isNull(), F.lit(None).cast("double"))
        .when(label_fav, F.lit(1.0))
        .otherwise(F.lit(0.0))
    )
    if cols.prediction:
        p = cols.prediction
        pred_pos = _isin(p.column, types[p.column], p.positive, "columns.prediction.positive")
    else:
        pred_pos = F.col(cols.score.column).cast("double") >= F.lit(float(cols.score.threshold))  # type: ignore[union-attr]
    pred_fav = pred_pos if fav_is_pos else ~pred_pos
    pred_expr = F.when(pred_fav, F.lit(1.0)).otherwise(F.lit(0.0))
    weight_expr = F.col(cols.weight).cast("double") if cols.weight else F.lit(1.0)
    if cols.row_key:
        key_expr = F.col(cols.row_key).cast("string")
    else:
        key_expr = F.xxhash64(*[F.col(c) for c in df.columns]).cast("string")

    derived = [
        key_expr.alias(KEY),
        label_expr.alias(LABEL),
        pred_expr.alias(PRED),
        weight_expr.alias(WEIGHT),
    ]
    attr_specs: list[tuple[str, str, str, str, list[str], list[str]]] = []
    for i, s in enumerate(cols.sensitive):
        vcol, pcol = f"_fs_s_{i}", f"_fs_p_{i}"
        if s.privileged_expr is not None:
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
            attr_specs.append((s.attr, vcol, pcol, "predicate", ["privileged"], [s.column]))
        else:
            tname = types[s.column]
            priv = _isin(s.column, tname, s.privileged, f"columns.sensitive[{i}].privileged")  # type: ignore[arg-type]
            value = F.col(s.column).cast("string")
            pvals = [str(_literal(v, tname)) for v in s.privileged]  # type: ignore[union-attr]
            if tname == "boolean":
                pvals = [str(v).lower() for v in pvals]
            attr_specs.append((s.attr, vcol, pcol, "values", pvals, [s.column]))
        derived += [value.alias(vcol), priv.alias(pcol)]
    with_roles = kept.select(*kept.columns, *derived)
    name_to_idx = {s.attr: i for i, s in enumerate(cols.sensitive)}
    inter_cols = []
    for j, combo in enumerate(cols.intersections):
        vcol, pcol = f"_fs_s_x{j}", f"_fs_p_x{j}"
        idx = [name_to_idx[a] for a in combo]
        value = F.concat_ws("|", *[F.col(f"_fs_s_{i}") for i in idx])
        priv = F.lit(True)
        for i in idx:
            priv = priv & F.col(f"_fs_p_{i}")
        inter_cols += [value.alias(vcol), priv.alias(pcol)]
        src_cols = [cols.sensitive[i].column for i in idx]
        attr_specs.append(("*".join(combo), vcol, pcol, "intersection", [], src_cols))
    if inter_cols:
        with_roles = with_roles.select("*", *inter_cols)

    role_names = [KEY, LABEL, PRED, WEIGHT]
    s_cols = [c for spec in attr_specs for c in spec[1:3]]
    base = with_roles.select(*role_names, *s_cols, *numeric, *categorical).persist(
        StorageLevel.MEMORY_AND_DISK)
    fmin = {c: float(stats[f"min::{c}"]) for c in numeric}
    fmax = {c: float(stats[f"max::{c}"]) for c in numeric}

    def build_features() -> tuple[DataFrame, list[str]]:
        """Min-max scale numeric features (constant -> 0), one-hot categorical ones."""
        scaled_names, scaled_exprs = [], []
        for k, c in enumerate(numeric):
            lo, hi = fmin[c], fmax[c]
            e = (F.col(c).cast("double") - F.lit(lo)) / F.lit(hi - lo) if hi > lo else F.lit(0.0)
            scaled_exprs.append(e.alias(f"_fs_num_{k}"))
            scaled_names.append(f"_fs_num_{k}")
        staged = base.select("*", *scaled_exprs)
        names = list(numeric)
        assembler_inputs = list(scaled_names)
        stages: list[Any] = []
        if categorical:
            cat_cols = [f"_fs_cat_{k}" for k in range(len(categorical))]
            idx_cols = [f"_fs_idx_{k}" for k in range(len(categorical))]
            ohe_cols = [f"_fs_ohe_{k}" for k in range(len(categorical))]
            staged = staged.select(
                "*", *[F.col(c).cast("string").alias(a) for c, a in zip(categorical, cat_cols,
                                                                          strict=True)])
            stages.append(StringIndexer(inputCols=cat_cols, outputCols=idx_cols,
                                        stringOrderType="alphabetAsc", handleInvalid="error"))
            stages.append(OneHotEncoder(inputCols=idx_cols, outputCols=ohe_cols, dropLast=False))
            assembler_inputs += ohe_cols
        stages.append(VectorAssembler(inputCols=assembler_inputs, outputCol="_fs_vec"))
        model = Pipeline(stages=stages).fit(staged)
        if categorical:
            for c, labels in zip(categorical, model.stages[0].labelsArray, strict=True):
                names += [f"{c}={v}" for v in labels]
        encoded = model.transform(staged).select(
            *role_names, vector_to_array(F.col("_fs_vec")).alias(X), *s_cols, *numeric,
            *categorical,
        ).persist(StorageLevel.MEMORY_AND_DISK)
        log.info("features encoded: %d columns -> %d dimensions",
                 len(numeric) + len(categorical), len(names))
        return encoded, names

    # ---- observed values of each sensitive view (aggregate, capped) ----
    cap = max(prep.max_categories, 1000)
    attributes = []
    for name, vcol, pcol, kind, pvals, src_cols in attr_specs:
        counts = (
            base.groupBy(vcol, pcol).count().orderBy(vcol).limit(cap + 1).collect()
        )
        if len(counts) > cap:
            raise InvalidValueError(
                f"sensitive attribute {name!r} has more than {cap} distinct values; "
                "is it an identifier column?"
            )
        values = {str(r[vcol]): int(r["count"]) for r in counts}
        if kind == "intersection":
            pvals = sorted({str(r[vcol]) for r in counts if r[pcol]})
        attributes.append(AttributeInfo(name, vcol, pcol, values, pvals, kind, src_cols))
    audited = n - dropped_total
    log.info(
        "prepared %d of %d rows (%d dropped, %d unlabelled); %d features",
        audited, n, dropped_total, int(stats["unlabelled"] or 0), len(numeric) + len(categorical),
    )
    return PreparedData(
        base_df=base,
        build_features=build_features,
        attributes=attributes,
        numeric_features=numeric,
        categorical_features=categorical,
        feature_min=fmin,
        feature_max=fmax,
        rows_read=n,
        rows_audited=audited,
        rows_unlabelled=int(stats["unlabelled"] or 0),
        dropped={"total": dropped_total, **{f"null_{c}": k for c, k in dropped.items()}},
        label_column=lab.column,
        decision_column=cols.decision_column,
        weighted=cols.weight is not None,
    )
