"""The prepared rows and their encoded features, built on first use.

:func:`_base_rows` is the prepared table's plan (role, view, feature and context
columns); :func:`_persisted_base` persists it as ``PreparedData.base_df``;
:class:`_FeatureEncoder` builds ``PreparedData.df`` (min-max scaling and one-hot
encoding into ``_fs_x``) with column expressions only: no Spark ML stage, no RDD, no
Python UDF, so it runs on a classic and on a Spark Connect session alike. A run whose
audits never read rows builds neither.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fairspark.columns import BASE, KEY, LABEL, PRED, WEIGHT, X, input_col
from fairspark.errors import InvalidValueError
from fairspark.prepare._columns import _any_null
from fairspark.prepare._views import _with_views

if TYPE_CHECKING:  # pragma: no cover
    from pyspark import StorageLevel
    from pyspark.sql import Column, DataFrame

    from fairspark.config_model import Config
    from fairspark.prepare._columns import _ColumnPlan

log = logging.getLogger("fairspark")


#: the prepared role columns, in the order of the prepared table
_ROLE_COLUMNS = (KEY, LABEL, PRED, WEIGHT)


def _base_rows(df: DataFrame, plan: _ColumnPlan, config: Config) -> DataFrame:
    """The prepared rows without features (role, view and raw feature columns): a plan,
    nothing persisted or run."""
    kept = df.where(~_any_null(plan))
    with_views, views = _with_views(df, kept, config, plan.types)
    view_cols = [c for v in views for c in (v.value_col, v.priv_col)]
    roles = [*_ROLE_COLUMNS, *([BASE] if config.columns.baseline is not None else [])]
    return with_views.select(*roles, *view_cols,
                             *[input_col(c) for c in (*plan.features,
                                                      *_context_columns(plan, config))])


def _persisted_base(df: DataFrame, plan: _ColumnPlan, config: Config) -> DataFrame:
    """:func:`_base_rows`, persisted at :func:`cache_level` (``PreparedData.base_df``)."""
    return _base_rows(df, plan, config).persist(cache_level())


def cache_level() -> StorageLevel:
    """The storage level of the prepared tables fairspark persists: ``DISK_ONLY``.

    Spark writes a ``DISK_ONLY`` block as it computes it and reads it back as a stream
    (a file, in the OS page cache while memory allows), so a cached table never needs
    the JVM heap, whatever its size and its partitions' sizes: with
    ``MEMORY_AND_DISK`` (serialized, pyspark's) a 1 GB driver in local mode died of
    ``OutOfMemoryError`` caching the encoded 904k x 48 table (issue 57), and reading a
    block back from disk first copies the whole block onto the heap (a 210 MB
    partition killed the same driver before the encoded table was cut into 64 MB
    partitions, a shuffle this level makes unnecessary).
    """
    from pyspark import StorageLevel

    return StorageLevel.DISK_ONLY


def _context_columns(plan: _ColumnPlan, config: Config) -> list[str]:
    """The source columns of ``privileged_expr`` attributes that are not features.

    A model fitted on them (HFM's discriminative risk) needs them as they are; so does
    a registered model that an audit calls (HFM's DR), with every input column it reads
    (:meth:`~fairspark._params.AuditParams.context_columns`).
    """
    wanted = [*(s.column for s in config.columns.sensitive if s.privileged_expr is not None),
              *(c for p in config.audits.enabled().values() for c in p.context_columns())]
    return list(dict.fromkeys(c for c in wanted if c in plan.types and c not in plan.features))


# --------------------------------------------------------------------------- features
def _scaled(column: str, lo: float, hi: float) -> Column:
    """Min-max scaling of a numeric feature: ``(x - lo) / (hi - lo)``, 0 when constant.

    Skipped (``x`` itself) when the column's range is already [0, 1]: ``(x - 0) / 1``
    is ``x``, bit for bit. ``+ 0.0`` makes a negative zero positive and changes nothing
    else, as the vector assembly of earlier versions did (it stored no zeros).
    """
    from pyspark.sql import functions as F

    x = input_col(column).cast("double")
    if not hi > lo:
        return F.lit(0.0)
    if lo == 0.0 and hi == 1.0:
        return x + F.lit(0.0)
    return (x - F.lit(lo)) / F.lit(hi - lo) + F.lit(0.0)


def _category_labels(base: DataFrame, categorical: list[str], *,
                     max_labels: int) -> dict[str, list[str]]:
    """Each categorical feature's distinct values (as strings, nulls left out), sorted.

    The preparation's bounded values pass (:func:`fairspark.prepare._scan.
    _category_values`) over the prepared rows, for a window's or the staged flow's
    preparation, which counted the values approximately or per partition: at most
    ``max_labels + 1`` values per column reach the driver; more is an error.
    """
    from fairspark.prepare._scan import _category_values

    labels, _ = _category_values(base, None, categorical, cap=max_labels)
    for c, values in labels.items():
        if len(values) > max_labels:
            raise InvalidValueError(
                f"categorical feature {c!r} has more than {max_labels} distinct values; "
                "exclude it or raise 'preparation.max_categories'")
    return labels


@dataclass
class _FeatureEncoder:
    """Builds ``PreparedData.df``: min-max scaled numeric features (constant -> 0) and
    one-hot categorical ones (values in sorted order), as the array column ``_fs_x``.

    Column expressions over the prepared rows (one ``array`` of scaled columns and
    ``value = v`` indicators); the minima and maxima came from the preparation's
    aggregation, the categorical values from its bounded pass (else the same pass over
    the prepared rows finds them here). With ``persist`` the prepared rows (``base``,
    persisted at :func:`cache_level` by their builder) are counted here (one read of
    the input, written to disk) and every read of the encoded table computes ``_fs_x``
    from them; without, the encoding is a projection that each of its reader's jobs
    computes as it scans the input (no write, no read back): the cache pays only when
    several audits read the features.
    """

    #: the prepared rows without features: ``PreparedData.rows`` (built and persisted
    #: on first use) with :attr:`persist`, else ``base_df`` when an audit built it, or
    #: its plan
    base: Callable[[], DataFrame]
    numeric: list[str]
    categorical: list[str]
    feature_min: dict[str, float]
    feature_max: dict[str, float]
    #: the sensitive-view columns carried into the encoded table, in order
    view_cols: list[str]
    #: raw columns carried unchanged (``PreparedData.context_columns``)
    context: list[str] = field(default_factory=list)
    #: most distinct values a categorical feature may have (``preparation.max_categories``,
    #: with room for the approximate count's error)
    max_labels: int = 100_000
    #: each categorical feature's values, sorted, when the preparation counted them
    #: exactly (:func:`fairspark.prepare._scan._category_values`); ``None``: the same
    #: bounded pass over the prepared rows finds them here (a window's or the staged
    #: flow's preparation)
    labels: dict[str, list[str]] | None = None
    #: the rows are persisted: materialize them here (several audits read features)
    persist: bool = True

    def __call__(self) -> tuple[DataFrame, list[str]]:
        """The encoded table (a projection over the rows, persisted with :attr:`persist`)
        and the names of the entries of ``_fs_x``."""
        from pyspark.sql import functions as F

        base = self.base()
        labels = (self.labels if self.labels is not None else
                  _category_labels(base, self.categorical, max_labels=self.max_labels))
        names = list(self.numeric)
        entries = [_scaled(c, self.feature_min[c], self.feature_max[c]) for c in self.numeric]
        for c in self.categorical:
            as_text = input_col(c).cast("string")
            names += [f"{c}={v}" for v in labels[c]]
            entries += [(as_text == F.lit(v)).cast("double") for v in labels[c]]
        x = F.array(*entries) if entries else F.array().cast("array<double>")
        # the baseline decision (columns.baseline) travels with the rows: HFM's baseline
        # D_f reads it beside the features, mdfa's sample beside the audited decision
        roles = [*_ROLE_COLUMNS, *([BASE] if BASE in base.columns else [])]
        encoded = base.select(
            *roles, x.alias(X), *self.view_cols,
            *[input_col(c) for c in (*self.numeric, *self.categorical, *self.context)],
        )
        if self.persist:
            # the persisted rows (``base``), materialized here, where the runner's
            # "encode features" stage times it, and not by the first audit that reads
            # them (that audit's stage and time budget used to pay: 9 s of HFM's 29 s on
            # 904k rows). The encoding stays a projection over them: persisting the
            # encoded table (raw columns and the array) cost 14.6 s on 1M x 50 against
            # 6.7 s for the raw rows, and reading _fs_x back from it was no faster than
            # computing it from them (0.75 s against 0.76 s a pass; docs/benchmarks.md)
            base.count()
        # one reader: the encoding runs inside its jobs (HFM's driver path reads the
        # vectors once; writing them to disk first cost more than computing them in
        # that read: 904k rows, d = 56, docs/benchmarks.md, issue 56)
        log.info("features encoded: %d columns -> %d dimensions (%s)",
                 len(self.numeric) + len(self.categorical), len(names),
                 "rows persisted, encoded on each read" if self.persist
                 else "computed by the one audit that reads them")
        return encoded, names
