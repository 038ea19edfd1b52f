"""The staged path, for more than ``ONE_PASS_MAX_GROUPS`` groups.

A statistics pass (:func:`_collect_stats`, one global aggregation of every check's
counter), the persisted rows, and one count per view (:func:`_attribute_info`),
which names the view with too many values; the group audit then aggregates the
persisted rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fairspark.audits.prepared import AttributeInfo, InputStats
from fairspark.columns import input_col
from fairspark.errors import InvalidValueError
from fairspark.prepare._checks import _check_counters, _checked, _count_where
from fairspark.prepare._columns import _any_null, _binary_roles, _missing
from fairspark.prepare._rows import _persisted_base
from fairspark.prepare._views import _intersection_views, _sensitive_views

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from fairspark.config_model import Config
    from fairspark.prepare._columns import _ColumnPlan
    from fairspark.prepare._views import _View


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
