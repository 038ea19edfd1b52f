"""Compare two runs' ``metrics.parquet`` value by value (for refactors: same numbers?).

    python tools/compare_metrics.py BEFORE/run_date=D AFTER/run_date=D [--tol 1e-12]
        [--exclude-audit correlation]

Rows are matched on (audit, attribute, group, metric, metric_b, model); ``value``,
``lower`` and ``upper`` must agree within ``--tol`` (absolute), ``status`` and
``detail`` exactly. Run metadata (run date, versions, config hash) is not compared.
Exits 0 when everything agrees, 1 otherwise, and prints every difference.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

KEYS = ["audit", "attribute", "group", "metric", "metric_b", "model"]
NUMBERS = ["value", "lower", "upper"]
TEXTS = ["status", "detail"]


def _load(folder: Path, exclude: list[str]) -> pd.DataFrame:
    m = pd.read_parquet(folder / "metrics.parquet")
    m = m[~m.audit.isin(exclude)]
    return m.assign(**{k: m[k].fillna("") for k in KEYS}).set_index(KEYS).sort_index()


def _same(a: object, b: object, tol: float) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or (isinstance(a, float) and math.isnan(a))) and (
            b is None or (isinstance(b, float) and math.isnan(b)))
    return abs(float(a) - float(b)) <= tol


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--tol", type=float, default=1e-12)
    ap.add_argument("--exclude-audit", action="append", default=[])
    args = ap.parse_args()
    a, b = _load(args.before, args.exclude_audit), _load(args.after, args.exclude_audit)
    diffs = []
    for k in a.index.difference(b.index):
        diffs.append(f"only before: {k}")
    for k in b.index.difference(a.index):
        diffs.append(f"only after:  {k}")
    common = a.index.intersection(b.index)
    for k in common:
        ra, rb = a.loc[k], b.loc[k]
        if isinstance(ra, pd.DataFrame):  # repeated key: compare in order
            ra, rb = ra.iloc[0], rb.iloc[0] if isinstance(rb, pd.DataFrame) else rb
        for c in NUMBERS:
            va, vb = ra[c], rb[c]
            va = None if pd.isna(va) else float(va)
            vb = None if pd.isna(vb) else float(vb)
            if not _same(va, vb, args.tol):
                diffs.append(f"{k} {c}: {va!r} -> {vb!r}")
        for c in TEXTS:
            if str(ra[c]) != str(rb[c]):
                diffs.append(f"{k} {c}: {ra[c]!r} -> {rb[c]!r}")
    print(f"{len(common)} rows compared, {len(diffs)} differences (tol {args.tol:g}"
          + (f", audits left out: {args.exclude_audit}" if args.exclude_audit else "") + ")")
    for d in diffs:
        print("  " + d)
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
