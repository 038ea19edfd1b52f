"""The input checks: their counters, the checks of :class:`InputStats`, the warnings.

:func:`_check_counters` are the aggregations both scans share (the one aggregation
of :mod:`._scan` and the statistics pass of :mod:`._staged_flow`); :func:`_checked` runs
every check on their result (:func:`_check_stats`, :func:`_check_binary`) and the
row key's own aggregation (:func:`_check_unique_keys`), and gives the warnings.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from fairspark._memory import max_result_bytes
from fairspark.columns import input_col
from fairspark.errors import EmptyInputError, InvalidValueError
from fairspark.numbers import fmt_fixed, fmt_setting
from fairspark.prepare._columns import (
    _FLOATING,
    _NUMERIC,
    _any_null,
    _binary_roles,
    _missing,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from fairspark.audits.prepared import InputStats
    from fairspark.config_model import Config
    from fairspark.prepare._columns import _ColumnPlan

log = logging.getLogger("fairspark")

# Row keys of a table of at most this many rows are checked on the driver: their 64-bit
# hashes are read in one pass of the key column and compared with numpy, no shuffle
# (:func:`_key_hashes_clash`): 8 bytes a row, 128 MB at the cap, which pass through the
# driver JVM as Arrow batches (a quarter of Spark's default 1 GB heap) and are held
# twice in Python. A larger table's hashes are counted in a shuffle.
KEY_HASHES_ON_DRIVER_MAX_ROWS = 16_000_000


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
            f"the weights of the {stats.audited} audited rows sum to "
            f"{fmt_setting(stats.weight_total)} "
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
            f"{dropped_total} of {n} rows ({fmt_fixed(100 * dropped_total / n, 1)}%) have a "
            "missing prediction, sensitive value or feature, more than "
            "'preparation.max_dropped_fraction' = "
            f"{fmt_setting(prep.max_dropped_fraction)}; nulls per column: {dropped}"
        )
    for c, card in stats.categories.items():
        if card > prep.max_categories:
            raise InvalidValueError(
                f"categorical feature {c!r} has more than {prep.max_categories} distinct "
                f"values ('preparation.max_categories' = {prep.max_categories}); is it an "
                "identifier column? exclude it or raise the limit"
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
        lo, hi = fmt_setting(stats.score_min), fmt_setting(stats.score_max)
        out.append(f"score column {cols.score.column!r} ranges over [{lo}, {hi}], outside "
                   "[0, 1], while the threshold is the default 0.5; set "
                   "'columns.score.threshold' if the scores are not probabilities")
    return out


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
        return fmt_setting(v) if isinstance(v, float) else repr(v)

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
        what = {"label": cols.label, "decision": cols.prediction,
                "baseline": cols.baseline}[role]
        key = {"label": "columns.label", "decision": "columns.prediction",
               "baseline": "columns.baseline"}[role]
        pos = what.positive[0] if len(what.positive) == 1 else what.positive  # type: ignore[union-attr]
        word = {"label": "label", "decision": "decision", "baseline": "baseline decision"}[role]
        head = f"{word} column {column!r} ('{key}.column')"
        if no_positive and not numeric:
            raise InvalidValueError(
                f"{head} holds the values {_shown(values, n)}; none of them is the configured "
                f"positive value {pos!r} ('{key}.positive'); set '{key}.positive' to the "
                "value(s) as they appear in the column")
        hint = (f"if it holds scores or probabilities, configure 'columns.score: {{column: "
                f"{column}, threshold: <cut-off>}}' instead of 'columns.prediction'"
                if role == "decision" else
                f"if it holds scores or probabilities, configure 'columns.baseline: {{column: "
                f"{column}, threshold: <cut-off>}}'" if role == "baseline" else
                f"list every favourable value under '{key}.positive' and map the others to "
                "one value upstream")
        none = " (none of them is)" if no_positive else ""
        raise InvalidValueError(
            f"{head} is not binary: it holds {_shown(values, n)}, where a "
            f"{'label' if role == 'label' else 'decision'} holds the positive value "
            f"{pos!r} ('{key}.positive'){none} and one negative value; {hint}")


def key_hashes_fit_driver(spark, rows: int, *, max_rows: int) -> bool:
    """Whether :func:`_key_hashes_clash` may bring ``rows`` hashes to the driver: at most
    ``max_rows`` (:data:`KEY_HASHES_ON_DRIVER_MAX_ROWS`) and, in Arrow (8 bytes a row
    and a little per batch), at most half of ``spark.driver.maxResultSize``."""
    return rows <= max_rows and 8.0 * rows + (1 << 20) <= max_result_bytes(spark) / 2


def _key_hashes_clash(df: DataFrame, row_key: str) -> bool:
    """Whether two rows share the 64-bit hash of ``row_key`` (on every row whose key is
    not null), the hashes compared on the driver.

    One read of the key column, no shuffle and no Python task: each row's ``xxhash64``
    comes back as Arrow (8 bytes a row) and numpy sorts them. The caller checks the
    size first (:func:`key_hashes_fit_driver`); a larger table's hashes are counted by
    :func:`_category_values` (a shuffle: on the 10M-row nightly table, 34.7 s of its
    preparation).
    """
    from pyspark.sql import functions as F

    key = input_col(row_key)
    table = df.where(key.isNotNull()).select(F.xxhash64(key).alias("h")).toArrow()
    if table.num_rows < 2:
        return False
    import numpy as np

    hashes = np.sort(table.column("h").to_numpy())  # a copy: Arrow's buffer is read-only
    return bool((hashes[1:] == hashes[:-1]).any())


def _check_unique_keys(df: DataFrame, config: Config, *, clash: bool | None = None,
                       rows: int | None = None) -> None:
    """A configured row key must not repeat (key hashes compared; an example).

    Rows that share a key would be merged wherever an audit joins by key (HFM's
    nearest neighbours), silently changing the numbers. ``clash``: whether two keys
    share a hash, when a pass already compared them (the preparation's second pass);
    ``None``: the hashes are compared here, on the driver when the table's ``rows``
    are known and fit it (:func:`key_hashes_fit_driver`), else in an aggregation.
    """
    from pyspark.sql import functions as F

    key = config.columns.row_key
    if not key:
        return
    if clash is None and rows is not None and key_hashes_fit_driver(
            df.sparkSession, rows, max_rows=KEY_HASHES_ON_DRIVER_MAX_ROWS):
        clash = _key_hashes_clash(df, key)
    # first by a 64-bit hash of the key (a shuffle of longs, not of strings); only when
    # two rows share a hash are the keys themselves compared, for the message's example
    if clash is None:
        clash = bool(df.where(input_col(key).isNotNull())
                     .groupBy(F.xxhash64(input_col(key)).alias("_h"))
                     .agg(F.count(F.lit(1)).alias("_n")).where(F.col("_n") > 1).limit(1)
                     .collect())
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


def _checked(stats: InputStats, df: DataFrame, plan: _ColumnPlan, config: Config,
             timings: dict[str, float], *, key_clash: bool | None = None) -> list[str]:
    """Raise for unusable input (the statistics, then the row keys); the warnings.

    ``key_clash``: whether two row keys share a hash, when a pass already looked
    (:func:`~fairspark.prepare._scan._category_values`; ``False`` for a window, whose
    partitions checked their keys), so the keys are compared only then; ``None``: not
    looked yet, :func:`_check_unique_keys` runs here (the staged flow).
    """
    import time

    _check_stats(stats, config)
    _check_binary(stats, df, plan, config)
    if plan.check_row_key and key_clash is not False:
        t0 = time.perf_counter()
        _check_unique_keys(df, config, clash=key_clash, rows=stats.rows)
        if key_clash is None:
            timings["row keys"] = round(time.perf_counter() - t0, 3)
    warnings = _input_warnings(stats, config)
    for w in warnings:
        log.warning("%s", w)
    return warnings
