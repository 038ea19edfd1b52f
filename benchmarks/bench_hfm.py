#!/usr/bin/env python
"""Benchmark of HFM set distances: fairspark (Spark) against single-machine peers.

One run, same data for every method, each cell with a time limit:

- fairspark on Spark (``--master``, default local[2]): approx, pointwise, certified
  (the default method: exact D by sample bounds and elimination, no projections; small
  tables are collected once and searched on the driver), certified_spark (certified
  with the Spark passes forced, ``local_max_bytes=0``)
- scipy ``directed_hausdorff`` both directions (EarlyBreak, single core), in a separate
  process, on the same points
- a blocked numpy brute force (``cdist`` blocks, single core)
- single-machine numpy ApproxDist (fairspark's kernel, same projections, single core)

Prints time ratios against scipy and the relative error of each method against the
exact value, as a markdown table with the command and the load average (1/5/15 min,
at the start and at the end) above it (``--out`` also writes it to a file).

The engine against scipy only, on the small cells::

    python benchmarks/bench_hfm.py --datasets uniform --dims 100 --sizes 10000 100000 \
        --methods certified --peers scipy

``--scale-check`` instead runs the whole HFM audit through the runner on a ~50 MB table
(Adult replicated) with ``spark.driver.maxResultSize=1m``.

Example::

    python benchmarks/bench_hfm.py --sizes 10000 30000 --dims 10 100 \
        --datasets uniform clustered adult --time-limit 120 --out /tmp/bench_hfm.md
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np
import pandas as pd

from _harness import SHARED, load, parse_args, read_adult, spark_session


# ----------------------------------------------------------------------------- data
def make_data(kind: str, n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points without the first coordinate: features X (n, d), label y, prediction yp, group."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        X = rng.random((n, d))
        g = rng.random(n) < 0.3
    elif kind == "clustered":
        centres = rng.random((20, d))
        lab = rng.integers(0, 20, n)
        X = np.clip(centres[lab] + rng.normal(0, 0.03, (n, d)), 0, 1)
        g = rng.random(n) < np.where(lab < 10, 0.6, 0.1)
    elif kind == "adult":
        X, g = _adult_features(d, n, rng)
    else:
        raise ValueError(kind)
    score = X[:, : min(3, X.shape[1])].mean(axis=1) + 0.1 * g
    y = (score + rng.normal(0, 0.1, n) > np.median(score)).astype(float)
    yp = (score > np.median(score)).astype(float)
    return X, np.column_stack([y, yp]), g.astype(int)


def _adult_features(d: int, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    df = read_adult(("data",)).dropna()
    num = ["age", "education_num", "hours_per_week", "capital_gain", "capital_loss", "fnlwgt"]
    cat = ["workclass", "marital_status", "occupation", "relationship", "native_country",
           "education"]
    cols = [(df[c] - df[c].min()) / (df[c].max() - df[c].min()) for c in num]
    for c in cat:
        for v in sorted(df[c].unique()):
            cols.append((df[c] == v).astype(float))
    X = np.column_stack(cols)[:, :d]
    g = (df["sex"] == "Male").to_numpy()
    idx = rng.integers(0, len(df), n)  # replicated; tiny jitter keeps rows distinct
    Xr = X[idx] + rng.normal(0, 1e-4, (n, X.shape[1]))
    return Xr, g[idx]


def adult_replica(copies: int, jitter: float, seed: int) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """A bank-like real table: UCI Adult (train + test, complete rows, 45,222), encoded
    as the job encodes it (numeric columns min-max scaled, categorical ones one-hot in
    alphabetical order; native_country left out: d = 56), replicated ``copies`` times
    with a Gaussian jitter of ``jitter`` on every feature. Label: income > 50K;
    prediction: a fixed rule (education_num >= 13 and hours >= 40); group: sex."""
    df = read_adult().dropna().reset_index(drop=True)
    num = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
    cat = ["workclass", "education", "marital_status", "occupation", "relationship"]
    cols = [((df[c] - df[c].min()) / (df[c].max() - df[c].min())).to_numpy(float) for c in num]
    for c in cat:
        for v in sorted(df[c].unique()):
            cols.append((df[c] == v).to_numpy(float))
    X = np.column_stack(cols)
    y = df["income"].str.startswith(">50K").to_numpy(float)
    yp = ((df["education_num"] >= 13) & (df["hours_per_week"] >= 40)).to_numpy(float)
    g = (df["sex"] == "Male").to_numpy(int)
    rng = np.random.default_rng(seed)
    Xr = np.tile(X, (copies, 1))
    Xr += rng.normal(0.0, jitter, Xr.shape)
    return Xr, np.column_stack([np.tile(y, copies), np.tile(yp, copies)]), np.tile(g, copies)


# Real tables at their natural size and dimension (fairness-comparison's
# numerical-binsensitive files: one-hot features, sensitive columns binarised, 1 =
# privileged). Features are min-max scaled; the sensitive and joint columns are left out.
_FC = "{d}/fairness-comparison/preprocessed/{f}_numerical-binsensitive.csv.gz"
REAL = {
    "adult_sex": ("adult", "adult", "income-per-year", "sex", ["race", "sex", "race-sex"]),
    "adult_race": ("adult", "adult", "income-per-year", "race", ["race", "sex", "race-sex"]),
    "compas_race": ("compas", "propublica-recidivism", "two_year_recid", "race",
                    ["race", "sex", "sex-race"]),
    "compas_sex": ("compas", "propublica-recidivism", "two_year_recid", "sex",
                   ["race", "sex", "sex-race"]),
    "german_sex": ("german", "german", "credit", "sex", ["sex", "age", "sex-age"]),
    "german_age": ("german", "german", "credit", "age", ["sex", "age", "sex-age"]),
    "ricci_race": ("ricci", "ricci", "Class", "Race", ["Race"]),
}


def real_table(kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, (label, label) and group of a real table (D only: prediction = label)."""
    folder, stem, label, sens, drop = REAL[kind]
    df = pd.read_csv(SHARED / _FC.format(d=folder, f=stem))
    feats = df.drop(columns=[label, *drop]).astype(float)
    lo, hi = feats.min(), feats.max()
    X = ((feats - lo) / (hi - lo).where(hi > lo, 1.0)).to_numpy()
    y = (df[label] == df[label].max() if stem != "german" else df[label] == 1).to_numpy(float)
    return X, np.column_stack([y, y]), (df[sens] == 1).to_numpy(int)


