"""The driver path's fast paths: the key sort in numpy, pass A on threads
with one cluster grouping for both targets; each against a reference computed here."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from scipy.spatial.distance import cdist

from fairspark.hfm._spark._passes import _bounds_batch, _row_slices
from fairspark.hfm._spark._work import _sorted_by_key


def _table(rng, n=3000, dim=4, chunks=3):
    base = rng.random((n // 20, dim))
    x = base[rng.integers(0, len(base), n)] + rng.normal(0.0, 1e-3, (n, dim))
    keys = [f"k{v:07d}" for v in rng.permutation(10 * n)[:n]]
    tbl = pa.table({
        "key": keys, "h": rng.random(n), "y": rng.integers(0, 2, n).astype(float),
        "yp": rng.integers(0, 2, n).astype(float),
        "x": pa.array(list(x), type=pa.list_(pa.float64())),
        "c0": rng.integers(0, 2, n).astype(np.int32),
    })
    step = -(-n // chunks)
    return pa.concat_tables([tbl.slice(s, step) for s in range(0, n, step)]), x


def _sample(batch, P, idx):
    """Pass A's sample of a key-sorted batch (rows ``idx``), its keys and codes."""
    codes = batch.column(4).to_numpy().astype(np.int64)
    keys = np.asarray(batch.column(0).to_pylist(), dtype=object)
    s = {"keys": keys[idx], "P": P[idx], "codes": {"c0": codes[idx]},
         "counts": {0: {0: int((codes == 0).sum()), 1: int((codes == 1).sum())}}}
    return s, keys, codes


def test_key_sort_keeps_rows_whole():
    rng = np.random.default_rng(0)
    tbl, x = _table(rng)
    batch, P = _sorted_by_key(tbl, 4)
    order = np.argsort(np.asarray(tbl["key"].to_pylist()), kind="stable")
    assert batch.schema.names == [c for c in tbl.column_names if c != "x"]
    assert batch.column(0).to_pylist() == [tbl["key"].to_pylist()[i] for i in order]
    # [yp, y, x]: the label's points [y, x] are a view of the last columns
    want = np.column_stack([tbl["yp"].to_numpy()[order], tbl["y"].to_numpy()[order], x[order]])
    assert np.array_equal(P, want)
    assert np.array_equal(batch.column(4).to_numpy(), tbl["c0"].to_numpy()[order])


def test_pass_a_on_threads_equals_one_thread_and_brute_force():
    rng = np.random.default_rng(1)
    tbl, _ = _table(rng)
    batch, P = _sorted_by_key(tbl, 4)
    idx = np.sort(rng.choice(len(P), 200, replace=False))
    s, keys, codes = _sample(batch, P, idx)
    pairs = [(0, 0), (1, 0)]
    one = _bounds_batch(batch, s, n_attr=1, dim_x=4, pairs=pairs, threads=1, points=P)
    two = _bounds_batch(batch, s, n_attr=1, dim_x=4, pairs=pairs, threads=2, points=P)
    assert one.equals(two)
    # one pair on three threads (3,000 rows: ranges of at least 4,096 rows leave one
    # range; the 12,000 rows of the next test make two)
    for p in pairs:
        alone = _bounds_batch(batch, s, n_attr=1, dim_x=4, pairs=[p], threads=1, points=P)
        split = _bounds_batch(batch, s, n_attr=1, dim_x=4, pairs=[p], threads=3, points=P)
        assert alone.equals(split)
    for t in (0, 1):
        T = np.column_stack([P[:, 1 - t], P[:, 2:]])
        d = cdist(T, T[idx])
        d[codes[:, None] == codes[idx][None, :]] = np.inf
        u = one.column(one.schema.get_field_index(f"u{t}_0")).to_numpy()
        np.testing.assert_allclose(u, d.min(axis=1), rtol=0, atol=1e-12)
        nb = one.column(one.schema.get_field_index(f"nb{t}_0")).to_pylist()
        assert nb == list(keys[idx][d.argmin(axis=1)])  # ties: the smaller key


