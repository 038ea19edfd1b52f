#!/usr/bin/env python
"""The CLI audit on a large synthetic table (HFM exact D at scale).

Writes ``--rows`` rows with ``--dim`` numeric features, a binary sensitive column, a
label, a prediction and a unique row key as Parquet under ``--tmp``, then runs
``fairspark audit`` (defaults, ``spark.driver.maxResultSize=1m``, ``local[2]``) on it
and prints the exit code, the wall time, the stage breakdown (the runner's ``stage``
log lines), the HFM rows (D, D_f, df with interval and status) and the load average.

Example::

    python benchmarks/bench_hfm_cli_scale.py --rows 5000000 --dim 30
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _harness import load, parse_args, write_uniform_table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--dim", type=int, default=30)
    ap.add_argument("--tmp", default="/tmp/fairspark_hfm_scale")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--only-hfm", action="store_true", help="switch the other audits off")
    ap.add_argument("--timeout", type=float, default=7200)
    args = parse_args(ap, argv, fast={"rows": 2000, "dim": 3, "only_hfm": True,
                                      "timeout": 600})
    base = Path(args.tmp) / f"n{args.rows}_d{args.dim}"
    inp = base / "in"
    if not (inp / "_done").exists():
        t = time.perf_counter()
        write_uniform_table(inp, args.rows, args.dim)
        (inp / "_done").write_text("")
        print(f"wrote {args.rows} rows x {args.dim} features in {time.perf_counter() - t:.1f} s")
    audits = {"hfm": {"method": "certified"}}
    if args.only_hfm:
        audits.update({a: {"enabled": False} for a in ("group", "mdfa", "correlation")})
    cfg = {
        "dataset": "hfm_scale", "run_date": "2026-11-30",
        "input": {"path": str(inp), "format": "parquet"},
        "columns": {
            "features": [f"f{j}" for j in range(args.dim)],
            "sensitive": [{"column": "sex", "privileged": "M"}],
            "label": {"column": "label", "positive": 1},
            "prediction": {"column": "prediction", "positive": 1}, "row_key": "row_id",
        },
        "audits": audits,
        "output": {"path": str(base / "out")},
        "spark": {"master": args.master, "conf": {"spark.driver.maxResultSize": "1m"}},
    }
    cfg_path = base / "config.json"  # JSON is YAML
    cfg_path.write_text(json.dumps(cfg, indent=1))
    cmd = [sys.executable, "-m", "fairspark.cli", "audit", "--config", str(cfg_path)]
    print("command:", " ".join(cmd), "| load at start:", load(), flush=True)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    el = time.perf_counter() - t
    print(f"exit code {proc.returncode}; wall {el:.1f} s; load at end {load()}")
    for line in (proc.stderr + proc.stdout).splitlines():
        if " stage " in line or "Error" in line or "error" in line:
            print("  " + line.strip())
    summ = sorted((base / "out").rglob("summary.json"))
    if summ:
        s = json.loads(summ[-1].read_text())
        print("stage_timings:", json.dumps(s.get("stage_timings", {})))
    for mp in sorted((base / "out").rglob("metrics.parquet")):
        import pandas as pd

        m = pd.read_parquet(mp)
        m = m[(m["audit"] == "hfm") & m["metric"].isin(["D", "D_f", "df"])]
        cols = [c for c in ("attribute", "metric", "value", "lower", "upper", "status", "detail")
                if c in m.columns]
        print(m[cols].to_string(index=False, max_colwidth=80))
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
