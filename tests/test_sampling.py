"""fairspark.sampling against brute-force references written here (pandas, fractions).

The ranks are Spark's own ``xxhash64`` computed in a plain ``select``; which rows a
sample must hold is then decided in pandas, so the tests do not reuse the sampler's
filters, windows or allocation.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pandas as pd
import pytest
from chispa import assert_df_equality

from fairspark.audits.prepared import PreparedData
from fairspark.columns import KEY
from fairspark.sampling import BUCKETS, stratified_sample, stratum_quotas

SEED = 20260601
#: rows per stratum: a null stratum, a single-member one, a large one
SIZES = {("F", "a"): 137, ("F", "b"): 58, ("M", "a"): 201, ("M", None): 23, ("X", "c"): 1}


# --------------------------------------------------------------------------- references


def _largest_remainder(counts: dict, cap: int) -> dict:
    """Largest-remainder allocation in exact arithmetic (fails on ambiguous ties)."""
    total = sum(counts.values())
    if total <= cap:
        return dict(counts)
    share = {k: Fraction(cap * n, total) for k, n in counts.items()}
    quota = {k: math.floor(s) for k, s in share.items()}
    by_rem = sorted(counts, key=lambda k: share[k] - quota[k], reverse=True)
    left = cap - sum(quota.values())
    if 0 < left < len(by_rem):
        cut_in, cut_out = by_rem[left - 1], by_rem[left]
        assert share[cut_in] - quota[cut_in] != share[cut_out] - quota[cut_out], "tie"
    for k in by_rem[:left]:
        quota[k] += 1
    return quota


def _table(spark, sizes: dict = SIZES, *, partitions: int = 3):
    rows = [(f"k{g}-{i}", a, b, float(i))
            for g, ((a, b), n) in enumerate(sizes.items()) for i in range(n)]
    return spark.createDataFrame(rows, "key string, sex string, city string, v double") \
        .repartition(partitions)


def _ranked_pdf(df, seed: int) -> pd.DataFrame:
    """Every row with its bucket, computed by Spark's xxhash64 in a plain select."""
    from pyspark.sql import functions as F

    bucket = F.pmod(F.xxhash64(F.col("key"), F.lit(seed)), F.lit(1 << 30))
    return df.select("key", "sex", "city", bucket.alias("bucket")).toPandas()


def _rows_with_keys(df, keys):
    from pyspark.sql import functions as F

    return df.where(F.col("key").isin(list(keys)))


def _strata(pdf: pd.DataFrame):
    return pdf.groupby(["sex", "city"], dropna=False, sort=False)


def _stratum_key(name: tuple) -> tuple:
    return tuple(None if (isinstance(x, float) and math.isnan(x)) else x for x in name)


# --------------------------------------------------------------------------- quotas


def test_quotas_sum_to_the_cap_and_follow_largest_remainder():
    rng = random.Random(3)
    checked = 0
    for _ in range(400):
        counts = {f"s{i}": rng.randint(1, 500) for i in range(rng.randint(1, 8))}
        cap = rng.randint(0, sum(counts.values()) + 50)
        total = sum(counts.values())
        got = stratum_quotas(counts, cap)
        assert sum(got.values()) == min(cap, total)
        assert set(got) == set(counts)
        if total <= cap:
            assert got == counts
            continue
        share = {k: Fraction(cap * n, total) for k, n in counts.items()}
        for k, q in got.items():
            assert q in (math.floor(share[k]), math.floor(share[k]) + 1), (counts, cap, k)
        # every stratum rounded up has a remainder at least that of every one rounded down
        up = [share[k] - math.floor(share[k]) for k in got if got[k] > math.floor(share[k])]
        down = [share[k] - math.floor(share[k]) for k in got if got[k] == math.floor(share[k])]
        if up and down:
            assert min(up) >= max(down), (counts, cap)
        try:
            ref = _largest_remainder(counts, cap)
        except AssertionError:  # an exact tie: either choice is largest-remainder
            continue
        assert got == ref, (counts, cap)
        checked += 1
    assert checked > 200


def test_quota_ties_go_to_the_smaller_stratum_key():
    # 3 strata of 1 row, cap 1: all remainders are 1/3 -> the smallest key wins
    assert stratum_quotas({"b": 1, "a": 1, "c": 1}, 1) == {"a": 1, "b": 0, "c": 0}
    # 10 rows over 3, 3, 4 with cap 5: shares 1.5, 1.5, 2.0 -> one extra row, to "x"
    assert stratum_quotas({"y": 3, "x": 3, "z": 4}, 5) == {"x": 2, "y": 1, "z": 2}


# --------------------------------------------------------------------------- exact samples


