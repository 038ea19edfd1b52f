"""Benchmark: mdfa splits as Spark tasks (local[2]) vs the same splits in a sequential loop.

Both paths run the very same kernel (:func:`fairspark.mdfa.run_split`) with the same
per-split seeds on the same collected sample, so the results are identical (checked)
and only the wall time differs. Usage::

    python scripts/benchmark_mdfa.py --rows 50000 --splits 100 --out docs/benchmarks.md

``--demo`` instead times the demo's mdfa stage alone (the demo config's ``audits.mdfa``
settings on ``out/demo/_input/adult_scored.parquet``, the group audit off, no report)
once per ``--wva-search`` value, in the same process, and prints the stage seconds
(``summary.json``'s ``audits.mdfa.seconds``) with the load average::

    python scripts/benchmark_mdfa.py --demo --wva-search bisection sequential
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
    ap.add_argument("--demo", action="store_true",
                    help="time the demo's mdfa stage alone instead (see the module docstring)")
    ap.add_argument("--wva-search", nargs="+", default=["bisection", "sequential"])
    args = ap.parse_args(argv)
    if args.demo:
        return demo_stage(args.wva_search)

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


def demo_stage(searches: list[str]) -> int:
    """Time the demo's mdfa stage alone once per Algorithm 1 search; print JSON lines."""
    import tempfile

    import yaml

    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job
    from fairspark.session import build_session

    raw = yaml.safe_load((ROOT / "fairspark" / "conf" / "demo.yaml").read_text())
    mdfa = raw["audits"]["mdfa"]
    spark = build_session(master=raw["spark"]["master"], app_name="mdfa-demo-bench",
                          conf={"spark.ui.enabled": "false", **raw["spark"].get("conf", {})},
                          log_level="ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        for search in searches:
            cfg = {**raw, "audits": {"group": {"enabled": False},
                                     "mdfa": {**mdfa, "wva_search": search}},
                   "limits": {"rules": []}, "output": {"path": f"{tmp}/{search}", "report": False}}
            cfg["input"] = {**raw["input"], "path": str(ROOT / raw["input"]["path"])}
            load0 = os.getloadavg()
            res = run_audit_job(spark, parse_config(cfg))
            info = res.summary["audits"]["mdfa"]
            g = {a: v.get("gamma_max", {}).get("mean") for a, v in info["attributes"].items()}
            print(json.dumps({"wva_search": search, "mdfa_stage_seconds": info["seconds"],
                              "load_avg_before": [round(x, 2) for x in load0],
                              "load_avg_after": [round(x, 2) for x in os.getloadavg()],
                              "gamma_max_mean": g}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
