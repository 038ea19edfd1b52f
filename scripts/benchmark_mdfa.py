"""Benchmark: mdfa splits as Spark tasks (local[2]) vs the same splits in a sequential loop.

Both paths run the very same kernel (:func:`fairspark.mdfa.run_split`) with the same
per-split seeds on the same collected sample, so the results are identical (checked)
and only the wall time differs. Usage::

    python scripts/benchmark_mdfa.py --rows 50000 --splits 100 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--splits", type=int, default=100)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--auditor", default="random_forest")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--worst-violation", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    args = ap.parse_args(argv)

    import torch  # noqa: F401 - loaded first, so pin_threads limits its pool too

    from fairspark._threads import pin_threads
    from fairspark.mdfa import MDFAParams, MDFASample, make_synthetic, run_splits, run_splits_local
    from fairspark.session import build_session

    pin_threads()  # the sequential peer gets one thread, as each Spark task does
    d = make_synthetic(n=args.rows, nu=0.5, mu=0.2, seed=0)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    p = MDFAParams(splits=args.splits, auditor=args.auditor, epochs=args.epochs,
                   worst_violation=args.worst_violation, sample_rows=args.rows)
    seeds = [1000 + k for k in range(args.splits)]

    spark = build_session(master=f"local[{args.cores}]", app_name="mdfa-bench",
                          conf={"spark.ui.enabled": "false"}, log_level="ERROR")
    # warm the Python workers (imports of torch / scikit-learn) outside the timing: Spark
    # reuses them across jobs, as it does across the attributes of one audit
    warm = MDFAParams(splits=args.cores, epochs=1, l2_grid=[1e-3], worst_violation=False,
                      auditor="logistic_regression")
    run_splits(spark, smp, seeds=list(range(args.cores)), params=warm, partitions=args.cores)

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    par = run_splits(spark, smp, seeds=seeds, params=p, partitions=args.cores)
    t_par = time.perf_counter() - t0
    t0 = time.perf_counter()
    seq = run_splits_local(smp, seeds=seeds, params=p)
    t_seq = time.perf_counter() - t0
    load1 = os.getloadavg()[0]
    same = all(
        np.array_equal(par[c].to_numpy(float), seq[c].to_numpy(float), equal_nan=True)
        for c in ("gamma_pos", "gamma_neg", "delta", "delta_unweighted")
    )
    spark.stop()
    speedup = t_seq / t_par
    eff = speedup / args.cores
    g = seq["gamma_pos"].to_numpy(float)
    cmd = (f"python scripts/benchmark_mdfa.py --rows {args.rows} --splits {args.splits} "
           f"--cores {args.cores} --auditor {args.auditor} --epochs {args.epochs}"
           + (" --worst-violation" if args.worst_violation else ""))
    result = {
        "rows": args.rows, "splits": args.splits, "cores": args.cores, "auditor": args.auditor,
        "epochs": args.epochs, "worst_violation": args.worst_violation,
        "spark_seconds": round(t_par, 1), "sequential_seconds": round(t_seq, 1),
        "speedup": round(speedup, 2), "parallel_efficiency": round(eff, 2),
        "identical_results": bool(same),
        "load_avg_before_after": [round(load0, 1), round(load1, 1)],
        "gamma_mean": round(float(g.mean()), 4), "planted_gamma": round(d.gamma, 4),
    }
    print(json.dumps(result), flush=True)
    out = Path(args.out)
    text = out.read_text() if out.exists() else (
        "# mdfa benchmark: parallel splits vs a sequential loop\n\n"
        "The splits of mdfa are independent; fairspark runs them as `mapInPandas` tasks over "
        "the broadcast sample (`fairspark.mdfa.run_splits`). The peer is the same kernel in a "
        "plain Python loop on the driver (`run_splits_local`), same seeds, same sample: the "
        "results must be identical. Efficiency = (sequential time / Spark time) / cores.\n\n"
        "| command | rows | splits | auditor | epochs | Alg. 1 | Spark s | sequential s | "
        "speedup | efficiency | identical | load avg (before, after) | host |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    text += (f"| `{cmd}` | {args.rows} | {args.splits} | {args.auditor} | {args.epochs} | "
             f"{'yes' if args.worst_violation else 'no'} | {t_par:.1f} | {t_seq:.1f} | "
             f"{speedup:.2f} | {eff:.2f} | {same} | {load0:.1f}, {load1:.1f} | "
             f"{platform.node()} {os.cpu_count()} CPUs |\n")
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
