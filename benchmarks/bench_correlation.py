"""Benchmark of the correlation audit's N x L trainings (Anahideh et al., 2021).

The same numbered attempts (same bootstrap samples, same seeds, same models) are run

1. through fairspark: ``mapInPandas`` tasks on a ``local[2]`` SparkSession;
2. in a plain sequential Python loop (one process);
3. in a 2-process joblib (loky) loop, one job per round;

with BLAS/OpenMP pinned to one thread everywhere. Each trial (3 by default) runs the
three back to back and prints one line: the wall-clock times, fairspark's parallel
efficiency ``T_sequential / (2 x T_fairspark)`` and the joblib loop's, whether the
three give identical metric vectors, and the load average before and after; then the
breakdown of fairspark's core-seconds per wave (:func:`breakdown`: start-up, shipping
the sample, the kernel, Arrow serialisation, gaps between tasks, idle tail, collect;
how many tasks ran on a fresh Python worker; the worker's OS threads).

Data: UCI Adult (``../shared/data``, fairness-comparison ``numerical-binsensitive``),
features min-max scaled, ``sex`` as the attribute (1 = privileged), label
``income-per-year``.

Example::

    python benchmarks/bench_correlation.py --n 300 --rounds 6 --k 1000 \\
        --models logistic_regression --trials 3

``auto-vs-fixed`` runs the audit itself twice in one Spark session on the
demo's scored Adult table (categorical features encoded by the job): ``rounds: auto``
(the default) and ``rounds: 30`` (fixed), the other settings at their defaults, and
prints per (attribute, model) the rounds used and run, the Monte-Carlo SE reached, the
wall time of each and their ratio, r(tpr_difference, fnr_difference), whether the
representatives agree, and the load average before and after; ``--save`` pickles
each run's summary (its ``monte_carlo_se_by_round`` gives any other target's stopping
round: round r depends only on its seed) and rows::

    python benchmarks/bench_correlation.py auto-vs-fixed \
        --input out/demo/_input/adult_scored.parquet --attributes sex

``fits`` runs the same rounds with ``linear_fits: per_model`` and
``batched`` and prints the CPU seconds per round by phase, the load average and the
ratio::

    python benchmarks/bench_correlation.py fits \
        --input out/demo/_input/adult_scored.parquet --attributes sex --set rounds=4
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from _harness import ROOT, draw_rows, load1, parse_args

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from fairspark._threads import pin_threads, single_thread

pin_threads()  # one BLAS/OpenMP thread here too, as in the Spark tasks

import numpy as np
import pandas as pd

from fairspark._shipping import Shipped
from fairspark.audits.base import derive_seed
from fairspark.correlation import (
    OracleData,
    OracleJob,
    OracleModel,
    draw_stratified_sample,
    run_attempt,
    run_oracle_tasks,
    split_round,
)
from fairspark.correlation._spark import _cached_split
from fairspark.session import build_session


def _prepared(y: np.ndarray, priv: np.ndarray, x: np.ndarray) -> pd.DataFrame:
    """The prepared-table columns of label ``y``, group ``priv`` and features ``x``."""
    return pd.DataFrame({"_fs_key": [str(i) for i in range(len(y))], "_fs_label": y,
                         "_fs_x": list(x), "_fs_w": 1.0, "_fs_p_0": priv})


def synthetic_table(rows: int, dim: int) -> pd.DataFrame:
    """The nightly design's rows (the harness's generator) with the prepared-table
    columns: the fast profile's table, which needs no data beside the checkout."""
    r = draw_rows(np.random.default_rng(0), rows, dim)
    return _prepared(r["label"].astype(float), ~r["female"], r["X"])


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
    return _prepared(y, priv, x)