# ----------------------------------------------------------------------------- peers
def scipy_hausdorff(V, g):
    from scipy.spatial.distance import directed_hausdorff

    a, b = V[g == 1], V[g == 0]
    return max(directed_hausdorff(a, b, seed=0)[0], directed_hausdorff(b, a, seed=0)[0])


def numpy_brute(V, g, block=2048):
    from scipy.spatial.distance import cdist

    best = 0.0
    a, b = V[g == 1], V[g == 0]
    for P, Q in ((a, b), (b, a)):
        for s in range(0, len(P), block):
            best = max(best, float(cdist(P[s:s + block], Q).min(axis=1).max()))
    return best


def numpy_approx(V, g, W, m2):
    from fairspark.hfm._kernels import approx_dist_numpy

    r = approx_dist_numpy(V, g, W, m2=m2)
    return r["approx"]


def _peer_worker(name, V, g, W, m2, q):
    """One peer cell; ``V`` a tuple (``--cli-stage``): D and D_f, the time of both."""
    fn = {"scipy": lambda P: scipy_hausdorff(P, g), "numpy_brute": lambda P: numpy_brute(P, g),
          "numpy_approx": lambda P: numpy_approx(P, g, W, m2)}[name]
    todo = V if isinstance(V, tuple) else (V,)
    t = time.perf_counter()
    vals = [fn(P) for P in todo]
    q.put((vals[0], time.perf_counter() - t))


