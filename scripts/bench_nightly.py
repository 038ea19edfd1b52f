#!/usr/bin/env python
"""Issue 17 item 3: the whole nightly run, all four audits at their documented defaults.

For each ``--rows`` size, writes a synthetic scored table (``--dim`` numeric features, two
sensitive attributes ``sex`` (2 values) and ``race`` (4 values) and their intersection,
a label, a prediction and a unique row key) as Parquet, runs ``fairspark audit`` on it
with every audit switched on at its defaults (``group``, ``hfm``, ``mdfa``,
``correlation``: an empty section each) on ``local[2]``, and prints one table line per
size: exit code, wall time, the runner's stage timings (from ``summary.json``), the peak
resident memory of the run's process tree (driver JVM, Python driver and Python workers,
sampled every 0.25 s from ``/proc``) and the load average. Then it fits, per stage,
``time = a + b * rows`` over the sizes (least squares) so that ``docs/operations.md``
can extrapolate.

Example (the issue's sizes; run on a quiet machine)::

    python scripts/bench_nightly.py --rows 100000 300000 1000000 --dim 50
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def write_table(path: Path, rows: int, dim: int, seed: int = 0, chunk: int = 250_000) -> None:
    """Scored table: the prediction depends on the features and (a little) on both groups."""
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    races = np.array(["White", "Black", "Asian", "Other"])
    for i, s in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - s)
        X = rng.normal(size=(n, dim))
        sex = rng.random(n) < 0.45
        race = rng.choice(4, size=n, p=[0.6, 0.2, 0.12, 0.08])
        X[:, 0] += 0.5 * sex  # features carry some group information
        X[:, 1] += 0.3 * (race == 1)
        score = X[:, :5].mean(axis=1) - 0.15 * sex - 0.1 * (race == 1)
        cols = {f"f{j}": X[:, j] for j in range(dim)}
        cols.update({
            "sex": np.where(sex, "Female", "Male"),
            "race": races[race],
            "label": (score + rng.normal(0, 0.3, n) > 0).astype(int),
            "prediction": (score > 0).astype(int),
            "row_id": [f"r{j:09d}" for j in range(s, s + n)],
        })
        pq.write_table(pa.table(cols), path / f"part-{i:05d}.parquet")


def _tree_rss(root: int) -> tuple[int, int]:
    """(sum, max) resident bytes over ``root`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            ppid, pages = int(parts[1]), int(parts[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
        rss[int(d)] = pages * page
    total, biggest, todo = 0, 0, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        biggest = max(biggest, rss.get(p, 0))
        todo.extend(children.get(p, []))
    return total, biggest


def run_one(base: Path, rows: int, dim: int, master: str, timeout: float) -> dict:
    inp = base / "in"
    if not (inp / "_done").exists():
        t = time.perf_counter()
        write_table(inp, rows, dim)
        (inp / "_done").write_text("")
        print(f"wrote {rows} rows x {dim} features in {time.perf_counter() - t:.1f} s",
              flush=True)
    out = base / "out"
    cfg = {
        "dataset": "nightly_bench", "run_date": "2026-11-30", "seed": 17,
        "input": {"path": str(inp), "format": "parquet"},
        "columns": {
            "features": [f"f{j}" for j in range(dim)],
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": "White"}],
            "intersections": [["sex", "race"]],
            "label": {"column": "label", "positive": 1},
            "prediction": {"column": "prediction", "positive": 1}, "row_key": "row_id",
        },
        "audits": {"group": {}, "hfm": {}, "mdfa": {}, "correlation": {}},
        "output": {"path": str(out)},
        "spark": {"master": master},
    }
    cfg_path = base / "config.json"  # JSON is YAML
    cfg_path.write_text(json.dumps(cfg, indent=1))
    cmd = [sys.executable, "-m", "fairspark.cli", "audit", "--config", str(cfg_path)]
    print("command:", " ".join(cmd), "| load at start:", _load(), flush=True)
    peak = {"sum": 0, "max": 0}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            s, m = _tree_rss(proc.pid)
            peak["sum"], peak["max"] = max(peak["sum"], s), max(peak["max"], m)
            done.wait(0.25)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        log, _ = proc.communicate()
    done.set()
    th.join()
    wall = time.perf_counter() - t
    stages: dict = {}
    summ = sorted(out.rglob("summary.json"))
    if summ:
        s = json.loads(summ[-1].read_text())
        stages = s.get("stage_timings", {})
        statuses = {a: v.get("status") for a, v in s.get("audits", {}).items()
                    if isinstance(v, dict)}
    else:
        statuses = {}
    if proc.returncode not in (0, 3):
        print(log[-4000:])
    return {"rows": rows, "rc": proc.returncode, "wall": wall, "stages": stages,
            "statuses": statuses, "peak_sum": peak["sum"], "peak_max": peak["max"],
            "load": _load()}


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return float("nan"), float("nan")
    b, a = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return a, b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--tmp", default="/tmp/fairspark_nightly_bench")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", default=None, help="also write the tables to this file")
    args = ap.parse_args(argv)
    print(f"cores: {os.cpu_count()}; load at start {_load()}", flush=True)
    res = [run_one(Path(args.tmp) / f"n{n}_d{args.dim}", n, args.dim, args.master,
                   args.timeout) for n in args.rows]
    names = sorted({k for r in res for k in r["stages"]},
                   key=lambda k: min(list(r["stages"]).index(k) for r in res
                                     if k in r["stages"]))
    lines = [f"command: `python scripts/bench_nightly.py --rows "
             f"{' '.join(map(str, args.rows))} --dim {args.dim} --master {args.master}`", "",
             "| rows | exit | wall (s) | " + " | ".join(f"{k} (s)" for k in names)
             + " | peak RSS, process tree (GB) | largest process (GB) | audit statuses "
               "| load 1/5/15 |",
             "|" + "---|" * (len(names) + 7)]
    for r in res:
        st = ", ".join(f"{a}: {v}" for a, v in r["statuses"].items())
        lines.append(f"| {r['rows']:,} | {r['rc']} | {r['wall']:.1f} | "
                     + " | ".join(f"{r['stages'].get(k, float('nan')):.1f}" for k in names)
                     + f" | {r['peak_sum'] / 1e9:.2f} | {r['peak_max'] / 1e9:.2f} | {st} "
                       f"| {r['load']} |")
    lines += ["", "Fit per stage, time = a + b x rows (least squares over the sizes):", "",
              "| stage | a (s) | b (s per 1M rows) |", "|---|---|---|"]
    xs = [r["rows"] for r in res]
    for k in [*names, "wall"]:
        ys = [r["wall"] if k == "wall" else r["stages"].get(k, float("nan")) for r in res]
        a, b = _fit(xs, ys)
        lines.append(f"| {k} | {a:.1f} | {b * 1e6:.1f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if all(r["rc"] in (0, 3) for r in res) else 1


if __name__ == "__main__":
    raise SystemExit(main())
