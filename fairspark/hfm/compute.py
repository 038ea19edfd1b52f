"""HFM distances of a points DataFrame by one of its three methods (Bian and Luo, 2024).

:func:`hfm_distances` is the library entry point; it is independent of
:class:`~fairspark.audits.prepared.PreparedData` (the audit adapts the prepared table with
:func:`points_from_table`).
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fairspark.hfm._kernels import (
    bin_counts,
    hfm_df,
    part_mean,
    sample_projections,
    value_part,
    witness,
)
from fairspark.hfm._spark import (
    approx_scan,
    certify_exact,
    pointwise_rows,
    summarise_approx,
    summarise_binned,
    summarise_pointwise,
)
from fairspark.hfm._spark.elimination import Bounds, CertifyOptions
from fairspark.hfm.results import TARGETS, CertifiedResult, DistanceResult
from fairspark.sampling import derive_seed

__all__ = ["CertifyOptions", "DistanceOptions", "DistanceResult", "hfm_distances",
           "make_projections", "points_from_table"]

Pair = tuple[int, int]
Progress = Callable[[dict[Pair, DistanceResult]], None]

METHODS = ("certified", "approx", "pointwise")


@dataclass(frozen=True)
class DistanceOptions:
    """Which distances :func:`hfm_distances` computes, how, and what comes beside them.

    Attributes
    ----------
    method:
        ``certified`` (the exact D), ``approx`` or ``pointwise`` (Bian and Luo, 2024).
    m2:
        Window per side (approx, pointwise; certified with ``paper_value``).
    targets:
        Which distances: 0 = D (label), 1 = D_f (prediction).
    histogram_bins:
        When > 0 (and the method gives per-row values: pointwise, certified),
        ``extra["hist"]`` holds ``(edges, counts)`` of the per-row distances, with the
        same edges for D and D_f of an attribute.
    paper_value:
        ``certified``: also compute the paper's ApproxDist (and the pointwise bound)
        beside the exact value (needs the projections).
    num_partitions:
        Range partitions per projection; default ``ceil(n_rows / rows_per_partition)``.
        The result does not depend on it.
    rows_per_partition:
        See ``num_partitions``.
    """

    method: str
    m2: int
    targets: tuple[int, ...] = (0, 1)
    histogram_bins: int = 0
    paper_value: bool = False
    num_partitions: int | None = None
    rows_per_partition: int = 50_000


def points_from_table(
    df: DataFrame,
    *,
    key_col: str,
    label_col: str,
    pred_col: str,
    x_col: str,
    code_exprs: list[Column],
) -> DataFrame:
    """Select the points DataFrame (``key, y, yp, x, c0..``) from a prepared-like table.

    Rows without a label are dropped (D and D_f are computed on the same labelled rows).

    Parameters
    ----------
    df : DataFrame
        Table with the key, label, prediction and feature-array columns.
    key_col, label_col, pred_col, x_col : str
        Column names.
    code_exprs : list of Column
        One integer group-code expression per audited attribute/view.

    Returns
    -------
    DataFrame
    """
    return df.where(F.col(label_col).isNotNull()).select(
        F.col(key_col).cast("string").alias("key"),
        F.col(label_col).cast("double").alias("y"),
        F.col(pred_col).cast("double").alias("yp"),
        F.col(x_col).cast("array<double>").alias("x"),
        *[e.cast("int").alias(f"c{i}") for i, e in enumerate(code_exprs)],
    )


def make_projections(*, dim: int, m1: int, sampler: str, seed: int) -> dict[int, np.ndarray]:
    """Projection vectors per target, each from its own derived seed.

    The same vectors serve every attribute (the sort does not depend on the groups),
    so one scan per projection serves all attributes.
    """
    return {
        tgt: sample_projections(
            dim=dim, m1=m1, sampler=sampler, seed=derive_seed(seed, "hfm", "proj", TARGETS[tgt])
        )
        for tgt in (0, 1)
    }


def hfm_distances(
    pts: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    n_rows: int,
    options: DistanceOptions,
    certify: CertifyOptions | None = None,
    projections: dict[int, np.ndarray] | None = None,
    on_progress: Progress | None = None,
) -> dict[Pair, DistanceResult]:
    """D and D_f per attribute of a points DataFrame.

    Parameters
    ----------
    pts : DataFrame
        Points (``key, y, yp, x, c0..``), e.g. from :func:`points_from_table`.
    n_attr : int
        Number of code columns.
    dim_x : int
        Feature length.
    n_rows : int
        Number of rows of ``pts`` (sizes the partitions; tells ``certified`` whether the
        points may fit the driver).
    options : DistanceOptions
        Method, window, targets, histogram, partitions
        (:class:`DistanceOptions`).
    certify : CertifyOptions, optional
        ``certified``: seed of the sample and block ranks, sample rows per code, the
        cap on rows checked per (target, attribute), the driver-path budget and the
        time budget (:class:`~fairspark.hfm._spark.elimination.CertifyOptions`; when the time
        budget runs out the result is ``not_certified`` with its interval). Default:
        its defaults.
    projections : dict, optional
        Target -> ``(m1, 1 + dim_x)`` projection vectors (from :func:`make_projections`);
        needed by ``approx``, ``pointwise`` and ``paper_value``.
    on_progress : callable, optional
        ``certified`` only: called with the results so far (copies) once the sample
        bounds are known (``upper`` = their maximum, ``lower`` unknown) and after every
        elimination round (``[lower, upper]`` so far), so that a caller whose time
        budget runs out keeps a valid interval.

    Returns
    -------
    dict
        ``(target, attribute index) -> DistanceResult``.
    """
    opt = options
    if opt.method not in METHODS:
        raise ValueError(f"unknown HFM method {opt.method!r}; expected one of {METHODS}")
    if opt.method == "certified":
        out = _certified_distances(pts, n_attr=n_attr, dim_x=dim_x, n_rows=n_rows,
                                   options=opt, certify=certify or CertifyOptions(),
                                   on_progress=on_progress)
        if opt.paper_value:
            if projections is None:
                raise ValueError("paper_value needs projection vectors")
            _add_paper_values(out, pts, n_attr=n_attr, dim_x=dim_x, n_rows=n_rows,
                              projections={t: projections[t] for t in opt.targets},
                              options=opt)
        return out
    if projections is None:
        raise ValueError(f"method {opt.method!r} needs projection vectors")
    projections = {t: projections[t] for t in opt.targets}
    with _approx_scan(pts, n_attr=n_attr, dim_x=dim_x, n_rows=n_rows, projections=projections,
                      options=opt) as (scan, ap):
        if opt.method == "approx":
            return _approx_distances(ap)
        return _bounded_distances(
            pts, scan, ap, m1s={tgt: int(projections[tgt].shape[0]) for tgt in opt.targets},
            targets=opt.targets, n_attr=n_attr, histogram_bins=opt.histogram_bins,
        )


@contextlib.contextmanager
def _approx_scan(
    pts: DataFrame, *, n_attr: int, dim_x: int, n_rows: int, projections: dict[int, np.ndarray],
    options: DistanceOptions,
) -> Iterator[tuple[DataFrame, dict[Pair, object]]]:
    """The persisted ApproxDist window scans and their per-pair summary (unpersisted on exit).

    Yields ``(scan, approx)`` with ``approx[(tgt, attr)]`` the summary row (``D``,
    ``D_avg``, witnesses, projection); ``options`` gives the window and the partitions.
    """
    P = options.num_partitions or max(1, math.ceil(n_rows / options.rows_per_partition))
    inner: list[DataFrame] = []
    scan = approx_scan(
        pts, n_attr=n_attr, dim_x=dim_x, projections=projections, m2=options.m2,
        num_partitions=P,
        persisted=inner,
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield scan, {(int(r.tgt), int(r.attr)): r for r in summarise_approx(scan).itertuples()}
    finally:
        scan.unpersist()
        for d in inner:
            d.unpersist()


def _bounded_distances(
    pts: DataFrame, scan: DataFrame, ap: dict[Pair, object], *, m1s: dict[int, int],
    targets: tuple[int, ...], n_attr: int, histogram_bins: int,
) -> dict[Pair, DistanceResult]:
    """The ``pointwise`` method from the window scans (ApproxDist beside it)."""
    ub_rows = pointwise_rows(scan, m1_by_tgt=m1s).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        pairs = [(tgt, a) for tgt in targets for a in range(n_attr)]
        out = _pointwise_distances(ub_rows, ap, pairs)
        if histogram_bins > 0:
            _add_histograms(out, ub_rows, "ub", histogram_bins)
        return out
    finally:
        ub_rows.unpersist()


def _certified_distances(
    pts: DataFrame, *, n_attr: int, dim_x: int, n_rows: int | None, options: DistanceOptions,
    certify: CertifyOptions, on_progress: Progress | None,
) -> dict[Pair, DistanceResult]:
    """The ``certified`` method: exact D by sample bounds and elimination."""
    out: dict[Pair, DistanceResult] = {}
    histogram_bins = options.histogram_bins

    def on_bounds(bounds: Bounds) -> None:
        # the sample bounds: their maximum bounds D, their mean bounds D_avg (on the
        # driver path the bounds are a pandas frame: no Spark job; on Spark the summary
        # pass A's tasks gathered and the histogram in one aggregation of the working
        # table, its range from pass A's largest bound; without the gathered summary,
        # the summary and the histogram in one aggregation of the bound rows)
        ub_df, tops, counts = bounds.rows, _attr_tops(bounds.top), None
        if isinstance(ub_df, pd.DataFrame):
            summ = _summarise_local(ub_df, "u")
        elif bounds.summary is not None:
            summ = bounds.summary
            if histogram_bins > 0 and bounds.histogram is not None:
                counts = bounds.histogram(tops, histogram_bins)
        elif histogram_bins > 0:
            summ, counts = summarise_binned(ub_df, value_col="u", bins=histogram_bins,
                                            tops=tops)
        else:
            summ = summarise_pointwise(ub_df, value_col="u")
        for r in summ.itertuples():
            out[(int(r.tgt), int(r.attr))] = DistanceResult(
                value=float(r.D), lower=None, upper=float(r.D), certified=False,
                avg=float(r.D_avg), avg_exact=False, key=r.key, nb_key=r.nb_key,
                extra={"bound_max": float(r.D), "bound_avg": float(r.D_avg)})
        if counts is not None:
            _set_histograms(out, counts, tops, histogram_bins)
        elif histogram_bins > 0:
            _add_histograms(out, ub_df, "u", histogram_bins)

    def on_step(cert: dict[Pair, CertifiedResult]) -> None:
        if on_progress is None:
            return
        snap = {p: copy.deepcopy(r) for p, r in out.items()}
        _apply_certification(snap, cert)
        on_progress(snap)

    pairs = [(tgt, a) for tgt in options.targets for a in range(n_attr)]
    cert = certify_exact(pts, n_attr=n_attr, dim_x=dim_x, pairs=pairs, n_rows=n_rows,
                         options=certify, on_step=on_step, on_bounds=on_bounds)
    _apply_certification(out, cert)
    return out


def _add_paper_values(
    out: dict[Pair, DistanceResult], pts: DataFrame, *, n_attr: int, dim_x: int, n_rows: int,
    projections: dict[int, np.ndarray], options: DistanceOptions,
) -> None:
    """The paper's ApproxDist and the pointwise bound beside the exact value, with errors."""
    with _approx_scan(pts, n_attr=n_attr, dim_x=dim_x, n_rows=n_rows, projections=projections,
                      options=options) as (scan, ap):
        pw = _bounded_distances(
            pts, scan, ap, m1s={t: int(w.shape[0]) for t, w in projections.items()},
            targets=tuple(projections), n_attr=n_attr, histogram_bins=0)
    for p, res in out.items():
        if p not in pw:
            continue
        res.extra.update({k: pw[p].extra[k] for k in
                          ("approx", "approx_avg", "pointwise", "pointwise_avg")})
        if res.certified:
            for k in ("approx", "pointwise"):
                res.extra[f"{k}_error"] = hfm_df(res.value, res.extra[k])