def run_peer(name, V, g, W, m2, limit):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_peer_worker, args=(name, V, g, W, m2, q))
    p.start()
    p.join(limit)
    if p.is_alive():
        p.terminate()
        p.join()
        return None, None
    return q.get() if not q.empty() else (None, None)


# ----------------------------------------------------------------------------- spark
def _spark(master: str, extra: dict[str, str] | None = None):
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8",
            "spark.driver.memory": "6g", **(extra or {})}
    return spark_session(master=master, app_name="bench_hfm", conf=conf)


def to_points_df(spark, X, Y, g, tmp):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(X)
    path = Path(tmp) / f"pts_{n}_{X.shape[1]}_{os.getpid()}_{time.time_ns()}"
    path.mkdir()
    per = 50_000
    for i, s in enumerate(range(0, n, per)):
        sl = slice(s, s + per)
        tbl = pa.table({
            "key": pa.array([f"r{j:08d}" for j in range(s, min(n, s + per))]),
            "y": pa.array(Y[sl, 0]), "yp": pa.array(Y[sl, 1]),
            "x": pa.array(list(X[sl]), type=pa.list_(pa.float64())),
            "c0": pa.array(g[sl].astype(np.int32)),
        })
        pq.write_table(tbl, path / f"part-{i:05d}.parquet")
    return spark.read.parquet(str(path))


def run_spark(spark, method, pts, n, d, W, m2, limit, *, cli_stage=False):
    """One fairspark cell; ``certified_spark`` is ``certified`` with the Spark passes
    forced (``local_max_bytes=0``); ``cli_stage``: both targets and the histogram, as
    the CLI's HFM stage computes them. The result gets ``extra["jobs"]``."""
    from fairspark.hfm.compute import CertifyOptions, DistanceOptions, hfm_distances

    sc = spark.sparkContext
    group = f"bench-{method}-{time.time_ns()}"
    timer = threading.Timer(limit, lambda: sc.cancelJobGroup(group))
    sc.setJobGroup(group, method, interruptOnCancel=True)
    timer.start()
    t = time.perf_counter()
    certify = CertifyOptions(local_max_bytes=0) if method == "certified_spark" else None
    outputs = {"targets": (0, 1), "histogram_bins": 40} if cli_stage else {"targets": (0,)}
    options = DistanceOptions(method=method.removesuffix("_spark"), m2=m2, **outputs)
    try:
        res = hfm_distances(pts, n_attr=1, dim_x=d, n_rows=n, options=options,
                            certify=certify, projections=W)
        el = time.perf_counter() - t
        res[(0, 0)].extra["jobs"] = len(sc.statusTracker().getJobIdsForGroup(group))
        return res[(0, 0)], el
    except Exception as exc:  # noqa: BLE001 - a cancelled or failed cell is reported
        el = time.perf_counter() - t
        return ("timeout" if el >= limit * 0.95 else f"error: {type(exc).__name__}"), None
    finally:
        timer.cancel()
        sc.setJobGroup("idle", "idle")


def feature_pass(pts) -> float:
    """Seconds of one ``mapInPandas`` pass that reads every feature vector (np.vstack)."""
    def read(it):
        for pdf in it:
            X = np.vstack(pdf["x"].to_numpy()) if len(pdf) else np.zeros((0, 1))
            yield pd.DataFrame({"s": [float(X.sum())]})

    t = time.perf_counter()
    pts.mapInPandas(read, "s double").agg({"s": "sum"}).collect()
    return time.perf_counter() - t


def worker_peak_rss_mb(spark) -> float:
    """The largest max RSS of the Python workers (reused across tasks: the peak of any task)."""
    import resource

    def rss(_it):
        yield pd.DataFrame({"m": [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0]})

    df = spark.range(0, 64, 1, 16).mapInPandas(rss, "m double")
    return float(df.agg({"m": "max"}).collect()[0][0])


