"""Partition-independence fingerprint of the HFM computation (scriptable).

Runs ``certified`` (which also yields ``approx`` and ``pointwise``), on the driver and
on the Spark passes, on a deterministic adversarial synthetic table (grid ties,
duplicated rows, a one-row group, a rare group, a multi-valued attribute) for several
partition counts, and returns every number as JSON. The output must be identical (1e-12
relative) for every partition count and on every cluster shape, e.g.::

    python studies/hfm_checks.py --master 'local[2]' > a.json
    spark-submit --master 'local-cluster[2,1,1024]' studies/hfm_checks.py > b.json
    python studies/hfm_checks.py --compare a.json b.json

A command-line tool, so it lives beside the other studies and not in the library; it
imports ``fairspark`` (installed, or the repository root on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

__all__ = ["compare_fingerprints", "fingerprint", "synthetic_points"]


def synthetic_points(*, n: int = 2000, dim_x: int = 4, seed: int = 7) -> list[tuple]:
    """Rows ``(key, y, yp, x, c0, c1, c2)`` of the adversarial test table."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 3, size=(n, dim_x)) / 2.0
    X[: n // 4] = rng.random((n // 4, dim_x))
    y = rng.integers(0, 2, n).astype(float)
    yp = np.where(rng.random(n) < 0.8, y, 1 - y)
    c0 = (rng.random(n) < 0.006).astype(int)
    c1 = rng.integers(0, 2, n)
    c1[17] = 2
    c2 = rng.integers(0, 4, n)
    idx = np.r_[np.arange(n), rng.choice(n, 40, replace=False)]
    return [
        (f"r{i:05d}", float(y[i]), float(yp[i]), [float(v) for v in X[i]],
         int(c0[i]), int(c1[i]), int(c2[i]))
        for i in idx
    ]


def fingerprint(spark: Any, *, partitions: tuple[int, ...] = (1, 3, 8), m1: int = 3,
                m2: int = 3, seed: int = 11) -> dict[str, Any]:
    """All HFM numbers of the synthetic table for each partition count.

    Parameters
    ----------
    spark : SparkSession
        Any session (local, local-cluster, a real cluster).
    partitions : tuple of int
        Range partition counts (the input is repartitioned the same way).
    m1, m2, seed : int
        ApproxDist settings.

    Returns
    -------
    dict
        ``{"P=<p>": {"<method>/<tgt>/<attr>": {...numbers and witness keys...}}}``.
    """
    from fairspark.hfm.compute import (
        CertifyOptions,
        DistanceOptions,
        hfm_distances,
        make_projections,
    )

    rows = synthetic_points()
    pts = spark.createDataFrame(
        rows, "key string, y double, yp double, x array<double>, c0 int, c1 int, c2 int"
    )
    W = make_projections(dim=5, m1=m1, sampler="uniform_l1", seed=seed)
    out: dict[str, Any] = {}
    for p in partitions:
        cell: dict[str, Any] = {}
        # certified: the default (this small table is searched on the driver);
        # certified_spark: the same passes forced onto Spark (local_max_bytes=0)
        for method in ("certified", "certified_spark"):
            options = DistanceOptions(method=method.removesuffix("_spark"), m2=m2,
                                      num_partitions=p,
                                      paper_value=method == "certified")
            certify = CertifyOptions(seed=seed, **({"local_max_bytes": 0}
                                                   if method == "certified_spark" else {}))
            res = hfm_distances(pts.repartition(p), n_attr=3, dim_x=4, n_rows=len(rows),
                                options=options, certify=certify, projections=W)
            for (tgt, a), r in sorted(res.items()):
                cell[f"{method}/{tgt}/{a}"] = {
                    "value": r.value, "avg": r.avg, "lower": r.lower, "upper": r.upper,
                    "key": r.key, "nb_key": r.nb_key,
                    **{k: r.extra[k] for k in ("approx", "approx_avg", "pointwise",
                                               "pointwise_avg", "engine", "n_searched",
                                               "n_checked") if k in r.extra},
                }
        out[f"P={p}"] = cell
    return out


def compare_fingerprints(a: dict[str, Any], b: dict[str, Any], *, rel: float = 1e-12) -> list[str]:
    """Differences between fingerprints (and between partition counts within each)."""
    problems: list[str] = []
    cells = [(f"a/{k}", v) for k, v in a.items()] + [(f"b/{k}", v) for k, v in b.items()]
    ref_name, ref = cells[0]
    for name, cell in cells[1:]:
        for key, vals in ref.items():
            other = cell.get(key)
            if other is None:
                problems.append(f"{name}: missing {key}")
                continue
            for field, v in vals.items():
                w = other.get(field)
                if isinstance(v, float) and isinstance(w, float):
                    if not math.isclose(v, w, rel_tol=rel, abs_tol=0.0):
                        problems.append(f"{name} {key} {field}: {w!r} != {v!r} ({ref_name})")
                elif v != w:
                    problems.append(f"{name} {key} {field}: {w!r} != {v!r} ({ref_name})")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Print the fingerprint as JSON, or compare two saved fingerprints (exit 1 if they differ)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--master", default=None)
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = ap.parse_args(argv)
    if args.compare:
        with open(args.compare[0]) as fa, open(args.compare[1]) as fb:
            problems = compare_fingerprints(json.load(fa), json.load(fb))
        print("\n".join(problems) or "identical")
        return 1 if problems else 0
    from fairspark.session import build_session

    # no --master: the one spark-submit (or pyspark's default) sets
    spark = build_session(master=args.master, app_name="hfm-fingerprint", log_level="ERROR",
                          conf={"spark.sql.execution.arrow.pyspark.enabled": "true"})
    try:
        fp = fingerprint(spark)
    finally:
        spark.stop()
    print(json.dumps(fp, sort_keys=True))
    problems = compare_fingerprints(fp, fp)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
