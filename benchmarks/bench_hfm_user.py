#!/usr/bin/env python
"""The HFM audit at the settings a user gets, against scipy in the same run.

Builds UCI Adult (the copy bundled in ``fairspark/data``: train + test, complete rows,
45,222; ``native_country`` left out) replicated ``--copies`` times with a Gaussian jitter
on the six numeric columns (``--jitter`` of each column's range), as Parquet. Then, one
after the other on a quiet machine:

- scipy's ``directed_hausdorff`` (both directions, single core) computing D and D_f on
  the points the job builds (numeric columns min-max scaled, categorical ones one-hot in
  alphabetical order, the label or the prediction first), in a separate process;
- ``python -m fairspark.cli audit`` (a fresh JVM each, ``local[2]``, only the HFM audit
  at its defaults) once per ``--settings`` entry: ``default`` (no ``spark.conf``: the CLI
  sizes the driver), ``1g`` and ``6g`` (``spark.driver.memory``), ``spark`` (the Spark path
  forced with ``audits.hfm.advanced.local_max_bytes: 0``), ``connect`` (pyspark's local Spark
  Connect server, ``spark.remote: local[2]``, started by the run).

Beside them, the run a user waits for against its peers: a user's pandas script that
reads the same Parquet and runs scipy (fresh process), one Spark scan of the table
(``df.agg`` of every feature's min and max) and a bare Spark session's cost (a fresh
process less its scan: the interpreter, pyspark's import, the session's start and its
stop), against the CLI's whole wall time, its preparation plus encoding, and its time
before the read (the log's stage lines before ``read``: start-up, session start,
previous runs) with its ``shutdown`` line (the session's stop, the JVM's end); and the
sum of the log's stage lines against the wall time (issue 56: every second on a line).

Prints, per run: exit code, the HFM stage (``summary.json``'s ``stage_timings``), its
ratio to scipy's D + D_f, D and D_f against scipy's (exactness), the path the engine took
and the load average.

Example::

    python benchmarks/bench_hfm_user.py --copies 20 --settings default 1g 6g spark
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from _harness import ROOT, load, parse_args, read_adult

NUMERIC = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
CATEGORICAL = ["workclass", "education", "marital_status", "occupation", "relationship"]


def adult_table(copies: int, jitter: float, seed: int) -> pd.DataFrame:
    """The bundled Adult, complete rows, replicated with a jitter on the numeric columns."""
    df = read_adult().dropna().drop(columns=["native_country"])
    df["income"] = df["income"].str.rstrip(".")
    df = df.reset_index(drop=True)
    big = pd.concat([df] * copies, ignore_index=True)
    rng = np.random.default_rng(seed)
    for c in NUMERIC:
        span = float(df[c].max() - df[c].min())
        big[c] = big[c].astype(float) + rng.normal(0.0, jitter * span, len(big))
    big["prediction"] = ((big["education_num"] >= 13)
                         & (big["hours_per_week"] >= 40)).astype(int)
    big["row_id"] = np.arange(len(big)).astype(str)
    return big


def points(big: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(V for D, V for D_f, group) as the job builds them."""
    cols = [((big[c] - big[c].min()) / (big[c].max() - big[c].min())).to_numpy(float)
            for c in NUMERIC]
    for c in CATEGORICAL:
        for v in sorted(big[c].unique()):
            cols.append((big[c] == v).to_numpy(float))
    X = np.column_stack(cols)
    y = (big["income"] == ">50K").to_numpy(float)
    yp = big["prediction"].to_numpy(float)
    g = (big["sex"] == "Male").to_numpy(int)
    return np.column_stack([y, X]), np.column_stack([yp, X]), g


def _scipy_run(VD, VF, g) -> tuple[float, float, float]:
    from scipy.spatial.distance import directed_hausdorff

    t = time.perf_counter()
    out = []
    for V in (VD, VF):
        a, b = V[g == 1], V[g == 0]
        out.append(max(directed_hausdorff(a, b, seed=0)[0], directed_hausdorff(b, a, seed=0)[0]))
    return out[0], out[1], time.perf_counter() - t


