"""Exact nearest-other-group distances on Spark: a distributed block nested loop."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fairspark._testing import maybe_fail_first_attempt
from fairspark._threads import pin_threads
from fairspark.hfm._kernels import nn_other_group
from fairspark.hfm._spark._points import code_cols, keys_at, points_of, points_schema_check

__all__ = ["block_nn", "exact_all"]

_EXACT_SCHEMA = "tgt int, attr int, key string, d double, nb_key string"


def _nn_frame(tgt: int, attr: int, keys, d: np.ndarray, nb: np.ndarray) -> pd.DataFrame:
    n = len(keys)
    return pd.DataFrame({
        "tgt": np.full(n, tgt, dtype=np.int32), "attr": np.full(n, attr, dtype=np.int32),
        "key": pd.Series(np.asarray(keys, dtype=object), dtype=object),
        "d": np.asarray(d, dtype=np.float64),
        "nb_key": pd.Series(np.asarray(nb, dtype=object), dtype=object),
    })


def _empty_nn_frame() -> pd.DataFrame:
    return _nn_frame(0, 0, [], np.zeros(0), np.zeros(0, dtype=object))


def _make_block_pair_fn(
    *, n_attr: int, dim_x: int, targets: tuple[int, ...], per_query: bool
) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    cols = code_cols(n_attr)

    def block_pair(qdf: pd.DataFrame, rdf: pd.DataFrame) -> pd.DataFrame:
        """Exact nn-other-group of one query block among one reference block."""
        pin_threads()
        maybe_fail_first_attempt("hfm")
        if len(qdf) == 0:
            return _empty_nn_frame()
        if len(rdf) == 0:  # an empty reference block: queries still count once per block
            rdf = qdf.iloc[:0]
        rdf = rdf.iloc[np.argsort(rdf["key"].to_numpy(dtype=str), kind="stable")]
        rkeys = rdf["key"].to_numpy()
        outs = []
        for tgt in targets:
            R = points_of(rdf, tgt, dim_x)
            for a, c in enumerate(cols):
                sub = qdf
                if per_query:
                    sub = qdf[(qdf["q_tgt"] == tgt) & (qdf["q_attr"] == a)]
                    if len(sub) == 0:
                        continue
                Q = points_of(sub, tgt, dim_x)
                d, idx = nn_other_group(Q, sub[c].to_numpy(), R, rdf[c].to_numpy())
                outs.append(_nn_frame(tgt, a, sub["key"].to_numpy(), d, keys_at(rkeys, idx)))
        if not outs:
            return _empty_nn_frame()
        return pd.concat(outs, ignore_index=True)

    return block_pair


def block_nn(
    queries: DataFrame,
    refs: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    n_qblocks: int,
    n_rblocks: int,
    targets: tuple[int, ...] = (0, 1),
) -> DataFrame:
    """Exact nn-other-group of query rows among reference rows: block nested loop.

    Rows are hashed into blocks by key; each (query block, reference block) pair is one
    cogroup task holding two blocks (memory per task ~ two blocks of rows). When the
    queries carry ``q_tgt`` and ``q_attr``, each query row is searched only for that
    (target, attribute); otherwise for every target and attribute.

    Returns
    -------
    DataFrame
        ``tgt, attr, key, d, nb_key`` per query row and reference block (not collected;
        take the minimum per query).
    """
    cols = code_cols(n_attr)
    per_query = "q_tgt" in queries.columns
    qcols = ["key", "y", "yp", "x", *cols, *(["q_tgt", "q_attr"] if per_query else [])]
    rseq = F.explode(F.sequence(F.lit(0), F.lit(n_rblocks - 1)))
    qseq = F.explode(F.sequence(F.lit(0), F.lit(n_qblocks - 1)))
    # fresh column ids on both sides: queries are often derived from refs (a self-join
    # otherwise, which the analyzer may reject or resolve to the wrong side)
    left = (
        queries.select(*[F.col(c).alias(c) for c in qcols])
        .withColumn("qb", F.pmod(F.xxhash64("key"), F.lit(n_qblocks)).cast("int"))
        .withColumn("rb", rseq)
    )
    right = (
        refs.select(*[F.col(c).alias(c) for c in ("key", "y", "yp", "x", *cols)])
        .withColumn("rb", F.pmod(F.xxhash64("key"), F.lit(n_rblocks)).cast("int"))
        .withColumn("qb", qseq)
    )
    block_pair = _make_block_pair_fn(n_attr=n_attr, dim_x=dim_x, targets=targets,
                                     per_query=per_query)
    return (
        left.groupBy("qb", "rb")
        .cogroup(right.groupBy("qb", "rb"))
        .applyInPandas(block_pair, _EXACT_SCHEMA)
    )


def exact_all(
    pts: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    n_blocks: int,
    targets: tuple[int, ...] = (0, 1),
) -> DataFrame:
    """Exact nn-other-group of every row (:func:`block_nn` of the table with itself).

    Returns
    -------
    DataFrame
        ``tgt, attr, key, d, nb_key, mult`` per distinct key (not collected); ``mult`` is
        the number of rows sharing the key.
    """
    points_schema_check(pts, n_attr)
    per_pair = block_nn(pts, pts, n_attr=n_attr, dim_x=dim_x, n_qblocks=n_blocks,
                        n_rblocks=n_blocks, targets=targets)
    return (
        per_pair.groupBy("tgt", "attr", "key")
        .agg(F.min(F.struct("d", "nb_key")).alias("m"), F.count(F.lit(1)).alias("n"))
        .select(
            "tgt", "attr", "key", F.col("m.d").alias("d"), F.col("m.nb_key").alias("nb_key"),
            (F.col("n") / F.lit(n_blocks)).alias("mult"),
        )
    )