def test_pass_a_row_ranges_equal_the_whole_batch():
    rng = np.random.default_rng(2)
    tbl, _ = _table(rng, n=12_000, chunks=5)
    batch, P = _sorted_by_key(tbl, 4)
    assert len(_row_slices(len(P), 2)) == 2 and len(_row_slices(len(P), 1)) == 1
    assert len(_row_slices(4000, 2)) == 1  # ranges of at least 4,096 rows
    codes = batch.column(4).to_numpy().astype(np.int64)
    idx = np.sort(rng.choice(len(P), 300, replace=False))
    keys = np.asarray(batch.column(0).to_pylist(), dtype=object)
    s = {"keys": keys[idx], "P": P[idx], "codes": {"c0": codes[idx]},
         "counts": {0: {0: int((codes == 0).sum()), 1: int((codes == 1).sum())}}}
    # one range per thread, with one pair or with as many pairs as threads
    for pairs in ([(1, 0)], [(0, 0), (1, 0)]):
        keep: dict = {}
        split = _bounds_batch(batch, s, n_attr=1, dim_x=4, pairs=pairs, threads=2, points=P,
                              keep=keep)
        assert len(keep["parts"]) == 2 and keep["parts"][0].stop == keep["parts"][1].start
        whole = _bounds_batch(batch, s, n_attr=1, dim_x=4, pairs=pairs, threads=1, points=P)
        assert split.equals(whole)
    T = np.column_stack([P[:, 0], P[:, 2:]])
    d = cdist(T, T[idx])
    d[codes[:, None] == codes[idx][None, :]] = np.inf
    np.testing.assert_allclose(split.column(split.schema.get_field_index("u1_0")).to_numpy(),
                               d.min(axis=1), rtol=0, atol=1e-12)


def test_points_through_local_files_equal_the_collect(spark):
    """On a local master the points come through Arrow files (past the JVM): the same
    rows and values as Spark's own ``toArrow``, whatever the partitions (one of them
    empty), and the temporary folder is gone afterwards."""
    import glob
    import tempfile

    from fairspark.hfm._spark._driver import _arrow_via_files, driver_budget, local_master

    rng = np.random.default_rng(7)
    tbl, _ = _table(rng, n=2500)
    df = spark.createDataFrame(tbl.to_pandas()).repartition(5, "c0")  # 3 of 5 empty
    before = set(glob.glob(f"{tempfile.gettempdir()}/fairspark-points-*"))
    got = _arrow_via_files(df).sort_by("key")
    want = df.toArrow().sort_by("key")
    assert got.num_rows == want.num_rows == 2500
    assert got.column_names == want.column_names
    for c in want.column_names:
        assert got[c].to_pylist() == want[c].to_pylist(), c
    assert set(glob.glob(f"{tempfile.gettempdir()}/fairspark-points-*")) == before
    assert local_master(spark)
    # the files path is bounded by memory and the temporary folder, not by the JVM
    _, parts = driver_budget(spark, None, via_files=True)
    assert set(parts) == {"temp_free / 2", "available_memory / 8"}
    _, parts = driver_budget(spark, None)
    assert {"jvm_heap / 4", "max_result_size / 2"} <= set(parts)


def test_fixed_point_mean_is_exact_and_order_free():
    """The averages' fixed-point sum: the same bits in any row order, equal to the
    exactly rounded mean (``fractions``) to 2**-60 of each value, and Spark's
    aggregation gives the same bits as numpy's."""
    from fractions import Fraction

    from fairspark.hfm._kernels import fixed_mean

    rng = np.random.default_rng(3)
    v = rng.random(10_001) * rng.choice([1e-9, 1.0, 7.0], 10_001)
    w = rng.integers(1, 4, 10_001)
    m = fixed_mean(v, w)
    for _ in range(3):
        perm = rng.permutation(len(v))
        assert fixed_mean(v[perm], w[perm]).hex() == m.hex()
    exact = sum(Fraction(float(a)) * int(b) for a, b in zip(v, w, strict=True)) / int(w.sum())
    # one rounding of the mean, and each value cut to a multiple of 2**-60 (weights <= 3)
    assert abs(Fraction(m) - exact) <= Fraction(float(np.spacing(m))) / 2 + Fraction(3, 1 << 60)
    assert fixed_mean(np.array([1.0, np.inf]), np.array([1, 1])) == np.inf


