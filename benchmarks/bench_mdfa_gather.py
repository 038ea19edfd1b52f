#!/usr/bin/env python
"""mdfa's statistics and samples of every view in one pass.

On the nightly benchmark's synthetic table (``benchmarks/bench_nightly.py``: ``--dim``
features, sex, race and their intersection: 3 views) this times, in one Spark
application on ``--master``:

- **preparation's scan**: ``prepare`` (the one scan of the input with its checks) and
  the encoding of the features (the persisted table every audit reads);
- **per view** (the code before the one pass): for each view one ``groupBy`` of its
  statistics and one stratified collect of its sample
  (:func:`fairspark.mdfa._spark.grouped_stats`, :func:`~fairspark.mdfa._spark.collect_sample`);
- **one pass** (the default now): :func:`fairspark.mdfa.audit.gather_views`, every
  view's statistics from one aggregation and every sample from one pre-filtered collect.

It checks that both give the same sample rows per view and prints the seconds, the
ratios to preparation's scan and the load average. The two variants run ``--trials``
times each, alternating, so that a change of the machine's load hits both.

Example::

    python benchmarks/bench_mdfa_gather.py --rows 1000000 --dim 50 --trials 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _harness import load, parse_args, write_table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--tmp", default="/tmp/fairspark_nightly_bench")
    args = parse_args(ap, argv, fast={"rows": 2000, "dim": 4, "trials": 1})

    from bench_nightly import nightly_config
    from pyspark.sql import functions as F

    from fairspark.audits.base import AuditContext
    from fairspark.cli import _session
    from fairspark.columns import KEY, PRED, WEIGHT, X, input_col
    from fairspark.config import parse_config
    from fairspark.io import read_input
    from fairspark.mdfa._spark import collect_sample, grouped_stats, with_mdfa_columns
    from fairspark.mdfa.audit import AUDIT, _plan_features, gather_views
    from fairspark.prepare import prepare

    base = Path(args.tmp) / f"n{args.rows}_d{args.dim}"  # the table bench_nightly writes
    inp = base / "in"
    if not (inp / "_done").exists():
        write_table(inp, args.rows, args.dim)
        (inp / "_done").write_text("")
    cfg = parse_config(nightly_config(inp, base / "out", args.dim, args.master,
                                      {"group": {}, "mdfa": {}}))
    spark = _session(cfg, under_submit=False)  # as the CLI starts it
    print(f"load average at start: {load()}", flush=True)
    t0 = time.perf_counter()
    prepared = prepare(read_input(spark, input_config=cfg.input), config=cfg)
    t_prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    prepared.df.count()  # the encoded, persisted table every audit reads
    t_enc = time.perf_counter() - t0
    print(f"prepare (the one scan and its checks): {t_prep:.1f} s; encoding and "
          f"persisting the features: {t_enc:.1f} s; load {load()}", flush=True)

    ctx = AuditContext(spark=spark, prepared=prepared, config=cfg,
                       run_date=cfg.effective_run_date())
    params = cfg.audits.mdfa
    plan = _plan_features(prepared, params, set())
    attrs = ctx.attributes(params)

    def per_view() -> dict:
        out = {}
        capped = prepared.capped_df(max_rows=params.max_rows,
                                    seed=ctx.seed_for(AUDIT, "max_rows"))
        desc = ([input_col(c) for c in plan.desc_numeric]
                + [F.col(X)[i] for i in plan.desc_onehot_idx])
        for a in attrs:
            df = with_mdfa_columns(capped, priv_col=a.priv_col, prediction_col=PRED,
                                   target_group=params.target_group)
            st = grouped_stats(df, desc_cols=desc, desc_names=plan.desc_names,
                               weight_col=WEIGHT if prepared.weighted else None)
            cols = [F.col(X).alias("_x")] + [input_col(c).cast("double").alias(f"_d{j}")
                                             for j, c in enumerate(plan.desc_numeric)]
            out[a.name] = collect_sample(df, columns=cols, key_col=KEY,
                                         counts=st.cell_counts(), cap=params.sample_rows,
                                         seed=ctx.seed_for(AUDIT, a.name, "sample"))
        return out

    def one_pass() -> dict:
        return {n: v.rows for n, v in gather_views(ctx, params, attrs, plan).items()}

    times: dict[str, list[float]] = {"per view": [], "one pass": []}
    samples = {}
    for trial in range(args.trials):
        for name, fn in (("per view", per_view), ("one pass", one_pass)):
            t0 = time.perf_counter()
            samples[name] = fn()
            times[name].append(time.perf_counter() - t0)
            print(f"trial {trial}: {name}: {times[name][-1]:.1f} s; load {load()}",
                  flush=True)
    same = all(list(samples["per view"][a.name]["_k"]) == list(samples["one pass"][a.name]["_k"])
               for a in attrs)
    scan = t_prep + t_enc
    best = {k: min(v) for k, v in times.items()}
    print(json.dumps({"rows": args.rows, "dim": args.dim, "views": [a.name for a in attrs],
                      "sample_rows": params.sample_rows, "same_sample_rows": same,
                      "prepare_s": round(t_prep, 2), "encode_s": round(t_enc, 2),
                      "best_s": {k: round(v, 2) for k, v in best.items()},
                      "ratio_to_preparation": {k: round(v / scan, 2) for k, v in best.items()},
                      "one_pass_vs_per_view": round(best["one pass"] / best["per view"], 3),
                      "load_end": load()}, indent=1))
    spark.stop()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