def _round_job(x, y, priv, w, ids, *, model, seed, k, min_accuracy):
    data = OracleData(x=x, y=y, priv=priv, w=w)
    out = []
    with single_thread():
        splits: dict[int, object] = {}
        for rnd, att in ids:
            if rnd not in splits:
                splits[rnd] = split_round(data, seed=seed, round_id=rnd, test_fraction=0.3)
            res = run_attempt(
                data, splits[rnd], OracleModel(model=model, k=k, min_accuracy=min_accuracy),
                seed=seed, round_id=rnd, attempt=att,
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
                        data, split, OracleModel(model=model, k=k, min_accuracy=0.0),
                        seed=seed, round_id=0, attempt=int(a),
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
                data, split, OracleModel(model=model, k=k, min_accuracy=0.0),
                seed=seed, round_id=0, attempt=a,
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


def breakdown(tasks: list[dict], *, submit: float, collected: float, cores: int) -> dict:
    """Where one Spark job's core-seconds went, from the tasks' own timings.

    ``2 x wall`` core-seconds (for 2 cores) split into: start-up (job submitted to
    each core's first task: scheduling, a fresh Python worker's fork and imports,
    the closure's deserialisation), reading the shipped sample, the kernel itself,
    Arrow serialisation of the results, gaps between a core's tasks (task start-up
    of a reused worker), the idle tail (cores done while the last task runs) and the
    collect (last task done to pandas on the driver). Tasks are laid on cores in order
    of start; a core is free when its last task ends.
    """
    wall = collected - submit
    free = [submit] * cores
    first = [None] * cores
    startup = gaps = 0.0
    for t in sorted(tasks, key=lambda t: t["start"]):
        c = min(range(cores), key=lambda i: free[i])
        if first[c] is None:
            first[c] = t["start"]
            startup += max(0.0, t["start"] - submit)
        else:
            gaps += max(0.0, t["start"] - free[c])
        free[c] = max(free[c], t["end"])
    last = max(t["end"] for t in tasks)
    tail = sum(last - f for f in free)
    fields = {
        "startup": startup,
        "ship": sum(t["ship_s"] for t in tasks),
        "kernel": sum(t["run_s"] for t in tasks),
        "serialise": sum(t["serialise_s"] for t in tasks),
        "gaps": gaps,
        "tail": tail,
        "collect": cores * max(0.0, collected - last),
    }
    accounted = sum(fields.values())
    in_tasks = sum(t["end"] - t["start"] for t in tasks)
    fields["task_other"] = in_tasks - fields["ship"] - fields["kernel"] - fields["serialise"]
    fields["unaccounted"] = cores * wall - accounted - fields["task_other"]
    out = {k: round(v, 2) for k, v in fields.items()}
    out["core_seconds"] = round(cores * wall, 2)
    out["tasks"] = len(tasks)
    out["kernel_cpu"] = round(sum(t.get("run_cpu_s", 0.0) for t in tasks), 2)
    out["python_workers"] = len({t["pid"] for t in tasks})
    out["tasks_on_fresh_workers"] = sum(1 for t in tasks if t["worker_tasks_before"] == 0)
    out["worker_os_threads_max"] = max(t.get("os_threads", 1) for t in tasks)
    return out


def _correlation_run(spark, cfg) -> tuple[dict, list[dict], float, str, str]:
    """One audit run: the correlation summary, its rows, wall seconds, load before/after."""
    from fairspark.runner import compute_run

    before, t0 = load1(), time.perf_counter()
    run = compute_run(spark, cfg, render=False)
    wall = time.perf_counter() - t0
    rows = [r for r in run.long_rows if r["audit"] == "correlation"]
    return run.summary["audits"]["correlation"], rows, wall, before, load1()


def _pair(rows: list[dict], attr: str, model: str) -> float:
    return next(r["value"] for r in rows if r["attribute"] == attr and r["model"] == model
                and r["metric"] == "tpr_difference" and r["metric_b"] == "fnr_difference")


def auto_vs_fixed(argv: list[str]) -> int:
    """``rounds: auto`` against ``rounds: 30`` in one Spark session."""
    import logging
    import pickle

    from fairspark.demo import demo_config

    ap = argparse.ArgumentParser(prog="bench_correlation.py auto-vs-fixed")
    ap.add_argument("--input", required=True, help="the demo's scored Adult parquet")
    ap.add_argument("--attributes", nargs="+", default=["sex"])
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="correlation parameters for both runs (YAML values)")
    ap.add_argument("--runs", nargs="+", default=["auto", "30"],
                    help="the rounds of each run, in order (default: auto 30)")
    ap.add_argument("--save", help="pickle every run's summary and rows here (after each)")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    import yaml

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    extra = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    spark = build_session(master=args.master)
    out: dict[str, tuple] = {}
    for name in args.runs:
        corr = {"attributes": args.attributes, **extra, "rounds": yaml.safe_load(name)}
        cfg = demo_config(overrides={
            "input": {"path": args.input},
            "audits": {"group": None, "hfm": None, "mdfa": None, "correlation": corr},
        })
        summary, rows, wall, before, after = out[name] = _correlation_run(spark, cfg)
        print(f"rounds: {name}: {wall:.1f} s wall (load {before} -> {after})", flush=True)
        for attr, models in summary["attributes"].items():
            for model, a in models.items():
                print(f"  {attr}/{model}: {a['rounds']} rounds used ({a['rounds_run']} run, "
                      f"stopped by {a['stopped_by']}), Monte-Carlo SE "
                      f"{a['monte_carlo_se']:.4f}, {a['attempts']} attempts, r(tpr, fnr) "
                      f"{_pair(rows, attr, model):.12f}, representatives "
                      f"{a.get('representatives')}", flush=True)
        if args.save:
            Path(args.save).write_bytes(pickle.dumps(out))
    if len(out) == 2:
        (sa, _, wa, _, _), (sf, _, wf, _, _) = out.values()
        same = all(sa["attributes"][a][m].get("representatives")
                   == sf["attributes"][a][m].get("representatives")
                   for a in sa["attributes"] for m in sa["attributes"][a])
        print(f"wall {args.runs[0]} / {args.runs[1]} = {wa / wf:.2f}; representatives "
              f"{'the same' if same else 'DIFFER'}")
    spark.stop()
    return 0


