"""The correlation audit's stratified capped sample, drawn by Spark (see ``_spark.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fairspark import columns
from fairspark.correlation._oracle import OracleData

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["OracleSample", "draw_stratified_sample"]


@dataclass
class OracleSample:
    """The capped stratified sample every training task reads.

    Attributes
    ----------
    x, y, w : features (n, d), labels (1.0 = favourable), weights.
    priv : (n, a) privileged flags, one column per attribute.
    attributes : attribute names, in column order of ``priv``.
    population_rows : labelled rows in the table (before the cap).
    population_cells : attribute -> labelled rows per group x label cell (``CELLS`` order).
    """

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    priv: np.ndarray
    attributes: list[str]
    population_rows: int
    population_cells: dict[str, np.ndarray] = field(default_factory=dict)

    def for_attribute(self, i: int) -> OracleData:
        """The oracle's view of attribute ``i`` (binary privileged / unprivileged)."""
        return OracleData(x=self.x, y=self.y, priv=self.priv[:, i], w=self.w)


def _labelled_df(df: DataFrame, *, priv_cols: Sequence[str], cols: columns.TableColumns
                 ) -> DataFrame:
    """The labelled rows as ``_y, _x, _w, _p0.._p<a-1>, _k`` (a null flag is False)."""
    from pyspark.sql import functions as F

    from fairspark.errors import MissingColumnError

    label_col, features_col, weight_col, key_col = cols.label, cols.features, cols.weight, cols.key
    wanted = [label_col, features_col, *priv_cols, weight_col, key_col]
    missing = [c for c in wanted if c and c not in df.columns]
    if missing:
        raise MissingColumnError(missing[0], "correlation input", df.columns)
    w_expr = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    flags = [
        F.coalesce(F.col(c).cast("boolean"), F.lit(False)).alias(f"_p{i}")
        for i, c in enumerate(priv_cols)
    ]
    return df.where(F.col(label_col).isNotNull()).select(
        F.col(label_col).cast("double").alias("_y"),
        F.col(features_col).alias("_x"),
        w_expr.alias("_w"),
        *flags,
        F.col(key_col).cast("string").alias("_k"),
    )


def _population_cells(
    counts: Mapping[tuple, int], attributes: Sequence[str]
) -> dict[str, np.ndarray]:
    """Rows per group x label cell of each attribute, from the (label, *flags) counts."""
    cells = {a: np.zeros(4, dtype=np.int64) for a in attributes}
    for (y, *flags), n in counts.items():
        for a, flag in zip(attributes, flags, strict=True):
            cells[a][2 * int(bool(flag)) + int(y > 0.5)] += n
    return cells


def draw_stratified_sample(
    df: DataFrame,
    *,
    priv_cols: Sequence[str],
    attributes: Sequence[str],
    max_rows: int,
    seed: int,
    cols: columns.TableColumns = columns.PREPARED,
) -> OracleSample:
    """Draw the labelled rows' stratified sample with Spark and bring it to the driver.

    Parameters
    ----------
    df : Spark DataFrame with the prepared-table columns.
    priv_cols, attributes : privileged-flag columns and the attribute names.
    max_rows : cap on the sample's rows.
    seed : seed of the ranking hash.
    cols : the label, features, weight and key columns (the prepared table's by
        default; ``weight=None`` means weight 1).

    Returns
    -------
    OracleSample
        :func:`fairspark.sampling.stratified_sample` of the labelled rows with strata
        label x privileged flags and the row key as the hash key: each stratum's
        largest-remainder quota of ``max_rows``, its rows of lowest
        ``pmod(xxhash64(key, seed), 2^30)`` (ties by key). Rows are ordered by
        (label, flags, rank, key), independent of the table's partitioning.
    """
    from fairspark.sampling import stratified_sample, stratum_counts

    labelled_df = _labelled_df(df, priv_cols=priv_cols, cols=cols)
    strata = ["_y", *[f"_p{i}" for i in range(len(priv_cols))]]
    counts = stratum_counts(labelled_df, strata)
    if sum(counts.values()) == 0:
        return _to_oracle_sample(pd.DataFrame(columns=strata), attributes, counts)
    sample_pdf = (
        stratified_sample(
            labelled_df, strata=strata, key_col="_k", cap=max_rows, seed=seed, counts=counts
        )
        .select(*strata, "_h", "_k", "_x", "_w")
        .toPandas()
        .sort_values([*strata, "_h", "_k"], kind="mergesort")
        .reset_index(drop=True)
    )
    return _to_oracle_sample(sample_pdf, attributes, counts)


def _to_oracle_sample(
    sample_pdf: pd.DataFrame, attributes: Sequence[str], counts: Mapping[tuple, int]
) -> OracleSample:
    """The collected sample (``_y, _p<i>.., _x, _w``) as numpy arrays."""
    n = len(sample_pdf)
    pcols = [f"_p{i}" for i in range(len(attributes))]
    x = (
        np.vstack([np.asarray(v, dtype=np.float64) for v in sample_pdf["_x"]])
        if n
        else np.empty((0, 0))
    )
    return OracleSample(
        x=x,
        y=sample_pdf["_y"].to_numpy(np.float64),
        w=sample_pdf["_w"].to_numpy(np.float64) if n else np.empty(0),
        priv=sample_pdf[pcols].to_numpy(dtype=bool) if n else np.empty((0, len(pcols)), bool),
        attributes=list(attributes),
        population_rows=sum(counts.values()),
        population_cells=_population_cells(counts, attributes) if n else {},
    )