@pytest.mark.parametrize("cap", [1, 40, 419, 1000])
def test_exact_takes_the_lowest_ranked_rows_of_each_stratum(spark, cap):
    df = _table(spark)
    pdf = _ranked_pdf(df, SEED)
    counts = {_stratum_key(k): len(g) for k, g in _strata(pdf)}
    quotas = _largest_remainder(counts, cap)
    keep = []
    for k, g in _strata(pdf):
        q = quotas[_stratum_key(k)]
        keep += list(g.sort_values(["bucket", "key"]).head(q)["key"])
    assert len(keep) == min(cap, len(pdf))

    got = stratified_sample(df, strata=["sex", "city"], key_col="key", cap=cap, seed=SEED)
    assert_df_equality(got.drop("_h"), _rows_with_keys(df, keep), ignore_row_order=True)


def test_exact_with_no_strata_is_a_plain_capped_sample(spark):
    df = _table(spark)
    pdf = _ranked_pdf(df, 5)
    keep = pdf.sort_values(["bucket", "key"]).head(77)["key"]
    got = stratified_sample(df, strata=[], key_col="key", cap=77, seed=5)
    assert_df_equality(got.drop("_h"), _rows_with_keys(df, keep), ignore_row_order=True)


@pytest.mark.parametrize("exact", [True, False])
def test_the_sample_does_not_depend_on_the_partitioning(spark, exact):
    one = _table(spark, partitions=1)
    seven = _table(spark, partitions=7)
    assert one.rdd.getNumPartitions() == 1 and seven.rdd.getNumPartitions() == 7
    a = stratified_sample(one, strata=["sex", "city"], key_col="key", cap=100, seed=11,
                          exact=exact)
    b = stratified_sample(seven, strata=["sex", "city"], key_col="key", cap=100, seed=11,
                          exact=exact)
    assert_df_equality(a, b, ignore_row_order=True)
    assert 0 < a.count() < sum(SIZES.values())


# --------------------------------------------------------------------------- threshold samples


def test_inexact_keeps_the_rows_below_the_quota_share_of_the_hash_range(spark):
    df = _table(spark)
    cap = 150
    pdf = _ranked_pdf(df, SEED)
    counts = {_stratum_key(k): len(g) for k, g in _strata(pdf)}
    quotas = _largest_remainder(counts, cap)
    keep = []
    for k, g in _strata(pdf):
        n, q = counts[_stratum_key(k)], quotas[_stratum_key(k)]
        keep += list(g[g["bucket"] < int(q / n * (1 << 30))]["key"])

    got = stratified_sample(df, strata=["sex", "city"], key_col="key", cap=cap, seed=SEED,
                            exact=False)
    assert_df_equality(got.drop("_h"), _rows_with_keys(df, keep), ignore_row_order=True)
    # the rank column is the bucket as a fraction of the range
    ranks = got.select("key", "_h").toPandas().merge(pdf, on="key", how="inner")
    assert (ranks["_h"] == ranks["bucket"] / BUCKETS).all()


def test_a_table_under_the_cap_is_returned_whole(spark):
    df = _table(spark)
    got = stratified_sample(df, strata=["sex"], key_col="key", cap=10_000, seed=1,
                            exact=False)
    assert_df_equality(got.drop("_h"), df, ignore_row_order=True)


# --------------------------------------------------------------------------- capped_df


def _prepared(df, n: int) -> PreparedData:
    return PreparedData(base_df=df, attributes=[], numeric_features=[], categorical_features=[],
                        feature_min={}, feature_max={}, rows_read=n, rows_audited=n,
                        rows_unlabelled=0)


@pytest.mark.parametrize(("max_rows", "seed"), [(1, 4), (90, 17), (299, 2**62 + 5)])
def test_capped_df_keeps_the_rows_of_the_bucket_rule(spark, max_rows, seed):
    from pyspark.sql import functions as F

    df = _table(spark).withColumnRenamed("key", KEY)
    n = df.count()
    prepared = _prepared(df, n)
    got = prepared.capped_df(max_rows=max_rows, seed=seed, features=False)
    # the rule capped_df always had: bucket < int(max_rows / n * 2^30)
    bucket = F.pmod(F.xxhash64(F.col(KEY), F.lit(seed)), F.lit(1 << 30))
    expected = df.where(bucket < F.lit(int(max_rows / n * (1 << 30))))
    assert_df_equality(got, expected, ignore_row_order=True)


def test_capped_df_without_a_cap_or_over_the_table_is_the_table(spark):
    df = _table(spark).withColumnRenamed("key", KEY)
    prepared = _prepared(df, df.count())
    assert prepared.capped_df(max_rows=None, seed=1, features=False) is df
    assert prepared.capped_df(max_rows=10**6, seed=1, features=False) is df