def _scipy(VD, VF, g, q) -> None:
    q.put(_scipy_run(VD, VF, g))


def scipy_reference(VD, VF, g) -> tuple[float, float, float]:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_scipy, args=(VD, VF, g, q))
    p.start()
    res = q.get()
    p.join()
    return res


def _pandas_script(inp: str, q) -> None:
    """A user's script: read the Parquet with pandas, build the points, scipy's D, D_f."""
    t = time.perf_counter()
    big = pd.read_parquet(inp)
    t_read = time.perf_counter() - t
    VD, VF, g = points(big)
    D, Df, _ = _scipy_run(VD, VF, g)
    q.put((D, Df, t_read, time.perf_counter() - t))


def pandas_script(inp: str) -> tuple[float, float, float, float]:
    """(D, D_f, read seconds, whole seconds) of :func:`_pandas_script`, in a fresh process."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_pandas_script, args=(inp, q))
    p.start()
    res = q.get()
    p.join()
    return res


_SCAN = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", {mem!r}).getOrCreate())
t1 = time.perf_counter()
df = spark.read.parquet({inp!r})
cols = {cols!r}
t2 = time.perf_counter()
df.agg(*[f(c) for c in cols for f in (F.min, F.max)]).collect()
t3 = time.perf_counter()
print("SCAN", t1 - t0, t3 - t2)
"""


def spark_scan(inp: str) -> tuple[float, float]:
    """(a bare session's cost: the process's wall time less its one scan, so the
    interpreter's start, pyspark's import, the session's start and its stop at exit; one
    scan: ``df.agg`` of every feature's min and max) in a fresh process, with the driver
    heap the CLI sizes."""
    from fairspark.cli import local_driver_memory

    code = _SCAN.format(root=str(ROOT), mem=local_driver_memory(), inp=inp,
                        cols=[*NUMERIC, *CATEGORICAL])
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    whole = time.perf_counter() - t
    line = next(x for x in out.stdout.splitlines() if x.startswith("SCAN"))
    scan = float(line.split()[2])
    return whole - scan, scan


def stage_table(log: str) -> dict[str, float]:
    """The log's stage table: its top-level lines (a line ``a: b`` is a part of ``a``)."""
    import re

    found = (re.search(r" fairspark INFO stage (\S.*?)\s+(\d+\.\d+) s$", ln)
             for ln in log.splitlines())
    return {m.group(1): float(m.group(2)) for m in found if m and ": " not in m.group(1)}


def before_the_read(table: dict[str, float]) -> float:
    """The log's stage lines before ``read`` (start-up, session start, previous runs)."""
    names = list(table)
    return sum(table[n] for n in names[:names.index("read")]) if "read" in table else 0.0