def _warm_up(spark) -> None:
    """Start the Python workers once so the first measured cell does not pay for it."""
    from fairspark.hfm._kernels import sample_projections
    from fairspark.hfm.compute import DistanceOptions, hfm_distances

    X, Y, g = make_data("uniform", 200, 3, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        pts = to_points_df(spark, X, Y, g, tmp)
        W = sample_projections(dim=4, m1=2, sampler="uniform_l1", seed=0)
        hfm_distances(pts, n_attr=1, dim_x=3, n_rows=200, projections={0: W},
                      options=DistanceOptions("certified", m2=2, targets=(0,),
                                              paper_value=True))


# ----------------------------------------------------------------------------- main
def bench(args) -> str:
    from fairspark.hfm._kernels import default_m2, sample_projections

    load0 = load()
    spark = _spark(args.master)
    _warm_up(spark)
    lines = []
    hdr = ("| data | n | d | method | time (s) | time / scipy | value | rel. error vs exact "
           "| note | load 1/5/15 |")
    lines += [hdr, "|" + "---|" * 10]
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.datasets:
            real = kind in REAL or kind == "adult_replica"  # natural n and d
            for d in ([None] if real else args.dims):
                for n in ([None] if real else args.sizes):
                    if kind == "adult_replica":
                        X, Y, g = adult_replica(args.copies, args.jitter, seed=1)
                        n = len(X)
                    elif real:
                        X, Y, g = real_table(kind)
                        n = len(X)
                    else:
                        X, Y, g = make_data(kind, n, d, seed=1)
                    V = np.column_stack([Y[:, 0], X])  # D (label) only
                    if args.cli_stage:  # D and D_f, as the fairspark cells compute them
                        V = (V, np.column_stack([Y[:, 1], X]))
                    m2 = default_m2(n)
                    W = sample_projections(dim=1 + X.shape[1], m1=args.m1,
                                           sampler="uniform_l1", seed=2)
                    dd = X.shape[1]
                    cells: dict[str, tuple] = {}
                    for peer in args.peers:
                        cells[peer] = (*run_peer(peer, V, g, W, m2, args.time_limit), "",
                                       load())
                        print(kind, n, dd, peer, cells[peer], flush=True)
                    pts = to_points_df(spark, X, Y, g, tmp).cache()
                    pts.count()
                    # PySpark's first column expression of a process imports IPython
                    # (pyspark.errors' call-site capture: 0.3 s); the CLI's preparation
                    # makes its first ones long before its HFM stage, so the cells do not
                    # pay it either
                    from fairspark.sampling import hash_bucket

                    pts.select(hash_bucket("key", 0)).limit(1).collect()
                    if args.pass_ref:
                        # the median of three passes: the first may pay for warm-up
                        runs = [feature_pass(pts) for _ in range(3)]
                        el = float(np.median(runs))
                        cells["4 x feature pass"] = (
                            None, 4 * el, "one mapInPandas pass: median "
                            f"{el:.2f} s of {', '.join(f'{v:.2f}' for v in runs)}", load())
                    for method in args.methods:
                        runs = []
                        for _ in range(max(1, args.repeat)):
                            r, el = run_spark(spark, method, pts, n, dd, {0: W, 1: W}, m2,
                                              args.time_limit, cli_stage=args.cli_stage)
                            if el is None:
                                break
                            runs.append(el)
                        if len(runs) > 1:
                            first, el = runs[0], float(np.median(runs))
                        if el is None:
                            cells[f"spark_{method}"] = (None, None, r, load())
                        else:
                            note = ""
                            if method.startswith("certified"):
                                note = (f"{r.extra.get('engine')}, {r.extra.get('jobs')} jobs, "
                                        f"{'certified' if r.certified else 'NOT certified'}, "
                                        f"{r.extra.get('n_searched')} exact searches, "
                                        f"{r.extra.get('n_checked')} rows checked, "
                                        f"{r.extra.get('n_candidates')} with bound > D")
                            if len(runs) > 1:
                                note += (f"; median of {len(runs)} runs: "
                                         f"{', '.join(f'{v:.2f}' for v in runs)} s")
                            if args.pass_ref and "4 x feature pass" in cells:
                                ref = cells["4 x feature pass"][1] / 4
                                note += f"; {el / ref:.2f} feature passes"
                                if len(runs) > 1:
                                    note += f" (first run: {first / ref:.2f})"
                            cells[f"spark_{method}"] = (r.value, el, note, load())
                        print(kind, n, dd, method, cells[f"spark_{method}"], flush=True)
                        if el is not None and "cost" in r.extra:
                            print(_cost_table(r.extra["cost"]), flush=True)
                    if args.worker_rss:
                        cells["worker peak RSS"] = (None, None,
                                                    f"{worker_peak_rss_mb(spark):.0f} MB "
                                                    "(largest Python worker max RSS)", load())
                    pts.unpersist()
                    exact = None
                    for k in ("scipy", "numpy_brute", "spark_exact", "spark_certified"):
                        c = cells.get(k)
                        if c and c[0] is not None and (k != "spark_certified" or
                                                       "NOT" not in c[2]):
                            exact = c[0]
                            break
                    t_scipy = cells.get("scipy", (None, None))[1]
                    for k, c in cells.items():
                        v, el = c[0], c[1]
                        note = c[2] if len(c) > 2 else ""
                        ld = c[3] if len(c) > 3 else load()
                        ratio = f"{el / t_scipy:.3g}" if el and t_scipy else "n/a"
                        err = (f"{(v - exact) / exact:.2e}" if v is not None and exact
                               else "n/a")
                        tt = (f"{el:.2f}" if el else "-" if k == "worker peak RSS"
                              else f"> {args.time_limit:g} (limit)")
                        vv = f"{v:.6g}" if v is not None else "n/a"
                        lines.append(f"| {kind} | {n} | {dd} | {k} | {tt} | {ratio} | {vv} | "
                                     f"{err} | {note} | {ld} |")
    spark.stop()
    return "\n".join([_run_header(load0), "", *lines])


def _cost_table(cost: dict) -> str:
    """The engine's cost model (summary.json's ``cost``) as a small markdown table."""
    out = [f"cost model: {cost['engine']} engine, {cost['jobs']} jobs, {cost['stages']} "
           f"stages, {cost['seconds']:.2f} s in the passes",
           "| pass | s | jobs | stages | rows read | feature MB read | rows left |",
           "|---|---|---|---|---|---|---|"]
    for p in cost["passes"]:
        mb = "" if p.get("bytes_read") is None else f"{p['bytes_read'] / 1e6:.1f}"
        out.append(f"| {p['pass']} | {p['seconds']:.2f} | {p['jobs']} | {p['stages']} | "
                   f"{p.get('rows_read') if p.get('rows_read') is not None else ''} | {mb} | "
                   f"{p.get('rows_left') if p.get('rows_left') is not None else ''} |")
    return "\n".join(out)


def _run_header(load0: str) -> str:
    return (f"command: `python {' '.join(sys.argv)}`; cores: {os.cpu_count()}; "
            f"load average (1/5/15 min) at start: {load0}, at end: {load()}")


def scale_check(args) -> str:
    """The HFM audit on ~50 MB (Adult replicated) with spark.driver.maxResultSize=1m."""
    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job

    df = read_adult(("data",)).dropna().reset_index(drop=True)
    rng = np.random.default_rng(0)
    reps = args.scale_rows // len(df) + 1
    big = pd.concat([df] * reps, ignore_index=True).iloc[: args.scale_rows].copy()
    big["age"] = big["age"] + rng.integers(0, 3, len(big))  # not only exact copies
    big["row_id"] = np.arange(len(big)).astype(str)
    big["prediction"] = ((big["education_num"] >= 13) & (big["hours_per_week"] >= 40)).astype(int)
    tmp = Path(tempfile.mkdtemp(prefix="hfm_scale_"))
    inp = tmp / "in"
    inp.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(big)), 8)):
        big.iloc[part].to_parquet(inp / f"part-{i:05d}.parquet", index=False)
    mb = sum(f.stat().st_size for f in inp.iterdir()) / 1e6
    mem_mb = big.memory_usage(deep=True).sum() / 1e6
    spark = _spark(args.master, {"spark.driver.maxResultSize": "1m"})
    cfg = parse_config({
        "dataset": "hfm_scale", "run_date": "2026-11-29", "input": {"path": str(inp)},
        "columns": {
            "features": ["age", "education_num", "hours_per_week", "capital_gain",
                         "workclass", "occupation", "marital_status"],
            "categorical": ["workclass", "occupation", "marital_status"],
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": "White"}],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": {"column": "prediction", "positive": [1]}, "row_key": "row_id",
        },
        "audits": {"group": {"enabled": False}, "hfm": {"method": args.scale_method,
                                                          "m1": args.m1}},
        "output": {"path": str(tmp / "out"), "report": True},
    })
    t = time.perf_counter()
    res = run_audit_job(spark, cfg)
    el = time.perf_counter() - t
    rows = pd.DataFrame(res.rows)
    rows = rows[(rows.audit == "hfm") & rows.metric.isin(["D", "D_f", "df"])]
    spark.stop()
    out = [f"rows={len(big)} parquet={mb:.1f} MB pandas in-memory={mem_mb:.1f} MB "
           f"exit_code={res.exit_code} seconds={el:.1f}",
           rows[["attribute", "metric", "value", "lower", "upper", "status"]].to_string()]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--dims", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--datasets", nargs="+", default=["uniform", "clustered", "adult"],
                    choices=["uniform", "clustered", "adult", "adult_replica", *REAL],
                    help="synthetic kinds (sized by --sizes/--dims), adult replicated, or "
                         "real tables at their natural size (e.g. compas_race)")
    ap.add_argument("--methods", nargs="+",
                    default=["approx", "pointwise", "certified"])
    ap.add_argument("--peers", nargs="*", default=["scipy", "numpy_brute", "numpy_approx"],
                    choices=["scipy", "numpy_brute", "numpy_approx"])
    ap.add_argument("--copies", type=int, default=20,
                    help="adult_replica: copies of Adult's 45,222 rows (20: 904k rows)")
    ap.add_argument("--jitter", type=float, default=1e-3,
                    help="adult_replica: standard deviation of the jitter on every feature")
    ap.add_argument("--m1", type=int, default=25)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default=None)
    ap.add_argument("--scale-check", action="store_true")
    ap.add_argument("--scale-rows", type=int, default=400_000)
    ap.add_argument("--scale-method", default="certified")
    ap.add_argument("--pass-ref", action="store_true",
                    help="also time a mapInPandas pass over the features (the median of "
                         "three; x4 reference)")
    ap.add_argument("--cli-stage", action="store_true",
                    help="fairspark cells compute D and D_f with the 40-bin histogram, as "
                         "the CLI's HFM stage does (default: D only, no histogram)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each fairspark cell this many times in a row and report "
                         "the first run and the median (the feature-pass reference is "
                         "the median of three); default 1")
    ap.add_argument("--worker-rss", action="store_true",
                    help="report the Python workers' peak RSS after the cells")
    args = parse_args(ap, argv, fast={"sizes": [500], "dims": [3], "datasets": ["uniform"],
                                      "methods": ["certified"], "peers": ["scipy"],
                                      "m1": 5, "time_limit": 120.0, "scale_rows": 2000})
    text = scale_check(args) if args.scale_check else bench(args)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