def test_folded_parts_give_the_whole_summary_in_any_split():
    """The summary kernels the Spark tasks fold (``value_part``, ``fold_part``) give,
    from any split of the rows in any order, the bits of the whole rows' mean, their
    maximum, and the witness a brute-force sort picks (ties at the maximum, missing
    neighbour keys first); a value at the fixed-point limit falls back to the plain
    mean, an infinite one gives itself."""
    from fairspark.hfm._kernels import (
        FIX_LIMIT,
        fixed_mean,
        fold_part,
        part_mean,
        value_part,
        witness,
    )

    rng = np.random.default_rng(11)
    n = 3000
    v = np.round(rng.random(n) * 4.0, 2)  # many ties, also at the maximum
    w = rng.integers(1, 4, n)
    keys = [f"k{i:04d}" for i in rng.permutation(n)]
    nbs = [None if i % 3 == 0 else f"n{i % 7}" for i in range(n)]
    top = v.max()
    at = [i for i in range(n) if v[i] == top]
    # brute force: sort the rows at the maximum by (key present, key, nb present, nb)
    want_w = sorted(((keys[i], nbs[i]) for i in at),
                    key=lambda t: (t[0] is not None, t[0] or "", t[1] is not None, t[1] or ""))[0]
    for splits in (1, 2, 7):
        order = rng.permutation(n)
        acc: dict = {}
        for idx in np.array_split(order, splits):
            part = value_part(v[idx], w[idx])
            here = idx[v[idx] == part["D"]]
            part["w"] = witness([keys[i] for i in here], [nbs[i] for i in here])
            fold_part(acc, part)
        assert acc["D"] == top
        assert acc["ws"] == int(w.sum())
        assert part_mean(acc).hex() == fixed_mean(v, w).hex()
        assert tuple(acc["w"]) == want_w
    big = np.array([1.0, FIX_LIMIT * 2, 3.0])
    assert part_mean(value_part(big, np.ones(3, np.int64))) == big.mean()
    assert part_mean(value_part(np.array([1.0, np.inf]), np.ones(2, np.int64))) == np.inf


def test_fixed_point_sums_do_not_wrap_past_64_bits():
    """Values near the fixed-point limit (``2**31``; each one's integer part about
    ``2**61``) and heavy weights: the integer sums must be the exact ones (numpy's
    int64 sum wraps silently), so the mean is the exactly rounded one
    (``fractions``), split or whole."""
    from fractions import Fraction

    from fairspark.hfm._kernels import (
        FIX_BITS,
        FIX_LIMIT,
        fixed_parts,
        fold_part,
        part_mean,
        value_part,
    )

    rng = np.random.default_rng(5)
    v = FIX_LIMIT * (0.5 + 0.49 * rng.random(40))
    w = rng.integers(1, 1000, 40)
    hi, lo = fixed_parts(v)
    # the sums by Python integers, row by row
    want_hs = sum(int(h) * int(k) for h, k in zip(hi, w, strict=True))
    want_ls = sum(int(x) * int(k) for x, k in zip(lo, w, strict=True))
    assert want_hs >= 1 << 63  # int64 would wrap
    part = value_part(v, w)
    assert (part["hs"], part["ls"], part["ws"]) == (want_hs, want_ls, int(w.sum()))
    exact = Fraction(want_hs * (1 << FIX_BITS) + want_ls, (1 << 2 * FIX_BITS) * int(w.sum()))
    assert part_mean(part) == float(exact)
    acc: dict = {}
    for idx in np.array_split(np.arange(40), 3):
        fold_part(acc, value_part(v[idx], w[idx]))
    assert part_mean(acc).hex() == part_mean(part).hex()
    # against the plain weighted mean: the same to a few ulps
    assert part_mean(part) == pytest.approx(float((v * w).sum() / w.sum()), rel=1e-12)


def test_spark_summary_mean_has_the_numpy_bits(spark):
    """``summarise_pointwise`` (Spark, any partitioning) and the driver path's numpy
    summary give bit-identical means."""
    import pandas as pd

    from fairspark.hfm._kernels import fixed_mean
    from fairspark.hfm._spark.approx import summarise_pointwise

    rng = np.random.default_rng(4)
    n = 5000
    pdf = pd.DataFrame({"tgt": rng.integers(0, 2, n), "attr": 0,
                        "key": [f"k{i:05d}" for i in range(n)],
                        "u": rng.random(n) * 3.0, "nb_key": "z", "mult": rng.integers(1, 3, n)})
    for parts in (1, 4, 9):
        got = summarise_pointwise(spark.createDataFrame(pdf).repartition(parts), value_col="u")
        for r in got.itertuples():
            sub = pdf[pdf.tgt == r.tgt]
            assert r.D_avg.hex() == fixed_mean(sub.u.to_numpy(), sub.mult.to_numpy()).hex()
            assert r.D == sub.u.max()


