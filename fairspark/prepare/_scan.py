"""The one-aggregation path: the input read once, grouped; the driver merges the groups.

:func:`_one_pass_groups` runs ONE aggregation over the input, grouped by (kept, each
sensitive view's value and flag, label, decision), with every check's counter
(:func:`_one_pass_columns`) and the group audit's sums
(:func:`fairspark.metrics.cells.cell_sums`); :func:`_stats_from_groups` merges the
groups into :class:`InputStats` (with :func:`_distinct_counts`, the distinct values'
own aggregation) and :func:`_views_from_groups` into every view's observed values
and the group audit's cells. A window's merged groups (:mod:`._merged`) take the
same driver-side merges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fairspark.audits.prepared import AttributeInfo, InputStats
from fairspark.columns import BASE, LABEL, PRED, WEIGHT, input_col
from fairspark.errors import InvalidValueError
from fairspark.metrics.cells import CELL_OF, cell_sums, cells_from_groups
from fairspark.prepare._checks import _check_counters
from fairspark.prepare._columns import (
    _FLOATING,
    _any_null,
    _decision_column,
    _label_column,
    _missing,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from fairspark.config_model import Config
    from fairspark.prepare._columns import _ColumnPlan
    from fairspark.prepare._views import _View


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
    if _baseline_prediction(config):  # as the decision's: is the baseline binary?
        raw_base = F.when(keep, F.xxhash64(input_col(cols.baseline.column)))  # type: ignore[union-attr]
        aggs += [F.min(raw_base).alias("lo::baseline"), F.max(raw_base).alias("hi::baseline")]
    return aggs


def _baseline_prediction(config: Config) -> bool:
    """``columns.baseline`` is a prediction with positive values (not a score)."""
    b = config.columns.baseline
    return b is not None and getattr(b, "threshold", None) is None


def _distinct_counts(df: DataFrame, plan: _ColumnPlan, config: Config,
                     columns: list[str]) -> dict[str, int]:
    """``approx_count_distinct`` of ``columns`` over the kept rows (as the statistics pass).

    One global aggregation over these columns only, run when a label group holds two
    raw values (the label's "about N distinct values" warning); the categorical
    features' values are counted exactly by :func:`_category_values`.
    """
    from pyspark.sql import functions as F

    if not columns:
        return {}
    keep = ~_any_null(plan)
    row = df.agg(*[F.approx_count_distinct(F.when(keep, input_col(c))).alias(f"c{k}")
                   for k, c in enumerate(columns)]).collect()[0]
    return {c: int(row[f"c{k}"] or 0) for k, c in enumerate(columns)}


def _category_values(df: DataFrame, plan: _ColumnPlan | None, columns: list[str], *, cap: int,
                     row_key: str | None = None) -> tuple[dict[str, list[str]], bool]:
    """Each of ``columns``' distinct values over the kept rows (every row without a
    ``plan``: the prepared rows, or an input the one aggregation found no row to drop
    in, so that only these columns are read), as strings, sorted, at most ``cap + 1``
    per column
    (more than ``cap`` means too many: the caller refuses); and whether two rows share
    the 64-bit hash of ``row_key`` (on every row whose key is not null, kept or not).

    One read of these columns, one shuffle, no Python task: each row becomes one
    ``(column, value)`` pair per categorical feature and one ``(key, hash)`` pair
    (``explode``); a hash aggregation counts the pairs (its partial aggregation
    collapses a categorical column to its values on each partition); a window keeps
    the first ``cap + 1`` values of each column in Spark's string order and the hashes
    seen twice. So an identifier listed as categorical costs the shuffle of its
    values, not a set of them on one executor, and the driver gets at most ``cap + 1``
    values per column. The values are the strings the encoding compares
    (``cast("string")``), sorted by code point (Spark's string order, that of earlier
    versions' ``StringIndexer(stringOrderType="alphabetAsc")``): they are the one-hot
    entries of ``_fs_x``, so the encoding needs no pass of its own. A hash seen twice
    is a possible repeated key (:func:`~fairspark.prepare._checks._check_unique_keys`
    compares the keys themselves). The row keys' check shares this shuffle only for a
    table too large for :func:`_key_hashes_clash` (a hash per row makes the hash map as
    large as the table; a ``mapInArrow`` pass for the values started the Python workers
    in preparation).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not columns and not row_key:
        return {}, False
    keep = ~_any_null(plan) if plan is not None else F.lit(True)
    pairs = [F.when(keep, F.struct(F.lit(k).alias("c"), input_col(c).cast("string").alias("v"),
                                   F.lit(None).cast("long").alias("h")))
             for k, c in enumerate(columns)]
    if row_key:  # column -1: the key's hash, on every row with a key
        pairs.append(F.when(input_col(row_key).isNotNull(), F.struct(
            F.lit(-1).alias("c"), F.lit(None).cast("string").alias("v"),
            F.xxhash64(input_col(row_key)).alias("h"))))
    counted = (df.select(F.explode(F.array(*pairs)).alias("p"))
               .where(F.col("p").isNotNull() & (F.col("p.v").isNotNull() | (F.col("p.c") < 0)))
               .select("p.c", "p.v", "p.h")
               .groupBy("c", "v", "h").agg(F.count(F.lit(1)).alias("n"))
               .where((F.col("c") >= 0) | (F.col("n") > 1)))
    first = F.row_number().over(Window.partitionBy("c").orderBy("v", "h"))
    rows = counted.select("c", "v", first.alias("r")).where(F.col("r") <= cap + 1).collect()
    found: list[list[str]] = [[] for _ in columns]
    clash = False
    for r in rows:
        if r["c"] < 0:
            clash = True
        else:
            found[r["c"]].append(r["v"])
    return {c: sorted(found[k]) for k, c in enumerate(columns)}, clash


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
                     views: list[tuple[_View, Column, Column]], *,
                     max_groups: int = ONE_PASS_MAX_GROUPS) -> list[dict[str, Any]] | None:
    """Run the one aggregation; its groups as dicts, or ``None`` past ``max_groups``.

    Groups the rows by (kept, each configured sensitive view's value and flag, label,
    decision); a dropped row's keys are all null, so the dropped rows form one group.
    The callers (:func:`fairspark.prepare.prepare`, a window's partitions) pass
    ``fairspark.prepare.ONE_PASS_MAX_GROUPS``, read when they run, so that lowering
    it there (as the tests do, to force the staged flow) reaches both.
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
    if cols.baseline is not None:  # the second decision: joint cells, same aggregation
        keys.append(F.when(kept, _decision_column(config, plan.types, baseline=True)
                           .cast("tinyint")).alias(BASE))
    rows = (staged.groupBy(*keys).agg(*_one_pass_columns(plan, config))
            .limit(max_groups + 1).collect())
    if len(rows) > max_groups:
        return None
    return [r.asDict() for r in rows]


def _stats_from_groups(distinct: Callable[[list[str]], dict[str, int]],
                       groups: list[dict[str, Any]], plan: _ColumnPlan,
                       config: Config) -> InputStats:
    """:class:`InputStats` merged from the groups of the one pass (plus distinct counts).

    ``distinct`` gives the distinct values of columns over the kept rows (a Spark
    aggregation, or the merged per-partition value counts of a window).
    """

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
    cards = distinct([*categorical, *([label] if label_values is None else [])])
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
    roles = ([("label", LABEL)] + ([("decision", PRED)] if cols.prediction else [])
             + ([("baseline", BASE)] if _baseline_prediction(config) else []))
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

    The cells are the group audit's (:func:`fairspark.metrics.cells.cells_from_groups`,
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
    kept = [r for r in groups if r[_KEEP]]
    cells = cells_from_groups(kept, views, config.columns.intersections)
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


def _joint_cells(groups: list[dict[str, Any]], views: list[_View], config: Config) -> Any:
    """The cells split further by the baseline decision (``columns.baseline``), from the
    same groups as :func:`_views_from_groups`' cells; ``None`` without a baseline."""
    if config.columns.baseline is None:
        return None
    return cells_from_groups([r for r in groups if r[_KEEP]], views,
                             config.columns.intersections, by=BASE)