def _approx_distances(ap: dict[Pair, object]) -> dict[Pair, DistanceResult]:
    """The ``approx`` method: the paper's ApproxDist per (target, attribute)."""
    out: dict[Pair, DistanceResult] = {}
    for p, r in ap.items():
        out[p] = DistanceResult(
            value=float(r.D), lower=None, upper=None, certified=False,
            avg=float(r.D_avg), avg_exact=False, key=r.key, nb_key=r.nb_key,
            extra={"approx": float(r.D), "approx_avg": float(r.D_avg),
                   "projection": int(r.proj)},
        )
    return out


def _pointwise_distances(
    ub_rows: DataFrame, ap: dict[Pair, object], pairs: list[Pair]
) -> dict[Pair, DistanceResult]:
    """The ``pointwise`` method (max over rows of the per-row bound), ApproxDist beside."""
    out: dict[Pair, DistanceResult] = {}
    pw = {(int(r.tgt), int(r.attr)): r for r in summarise_pointwise(ub_rows).itertuples()}
    for p in pairs:
        if p not in pw:
            continue
        r, a = pw[p], ap[p]
        out[p] = DistanceResult(
            value=float(r.D), lower=None, upper=None, certified=False,
            avg=float(r.D_avg), avg_exact=False, key=r.key, nb_key=r.nb_key,
            extra={"approx": float(a.D), "approx_avg": float(a.D_avg),
                   "pointwise": float(r.D), "pointwise_avg": float(r.D_avg)},
        )
    return out


