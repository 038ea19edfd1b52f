"""The one sampler: hash-ranked, stratified, capped, independent of the partitioning.

Every sample fairspark draws (an audit's ``max_rows`` cap, mdfa's sample, the
correlation audit's sample) comes from :func:`stratified_sample`:

- **allocation**: a stratum of ``n_s`` rows gets ``q_s`` rows, proportional to
  ``n_s`` with the largest-remainder rule, so the quotas sum to exactly
  ``min(cap, n)`` (:func:`stratum_quotas`);
- **ranking**: a row's rank inside its stratum is ``bucket = pmod(xxhash64(key,
  seed), 2^30)`` (ties broken by the key), a function of the row alone, so the same
  rows are drawn whatever the partitioning, retries or executor count;
- **exact**: ``exact=True`` takes exactly the ``q_s`` lowest-ranked rows of each
  stratum (a pre-filter at about 1.2 quotas keeps the window sorts small; the result
  is meant to be collected); ``exact=False`` keeps the rows whose bucket is below
  ``q_s / n_s`` of the range (the same lowest-ranked rows, about ``q_s`` of them, with
  no sort: for caps too large to collect).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = [
    "BUCKETS",
    "derive_seed",
    "hash_bucket",
    "per_stratum",
    "prefilter_fractions",
    "stratified_sample",
    "stratum_counts",
    "stratum_quotas",
]

def derive_seed(seed: int, *parts: object) -> int:
    """A deterministic 63-bit seed from a base seed and any labels (task ids, names).

    The same (seed, parts) give the same value on every machine and Python version,
    so tasks draw the same random numbers whatever the partitioning or retry.
    """
    blob = json.dumps([int(seed), *[str(p) for p in parts]]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") >> 1


#: the ranking hash is reduced to this many buckets
BUCKETS = 1 << 30


def stratum_quotas(counts: Mapping[Hashable, int], cap: int) -> dict[Hashable, int]:
    """Proportional allocation of ``cap`` rows over strata (largest remainder).

    Parameters
    ----------
    counts:
        Rows per stratum.
    cap:
        Rows wanted in all (``>= 0``).

    Returns
    -------
    dict
        Rows to take per stratum; all of ``counts`` when they sum to at most ``cap``,
        else quotas that sum to exactly ``cap`` (ties of the remainder go to the
        smaller stratum key).
    """
    total = sum(counts.values())
    if total <= cap:
        return dict(counts)
    raw = {k: cap * v / total for k, v in counts.items()}
    q = {k: math.floor(v) for k, v in raw.items()}
    left = cap - sum(q.values())
    for k in sorted(raw, key=lambda k: (-(raw[k] - q[k]), k))[:left]:
        q[k] += 1
    return q


def hash_bucket(key_col: str, seed: int, *salts: int) -> Column:
    """The ranking of a row: ``pmod(xxhash64(key, seed, *salts), 2^30)`` as a long column
    (the one hash every seeded per-row draw uses; ``salts`` give independent draws)."""
    from pyspark.sql import functions as F

    return F.pmod(F.xxhash64(F.col(key_col), F.lit(int(seed)), *[F.lit(int(v)) for v in salts]),
                  F.lit(BUCKETS))


def stratum_counts(df: DataFrame, strata: Sequence[str]) -> dict[tuple, int]:
    """Rows per stratum (one aggregation; the result has one row per stratum)."""
    from pyspark.sql import functions as F

    if not strata:
        return {(): int(df.count())}
    rows = df.groupBy(*strata).agg(F.count(F.lit(1)).alias("_n")).collect()
    return {tuple(r[c] for c in strata): int(r["_n"]) for r in rows}


def per_stratum(strata: Sequence[str], values: Mapping[tuple, object], default: object) -> Column:
    """A column that is ``values[k]`` on the rows of stratum ``k`` (a tuple of the
    ``strata`` columns' values), ``default`` elsewhere."""
    from pyspark.sql import functions as F

    expr = F.lit(default)
    for k, v in sorted(values.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        cond = F.lit(True)
        for c, x in zip(strata, k, strict=True):
            cond = cond & (F.col(c).isNull() if x is None else (F.col(c) == F.lit(x)))
        expr = F.when(cond, F.lit(v)).otherwise(expr)
    return expr


def stratified_sample(
    df: DataFrame,
    *,
    strata: Sequence[str],
    key_col: str,
    cap: int,
    seed: int,
    exact: bool = True,
    counts: Mapping[tuple, int] | None = None,
    rank_col: str = "_h",
) -> DataFrame:
    """The sample of ``df`` stratified by ``strata``, at most ``cap`` rows.

    Parameters
    ----------
    df:
        The table; ``strata`` and ``key_col`` are columns of it.
    strata:
        Stratum columns (empty: one stratum, a plain capped sample).
    key_col:
        The row key the ranking hashes (unique per row for an exact count).
    cap:
        Rows wanted in all.
    seed:
        Seed of the ranking hash.
    exact:
        Take exactly the quota of each stratum (``True``; for samples that are
        collected) or keep rows below the quota's share of the hash range (``False``;
        about the quota, no sort).
    counts:
        Rows per stratum (as from :func:`stratum_counts`), when already known.
    rank_col:
        Name of the added rank column: the bucket divided by ``2^30``, in ``[0, 1)``.

    Returns
    -------
    DataFrame
        ``df``'s columns plus ``rank_col``. Order the collected rows by
        ``(*strata, rank_col, key_col)`` for a partition-independent order.
    """
    from pyspark.sql import functions as F

    counts = dict(counts) if counts is not None else stratum_counts(df, strata)
    total = sum(counts.values())
    bucket = hash_bucket(key_col, seed)
    ranked = df.select("*", (bucket / F.lit(float(BUCKETS))).alias(rank_col))
    if total <= cap:
        return ranked
    quotas = stratum_quotas(counts, cap)
    if not exact:
        thr = {k: int(q / counts[k] * BUCKETS) for k, q in quotas.items()}
        keep = per_stratum(strata, thr, 0)
        return ranked.where(bucket < keep)
    return _take_exact(ranked, strata=strata, key_col=key_col, counts=counts, quotas=quotas,
                       rank_col=rank_col)


def prefilter_fractions(counts: Mapping[Hashable, int], quotas: Mapping[Hashable, int], *,
                        factor: float = 1.2) -> dict[Hashable, float]:
    """The rank below which a stratum keeps about ``factor`` times its quota (plus 50
    rows), before the exact lowest-ranked quota is taken; 1.0 for a stratum taken
    whole. A row whose rank falls below its stratum's fraction is kept."""
    return {k: (1.0 if q >= counts[k] else min(1.0, factor * q / counts[k] + 50.0 / counts[k]))
            for k, q in quotas.items()}


def _take_exact(ranked: DataFrame, *, strata: Sequence[str], key_col: str,
                counts: Mapping[tuple, int], quotas: Mapping[tuple, int],
                rank_col: str) -> DataFrame:
    """Exactly ``quotas[s]`` lowest-ranked rows of each stratum ``s``.

    A pre-filter keeps about 1.2 quotas per stratum (4x more each time too few pass),
    so the ranking windows sort about the sample, not whole strata.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    factor = 1.2
    while True:
        frac = prefilter_fractions(counts, quotas, factor=factor)
        kept = ranked.where(F.col(rank_col) < per_stratum(strata, frac, 0.0))
        got = stratum_counts(kept, strata)
        if all(got.get(k, 0) >= q for k, q in quotas.items()) or factor > 1e6:
            break
        factor *= 4
    order = Window.partitionBy(*strata) if strata else Window.partitionBy(F.lit(0))
    win = order.orderBy(rank_col, key_col)
    return (
        kept.select("*", F.row_number().over(win).alias("_fs_rank"))
        .where(F.col("_fs_rank") <= per_stratum(strata, quotas, 0))
        .drop("_fs_rank")
    )
