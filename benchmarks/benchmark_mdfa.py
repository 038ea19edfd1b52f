"""Benchmark: mdfa splits as Spark tasks (local[2]) vs the same splits in a sequential loop.

Both paths run the very same kernel (:func:`fairspark.mdfa.run_split`) with the same
per-split seeds on the same collected sample, so the results are identical (checked)
and only the wall time differs. A second peer, joblib with ``--cores`` loky processes
(one thread each, one split per call), shows what the machine gives two processes
running the kernel side by side. Each trial (3 by default) runs the three back to back
and prints one line (times, speedups, identical, load average before and after) and the
breakdown of the Spark job's core-seconds (see ``bench_correlation.breakdown``).
Usage::

    python benchmarks/benchmark_mdfa.py --rows 4000 --splits 100 --trials 3

``--demo`` instead times the demo's mdfa stage alone (the demo config's ``audits.mdfa``
settings on ``out/demo/_input/adult_scored.parquet``, the group audit off, no report)
once per ``--wva-search`` value, in the same process, and prints the stage seconds
(``summary.json``'s ``audits.mdfa.seconds``) with the load average::

    python benchmarks/benchmark_mdfa.py --demo --wva-search bisection sequential
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from _harness import load1, parse_args, spark_session

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=4_000)
    ap.add_argument("--splits", type=int, default=100)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--auditor", default="random_forest")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--worst-violation", action="store_true")
    ap.add_argument("--trials", type=int, default=3, help="repeats, each printed on its line")
    ap.add_argument("--partitions", type=int, default=None,
                    help="tasks (default: fairspark's, 4 per core)")
    ap.add_argument("--conf", nargs="*", default=[], metavar="KEY=VALUE",
                    help="extra Spark settings (e.g. spark.python.daemon.module=pyspark.daemon)")
    ap.add_argument("--out", default=None,
                    help="append the figures as a markdown table row to this file")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--demo", action="store_true",
                    help="time the demo's mdfa stage alone instead (see the module docstring)")
    ap.add_argument("--wva-search", nargs="+", default=["bisection", "sequential"])
    ap.add_argument("--skip-joblib", action="store_true",
                    help="leave out the joblib peer (--cores loky processes)")
    ap.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                    help="time trial 0 with cold Spark Python workers (their torch and "
                         "scikit-learn imports inside the timing)")
    args = parse_args(ap, argv, fast={"rows": 500, "splits": 2, "trials": 1, "epochs": 2,
                                      "auditor": "logistic_regression", "skip_joblib": True})
    if args.demo:
        return demo_stage(args.wva_search)

    import torch  # noqa: F401 - loaded first, so pin_threads limits its pool too
    from bench_correlation import breakdown

    from fairspark._threads import pin_threads
    from fairspark.mdfa import (
        MDFAParams,
        MDFASample,
        make_synthetic,
        run_splits,
        run_splits_local,
        split_frame,
    )

    pin_threads()  # the sequential peer gets one thread, as each Spark task does
    d = make_synthetic(n=args.rows, nu=0.5, mu=0.2, seed=0)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    p = MDFAParams(splits=args.splits, auditor=args.auditor, epochs=args.epochs,
                   worst_violation=args.worst_violation, sample_rows=args.rows)
    seeds = [1000 + k for k in range(args.splits)]

    spark = spark_session(master=f"local[{args.cores}]", app_name="mdfa-bench",
                          conf={"spark.ui.enabled": "false",
                                **dict(kv.split("=", 1) for kv in args.conf)})
    daemon = spark.sparkContext.getConf().get("spark.python.daemon.module", "pyspark.daemon")
    print(f"mdfa: {args.rows} rows, {args.splits} splits, auditor {args.auditor}, "
          f"{args.epochs} epochs; python daemon {daemon}; load {load1()}", flush=True)
    # The sequential peer runs in this process, which has imported torch and
    # scikit-learn already. Unless --no-warm-up, one untimed Spark job of one split per
    # core first starts the Python workers and their imports (as bench_correlation
    # does), so every trial compares warm workers with a warm process; with it, trial 0
    # pays the start-up a real audit pays once per run (12-20 core-s here).
    # The second peer, joblib: the same kernel in --cores loky processes (one thread
    # each), one split per call with joblib's dynamic dispatch, so it shows what this
    # machine gives two processes running the kernel side by side.
    from joblib import Parallel, delayed

    def joblib_run(seed_list: list[int]):
        parts = Parallel(n_jobs=args.cores, backend="loky")(
            delayed(_one_split)(smp, i, sd, p) for i, sd in enumerate(seed_list))
        return split_frame(parts)

    if args.warm_up:
        t0 = time.perf_counter()
        run_splits(spark, smp, seeds=seeds[:args.cores], params=p, partitions=args.cores)
        if not args.skip_joblib:
            joblib_run(seeds[:args.cores])
        print(f"warm-up (Spark Python workers, loky processes) "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
    trials = []
    for trial in range(args.trials):
        load0 = load1()
        prof: list[dict] = []
        t0 = time.perf_counter()
        par = run_splits(spark, smp, seeds=seeds, params=p, partitions=args.partitions,
                         profile=prof)
        t_par = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        seq = run_splits_local(smp, seeds=seeds, params=p)
        t_seq, cpu_seq = time.perf_counter() - t0, time.process_time() - c0
        same = _same_results(par, seq)
        t_job = same_job = None
        if not args.skip_joblib:
            t0 = time.perf_counter()
            job_res = joblib_run(seeds)
            t_job = time.perf_counter() - t0
            same_job = _same_results(job_res, seq)
        job = prof[-1]
        b = breakdown(prof[:-1], submit=job["submit"], collected=job["collected"],
                      cores=args.cores)
        row = {"trial": trial, "sequential_seconds": round(t_seq, 2),
               "spark_seconds": round(t_par, 2), "speedup": round(t_seq / t_par, 3),
               "identical_results": bool(same), "load_before": load0, "load_after": load1(),
               "joblib_seconds": None if t_job is None else round(t_job, 2),
               "speedup_joblib": None if t_job is None else round(t_seq / t_job, 3),
               "identical_joblib": same_job,
               "chunks": job["chunks"], "breakdown_core_seconds": b}
        trials.append(row)
        job_txt = ("" if t_job is None else
                   f"  joblib{args.cores} {t_job:.2f}s speedup {t_seq / t_job:.3f}"
                   f" identical {same_job}")
        print(f"trial {trial}: {args.splits} splits  sequential {t_seq:.2f}s  spark {t_par:.2f}s"
              f"  speedup {t_seq / t_par:.3f}  identical {same}{job_txt}"
              f"  load {load0} -> {load1()}", flush=True)
        print(f"    core-seconds ({job['chunks']} tasks): " + json.dumps(b), flush=True)
        print(f"    CPU s: sequential {cpu_seq:.2f}, kernel in tasks {b['kernel_cpu']:.2f} "
              f"(ratio {b['kernel_cpu'] / max(cpu_seq, 1e-9):.3f})", flush=True)
        row["cpu_sequential"] = round(cpu_seq, 2)
    spark.stop()
    g = seq["gamma_pos"].to_numpy(float)
    result = {
        "rows": args.rows, "splits": args.splits, "cores": args.cores, "auditor": args.auditor,
        "epochs": args.epochs, "worst_violation": args.worst_violation, "python_daemon": daemon,
        "trials": trials, "gamma_mean": round(float(g.mean()), 4),
        "planted_gamma": round(d.gamma, 4),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.out:
        _append_markdown(Path(args.out), args, trials)
    return 0


def _same_results(a, b) -> bool:
    """Two split tables give the same gamma and delta columns, bit for bit."""
    return all(
        np.array_equal(a[c].to_numpy(float), b[c].to_numpy(float), equal_nan=True)
        for c in ("gamma_pos", "gamma_neg", "gamma_max", "delta", "delta_unweighted"))


def _one_split(smp, split: int, seed: int, params):
    """joblib peer: one split in a loky process pinned to one thread, as a Spark task is."""
    from fairspark._threads import pin_threads
    from fairspark.mdfa import run_split

    pin_threads()
    return run_split(smp, split=split, seed=int(seed), params=params)


def _append_markdown(out: Path, args: argparse.Namespace, trials: list[dict]) -> None:
    """One markdown table row per trial (the table's header when the file is new)."""
    cmd = (f"python benchmarks/benchmark_mdfa.py --rows {args.rows} --splits {args.splits} "
           f"--cores {args.cores} --auditor {args.auditor} --epochs {args.epochs}"
           + (" --worst-violation" if args.worst_violation else ""))
    text = out.read_text() if out.exists() else (
        "| command | trial | Spark s | sequential s | speedup | identical | load avg "
        "(before, after) | host |\n|---|---|---|---|---|---|---|---|\n"
    )
    for t in trials:
        text += (f"| `{cmd}` | {t['trial']} | {t['spark_seconds']:.1f} | "
                 f"{t['sequential_seconds']:.1f} | {t['speedup']:.2f} | "
                 f"{t['identical_results']} | {t['load_before']}, {t['load_after']} | "
                 f"{platform.node()} {os.cpu_count()} CPUs |\n")
    out.write_text(text, encoding="utf-8")


def demo_stage(searches: list[str]) -> int:
    """Time the demo's mdfa stage alone once per Algorithm 1 search; print JSON lines."""
    import tempfile

    import yaml

    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job

    raw = yaml.safe_load((ROOT / "fairspark" / "conf" / "demo.yaml").read_text())
    mdfa = raw["audits"]["mdfa"]
    spark = spark_session(master=raw["spark"]["master"], app_name="mdfa-demo-bench",
                          conf={"spark.ui.enabled": "false", **raw["spark"].get("conf", {})})
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