def _apply_certification(
    out: dict[Pair, DistanceResult], cert: dict[Pair, CertifiedResult]
) -> None:
    """Put certification results (final or so far) into the distance results."""
    for p, c in cert.items():
        res = out[p]
        res.extra["n_searched"] = c.n_searched
        res.extra["n_candidates"] = c.n_above
        res.extra["n_checked"] = c.n_checked
        res.extra["steps"] = c.steps
        res.extra["rounds"] = c.rounds
        if c.engine is not None:
            res.extra["engine"] = c.engine
        if c.cost is not None:
            res.extra["cost"] = c.cost
        # the pointwise value bounds D from above before any remaining bound is known
        upper = min(c.upper, res.extra.get("pointwise", math.inf))
        lower = c.lower if math.isfinite(c.lower) else None
        res.lower, res.upper, res.certified = lower, upper, c.certified
        if c.certified:
            res.value = c.lower
            res.key, res.nb_key = c.key, c.nb_key
        else:
            res.value = upper


def _pair_rows(rows: pd.DataFrame) -> list[tuple[int, int, np.ndarray]]:
    """Per (tgt, attr) of a pandas frame of per-row values, in sorted order, the
    positions of its rows (in frame order)."""
    tg, at = rows["tgt"].to_numpy(np.int64), rows["attr"].to_numpy(np.int64)
    code = tg * (1 << 32) + at
    return [(int(c >> 32), int(c & 0xFFFFFFFF), np.flatnonzero(code == c))
            for c in np.unique(code)]