def test_summary_and_histogram_in_one_aggregation_equal_the_two(spark):
    """``summarise_binned`` (one groupBy by bin) gives ``summarise_pointwise``'s summary
    to the bit, witness included with ties at the maximum, and the histogram numpy
    computes from the rows, at any partitioning."""
    import pandas as pd

    from fairspark.hfm._spark.approx import summarise_binned, summarise_pointwise

    rng = np.random.default_rng(5)
    n = 4000
    u = np.round(rng.random(n) * 2.0, 2)  # coarse values: ties, several at the maximum
    pdf = pd.DataFrame({"tgt": rng.integers(0, 2, n), "attr": rng.integers(0, 2, n),
                        "key": [f"k{v:05d}" for v in rng.permutation(n)], "u": u,
                        "nb_key": [f"n{v % 7}" for v in range(n)],
                        "mult": rng.integers(1, 3, n)})
    pdf.loc[pdf.index[:3], "nb_key"] = None
    bins = 10
    tops = {a: float(pdf.u[pdf.attr == a].max()) for a in (0, 1)}
    for parts in (1, 5):
        df = spark.createDataFrame(pdf).repartition(parts)
        want = summarise_pointwise(df, value_col="u")
        got, counts = summarise_binned(df, value_col="u", tops=tops, bins=bins)
        for col in ("D", "D_avg"):
            assert [v.hex() for v in got[col]] == [v.hex() for v in want[col]]
        assert got[["tgt", "attr", "key", "nb_key"]].equals(want[["tgt", "attr", "key", "nb_key"]])
        for (t, a), sub in pdf.groupby(["tgt", "attr"]):
            # the witness by hand: the largest value, then the smallest key
            top_rows = sub[sub.u == sub.u.max()].sort_values("key")
            row = got[(got.tgt == t) & (got.attr == a)].iloc[0]
            assert row.key == top_rows.key.iloc[0]
            b = np.minimum(np.floor(sub.u.to_numpy() / tops[a] * bins), bins - 1).astype(int)
            hist = np.bincount(b, weights=sub["mult"].to_numpy(), minlength=bins)
            c = counts[(counts.tgt == t) & (counts.attr == a)]
            mine = np.zeros(bins)
            mine[c["bin"].to_numpy(int)] = c["n"].to_numpy(float)
            np.testing.assert_array_equal(mine, hist)


def test_prefaulted_matrix_is_a_writable_float_matrix_at_any_size():
    """Large (mapped at once) and small (numpy's allocator) alike: float64, the shape
    asked, writable, and the label/prediction points built from it equal numpy's."""
    from fairspark.hfm._spark._blobs import _PREFAULT_BYTES, _tpoints, prefaulted_empty

    for n in (10, _PREFAULT_BYTES // (8 * 6) + 1000):
        a = prefaulted_empty((n, 6))
        assert a.shape == (n, 6) and a.dtype == np.float64 and a.flags.writeable
        a[:] = np.arange(n * 6, dtype=float).reshape(n, 6)
        want = np.concatenate([a[:, :1], a[:, 2:]], axis=1)
        np.testing.assert_array_equal(_tpoints(a, 1), want)
        np.testing.assert_array_equal(_tpoints(a, 0), a[:, 1:])


def test_matrices_made_on_a_thread_serve_the_key_sort_and_pass_a(monkeypatch):
    """:class:`Prealloc`'s matrices (pages written off the GIL, mapped when large) are
    float64, writable and of the shapes asked; the key sort and pass A written into
    them give the bits of those that make their own (the threshold lowered so that
    this small table takes the mapped path)."""
    from fairspark.hfm._spark import _blobs
    from fairspark.hfm._spark._blobs import Prealloc, touched_empty

    for n in (10, _blobs._PREFAULT_BYTES // (8 * 6) + 1000):
        a = touched_empty((n, 6))
        assert a.shape == (n, 6) and a.dtype == np.float64 and a.flags.writeable
        a[:] = 1.5
        assert float(a.sum()) == 1.5 * n * 6
    monkeypatch.setattr(_blobs, "_PREFAULT_BYTES", 1024)
    rng = np.random.default_rng(5)
    tbl, _ = _table(rng)
    ready = Prealloc([(tbl.num_rows, 6), (tbl.num_rows, 5)]).get()
    assert [m.shape for m in ready] == [(tbl.num_rows, 6), (tbl.num_rows, 5)]
    batch, P = _sorted_by_key(tbl, 4)
    batch2, P2 = _sorted_by_key(tbl, 4, threads=2, out=ready[0])
    assert P2 is ready[0] and np.array_equal(P, P2) and batch.equals(batch2)
    idx = np.sort(rng.choice(len(P), 150, replace=False))
    s, _, _ = _sample(batch, P, idx)
    pairs = [(0, 0), (1, 0)]
    own = _bounds_batch(batch, s, n_attr=1, dim_x=4, pairs=pairs, threads=2, points=P)
    kept: dict = {"tp_out": ready[1]}
    given = _bounds_batch(batch, s, n_attr=1, dim_x=4, pairs=pairs, threads=2, points=P2,
                          keep=kept)
    assert own.equals(given)
    # the prediction's points of every row range are views of the matrix given
    for r, tp in zip(kept["parts"], kept["tp"], strict=True):
        assert np.shares_memory(tp[1], ready[1])
        np.testing.assert_array_equal(tp[1], np.column_stack([P[r, :1], P[r, 2:]]))