def fits(argv: list[str]) -> int:
    """``linear_fits: per_model`` against ``batched`` in one Spark session.

    The same rounds (same seeds, bootstraps and test sets) of the audit on the demo's
    scored table, once with one scikit-learn fit per attempt and once with each round's
    logistic regressions fitted together; prints the CPU seconds per round by phase
    (measured in the tasks, ``summary.json``'s ``cost``), the wall time, the load
    average (``os.getloadavg()``) before and after each run, the ratio, and whether the
    representatives and r(tpr_difference, fnr_difference) agree.
    """
    import logging

    import yaml

    from fairspark.demo import demo_config

    ap = argparse.ArgumentParser(prog="bench_correlation.py fits")
    ap.add_argument("--input", required=True, help="the demo's scored Adult parquet")
    ap.add_argument("--attributes", nargs="+", default=["sex"])
    ap.add_argument("--set", nargs="*", default=["rounds=4"], metavar="KEY=VALUE",
                    help="correlation parameters for both runs (default rounds=4)")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    extra = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    spark = build_session(master=args.master)
    got = {}
    for how in ("per_model", "batched"):
        corr = {"attributes": args.attributes, **extra, "advanced": {"linear_fits": how}}
        cfg = demo_config(overrides={
            "input": {"path": args.input},
            "audits": {"group": None, "hfm": None, "mdfa": None, "correlation": corr},
        })
        la0 = os.getloadavg()
        summary, rows, wall, _, _ = _correlation_run(spark, cfg)
        la1 = os.getloadavg()
        got[how] = summary
        print(f"linear_fits: {how}: {wall:.1f} s wall, load average "
              f"{la0[0]:.2f} {la0[1]:.2f} {la0[2]:.2f} -> {la1[0]:.2f} {la1[1]:.2f} {la1[2]:.2f}")
        for attr, models in summary["attributes"].items():
            for model, a in models.items():
                c = a["cost"]["cpu_s_per_round"]
                print(f"  {attr}/{model}: {a['cost']['rounds_run']} rounds, "
                      f"{a['cost']['attempts']} attempts; CPU s per round "
                      + ", ".join(f"{k} {v:.2f}" for k, v in c.items())
                      + f"; r(tpr, fnr) {_pair(rows, attr, model):.12f}; representatives "
                      f"{a.get('representatives')}", flush=True)
    pm, bt = got["per_model"], got["batched"]
    for attr, models in pm["attributes"].items():
        for model, a in models.items():
            b = bt["attributes"][attr][model]
            ratio = a["cost"]["cpu_s_per_round"]["total"] / b["cost"]["cpu_s_per_round"]["total"]
            same = a.get("representatives") == b.get("representatives")
            print(f"{attr}/{model}: CPU s per round per_model / batched = {ratio:.2f}; "
                  f"representatives {'the same' if same else 'DIFFER'}")
    spark.stop()
    return 0


