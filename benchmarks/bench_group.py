"""Benchmark of the group audit (one Spark pass + analytic intervals) against one process.

For each table size a synthetic scored table (two sensitive attributes, their
intersection, a few features, a label and a decision) is written to Parquet, then the
same metrics are computed

1. by fairspark: ``run_audit_job`` with only the ``group`` audit on ``local[2]``
   (read, prepare, one aggregation pass, catalogue and intervals on the driver, write
   ``metrics.parquet`` and ``summary.json``; no report). The group audit's own stage
   time is printed too;
2. by pandas in one process: ``read_parquet`` of the needed columns, one ``groupby``
   for the confusion cells, then the same numpy catalogue and intervals
   (``fairspark.metrics``) on those counts (the "best one-process" peer);
3. by fairlearn in one process: ``read_parquet`` plus ``MetricFrame`` per view with
   selection rate, TPR, FPR, FNR, TNR, PPV, NPV, FDR, FOR, error rate and accuracy per
   group, and ``difference()`` / ``ratio()`` (fairlearn gives no analytic intervals;
   its bootstrap would multiply this time by the number of resamples).

It checks that the three agree on the statistical parity difference and TPR
difference of every view, and prints seconds, rows/s, the job's stage breakdown
(read, prepare with its one scan and row-key check, the group audit, write) and each
peer's time over fairspark's, with the load average (``/proc/loadavg``) on every line:
on a shared machine compare only ratios within one run. Before each size it checks
that the table and the pandas peer fit in the available memory and skips the size
otherwise. Example (the figures of docs/benchmarks.md: 1M, 10M and 30M rows, fairlearn at 1M only;
about 8 minutes on a quiet 2-core machine)::

    python benchmarks/bench_group.py --rows 1000000 10000000 30000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _harness import best_of, load, parse_args, spark_session

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from fairspark._threads import pin_threads

pin_threads()  # one BLAS/OpenMP thread for every peer, as in the Spark tasks

import numpy as np
import pandas as pd

from fairspark.metrics import CELLS, compare_groups
from fairspark.metrics._intervals import comparison_intervals, rate_interval

RACES = ["w", "b", "a", "o"]
#: bytes per row the pandas peer holds at its peak (4 columns, the cell codes, masks):
#: measured about 150 (peak RSS 427 MB at 2e6 rows, 124 MB after the imports), with a
#: margin; a size is skipped when memory is short (30M rows: about 6 GB)
PANDAS_BYTES_PER_ROW = 200


def _load() -> str:
    """The 1-, 5- and 15-minute load averages, for every printed figure."""
    return "load " + load()


def available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
RATE_NAMES = ("selection_rate", "tpr", "fpr", "fnr", "tnr", "ppv", "npv", "fdr", "for",
              "error_rate", "accuracy", "base_rate")


def _spark(driver_memory: str):
    return spark_session(
        app_name="bench-group",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8",
              "spark.driver.memory": driver_memory},
    )


def make_table(spark, n: int, path: str) -> None:
    """Write ``n`` synthetic scored rows (seeded) to Parquet."""
    from pyspark.sql import functions as F

    race = F.element_at(F.array(*[F.lit(r) for r in RACES]),
                        (F.floor(F.pow(F.rand(seed=11), 2) * 4) + 1).cast("int"))
    (
        spark.range(n, numPartitions=max(2, n // 1_000_000))
        .select(
            F.col("id").cast("string").alias("row_id"),
            F.rand(seed=1).alias("x1"), F.randn(seed=2).alias("x2"),
            F.element_at(F.array(*[F.lit(c) for c in "abcde"]),
                         (F.floor(F.rand(seed=3) * 5) + 1).cast("int")).alias("city"),
            F.when(F.rand(seed=10) < 0.6, "M").otherwise("F").alias("sex"),
            race.alias("race"),
        )
        .withColumn("y", (F.rand(seed=12) < 0.25 + 0.3 * F.col("x1")).cast("int"))
        .withColumn("p", (F.col("x1") + 0.1 * (F.col("sex") == "M").cast("double")
                          + 0.05 * (F.col("race") == "w").cast("double")
                          + 0.3 * F.rand(seed=13) > 0.75).cast("int"))
        .write.mode("overwrite").parquet(path)
    )


def run_fairspark(spark, path: str, out: str) -> tuple[float, dict, list[dict]]:
    """The real job function; returns wall seconds, stage timings and the rows."""
    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job

    cfg = parse_config({
        "dataset": "bench_group", "run_date": "2026-01-01", "seed": 1,
        "input": {"path": path},
        "columns": {
            "features": ["x1", "x2", "city"],
            "sensitive": [{"column": "sex", "privileged": "M"},
                          {"column": "race", "privileged": "w"}],
            "intersections": [["sex", "race"]],
            "label": {"column": "y", "positive": 1},
            "prediction": {"column": "p", "positive": 1},
            "row_key": "row_id",
        },
        "audits": {"group": {"ci_level": 0.95, "min_group_size": 30}},
        "output": {"path": out, "report": False},
    })
    t0 = time.perf_counter()
    result = run_audit_job(spark, cfg)
    seconds = time.perf_counter() - t0
    if result.exit_code != 0:
        raise SystemExit(f"fairspark run failed: {result.summary['audits']}")
    return seconds, result.summary["stage_timings"], result.rows


def _views(pdf: pd.DataFrame) -> dict[str, tuple[pd.Series, pd.Series]]:
    """view name -> (value per row, privileged flag per row)."""
    inter = pdf["sex"].astype(str) + "|" + pdf["race"].astype(str)
    return {
        "sex": (pdf["sex"], pdf["sex"] == "M"),
        "race": (pdf["race"], pdf["race"] == "w"),
        "sex*race": (inter, (pdf["sex"] == "M") & (pdf["race"] == "w")),
    }


def run_pandas(path: str) -> tuple[float, dict[str, dict[str, float]]]:
    """One process: read, one groupby for the cells, numpy catalogue and intervals."""
    t0 = time.perf_counter()
    pdf = pd.read_parquet(path, columns=["sex", "race", "y", "p"])
    y, p = pdf["y"].to_numpy(), pdf["p"].to_numpy()
    cell = np.select([(y == 1) & (p == 1), (y == 0) & (p == 1), (y == 0) & (p == 0)],
                     [0, 1, 2], 3)  # tp fp tn fn (no unlabelled rows here)
    counts = (pdf.assign(cell=cell).groupby(["sex", "race", "cell"], observed=True)
              .size().unstack("cell", fill_value=0))
    out: dict[str, dict[str, float]] = {}
    idx = counts.index.to_frame(index=False)
    for name, (vals, _) in _views(idx).items():
        priv = {"sex": idx["sex"] == "M", "race": idx["race"] == "w",
                "sex*race": (idx["sex"] == "M") & (idx["race"] == "w")}[name].to_numpy()

        def group(mask: np.ndarray) -> dict[str, float]:
            s = counts.to_numpy()[mask].sum(axis=0).astype(float)
            d = {c: 0.0 for c in CELLS}
            d.update({CELLS[int(k)]: float(s[j]) for j, k in enumerate(counts.columns)})
            return d | {f"{c}_n": v for c, v in d.items()} | {f"{c}_w2": v for c, v in d.items()}

        u, pr = group(~priv), group(priv)
        values = compare_groups(u, pr)
        comparison_intervals(u, pr, level=0.95)
        for g in (u, pr):
            for r in RATE_NAMES:
                rate_interval(g, r, level=0.95)
        for v in pd.unique(vals[~priv]):  # per unprivileged value, as fairspark does
            g = group(vals.to_numpy() == v)
            compare_groups(g, pr)
            comparison_intervals(g, pr, level=0.95)
        out[name] = {k: float(values[k]) for k in ("statistical_parity_difference",
                                                     "tpr_difference")}
    return time.perf_counter() - t0, out


def run_fairlearn(path: str) -> tuple[float, dict[str, dict[str, float]]]:
    """One process: read, MetricFrame per view, difference() and ratio()."""
    from fairlearn.metrics import (
        MetricFrame,
        false_negative_rate,
        false_positive_rate,
        selection_rate,
        true_negative_rate,
        true_positive_rate,
    )
    from sklearn.metrics import accuracy_score, precision_score

    def npv(y, p):
        return precision_score(1 - np.asarray(y), 1 - np.asarray(p), zero_division=np.nan)

    def fdr(y, p):
        return 1.0 - precision_score(y, p, zero_division=np.nan)

    def for_(y, p):
        return 1.0 - npv(y, p)

    def err(y, p):
        return 1.0 - accuracy_score(y, p)

    metrics = {
        "selection_rate": selection_rate, "tpr": true_positive_rate,
        "fpr": false_positive_rate, "fnr": false_negative_rate, "tnr": true_negative_rate,
        "ppv": lambda y, p: precision_score(y, p, zero_division=np.nan), "npv": npv,
        "fdr": fdr, "for": for_, "error_rate": err, "accuracy": accuracy_score,
    }
    t0 = time.perf_counter()
    pdf = pd.read_parquet(path, columns=["sex", "race", "y", "p"])
    out: dict[str, dict[str, float]] = {}
    for name, (vals, priv) in _views(pdf).items():
        binary = np.where(priv, "privileged", "unprivileged")
        mf = MetricFrame(metrics=metrics, y_true=pdf["y"], y_pred=pdf["p"],
                         sensitive_features=pd.Series(binary, name=name))
        by = mf.by_group
        mf.difference()
        mf.ratio()
        out[name] = {
            "statistical_parity_difference": float(by.loc["unprivileged", "selection_rate"]
                                                   - by.loc["privileged", "selection_rate"]),
            "tpr_difference": float(by.loc["unprivileged", "tpr"] - by.loc["privileged", "tpr"]),
        }
        per_value = MetricFrame(metrics=metrics, y_true=pdf["y"], y_pred=pdf["p"],
                                sensitive_features=vals.rename(name))
        _ = per_value.by_group
    return time.perf_counter() - t0, out


def _one_size(spark, n: int, work: Path, args) -> dict:
    """Write the table of ``n`` rows, time fairspark and the peers, print and check."""
    path = str(work / f"table-{n}")
    t0 = time.perf_counter()
    make_table(spark, n, path)
    print(f"\n== {n:,} rows (table written in {time.perf_counter() - t0:.1f} s; {_load()})",
          flush=True)
    k = iter(range(10**6))
    fs_s, stages, rows = best_of(
        lambda: run_fairspark(spark, path, str(work / f"out-{n}-{next(k)}")), args.trials)
    fs_load = _load()
    fs_vals = {r["attribute"]: r for r in rows
               if r["group"] == "unprivileged" and r["metric"] == "statistical_parity_difference"}
    fs_tpr = {r["attribute"]: r["value"] for r in rows
              if r["group"] == "unprivileged" and r["metric"] == "tpr_difference"}
    pd_s, pd_vals = best_of(lambda: run_pandas(path), args.trials)
    pd_load = _load()
    entry = {"rows": n, "fairspark_s": fs_s, "fairspark_stages": stages,
             "group_audit_s": stages.get("audit group"), "pandas_s": pd_s,
             "load_fairspark": fs_load, "load_pandas": pd_load}
    fl_vals = pd_vals
    if n <= args.fairlearn_max_rows:
        fl_s, fl_vals = run_fairlearn(path)
        entry["fairlearn_s"], entry["load_fairlearn"] = fl_s, _load()
    for view in ("sex", "race", "sex*race"):
        a = fs_vals[view]["value"]
        for peer in (pd_vals, fl_vals):
            assert abs(a - peer[view]["statistical_parity_difference"]) < 1e-9, view
            assert abs(fs_tpr[view] - peer[view]["tpr_difference"]) < 1e-9, view
    entry["sex_spd"] = [fs_vals["sex"]["value"], fs_vals["sex"]["lower"],
                        fs_vals["sex"]["upper"]]
    print(f"fairspark job (group audit only): {fs_s:8.2f} s  {n / fs_s:>12,.0f} rows/s"
          f"   ({fs_load})")
    for name, sec in stages.items():
        print(f"  stage {name:<26} {sec:8.2f} s"
              + (f"  {n / sec:>12,.0f} rows/s" if sec > 0 and name.startswith("prepare") else ""))
    print(f"pandas one process:               {pd_s:8.2f} s  {n / pd_s:>12,.0f} rows/s"
          f"   fairspark/pandas = {fs_s / pd_s:.2f}   ({pd_load})")
    if "fairlearn_s" in entry:
        fl = entry["fairlearn_s"]
        print(f"fairlearn one process:            {fl:8.2f} s  {n / fl:>12,.0f} rows/s"
              f"   fairspark/fairlearn = {fs_s / fl:.2f}   ({entry['load_fairlearn']})")
    print("values agree (SP and TPR differences of sex, race, sex*race)", flush=True)
    shutil.rmtree(path, ignore_errors=True)
    return entry


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir)")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--fairlearn-max-rows", type=int, default=1_000_000,
                    help="run the fairlearn peer only up to this many rows (it is slow)")
    ap.add_argument("--json", default=None, help="write the figures to this JSON file")
    ap.add_argument("--trials", type=int, default=1,
                    help="runs of fairspark and of pandas per size (the fastest is kept)")
    args = parse_args(ap, argv, fast={"rows": [20_000], "trials": 1, "driver_memory": "1g",
                                      "fairlearn_max_rows": 20_000})
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-group-"))
    work.mkdir(parents=True, exist_ok=True)
    spark = _spark(args.driver_memory)
    results = []
    try:
        for n in args.rows:
            need, have = n * PANDAS_BYTES_PER_ROW, available_bytes()
            if have is not None and need > 0.8 * have:
                print(f"\n== {n:,} rows skipped: the pandas peer needs about {need / 2**30:.1f} "
                      f"GiB, {have / 2**30:.1f} GiB available ({_load()})", flush=True)
                continue
            results.append(_one_size(spark, n, work, args))
    finally:
        spark.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
