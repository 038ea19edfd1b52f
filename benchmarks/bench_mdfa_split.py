"""Benchmark: the CPU seconds of one mdfa split by phase, at the defaults a user gets.

The sample is the paper's synthetic design (planted violation nu = 0.5, imbalance
mu = 0.2) widened to ``--dim`` features by independent normal columns, ``--rows`` rows
(default 50,000 at d = 50: the default ``sample_rows`` cap). The per-view work the
audit does once (the null model, the L2 choice or the view's balancing net) is timed
apart, then ``--splits`` splits run one after the other on one thread, as in a Spark
task, with ``MDFAParams()`` (optionally ``--params`` JSON on top). Prints the phase
table (CPU seconds per split: balancing, certificate, null, Algorithm 1), the per-view
seconds spread over the view's splits, and the load average::

    python benchmarks/bench_mdfa_split.py --rows 50000 --dim 50 --splits 3
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from _harness import load1, parse_args

PHASES = ("cpu_balance", "cpu_certificate", "cpu_null", "cpu_violation")


def sample_of(*, rows: int, dim: int, seed: int):
    """The synthetic sample widened to ``dim`` features (the first two carry the design)."""
    from fairspark.mdfa import MDFASample, make_synthetic

    data = make_synthetic(n=rows, nu=0.5, mu=0.2, seed=seed)
    rng = np.random.default_rng(seed + 1)
    x = np.hstack([data.x, rng.standard_normal((rows, max(0, dim - 2)))])
    names = [f"x{i}" for i in range(x.shape[1])]
    return MDFASample(x=x, s=data.s, y=data.y, desc=x[:, :2], feature_names=names,
                      desc_names=names[:2])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--params", default="{}", help="JSON of MDFAParams fields on top")
    ap.add_argument("--seed", type=int, default=0)
    args = parse_args(ap, argv, fast={
        "rows": 1000, "dim": 4, "splits": 1,
        "params": '{"epochs": 2, "auditor": "logistic_regression", "worst_violation": false}'})
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import torch

    from fairspark.audits.base import derive_seed
    from fairspark.mdfa.certify import prepare_view, run_split
    from fairspark.mdfa.params import MDFAParams

    torch.set_num_threads(1)
    params = MDFAParams(**json.loads(args.params))
    sample = sample_of(rows=args.rows, dim=args.dim, seed=args.seed)
    load0 = load1()
    seeds = [derive_seed(args.seed, "split", i) for i in range(args.splits)]
    c0 = time.process_time()
    sample = sample.with_null_model(seed=derive_seed(args.seed, "null"))
    c1 = time.process_time()
    sample, params = prepare_view(sample, seeds=seeds, params=params)
    c2 = time.process_time()
    rows = [run_split(sample, split=i, seed=sd, params=params) for i, sd in enumerate(seeds)]
    wall = time.process_time() - c2
    table = {ph: float(np.mean([getattr(r, ph) or 0.0 for r in rows])) for ph in PHASES}
    per_split = sum(table.values())
    planned = params.planned_splits() if params.splits != "auto" else params.splits_wave
    view = (c1 - c0) + (c2 - c1)
    print(f"mdfa split phases, {args.rows} rows, d = {args.dim}, {args.splits} splits, "
          f"params {args.params}; load before {load0}, after {load1()}")
    print("| phase | CPU s per split |")
    print("|---|---|")
    for ph in PHASES:
        print(f"| {ph.removeprefix('cpu_')} | {table[ph]:.2f} |")
    print(f"| **split total** | **{per_split:.2f}** (measured {wall / len(rows):.2f}) |")
    print(f"| per view: null model | {c1 - c0:.2f} |")
    print(f"| per view: L2 choice / view net | {c2 - c1:.2f} |")
    print(f"| per split with the per-view work over {planned} splits | "
          f"{per_split + view / planned:.2f} |")
    print("gamma_max per split:", [round(r.gamma_max, 4) for r in rows],
          "t:", [r.t for r in rows])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