def stop_rule(argv: list[str]) -> int:
    """Where ``rounds: auto`` stops by each rule on bench_nightly's synthetic table.

    Runs ``--rounds`` rounds of one view in this process (no Spark; the rounds are the
    audit's: same seeds, bootstraps and batched fits at the defaults), then reads off
    every prefix: the matrix's Monte-Carlo SE and its worst pair, the representatives,
    and where the SE rule alone and the SE + stable-representatives rule stop.
    """
    import importlib.util

    from fairspark.correlation._batched import run_round_batched
    from fairspark.correlation._cluster import prefix_representatives
    from fairspark.correlation._estimate import decide_rounds, estimate_correlations
    from fairspark.correlation.params import CorrelationParams

    ap = argparse.ArgumentParser(prog="bench_correlation.py stop-rule")
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--rows", type=int, default=20000, help="the sample (sample_rows)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)
    spec = importlib.util.spec_from_file_location("bench_nightly",
                                                  ROOT / "benchmarks/bench_nightly.py")
    bn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bn)
    p = CorrelationParams()
    r = bn.draw_rows(np.random.default_rng(args.seed), args.rows, args.dim)
    data = OracleData(x=r["X"], y=r["label"].astype(float), priv=~r["female"],
                      w=np.ones(args.rows))
    oracle = OracleModel(model="logistic_regression", k=p.k, min_accuracy=p.min_accuracy)
    metrics = list(oracle.metrics)
    values, la0, c0 = [], os.getloadavg(), time.process_time()
    for rnd in range(args.rounds):
        split = split_round(data, seed=args.seed, round_id=rnd, test_fraction=p.test_fraction)
        done = run_round_batched(data, split, oracle, seed=args.seed, round_id=rnd, first=0,
                                 need=p.n_samples, cap=p.attempt_cap)
        values.append(np.stack([res.metrics for _, res in done
                                if res.status == "accepted"][: p.n_samples]))
    cpu = time.process_time() - c0
    est = estimate_correlations(values, metrics=metrics, ci_level=p.ci_level)
    per = est.per_round
    seed = derive_seed(args.seed, "pivot")
    reps = [prefix_representatives(per[:n], metrics, p, seed) for n in range(1, len(values) + 1)]
    iu = np.triu_indices(len(metrics), 1)
    print(f"{args.rounds} rounds, dim {args.dim}, {args.rows} rows: {cpu:.0f} CPU s "
          f"({cpu / args.rounds:.1f} per round), load average {la0[0]:.2f} -> "
          f"{os.getloadavg()[0]:.2f}")
    print("| kept rounds | SE | worst pair (its s) | representatives |")
    print("| --- | --- | --- | --- |")
    for n in range(2, len(values) + 1):
        e = estimate_correlations(values[:n], metrics=metrics, ci_level=p.ci_level)
        se = e.s[iu] / np.sqrt(e.rounds[iu])
        j = int(np.nanargmax(se))
        print(f"| {n} | {se[j]:.4f} | {metrics[iu[0][j]]} ~ {metrics[iu[1][j]]} "
              f"({e.s[iu][j]:.3f}) | {', '.join(reps[n - 1] or ())} |")
    ids = list(range(len(values)))
    for stable in (None, p.stable_rounds):
        d = decide_rounds(ids, per, rounds_run=len(values), rounds_min=p.rounds_min,
                          rounds_max=p.rounds_max, target_se=p.target_se,
                          representatives=reps, stable_rounds=stable)
        print(f"stable_rounds={stable}: stopped by {d.reason} after {d.rounds} rounds, "
              f"SE {d.se:.4f}, representatives {reps[d.rounds - 1]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["auto-vs-fixed"]:
        return auto_vs_fixed(argv[1:])
    if argv[:1] == ["fits"]:
        return fits(argv[1:])
    if argv[:1] == ["stop-rule"]:
        return stop_rule(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="N accepted models per round")
    ap.add_argument("--rounds", type=int, default=10, help="L rounds")
    ap.add_argument("--k", type=int, default=1000, help="bootstrap size K")
    ap.add_argument("--models", nargs="+", default=["logistic_regression"])
    ap.add_argument("--min-accuracy", type=float, default=0.5)
    ap.add_argument("--sample-rows", type=int, default=20000)
    ap.add_argument("--partitions", type=int, default=None,
                    help="tasks per wave (default: fairspark's, 4 per core)")
    ap.add_argument("--skip-joblib", action="store_true")
    ap.add_argument("--trials", type=int, default=3, help="repeats, each printed on its line")
    ap.add_argument(
        "--cpu-probe",
        type=int,
        default=0,
        metavar="N",
        help="also compare CPU seconds per training in tasks vs sequential (N fits)",
    )
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--data", choices=["adult", "synthetic"], default="adult",
                    help="Adult from --shared, or the nightly design's synthetic rows")
    ap.add_argument("--rows", type=int, default=5000, help="rows of --data synthetic")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--conf", nargs="*", default=[], metavar="KEY=VALUE",
                    help="extra Spark settings (e.g. spark.python.daemon.module=pyspark.daemon)")
    args = parse_args(ap, argv, fast={"n": 4, "rounds": 2, "k": 50, "sample_rows": 1000,
                                      "trials": 1, "data": "synthetic", "rows": 2000,
                                      "skip_joblib": True})

    from joblib import Parallel, delayed

    spark = build_session(
        master="local[2]",
        app_name="bench-correlation",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.driver.memory": "4g",
            **dict(kv.split("=", 1) for kv in args.conf),
        },
        log_level="ERROR",
    )
    daemon = spark.sparkContext.getConf().get("spark.python.daemon.module", "pyspark.daemon")
    pdf = (load_adult(Path(args.shared)) if args.data == "adult"
           else synthetic_table(args.rows, 5))
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
        "python_daemon": daemon,
        "models": {},
    }
    print(f"sample: {len(sample.y)} rows x {sample.x.shape[1]} features in {t_sample:.1f}s; "
          f"python daemon {daemon}; load {load1()}", flush=True)
    data = sample.for_attribute(0)
    # warm-up, not timed: Spark's Python workers (the daemon's imports, the broadcast)
    # and joblib's loky processes start once per application, as a SparkSession does;
    # the trials compare steady-state throughput
    t0 = time.perf_counter()
    warm = run_oracle_tasks(spark, sample, OracleJob(
        attributes=[0], models=[args.models[0]], seeds=[seed], n_samples=2, rounds=4,
        k=args.k, min_accuracy=args.min_accuracy, attempt_cap=10))
    if not args.skip_joblib:
        wids = list(zip(warm.attempts["round"].astype(int), warm.attempts["attempt"].astype(int),
                        strict=True))
        Parallel(n_jobs=2, backend="loky")(
            delayed(_round_job)(data.x, data.y, data.priv, data.w, wids[i::2],
                                model=args.models[0], seed=seed, k=args.k,
                                min_accuracy=args.min_accuracy) for i in range(2))
    print(f"warm-up (Spark workers, loky processes) {time.perf_counter() - t0:.1f}s", flush=True)
    for model in args.models:
        trials = []
        for trial in range(args.trials):
            # fairspark, sequential and joblib back to back in each trial, so that a
            # trial's ratios compare runs made under the same machine load
            load_before = load1()
            t0 = time.perf_counter()
            tab = run_oracle_tasks(spark, sample, OracleJob(
                attributes=[0], models=[model], seeds=[seed], n_samples=args.n,
                rounds=args.rounds, k=args.k, min_accuracy=args.min_accuracy,
                attempt_cap=5 * args.n, partitions=args.partitions, profile=True,
            ))
            t_fs = time.perf_counter() - t0
            att = tab.attempts
            ids = list(zip(att["round"].astype(int), att["attempt"].astype(int), strict=True))
            fs_vals = att[tab.metrics].to_numpy(float)
            t0, c0 = time.perf_counter(), time.process_time()
            seq = _round_job(
                data.x, data.y, data.priv, data.w, ids,
                model=model, seed=seed, k=args.k, min_accuracy=args.min_accuracy,
            )
            t_seq, cpu_seq = time.perf_counter() - t0, time.process_time() - c0
            same_seq = bool(np.array_equal(np.array(seq), fs_vals, equal_nan=True))
            t_job = same_job = None
            if not args.skip_joblib:
                by_round: dict[int, list] = {}
                for rnd, a in ids:
                    by_round.setdefault(rnd, []).append((rnd, a))
                t0 = time.perf_counter()
                parts = Parallel(n_jobs=2, backend="loky")(
                    delayed(_round_job)(
                        data.x, data.y, data.priv, data.w, chunk,
                        model=model, seed=seed, k=args.k, min_accuracy=args.min_accuracy,
                    )
                    for chunk in by_round.values()
                )
                t_job = time.perf_counter() - t0
                job_vals = np.array([v for p in parts for v in p])
                same_job = bool(np.array_equal(job_vals, fs_vals, equal_nan=True))
            waves = []
            for w in tab.profile:
                b = breakdown(w["tasks"], submit=w["submit"], collected=w["collected"], cores=2)
                waves.append({"attempts": w["attempts"], "chunks": w["chunks"], **b})
            pre = round(t_fs - sum(w["collected"] - w["submit"] for w in tab.profile), 2)
            row = {
                "trial": trial,
                "trainings": len(ids),
                "t_sequential": round(t_seq, 2),
                "cpu_sequential": round(cpu_seq, 2),
                "t_fairspark": round(t_fs, 2),
                "t_joblib2": None if t_job is None else round(t_job, 2),
                "efficiency_fairspark": round(t_seq / (2 * t_fs), 3),
                "efficiency_joblib2": None if t_job is None else round(t_seq / (2 * t_job), 3),
                "identical_sequential": same_seq,
                "identical_joblib": same_job,
                "load_before": load_before,
                "load_after": load1(),
                "driver_outside_jobs_s": pre,
                "waves": waves,
            }
            trials.append(row)
            print(
                f"[{model}] trial {trial}: {len(ids)} trainings  sequential {t_seq:.2f}s  "
                f"fairspark {t_fs:.2f}s  joblib2 "
                + ("-" if t_job is None else f"{t_job:.2f}s")
                + f"  efficiency fairspark {t_seq / (2 * t_fs):.3f}  joblib2 "
                + ("-" if t_job is None else f"{t_seq / (2 * t_job):.3f}")
                + f"  identical {same_seq}/{same_job}  load {load_before} -> {load1()}",
                flush=True,
            )
            for i, w in enumerate(waves):
                print(f"    wave {i} core-seconds: " + json.dumps(w), flush=True)
            kcpu = sum(w["kernel_cpu"] for w in waves)
            print(f"    CPU s: sequential {cpu_seq:.2f}, kernel in tasks {kcpu:.2f} "
                  f"(ratio {kcpu / max(cpu_seq, 1e-9):.3f}); kernel wall in tasks "
                  f"{sum(w['kernel'] for w in waves):.2f} core-s of "
                  f"{sum(w['core_seconds'] for w in waves):.2f}", flush=True)
        per_fit = min(t["t_sequential"] for t in trials) / trials[0]["trainings"]
        row = {"trials": trials, "seconds_per_training": round(per_fit, 5)}
        if args.cpu_probe:
            row["cpu_probe"] = cpu_probe(
                spark, sample, model=model, seed=seed, k=args.k, n=args.cpu_probe
            )
            print(json.dumps({"cpu_probe": row["cpu_probe"]}), flush=True)
        report["models"][model] = row
    spark.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
