"""The points table every Spark step reads, and small numpy helpers of the UDFs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame

__all__ = ["code_cols", "keys_at", "points_schema_check", "sort_order", "stack"]


def code_cols(n_attr: int) -> list[str]:
    """The group-code columns ``c0 .. c{n_attr-1}``."""
    return [f"c{a}" for a in range(n_attr)]


def points_schema_check(pts: DataFrame, n_attr: int) -> None:
    """Raise ``ValueError`` naming the missing columns of a points DataFrame."""
    need = ["key", "y", "yp", "x", *code_cols(n_attr)]
    missing = [c for c in need if c not in pts.columns]
    if missing:
        raise ValueError(f"points DataFrame lacks columns {missing}; has {pts.columns}")


def stack(col: pd.Series, dim_x: int) -> np.ndarray:
    """An array column of a pandas batch as an ``(n, dim_x)`` float matrix."""
    if len(col) == 0:
        return np.zeros((0, dim_x))
    return np.vstack(col.to_numpy()).astype(np.float64, copy=False).reshape(len(col), dim_x)


def keys_at(keys: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Keys at indices; ``None`` where the index is -1 (no neighbour)."""
    out = np.full(idx.shape[0], None, dtype=object)
    ok = idx >= 0
    out[ok] = np.asarray(keys, dtype=object)[idx[ok]]
    return out


def sort_order(g: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Order by projection ``g``, ties broken by row key."""
    return np.lexsort((np.asarray(keys, dtype=str), g))

