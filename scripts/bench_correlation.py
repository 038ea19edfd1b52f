"""Benchmark of the correlation audit's N x L trainings (METHODS §3, issue 6).

The same numbered attempts (same bootstrap samples, same seeds, same models) are run

1. through fairspark: ``mapInPandas`` tasks on a ``local[2]`` SparkSession;
2. in a plain sequential Python loop (one process);
3. in a 2-process joblib (loky) loop, one job per round;

with BLAS/OpenMP pinned to one thread everywhere. It prints the wall-clock times,
fairspark's parallel efficiency ``T_sequential / (2 x T_fairspark)`` and the joblib
loop's, checks that the three give identical metric vectors, and extrapolates the
nightly cost of the defaults (N = 1000, L = 30) from the measured time per training.

Data: UCI Adult (``../shared/data``, fairness-comparison ``numerical-binsensitive``),
features min-max scaled, ``sex`` as the attribute (1 = privileged), label
``income-per-year``.

Example::

    python scripts/bench_correlation.py --n 200 --rounds 10 --k 1000 \\
        --models logistic_regression
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from fairspark._threads import pin_threads, single_thread

pin_threads()  # one BLAS/OpenMP thread here too, as in the Spark tasks

import numpy as np
import pandas as pd

from fairspark._shipping import Shipped
from fairspark.audits.base import derive_seed
from fairspark.correlation import (
    OracleData,
    draw_stratified_sample,
    run_attempt,
    run_oracle_tasks,
    split_round,
)
from fairspark.correlation._spark import _cached_split
from fairspark.session import build_session


def load_adult(shared: Path) -> pd.DataFrame:
    """Adult as a table with the prepared-table columns."""
    d = pd.read_csv(
        shared / "adult/fairness-comparison/preprocessed/adult_numerical-binsensitive.csv.gz"
    )
    y = d["income-per-year"].astype(float)
    priv = d["sex"].astype(int) == 1
    feats = d.drop(columns=["income-per-year", "sex", "race", "race-sex"]).astype(float)
    lo, hi = feats.min(), feats.max()
    span = (hi - lo).replace(0, 1.0)
    x = ((feats - lo) / span).where(hi > lo, 0.0).to_numpy()
    return pd.DataFrame(
        {
            "_fs_key": [str(i) for i in range(len(d))],
            "_fs_label": y,
            "_fs_x": list(x),
            "_fs_w": 1.0,
            "_fs_p_0": priv,
        }
    )


def _round_job(x, y, priv, w, ids, *, model, seed, k, min_accuracy):
    data = OracleData(x=x, y=y, priv=priv, w=w)
    out = []
    with single_thread():
        splits: dict[int, object] = {}
        for rnd, att in ids:
            if rnd not in splits:
                splits[rnd] = split_round(data, seed=seed, round_id=rnd, test_fraction=0.3)
            res = run_attempt(
                data,
                splits[rnd],
                model=model,
                seed=seed,
                round_id=rnd,
                attempt=att,
                k=k,
                min_accuracy=min_accuracy,
            )
            out.append(res.metrics)
    return out


def cpu_probe(spark, sample, *, model: str, seed: int, k: int, n: int) -> dict:
    """CPU seconds per training inside Spark tasks vs in this process.

    Wall-clock efficiency needs an otherwise idle machine; CPU time per training does
    not, so it separates fairspark's own overhead from other tenants' load.
    """
    shipped = Shipped(spark, {"x": sample.x, "y": sample.y, "w": sample.w, "priv": sample.priv})

    def fn(batches):
        with single_thread():
            for b in batches:
                data, split = _cached_split(shipped, 0, 0, seed, 0.3)
                c0, w0 = time.process_time(), time.perf_counter()
                for a in b["id"]:
                    run_attempt(
                        data,
                        split,
                        model=model,
                        seed=seed,
                        round_id=0,
                        attempt=int(a),
                        k=k,
                        min_accuracy=0.0,
                    )
                yield pd.DataFrame(
                    {
                        "cpu": [time.process_time() - c0],
                        "wall": [time.perf_counter() - w0],
                        "n": [len(b)],
                    }
                )

    task_df = spark.range(0, n, 1, numPartitions=2).mapInPandas(
        fn, "cpu double, wall double, n long"
    )
    task_df.toPandas()  # warm the Python workers
    r = task_df.toPandas()
    data = sample.for_attribute(0)
    split = split_round(data, seed=seed, round_id=0, test_fraction=0.3)
    with single_thread():
        c0, w0 = time.process_time(), time.perf_counter()
        for a in range(n):
            run_attempt(
                data, split, model=model, seed=seed, round_id=0, attempt=a, k=k, min_accuracy=0.0
            )
        cpu_seq, wall_seq = time.process_time() - c0, time.perf_counter() - w0
    shipped.release()
    return {
        "trainings": n,
        "cpu_per_training_in_tasks": round(float(r["cpu"].sum()) / n, 5),
        "cpu_per_training_sequential": round(cpu_seq / n, 5),
        "cpu_overhead_in_tasks": round(float(r["cpu"].sum()) / cpu_seq - 1, 3),
        "cpu_share_tasks": [round(c / w, 2) for c, w in zip(r["cpu"], r["wall"], strict=True)],
        "cpu_share_sequential": round(cpu_seq / wall_seq, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="N accepted models per round")
    ap.add_argument("--rounds", type=int, default=10, help="L rounds")
    ap.add_argument("--k", type=int, default=1000, help="bootstrap size K")
    ap.add_argument("--models", nargs="+", default=["logistic_regression"])
    ap.add_argument("--min-accuracy", type=float, default=0.5)
    ap.add_argument("--sample-rows", type=int, default=20000)
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--skip-joblib", action="store_true")
    ap.add_argument("--trials", type=int, default=2, help="repeats; best times are compared")
    ap.add_argument(
        "--cpu-probe",
        type=int,
        default=0,
        metavar="N",
        help="also compare CPU seconds per training in tasks vs sequential (N fits)",
    )
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)

    from joblib import Parallel, delayed

    spark = build_session(
        master="local[2]",
        app_name="bench-correlation",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.driver.memory": "4g",
        },
        log_level="ERROR",
    )
    pdf = load_adult(Path(args.shared))
    df = spark.createDataFrame(pdf).cache()
    df.count()
    t0 = time.perf_counter()
    sample = draw_stratified_sample(
        df, priv_cols=["_fs_p_0"], attributes=["sex"], max_rows=args.sample_rows, seed=1
    )
    t_sample = time.perf_counter() - t0
    seed = derive_seed(0, "correlation", "sex")
    report: dict = {
        "n": args.n,
        "rounds": args.rounds,
        "k": args.k,
        "sample_rows": len(sample.y),
        "features": int(sample.x.shape[1]),
        "sample_seconds": round(t_sample, 2),
        "cpus": os.cpu_count(),
        "models": {},
    }
    print(f"sample: {len(sample.y)} rows x {sample.x.shape[1]} features in {t_sample:.1f}s")
    data = sample.for_attribute(0)
    for model in args.models:
        t_fs, t_seq, t_job, loads = [], [], [], []
        same_seq = same_job = True
        for _trial in range(args.trials):
            # fairspark, sequential and joblib back to back in each trial, so that a
            # trial's ratios compare runs made under the same machine load
            t0 = time.perf_counter()
            tab = run_oracle_tasks(
                spark,
                sample,
                attributes=[0],
                models=[model],
                seeds=[seed],
                n_samples=args.n,
                rounds=args.rounds,
                k=args.k,
                min_accuracy=args.min_accuracy,
                attempt_cap=5 * args.n,
                partitions=args.partitions,
            )
            t_fs.append(time.perf_counter() - t0)
            att = tab.attempts
            ids = list(zip(att["round"].astype(int), att["attempt"].astype(int), strict=True))
            fs_vals = att[tab.metrics].to_numpy(float)
            n_fit = len(ids)
            t0 = time.perf_counter()
            seq = _round_job(
                data.x,
                data.y,
                data.priv,
                data.w,
                ids,
                model=model,
                seed=seed,
                k=args.k,
                min_accuracy=args.min_accuracy,
            )
            t_seq.append(time.perf_counter() - t0)
            same_seq &= bool(np.array_equal(np.array(seq), fs_vals, equal_nan=True))
            if not args.skip_joblib:
                by_round: dict[int, list] = {}
                for rnd, a in ids:
                    by_round.setdefault(rnd, []).append((rnd, a))
                t0 = time.perf_counter()
                parts = Parallel(n_jobs=2, backend="loky")(
                    delayed(_round_job)(
                        data.x,
                        data.y,
                        data.priv,
                        data.w,
                        chunk,
                        model=model,
                        seed=seed,
                        k=args.k,
                        min_accuracy=args.min_accuracy,
                    )
                    for chunk in by_round.values()
                )
                t_job.append(time.perf_counter() - t0)
                job_vals = np.array([v for p in parts for v in p])
                same_job &= bool(np.array_equal(job_vals, fs_vals, equal_nan=True))
            loads.append(round(os.getloadavg()[0], 1))
        best_fs, best_seq = min(t_fs), min(t_seq)
        eff = best_seq / (2 * best_fs)
        per_fit = best_seq / n_fit
        nightly_1core = per_fit * 1000 * 30 * n_fit / (args.n * args.rounds)
        row = {
            "trainings": n_fit,
            "waves": tab.waves,
            "shipped_as": tab.shipped_as,
            "t_fairspark": [round(t, 2) for t in t_fs],
            "t_sequential": [round(t, 2) for t in t_seq],
            "t_joblib2": [round(t, 2) for t in t_job],
            "efficiency_fairspark_best": round(eff, 3),
            "efficiency_fairspark_per_trial": [
                round(a / (2 * b), 3) for a, b in zip(t_seq, t_fs, strict=True)
            ],
            "efficiency_joblib2_best": round(best_seq / (2 * min(t_job)), 3) if t_job else None,
            "load_average_1min_after_trial": loads,
            "seconds_per_training": round(per_fit, 5),
            "identical_sequential": same_seq,
            "identical_joblib": None if not t_job else same_job,
            "nightly_defaults_minutes_2_cores": round(nightly_1core / 2 / eff / 60, 1),
            "nightly_defaults_minutes_1_core": round(nightly_1core / 60, 1),
        }
        if args.cpu_probe:
            row["cpu_probe"] = cpu_probe(
                spark, sample, model=model, seed=seed, k=args.k, n=args.cpu_probe
            )
        report["models"][model] = row
        print(json.dumps({model: row}, indent=1), flush=True)
    spark.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