def _summarise_local(rows: pd.DataFrame, col: str) -> pd.DataFrame:
    """:func:`summarise_pointwise` of a pandas frame: max, weighted mean and the witness
    of the max, by the kernels of the Spark tasks' summary
    (:func:`~fairspark.hfm._kernels.value_part`, ``part_mean``, ``witness``). In numpy
    per pair, no grouped frames (two pairs of 904k rows: 0.9 s with a pandas groupby,
    which copies every group)."""
    v_all, w_all = rows[col].to_numpy(float), rows["mult"].to_numpy(np.int64)
    out = []
    for tgt, attr, at in _pair_rows(rows):
        v = v_all[at]
        part = value_part(v, w_all[at])
        top = at[v == part["D"]]  # only the rows at the maximum give a witness
        # the keys of those rows only (the driver path's are Arrow-backed: no Python
        # string for the other rows)
        key, nb_key = witness(rows["key"].iloc[top].to_numpy(object, na_value=None),
                              rows["nb_key"].iloc[top].to_numpy(object, na_value=None))
        out.append({"tgt": tgt, "attr": attr, "D": part["D"], "D_avg": part_mean(part),
                    "key": key, "nb_key": nb_key})
    return pd.DataFrame(out, columns=["tgt", "attr", "D", "D_avg", "key", "nb_key"])


def _attr_tops(top_by_pair: dict[Pair, float]) -> dict[int, float]:
    """Per attribute the histogram's upper end: the largest finite value of its pairs
    (0 when none is finite)."""
    tops: dict[int, float] = {}
    for (_, attr), top in top_by_pair.items():
        tops[attr] = max(tops.get(attr, 0.0), top if math.isfinite(top) else 0.0)
    return tops


def _add_histograms(
    out: dict[Pair, DistanceResult], rows: DataFrame | pd.DataFrame, col: str, bins: int
) -> None:
    """Histogram of per-row distances (Spark aggregation, only bin counts come back; or
    numpy on a pandas frame of the driver path)."""
    tops = _attr_tops({p: r.extra.get("pointwise", r.extra.get("bound_max", r.value))
                       for p, r in out.items()})
    if isinstance(rows, pd.DataFrame):  # numpy per pair: no grouped copies, no Spark
        v, mult = rows[col].to_numpy(float), rows["mult"].to_numpy(float)
        parts = []
        for tgt, attr, at in _pair_rows(rows):
            n = bin_counts(v[at], tops.get(attr, 0.0), bins, weights=mult[at])
            nz = np.flatnonzero(n)
            parts.append(pd.DataFrame({"tgt": tgt, "attr": attr, "bin": nz, "n": n[nz]}))
        counts = (pd.concat(parts, ignore_index=True) if parts
                  else pd.DataFrame(columns=["tgt", "attr", "bin", "n"]))
    else:
        top_col = F.lit(0.0)
        for attr, top in tops.items():
            top_col = F.when(F.col("attr") == attr,
                             F.lit(top if top > 0 else 1.0)).otherwise(top_col)
        b = F.least(F.floor(F.col(col) / top_col * bins), F.lit(bins - 1)).cast("int")
        counts = (
            rows.groupBy("tgt", "attr", b.alias("bin"))
            .agg(F.sum("mult").alias("n"))
            .toPandas()
        )
    _set_histograms(out, counts, tops, bins)


def _set_histograms(out: dict[Pair, DistanceResult], counts: pd.DataFrame,
                    tops: dict[int, float], bins: int) -> None:
    """Each result's ``hist``: bin edges over ``[0, top]`` and the counts per bin."""
    for (tgt, attr), res in out.items():
        top = tops[attr] if tops[attr] > 0 else 1.0
        c = np.zeros(bins)
        sub = counts[(counts["tgt"] == tgt) & (counts["attr"] == attr)]
        c[sub["bin"].to_numpy(int)] = sub["n"].to_numpy(float)
        res.extra["hist"] = (np.linspace(0.0, top, bins + 1), c)
