"""The weighted confusion cells, aggregated in the preparation's one pass over the input.

:func:`fairspark.prepare.prepare` groups the input rows by (kept, each sensitive
view's value and flag, label, decision) in ONE aggregation. The cells' part of it
(what the group audit reads) is here, in the statistics layer below the preparation:
:func:`cell_sums`, each group's row count, sum of weights and sum of squared weights,
and :func:`cells_from_groups`, which merges the kept groups on the driver into the
weighted confusion cells of every combination of view values
(``PreparedData.cells``, in the layout of :func:`fairspark.metrics.cell_counts`),
what :mod:`fairspark.group.audit` reads without a Spark job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from fairspark.columns import LABEL, PRED

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import Column


__all__ = ["CELL_OF", "cell_sums", "cells_from_groups"]


class _View(Protocol):
    """What the cells read of a sensitive view (``fairspark.prepare._views._View``; the
    preparation imports this module, so it is not imported here)."""

    name: str
    value_col: str
    priv_col: str
    kind: str

#: (label, decision) in the prepared table -> the confusion cell
CELL_OF = {(1.0, 1.0): "tp", (0.0, 1.0): "fp", (0.0, 0.0): "tn", (1.0, 0.0): "fn",
           (None, 1.0): "up", (None, 0.0): "un"}


def cell_sums(weight: Column) -> list[Column]:
    """Per group of the one aggregation: rows ``n``, weights ``w``, squared weights ``w2``.

    ``n`` and ``w`` also give the input's row count and weight total
    (:func:`fairspark.prepare._scan._stats_from_groups`).
    """
    from pyspark.sql import functions as F

    return [F.count(F.lit(1)).alias("n"), F.sum(weight).alias("w"),
            F.sum(weight * weight).alias("w2")]


def cells_from_groups(kept: list[dict[str, Any]], views: Sequence[_View],
                      intersections: Sequence[Sequence[str]], *,
                      by: str | None = None) -> pd.DataFrame:
    """The confusion cells per combination of the views' values, from the kept groups.

    Parameters
    ----------
    kept:
        The one aggregation's groups of kept rows (a window's: every partition's,
        concatenated), each with its views' value and flag, label and decision keys
        and :func:`cell_sums`.
    views:
        Every view in output order, the configured attributes first, then the
        intersections (``kind == "intersection"``).
    intersections:
        ``columns.intersections``: the attribute names of each intersection, in the
        order of the intersection views. They are formed here from their attributes'
        values (joined by ``|``, privileged when all are).
    by:
        A further key of the groups to keep apart (``fairspark.columns.BASE``, the
        baseline decision: the joint cells of two decisions), a float column after
        the views' columns; ``None``: summed over, as without it.

    Returns
    -------
    pandas.DataFrame
        One row per combination of the configured views' values: every view's value
        and flag column (intersections too) and :data:`~fairspark.metrics.CELL_STATS`
        (float64), sorted by the view columns.
    """
    import numpy as np
    import pandas as pd

    from fairspark.metrics._spark import CELL_STATS

    base = [v for v in views if v.kind != "intersection"]
    base_cols = [c for v in base for c in (v.value_col, v.priv_col)]
    key_cols = [*base_cols, *([by] if by else [])]
    combos: dict[tuple[Any, ...], dict[str, float]] = {}
    for r in kept:
        d = combos.setdefault(tuple(r[c] for c in key_cols), dict.fromkeys(CELL_STATS, 0.0))
        cell = CELL_OF[(r[LABEL], r[PRED])]
        # += : a window's groups hold the same key once per partition
        d[cell] += float(r["w"])
        d[f"{cell}_w2"] += float(r["w2"])
        d[f"{cell}_n"] += float(r["n"])
    cells = pd.DataFrame([dict(zip(key_cols, k, strict=True)) | d for k, d in combos.items()],
                         columns=[*key_cols, *CELL_STATS])
    by_attr = {v.name: v for v in base}
    for combo, v in zip(intersections, (v for v in views if v.kind == "intersection"),
                        strict=True):
        parts = [by_attr[a] for a in combo]
        cells[v.value_col] = (cells[[p.value_col for p in parts]].astype(str)
                              .agg("|".join, axis=1) if len(cells) else pd.Series(dtype=str))
        cells[v.priv_col] = (np.logical_and.reduce([cells[p.priv_col].astype(bool).to_numpy()
                                                    for p in parts]) if len(cells) else
                             pd.Series(dtype=bool))
    view_cols = [c for v in views for c in (v.value_col, v.priv_col)] + ([by] if by else [])
    if by:
        cells[by] = cells[by].astype(np.float64)
    for v in views:
        cells[v.priv_col] = cells[v.priv_col].astype(bool)
    cells = cells[[*view_cols, *CELL_STATS]]
    for s in CELL_STATS:
        cells[s] = cells[s].astype(np.float64)
    return cells.sort_values(view_cols, kind="mergesort").reset_index(drop=True)
