"""The one Spark pass of the group audit: weighted confusion cells per group combination."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fairspark.errors import InvalidValueError
from fairspark.metrics._core import CELLS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["cell_counts", "marginal_counts", "CELL_STATS"]

#: per cell: sum of weights, sum of squared weights, row count
CELL_STATS: tuple[str, ...] = tuple(
    s for c in CELLS for s in (c, f"{c}_w2", f"{c}_n")
)


def _cell_condition(cell: str, label: str, pred: str):
    from pyspark.sql import functions as F

    y, p = F.col(label), F.col(pred)
    return {
        "tp": (y == 1.0) & (p == 1.0),
        "fp": (y == 0.0) & (p == 1.0),
        "tn": (y == 0.0) & (p == 0.0),
        "fn": (y == 1.0) & (p == 0.0),
        "up": y.isNull() & (p == 1.0),
        "un": y.isNull() & (p == 0.0),
    }[cell]


def cell_counts(
    df: DataFrame,
    *,
    group_cols: list[str],
    label_col: str,
    prediction_col: str,
    weight_col: str,
    max_groups: int = 100_000,
) -> pd.DataFrame:
    """Weighted confusion cells for every combination of ``group_cols``, in one pass.

    Parameters
    ----------
    df:
        Prepared rows: ``label_col`` is 1.0/0.0/null, ``prediction_col`` 1.0/0.0.
    group_cols:
        Columns to group by (every sensitive view's value and privileged flag).
    max_groups:
        Fail rather than bring back more combinations than this.

    Returns
    -------
    pandas.DataFrame
        One row per combination: the group columns and, for each cell c in
        ``tp fp tn fn up un``: ``c`` (sum of weights), ``c_w2`` (sum of squared
        weights) and ``c_n`` (row count).

    Examples
    --------
    >>> df = spark.createDataFrame(
    ...     [("f", 1.0, 1.0, 1.0), ("f", 0.0, 1.0, 1.0), ("m", 1.0, 0.0, 2.0),
    ...      ("m", None, 1.0, 1.0)], "sex string, y double, p double, w double")
    >>> cells = cell_counts(df, group_cols=["sex"], label_col="y", prediction_col="p",
    ...                     weight_col="w")
    >>> cells[["sex", "tp", "fp", "fn", "up", "fn_w2", "fn_n"]]
      sex   tp   fp   fn   up  fn_w2  fn_n
    0   f  1.0  1.0  0.0  0.0    0.0   0.0
    1   m  0.0  0.0  2.0  1.0    4.0   1.0
    """
    from pyspark.sql import functions as F

    w = F.col(weight_col)
    aggs = []
    for c in CELLS:
        cond = _cell_condition(c, label_col, prediction_col)
        aggs += [
            F.sum(F.when(cond, w).otherwise(F.lit(0.0))).alias(c),
            F.sum(F.when(cond, w * w).otherwise(F.lit(0.0))).alias(f"{c}_w2"),
            F.sum(F.when(cond, F.lit(1)).otherwise(F.lit(0))).alias(f"{c}_n"),
        ]
    rows = df.groupBy(*group_cols).agg(*aggs).limit(max_groups + 1).collect()
    if len(rows) > max_groups:
        raise InvalidValueError(
            f"the sensitive attributes {group_cols} form more than {max_groups} groups"
        )
    out = pd.DataFrame([r.asDict() for r in rows], columns=[*group_cols, *CELL_STATS])
    for s in CELL_STATS:
        out[s] = out[s].astype(np.float64)
    # stable order so that float sums on the driver do not depend on partitioning
    return out.sort_values(group_cols, kind="mergesort").reset_index(drop=True)


def marginal_counts(cells: pd.DataFrame, mask: np.ndarray | pd.Series) -> dict[str, float]:
    """Sum the cell statistics of the combinations selected by ``mask``.

    Examples
    --------
    >>> import pandas as pd
    >>> cells = pd.DataFrame({"race": ["a", "b", "c"], **{s: [1.0, 2.0, 4.0] for s in CELL_STATS}})
    >>> marginal_counts(cells, cells["race"] != "a")["tp"]
    6.0"""
    sub = cells.loc[np.asarray(mask, dtype=bool), list(CELL_STATS)]
    return {s: float(sub[s].sum()) for s in CELL_STATS}