def run_cli(inp: str, tmp: Path, setting: str) -> dict:
    cfg = {
        "dataset": "adult_replica", "run_date": "2026-12-03", "input": {"path": inp},
        "columns": {
            "features": [*NUMERIC, *CATEGORICAL], "categorical": CATEGORICAL,
            "sensitive": [{"column": "sex", "privileged": "Male"}],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": {"column": "prediction", "positive": 1}, "row_key": "row_id",
        },
        "audits": {"group": {"enabled": False}, "hfm": {}},
        "output": {"path": str(tmp / f"out_{setting}"), "report": False},
        "spark": {"master": "local[2]"},
    }
    if setting in ("1g", "6g"):
        cfg["spark"]["conf"] = {"spark.driver.memory": setting}
    elif setting == "spark":
        cfg["audits"]["hfm"]["advanced"] = {"local_max_bytes": 0}
    elif setting == "connect":  # pyspark's local Connect server, started by the run
        cfg["spark"]["remote"] = "local[2]"
    conf = tmp / f"{setting}.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fairspark.cli", "audit", "--config", str(conf)],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    run = tmp / f"out_{setting}" / "run_date=2026-12-03"
    out = {"setting": setting, "exit": proc.returncode, "wall": wall, "load": load(),
           "log": [ln for ln in proc.stderr.splitlines() if "hfm" in ln.lower()
                   or " stage " in ln], "table": stage_table(proc.stderr)}
    if (run / "summary.json").exists():
        s = json.loads((run / "summary.json").read_text())
        out["stage"] = s["stage_timings"].get("audit hfm")
        out["stages"] = {k: v for k, v in s["stage_timings"].items()
                         if isinstance(v, int | float)}
        m = pd.read_parquet(run / "metrics.parquet")
        m = m[(m.audit == "hfm") & m.metric.isin(["D", "D_f"])]
        out["values"] = {r.metric: r.value for r in m.itertuples()}
    else:
        out["stderr"] = proc.stderr[-2000:]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--jitter", type=float, default=0.002)
    ap.add_argument("--settings", nargs="+", default=["default", "1g", "6g", "spark"],
                    choices=["default", "1g", "6g", "spark", "connect"])
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--verbose", action="store_true", help="print the HFM log lines")
    args = parse_args(ap, argv, fast={"copies": 1, "settings": ["default"]})
    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="hfm_user_"))
    big = adult_table(args.copies, args.jitter, seed=1)
    inp = tmp / "in"
    if not inp.exists():
        inp.mkdir(parents=True)
        for i, part in enumerate(np.array_split(np.arange(len(big)), 8)):
            big.iloc[part].to_parquet(inp / f"part-{i:05d}.parquet", index=False)
    VD, VF, g = points(big)
    print(f"# rows={len(big)} d={VD.shape[1] - 1} load at start {load()}", flush=True)
    D, Df, ref = scipy_reference(VD, VF, g)
    print(f"scipy D+D_f {ref:.2f} s  D={D:.12g} D_f={Df:.12g}  load {load()}", flush=True)
    del VD, VF
    pd_D, pd_Df, pd_read, user = pandas_script(str(inp))
    print(f"a user's pandas script (read the Parquet {pd_read:.2f} s, build the points, "
          f"scipy): {user:.2f} s, the same D and D_f: {(pd_D, pd_Df) == (D, Df)}  "
          f"load {load()}", flush=True)
    bare, scan = spark_scan(str(inp))
    print(f"a bare Spark session (interpreter, import, start, stop) {bare:.2f} s; one scan "
          f"(df.agg of every feature's min and max) {scan:.2f} s  load {load()}", flush=True)
    print("| setting | exit | HFM stage (s) | / scipy | D exact | D_f exact | wall (s) "
          "| / user's script | prepare + encode (s) | / one scan | before the read (s) "
          "| shutdown (s) | (before + shutdown) / bare session | lines / wall | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for setting in args.settings:
        r = run_cli(str(inp), tmp, setting)
        st = r.get("stage")
        v = r.get("values", {})
        ok_d = "yes" if "D" in v and abs(v["D"] - D) <= 1e-9 * max(D, 1) else f"{v.get('D')}"
        ok_f = ("yes" if "D_f" in v and abs(v["D_f"] - Df) <= 1e-9 * max(Df, 1)
                else f"{v.get('D_f')}")
        ratio = f"{st / ref:.2f}" if st else "-"
        stages = r.get("stages", {})
        prep = stages.get("prepare", 0.0) + stages.get("encode features", 0.0)
        table = r["table"]
        before, shut = before_the_read(table), table.get("shutdown", 0.0)
        print(f"| {setting} | {r['exit']} | {st if st is None else round(st, 2)} | {ratio} | "
              f"{ok_d} | {ok_f} | {r['wall']:.1f} | {r['wall'] / user:.2f} | {prep:.1f} | "
              f"{prep / scan:.2f} | {before:.2f} | {shut:.2f} | {(before + shut) / bare:.2f} "
              f"| {sum(table.values()) / r['wall']:.3f} | {r['load']} |", flush=True)
        if args.verbose:
            print("    stage table: " + ", ".join(f"{k} {t:.2f}" for k, t in table.items()))
        if args.verbose or r["exit"] != 0:
            print("\n".join("    " + ln for ln in r["log"]))
            if "stderr" in r:
                print(r["stderr"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
