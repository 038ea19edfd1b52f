"""Blob and Arrow column helpers of :mod:`fairspark.hfm._spark.elimination`.

The working table keeps every row's points ``[yp, y, x]`` as one float64 blob
(:func:`to_blob`, :func:`from_blob`: no per-row Python object); the rest reads Arrow
columns as numpy arrays (codes with nulls as a code of their own, ranks ``rho``), names
the per-pair bound columns and breaks distance ties by key.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fairspark.hfm._spark.state import Pair

__all__ = ["NULL_CODE", "blobs_of", "bound_col", "closer_or_tied", "codes_of", "column_of",
           "features_of", "from_blob", "key_order", "keys_at_rows", "neighbour_col",
           "numpy_of", "ranks_of", "stack_points", "strings_of", "target_points",
           "to_blob"]


def to_blob(P: np.ndarray) -> pa.Array:
    """Rows of a float matrix as a binary array (one float64 blob per row)."""
    P = np.ascontiguousarray(P, dtype=np.float64)
    n, w = P.shape
    offs = (np.arange(n + 1, dtype=np.int64) * (8 * w)).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offs), pa.py_buffer(P)])


def from_blob(col: pa.Array, width: int, *, copy: bool = True) -> np.ndarray:
    """A binary array of float64 blobs as an ``(n, width)`` matrix (no per-row objects;
    ``copy=False``: a read-only view of the Arrow buffer, valid while it lives)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if n == 0:
        return np.zeros((0, width))
    big = pa.types.is_large_binary(col.type)
    bufs = col.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64 if big else np.int32)
    offs = offs[col.offset:col.offset + n + 1]
    if col.null_count or offs[-1] - offs[0] != 8 * width * n:
        raise ValueError("feature blobs of unequal length")
    data = np.frombuffer(bufs[2], dtype=np.uint8, count=int(offs[-1] - offs[0]),
                         offset=int(offs[0]))
    view = data.view(np.float64).reshape(n, width)
    return np.array(view) if copy else view


def blobs_of(values) -> np.ndarray:
    """Blobs collected on the driver (bytes objects) as one matrix per row."""
    vals = list(values)
    if not vals:
        return np.zeros((0, 0))
    return np.frombuffer(b"".join(bytes(v) for v in vals), dtype=np.float64).reshape(len(vals), -1)


def column_of(batch: pa.RecordBatch, name: str) -> pa.Array:
    return batch.column(batch.schema.get_field_index(name))


def strings_of(col: pa.Array) -> np.ndarray:
    """A string column as an object array of ``str`` (``None`` where null)."""
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)


def numpy_of(batch: pa.RecordBatch, name: str, dtype=np.float64) -> np.ndarray:
    return column_of(batch, name).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def stack_points(y: np.ndarray, yp: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The points matrix ``[yp, y, x]``: the one place its column order is set."""
    return np.column_stack([yp, y, x])


def features_of(batch: pa.RecordBatch, dim_x: int) -> np.ndarray:
    """``[yp, y, x]`` of a batch of the points table (``x`` a list column): the label's
    points ``[y, x]`` are then a view (:func:`target_points`)."""
    x = column_of(batch, "x")
    flat = x.flatten().to_numpy(zero_copy_only=False)
    n = len(x)
    if flat.size != n * dim_x:
        raise ValueError(f"feature vectors must all have length {dim_x}")
    return stack_points(numpy_of(batch, "y"), numpy_of(batch, "yp"), flat.reshape(n, dim_x))


def target_points(P: np.ndarray, tgt: int) -> np.ndarray:
    """Points ``[t, x]`` of ``[yp, y, x]`` rows, ``t`` the label (0) or the prediction (1).

    The label's are a view of the rows (no copy: D's points, which every audit
    computes; 400 MB at 1e6 x 50); the prediction's a copy."""
    if tgt == 0:
        return P[:, 1:]
    out = np.empty((P.shape[0], P.shape[1] - 1))
    out[:, :1] = P[:, :1]
    out[:, 1:] = P[:, 2:]
    return out


def bound_col(p: Pair) -> str:
    return f"u{p[0]}_{p[1]}"


def neighbour_col(p: Pair) -> str:
    return f"nb{p[0]}_{p[1]}"


def keys_at_rows(keys: np.ndarray | pa.Array, idx: np.ndarray,
             rows: np.ndarray | None = None) -> np.ndarray:
    """``keys[rows][idx]`` as an object array of ``str``: ``keys`` a numpy object array
    or an Arrow string array (the driver path's, read only where a search found a
    neighbour: no Python string per row); ``rows`` a boolean mask or ``None``."""
    if isinstance(keys, np.ndarray):
        return (keys if rows is None else keys[rows])[idx]
    pos = idx if rows is None else np.flatnonzero(rows)[idx]
    return np.asarray(keys.take(pa.array(pos, pa.int64())).to_pylist(), dtype=object)


def closer_or_tied(d: np.ndarray, nk: np.ndarray, bd: np.ndarray, bk: np.ndarray) -> np.ndarray:
    """Where a new distance beats the running one: smaller, or equal with a smaller key."""
    better = d < bd
    tie = np.flatnonzero((d == bd) & np.isfinite(d))
    for i in tie:
        if nk[i] is not None and (bk[i] is None or nk[i] < bk[i]):
            better[i] = True
    return better


def key_order(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch sorted by key (nn ties go to the smallest index, hence the smallest key)."""
    return batch.take(pc.sort_indices(column_of(batch, "key")))


NULL_CODE = -(1 << 31)


def codes_of(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """An int code column (nulls as a code of their own that matches nothing else)."""
    return column_of(batch, name).fill_null(NULL_CODE).to_numpy(zero_copy_only=False)


def ranks_of(h: np.ndarray, codes: np.ndarray, counts: dict[int, int]) -> np.ndarray:
    """``rho = h * n(code)`` (0 for codes not counted)."""
    if not counts:
        return np.zeros(len(h))
    ks = np.array(sorted(counts), dtype=np.int64)
    vs = np.array([counts[k] for k in sorted(counts)], dtype=float)
    pos = np.clip(np.searchsorted(ks, codes), 0, len(ks) - 1)
    return h * np.where(ks[pos] == codes, vs[pos], 0.0)
