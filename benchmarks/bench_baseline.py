"""Benchmark: the group audit of two decisions (``columns.baseline``) against one.

A synthetic scored table (sex, race, a feature, a label, a challenger and a baseline
decision that agree on about 90% of rows) is written to Parquet by Spark; then
``run_audit_job`` with only the ``group`` audit runs on ``local[2]`` without a
baseline and with one (the one aggregation also groups by the baseline decision;
the baseline's cells and the paired differences are computed on the driver). After
one untimed run of each, prints the best wall time of each and their ratio (the
issue's target: at most 1.3x), with the load average: on a shared machine compare
only the ratio within one run.
Example::

    python benchmarks/bench_baseline.py --rows 1000000 10000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _harness import load, parse_args, spark_session

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _write(spark, n: int, path: str) -> None:
    """``n`` rows built on Spark (no driver copy), seeded."""
    from pyspark.sql import functions as F

    r = lambda k: F.rand(seed=k)
    df = (spark.range(n)
          .withColumn("sex", F.when(r(1) < 0.55, "M").otherwise("F"))
          .withColumn("race", F.element_at(F.array(*map(F.lit, "wbao")),
                                           (F.floor(r(2) * 4) + 1).cast("int")))
          .withColumn("x", F.randn(seed=3))
          .withColumn("y", (r(4) < 1 / (1 + F.exp(-F.col("x")))).cast("int"))
          .withColumn("p_old", (F.col("x") + F.when(F.col("sex") == "M", 0.3).otherwise(0.0)
                                > 0.2).cast("int"))
          .withColumn("p_new", F.when(r(5) < 0.1, 1 - F.col("p_old"))
                      .otherwise(F.col("p_old")))
          .withColumn("id", F.col("id").cast("string")))
    df.write.mode("overwrite").parquet(path)


def _config(inp: str, out: str, *, baseline: bool):
    from fairspark.config import parse_config

    cols = {"features": ["x"], "sensitive": [{"column": "sex", "privileged": "M"},
                                             {"column": "race", "privileged": "w"}],
            "label": {"column": "y"}, "prediction": {"column": "p_new"}, "row_key": "id"}
    if baseline:
        cols["baseline"] = {"column": "p_old"}
    return parse_config({"dataset": "bench_baseline", "run_date": "2026-12-05",
                         "input": {"path": inp}, "columns": cols, "audits": {"group": {}},
                         "output": {"path": out, "report": False}})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", default=None)
    args = parse_args(ap, argv, fast={"rows": [20_000], "repeats": 1})
    from fairspark.runner import run_audit_job

    spark = spark_session(app_name="bench-baseline",
                          conf={"spark.sql.shuffle.partitions": "8"})
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-baseline-"))
    print("| rows | one decision (s) | two decisions (s) | ratio | load |")
    print("|---|---|---|---|---|")
    for n in args.rows:
        inp = str(work / f"in_{n}")
        _write(spark, n, inp)
        best = {}
        for paired in (False, True):  # warm-up, untimed: the JVM's first run is slower
            run_audit_job(spark, _config(inp, str(work / "out"), baseline=paired))
        for _ in range(args.repeats):
            for paired in (False, True):  # interleaved: drifting load hits both alike
                t0 = time.perf_counter()
                res = run_audit_job(spark, _config(inp, str(work / "out"), baseline=paired))
                assert res.exit_code == 0, res.exit_code
                best[paired] = min(best.get(paired, float("inf")), time.perf_counter() - t0)
        print(f"| {n:,} | {best[False]:.2f} | {best[True]:.2f} | "
              f"{best[True] / best[False]:.2f}x | {load()} |")
        shutil.rmtree(inp, ignore_errors=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
