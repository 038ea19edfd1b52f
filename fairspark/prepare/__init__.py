"""Loading checks and preparation: one prepared DataFrame that every audit consumes.

Everything here runs on Spark; the driver only receives aggregates (counts, minima,
maxima, distinct categories under a cap). See ``docs/architecture.md`` for the
columns of the prepared table; their names are declared in :mod:`fairspark.columns`.

:func:`prepare` runs in steps, each a short function over small state objects, each
module one job:

1. :mod:`._columns`: :func:`_plan_columns`, schema checks, the feature split
   (:class:`_ColumnPlan`), the role columns; :mod:`._views`: the sensitive views;
2. :mod:`._scan` (the one-aggregation path): :func:`_one_pass_groups`, ONE
   aggregation over the input, grouped by (kept, each sensitive view's value and
   flag, label, decision), with every check's counter; :func:`_stats_from_groups`
   merges it into :class:`InputStats` and :mod:`._checks` raises for unusable input
   (:func:`_check_stats`). Two checks need a second pass, one for both: the values
   of categorical features and a configured row key's repeated hashes
   (:func:`_category_values`, exact and bounded, one shuffle of (column, value) and
   key-hash pairs; the encoding reuses the values, :func:`_check_unique_keys`
   compares the keys only when two hashes clash; a table of at most
   :data:`KEY_HASHES_ON_DRIVER_MAX_ROWS` rows has its hashes compared on the driver
   instead, :func:`_key_hashes_clash`, a job beside the values', no shuffle:
   :func:`_values_and_keys`). Each part runs only when an
   enabled audit needs it (:func:`_checks_needed`): a group-only run reads the input
   once;
3. :func:`_views_from_groups`: the observed values of each view (intersections
   formed on the driver) and the weighted confusion cells of every combination
   (``PreparedData.cells``, what the group audit reads; aggregated by
   :mod:`fairspark.metrics.cells`, beside the group audit);
4. on first use only (:mod:`._rows`): :func:`_persisted_base` (role, view and feature
   columns, persisted as ``base_df``) and :class:`_FeatureEncoder` (min-max scaling
   and one-hot encoding as column expressions, ``PreparedData.df``, persisted
   ``DISK_ONLY`` when several audits read it, else computed by its one reader's
   jobs), so a group-only run persists nothing.

With more than :data:`ONE_PASS_MAX_GROUPS` groups the staged flow runs instead
(:mod:`._staged_flow`: :func:`_collect_stats`, the persisted rows,
:func:`_attribute_info` per view). A window (:mod:`fairspark.nightly.window`) passes
its partitions' merged groups instead of aggregating (:mod:`._merged`:
:class:`MergedGroups`, :func:`partition_extras`). The results are the contract's
(:mod:`fairspark.audits.prepared`).

Lower :data:`ONE_PASS_MAX_GROUPS` here (``fairspark.prepare.ONE_PASS_MAX_GROUPS``),
not in :mod:`._scan`: :func:`prepare` and a window's partitions read it from here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fairspark.audits.prepared import PreparedData
from fairspark.prepare._checks import (
    KEY_HASHES_ON_DRIVER_MAX_ROWS,
    _checked,
    _key_hashes_clash,
    key_hashes_fit_driver,
)
from fairspark.prepare._checks import (
    _check_unique_keys as _check_unique_keys,
)
from fairspark.prepare._columns import _any_null as _any_null
from fairspark.prepare._columns import _plan_columns
from fairspark.prepare._merged import MergedGroups, partition_extras
from fairspark.prepare._rows import (
    _base_rows,
    _context_columns,
    _FeatureEncoder,
    _persisted_base,
    cache_level,
)
from fairspark.prepare._scan import (
    _KEEP,
    ONE_PASS_MAX_GROUPS,
    _category_values,
    _distinct_counts,
    _joint_cells,
    _one_pass_groups,
    _stats_from_groups,
    _views_from_groups,
)
from fairspark.prepare._staged_flow import _collect_stats as _collect_stats
from fairspark.prepare._staged_flow import _staged
from fairspark.prepare._views import _intersection_views, _sensitive_views

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from fairspark.config_model import Config

# PreparedData, AttributeInfo and InputStats are the contract's
# (fairspark.audits.prepared), the column names fairspark.columns'. The private names
# imported ``as`` themselves, and the private helpers prepare() uses, are imported from
# here by fairspark.nightly.window and the tests.
__all__ = ["MergedGroups", "ONE_PASS_MAX_GROUPS", "cache_level", "partition_extras", "prepare"]

log = logging.getLogger("fairspark")


def _values_and_keys(df: DataFrame, plan: Any, config: Config, groups: list[dict],
                     timings: dict[str, float]) -> tuple[dict[str, list[str]], bool]:
    """The second pass: the categorical features' values exactly, at most
    ``max_categories + 1`` each (the encoding reuses them), and whether two row keys
    share a hash; each only when an enabled audit needs it.

    The keys' hashes are compared on the driver when they fit it
    (:func:`key_hashes_fit_driver`), in a job of their own that runs beside the values'
    (a second driver thread, so that the two jobs' tasks share the cores); a larger
    table's hashes are counted in the values pass's shuffle. With no dropped row (the
    one aggregation's groups say) every row is kept, and the values pass reads only the
    categorical columns, not every column a dropped row is told by.
    """
    import time

    from fairspark._jobs import scope_thread

    counted = plan.categorical if plan.count_categories else []
    key = config.columns.row_key if plan.check_row_key else None
    on_driver = bool(key) and key_hashes_fit_driver(
        df.sparkSession, sum(g["n"] for g in groups), max_rows=KEY_HASHES_ON_DRIVER_MAX_ROWS)
    dropped = any(not g[_KEEP] and g["n"] for g in groups)
    keys: dict[str, Any] = {}

    def compare_keys() -> None:
        try:
            keys["clash"] = _key_hashes_clash(df, key)
        except Exception as e:  # noqa: BLE001 - re-raised in the caller's thread
            keys["error"] = e

    t0 = time.perf_counter()
    beside = scope_thread(df.sparkSession, compare_keys) if on_driver and counted else None
    if beside is not None:
        beside.start()
    found, clash = _category_values(df, plan if dropped else None, counted,
                                    cap=config.preparation.max_categories,
                                    row_key=None if on_driver else key)
    if on_driver:
        if beside is not None:
            beside.join()
        else:
            compare_keys()
        if "error" in keys:
            raise keys["error"]
        clash = keys["clash"]
    parts = [*(["values"] if counted else []), *(["row keys"] if key else [])]
    if parts:
        timings[" and ".join(parts)] = round(time.perf_counter() - t0, 3)
    return found, clash


def _counted(df: DataFrame, plan: Any, config: Config, *, views: list, all_views: list,
             merged: MergedGroups | None, timings: dict[str, float]) -> tuple:
    """The one aggregation (or a window's merged groups, or the staged flow past
    :data:`ONE_PASS_MAX_GROUPS` groups) and what :func:`prepare` reads from it:
    ``(groups, stats, warnings, base, attributes, (cells, joint_cells), labels)``;
    ``labels`` holds the categorical features' values when the one-aggregation path
    counted them exactly (:func:`_category_values`: the encoding's one-hot entries),
    else it is empty and the encoding collects them itself."""
    import time

    cap = max(config.preparation.max_categories, 1000)
    t0 = time.perf_counter()
    groups = (merged.groups if merged is not None else
              _one_pass_groups(df, plan, config, views, max_groups=ONE_PASS_MAX_GROUPS))
    if groups is None:
        log.info("more than %d groups: the staged preparation runs", ONE_PASS_MAX_GROUPS)
        stats, warnings, base, attributes = _staged(df, plan, config, cap, timings)
        return groups, stats, warnings, base, attributes, (None, None), {}
    labels: dict[str, list[str]] = {}
    clash = False  # a window's partitions checked their row keys
    if merged is None:
        timings["scan"] = round(time.perf_counter() - t0, 3)
        found, clash = _values_and_keys(df, plan, config, groups, timings)
        labels.update(found)

        def distinct(columns: list[str]) -> dict[str, int]:
            # the label's distinct values, when a group holds two raw labels,
            # approximately (a warning's "about"); the categorical features' exactly
            rest = [c for c in columns if c not in labels]
            t0 = time.perf_counter()
            counts = _distinct_counts(df, plan, config, rest)
            if rest:
                timings["distinct values"] = round(time.perf_counter() - t0, 3)
            return {**{c: len(labels[c]) for c in columns if c in labels}, **counts}
    else:
        distinct = merged.distinct(config.columns.label.column)
    stats = _stats_from_groups(distinct, groups, plan, config)
    warnings = _checked(stats, df, plan, config, timings, key_clash=clash)
    attributes, cells = _views_from_groups(groups, all_views, config, cap)
    return (groups, stats, warnings, None, attributes,
            (cells, _joint_cells(groups, all_views, config)), labels)


def _feature_encoder(prepared: PreparedData, df: DataFrame, plan: Any, config: Config,
                     view_cols: list[str], labels: dict[str, list[str]],
                     persist: bool | None) -> _FeatureEncoder:
    """The builder of ``prepared.df``: the encoding, a projection over the prepared rows;
    with the categorical values the preparation counted (``labels``), it reads nothing
    to find them. When more than one enabled audit reads features (or ``persist`` says
    so) the rows are persisted first (``base_df``, raw columns: the run's one cache),
    and every read computes ``_fs_x`` from them; a single reader computes the whole
    encoding in its own jobs (no cache written and read back)."""
    persist = len(config.audits.feature_readers()) > 1 if persist is None else persist
    return _FeatureEncoder(
        prepared.rows if persist else
        lambda: prepared.base_df if prepared.base_df is not None else _base_rows(df, plan, config),
        plan.numeric, plan.categorical, prepared.feature_min, prepared.feature_max,
        view_cols=view_cols, context=prepared.context_columns,
        labels=labels if set(plan.categorical) <= set(labels) else None,
        persist=persist,
        # without ``labels`` (a window's or the staged flow's preparation) the values
        # were counted approximately (5 % error)
        max_labels=2 * config.preparation.max_categories + 100)


def prepare(df: DataFrame, *, config: Config, merged: MergedGroups | None = None,
            persist_features: bool | None = None) -> PreparedData:
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
    persist_features:
        Persist the encoded table when an audit first reads it (``True``: the input is
        costly to compute again, e.g. scored by a registered model); ``None``: only
        when more than one enabled audit reads features.

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
    cols = config.columns
    timings: dict[str, float] = {}
    plan = _plan_columns(df, config)
    views = _sensitive_views(df, config, plan.types)
    all_views = [v for v, _, _ in views] + [v for v, _, _ in _intersection_views(cols)]
    groups, stats, warnings, base, attributes, (cells, joint), labels = _counted(
        df, plan, config, views=views, all_views=all_views, merged=merged, timings=timings)
    view_cols = [c for v in all_views for c in (v.value_col, v.priv_col)]
    fmin = {c: stats.feature_min[c] for c in plan.numeric}
    fmax = {c: stats.feature_max[c] for c in plan.numeric}
    prepared = PreparedData(
        base_df=base,
        build_base=lambda: _persisted_base(df, plan, config),
        cells=cells,
        joint_cells=joint,
        baseline_column=cols.baseline.column if cols.baseline is not None else "",
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
    prepared.build_features = _feature_encoder(prepared, df, plan, config, view_cols, labels,
                                               persist_features)
    log.info(
        "prepared %d of %d rows (%d dropped, %d unlabelled); %d features",
        stats.audited, stats.rows, stats.dropped, stats.unlabelled, len(plan.features),
    )
    return prepared
