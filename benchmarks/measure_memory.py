"""Measure memory per row of each audit, for executor sizing (docs/benchmarks.md).

Each (audit, rows) cell runs in a fresh local[2] Spark application (so peaks do not
carry over) on synthetic scored rows with ``--dim`` numeric features; after the audit
the script reads the executor's peak memory metrics from Spark's REST API
(``JVMHeapMemory``, ``ProcessTreePythonRSSMemory`` with process-tree metrics on) and
the stages' peak execution memory. The slope between two sizes is the memory per row.

Usage::

    python benchmarks/measure_memory.py --rows 20000 80000 --audits group hfm mdfa correlation
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _harness import parse_args, spark_session

AUDIT_PARAMS = {
    "group": {},
    "hfm": {"method": "certified"},
    "mdfa": {"sample_rows": 5000, "splits": 4, "auditor": "random_forest"},
    "correlation": {"n_samples": 40, "rounds": 2, "k": 500},
}


def _one(audit: str, rows: int, dim: int) -> dict:
    import numpy as np
    import pandas as pd

    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job

    # the REST API below reads the executor's peak memory: UI on, process-tree metrics
    spark = spark_session(
        app_name=f"mem-{audit}-{rows}", log_level="WARN",
        conf={"spark.ui.enabled": "true", "spark.ui.port": "4077",
              "spark.executor.processTreeMetrics.enabled": "true",
              "spark.executor.metrics.pollingInterval": "100ms",
              "spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "4"},
    )
    rng = np.random.default_rng(1)
    pdf = pd.DataFrame(rng.random((rows, dim)), columns=[f"x{i}" for i in range(dim)])
    pdf["id"] = np.arange(rows).astype(str)
    pdf["sex"] = rng.choice(["M", "F"], rows)
    pdf["y"] = (rng.random(rows) < 0.4).astype(int)
    pdf["p"] = ((pdf["x0"] + 0.2 * (pdf["sex"] == "M")) > 0.6).astype(int)
    tmp = Path(tempfile.mkdtemp())
    pdf.to_parquet(tmp / "in.parquet", index=False)
    cfg = {
        "dataset": "mem", "seed": 1, "input": {"path": str(tmp / "in.parquet")},
        "columns": {"features": [f"x{i}" for i in range(dim)],
                    "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"}, "row_key": "id"},
        "audits": {"group": {"enabled": audit == "group"}, audit: AUDIT_PARAMS[audit]},
        "output": {"path": str(tmp / "out"), "report": False},
    }
    t0 = time.perf_counter()
    res = run_audit_job(spark, parse_config(cfg))
    seconds = time.perf_counter() - t0
    time.sleep(1.0)  # one more metrics poll
    app = spark.sparkContext.applicationId
    base = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{app}"
    execs = json.load(urllib.request.urlopen(f"{base}/executors"))
    peak = execs[0].get("peakMemoryMetrics", {})
    stages = json.load(urllib.request.urlopen(f"{base}/stages"))
    spark.stop()
    return {
        "audit": audit, "rows": rows, "dim": dim, "seconds": round(seconds, 1),
        "exit_code": res.exit_code,
        "jvm_heap_mb": peak.get("JVMHeapMemory", 0) / 2**20,
        "python_rss_mb": peak.get("ProcessTreePythonRSSMemory", 0) / 2**20,
        "peak_execution_mb": max((s.get("peakExecutionMemory", 0) for s in stages),
                                 default=0) / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[20000, 80000])
    ap.add_argument("--audits", nargs="+", default=list(AUDIT_PARAMS))
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--one", nargs=2, metavar=("AUDIT", "ROWS"), help=argparse.SUPPRESS)
    args = parse_args(ap, argv, fast={"rows": [1000, 2000], "audits": ["group"], "dim": 3})
    if args.one:
        print(json.dumps(_one(args.one[0], int(args.one[1]), args.dim)))
        return 0
    results = []
    for audit in args.audits:
        for n in args.rows:
            out = subprocess.run(
                [sys.executable, __file__, "--one", audit, str(n), "--dim", str(args.dim)],
                capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
            line = [x for x in out.stdout.splitlines() if x.startswith("{")]
            if not line:
                print(f"{audit} {n}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            r = json.loads(line[-1])
            results.append(r)
            print(json.dumps(r), flush=True)
    print("\n| audit | rows | d | time (s) | JVM heap peak (MiB) | Python RSS peak (MiB) "
          "| stage exec. memory peak (MiB) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['audit']} | {r['rows']:,} | {r['dim']} | {r['seconds']} | "
              f"{r['jvm_heap_mb']:.0f} | {r['python_rss_mb']:.0f} | {r['peak_execution_mb']:.1f} |")
    print("\nper extra 1,000 rows (slope between the two sizes):")
    for audit in args.audits:
        rs = sorted((r for r in results if r["audit"] == audit), key=lambda r: r["rows"])
        if len(rs) >= 2:
            a, b = rs[0], rs[-1]
            dn = (b["rows"] - a["rows"]) / 1000
            print(f"- {audit}: JVM heap {(b['jvm_heap_mb'] - a['jvm_heap_mb']) / dn:+.3f} MiB, "
                  f"Python RSS {(b['python_rss_mb'] - a['python_rss_mb']) / dn:+.3f} MiB")
    return 0 if len(results) == len(args.audits) * len(args.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
