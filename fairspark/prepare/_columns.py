"""Column planning: the configured roles against the schema, the features, the role columns.

:func:`_plan_columns` checks every configured column's presence and type and splits
the features (:class:`_ColumnPlan`); the rest are the column expressions both
preparation paths share: which rows are dropped (:func:`_any_null`), the prepared
label, decision, key and weight (:func:`_role_columns`) and the configured positive
values of the label and a prediction (:func:`_binary_roles`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fairspark.columns import BASE, KEY, LABEL, PRED, WEIGHT, input_col
from fairspark.errors import ColumnTypeError, ConfigError, MissingColumnError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from fairspark.config_columns import ColumnsConfig
    from fairspark.config_model import Config


_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
_CATEGORICAL_OK = ("string", "boolean", "tinyint", "smallint", "int", "bigint", "date")
_FLOATING = ("float", "double")


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
    #: the baseline decision's column (``columns.baseline``; "" without one): as the
    #: decision, null or NaN there drops the row, so both decisions cover the same rows
    baseline: str = ""
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
    if cols.baseline is not None:
        role_cols.add(cols.baseline.column)
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
    if cols.baseline is not None:
        needed.append((cols.baseline.column, "baseline decision ('columns.baseline.column', "
                       "--baseline-column)"))
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
    base = cols.baseline
    if base is not None and getattr(base, "threshold", None) is not None \
            and types[base.column] not in _NUMERIC:
        raise ColumnTypeError(
            f"baseline score column {base.column!r} ('columns.baseline.column') has type "
            f"{types[base.column]}; expected a numeric type")
    if cols.score and types[cols.score.column] not in _NUMERIC:
        raise ColumnTypeError(
            f"score column {cols.score.column!r} has type {types[cols.score.column]}; "
            "expected a numeric type"
        )
    if cols.weight and types[cols.weight] not in _NUMERIC:
        raise ColumnTypeError(
            f"weight column {cols.weight!r} has type {types[cols.weight]}; expected a numeric type"
        )


def _checks_needed(config: Config) -> tuple[bool, bool]:
    """Whether an enabled audit reads features, and whether one joins rows by key.

    The distinct values of categorical features matter only to an audit that
    one-hot encodes them, and a repeated row key only to one that joins by it (each
    audit's :class:`~fairspark.audits.spec.AuditSpec` says); a group-only run skips
    both scans and does not read the key column (its nulls are counted, and refused,
    only when an audit joins by key).
    """
    specs = [config.audits.audit_spec(name) for name in config.audits.enabled()]
    return any(s.reads_features for s in specs), any(s.joins_by_key for s in specs)


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
    if cols.baseline is not None:
        required.append(cols.baseline.column)
    reads_features, joins_by_key = _checks_needed(config)
    return _ColumnPlan(types=types, numeric=numeric, categorical=categorical,
                       required=list(dict.fromkeys(required)), decision=cols.decision_column,
                       baseline=cols.baseline.column if cols.baseline is not None else "",
                       count_categories=reads_features,
                       check_row_key=bool(cols.row_key) and joins_by_key)


# --------------------------------------------------------------------------- columns


def _missing(col: str, types: dict[str, str]) -> Column:
    """Null, or NaN in a floating column: both mean "value not known"."""
    from pyspark.sql import functions as F

    c = input_col(col)
    return (c.isNull() | F.isnan(c)) if types[col] in _FLOATING else c.isNull()


def _any_null(plan: _ColumnPlan) -> Column:
    """True for a row that is dropped: a required column is null (the decision: or NaN)."""
    from pyspark.sql import functions as F

    any_null = F.lit(False)
    for c in plan.required:
        any_null = any_null | (_missing(c, plan.types) if c in (plan.decision, plan.baseline)
                               else input_col(c).isNull())
    return any_null


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


def _decision_column(config: Config, types: dict[str, str], *, baseline: bool = False
                     ) -> Column:
    """1.0 for a favourable decision (prediction or thresholded score), else 0.0.

    ``baseline=True``: the same for ``columns.baseline``, read as the audited decision is.
    """
    from pyspark.sql import functions as F

    cols = config.columns
    spec = cols.baseline if baseline else (cols.prediction or cols.score)
    key = "columns.baseline.positive" if baseline else "columns.prediction.positive"
    if getattr(spec, "threshold", None) is None:
        pred_pos = _isin(spec.column, types[spec.column], spec.positive, key)  # type: ignore[union-attr]
    else:
        pred_pos = input_col(spec.column).cast("double") >= F.lit(float(spec.threshold))  # type: ignore[union-attr]
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
    out = [
        key_expr.alias(KEY),
        _label_column(config, types).alias(LABEL),
        _decision_column(config, types).alias(PRED),
        weight_expr.alias(WEIGHT),
    ]
    if cols.baseline is not None:
        out.append(_decision_column(config, types, baseline=True).alias(BASE))
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
    b = cols.baseline
    if b is not None and getattr(b, "threshold", None) is None:  # a baseline prediction
        out.append(("baseline", b.column,
                    _isin(b.column, types[b.column], b.positive, "columns.baseline.positive")))  # type: ignore[union-attr]
    return [(role, column, F.coalesce(pos, F.lit(False))) for role, column, pos in out]
