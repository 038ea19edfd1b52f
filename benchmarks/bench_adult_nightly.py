#!/usr/bin/env python
"""A real table a user brings: Adult, all four audits at the defaults, against
a group-only audit of the same table in the same run.

Writes the scored table once (``--tmp``): all 48,842 labelled rows of UCI Adult (train
and test parts), scored by the demo's logistic regression (trained on the train part,
:func:`fairspark.demo.prepare_demo_input`'s pipeline), with a row key and the model's
probability as ``score`` (excluded from the features). Then runs ``fairspark audit``
twice on ``--master``: ``group`` only, and ``group``, ``hfm``, ``mdfa`` and
``correlation`` each an empty section (their documented defaults), sex and race as
sensitive attributes, every other column a feature (categorical ones encoded by the
job); with ``--kinds classic connect`` both runs on each session kind (Connect:
pyspark's local server, ``spark.remote: local[2]``). Prints each run's exit code, wall
time and stage timings (``summary.json``), the ratios of the wall times and the load
average before and after.

Example::

    python benchmarks/bench_adult_nightly.py --out /tmp/adult_nightly.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _harness import LIGHT_SETS, ROOT, load, md_table, parse_args, parse_sets, spark_session


def write_scored(path: Path, limit: int | None = None) -> None:
    """All of Adult (train and test), scored by the demo's pipeline, as Parquet (the
    first ``limit`` rows only when given)."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    from fairspark.demo import (
        ADULT_COLUMNS,
        CATEGORICAL,
        demo_config,
        load_adult,
        prepare_demo_input,
    )
    spark = spark_session(app_name="adult-bench-input", log_level="WARN")
    tmp_scored = path.parent / "_test_scored"
    cfg = demo_config(overrides={"input.path": str(tmp_scored),
                                 "audits.hfm.dr_model": str(path.parent / "_model")})
    prepare_demo_input(spark, config=cfg)  # trains on the train part, saves the model
    from pyspark.ml import PipelineModel

    model = PipelineModel.load(str(path.parent / "_model"))
    fill = {c: "unknown" for c in [*CATEGORICAL, "native_country"]}
    rows = (load_adult(spark, part="train").withColumn("part", F.lit("train"))
            .unionByName(load_adult(spark, part="test").withColumn("part", F.lit("test")))
            .fillna(fill))
    if limit is not None:
        rows = rows.limit(limit)
    rows = rows.withColumn("row_id", F.concat(F.col("part"), F.lit("-"),
                                              F.monotonically_increasing_id()))
    scored = model.transform(rows).select(
        *[c for c, _ in ADULT_COLUMNS], "row_id",
        vector_to_array("probability")[1].alias("score"),
        F.col("prediction").cast("double").alias("prediction"),
    )
    scored.coalesce(2).write.mode("overwrite").parquet(str(path))
    n = spark.read.parquet(str(path)).count()
    print(f"wrote {n} scored Adult rows to {path}", flush=True)
    spark.stop()


def config(inp: Path, out: Path, audits: dict, master: str) -> dict:
    return {
        "dataset": "adult_full", "run_date": "2026-12-01", "seed": 20261201,
        "input": {"path": str(inp), "format": "parquet"},
        "columns": {
            "features": "all_others", "exclude": ["score", "fnlwgt"],
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": "White"}],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": {"column": "prediction", "positive": 1.0},
            "row_key": "row_id",
        },
        "audits": audits,
        "output": {"path": str(out)},
        "spark": {"master": master},
    }


def run_cli(base: Path, name: str, cfg: dict, timeout: float) -> dict:
    cfg_path = base / f"{name}.json"
    cfg_path.write_text(json.dumps(cfg, indent=1))
    cmd = [sys.executable, "-m", "fairspark.cli", "audit", "--config", str(cfg_path)]
    load0 = load()
    t = time.perf_counter()
    with (base / f"{name}.log").open("w") as log:
        try:
            code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    wall = time.perf_counter() - t
    summary_path = Path(cfg["output"]["path"]) / f"run_date={cfg['run_date']}" / "summary.json"
    stages = {}
    if summary_path.exists():
        stages = json.loads(summary_path.read_text()).get("stage_timings", {})
    return {"name": name, "exit": code, "wall_s": round(wall, 1), "load_before": load0,
            "load_after": load(), "stages": stages}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tmp", default="/tmp/fairspark_adult_nightly")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", default=None, help="also write the table (Markdown) here")
    ap.add_argument("--rows", type=int, default=None, help="only the first ROWS rows")
    ap.add_argument("--kinds", nargs="+", default=["classic"], choices=["classic", "connect"],
                    help="session kinds, each with both runs (connect: pyspark's local "
                         "Connect server on --master, started by the run)")
    ap.add_argument("--set", nargs="*", default=[], metavar="AUDIT.KEY=VALUE",
                    help="override a default of the all-four run (e.g. mdfa.splits=4)")
    args = parse_args(ap, argv, fast={"rows": 2000, "set": LIGHT_SETS, "timeout": 600})
    sets = parse_sets(args.set)
    base = Path(args.tmp)
    base.mkdir(parents=True, exist_ok=True)
    inp = base / "adult_scored"
    if not (inp / "_SUCCESS").exists():
        write_scored(inp, args.rows)
    runs = []
    for kind in args.kinds:
        for name, audits in (("group_only", {"group": {}}),
                             ("all_four", {a: dict(sets.get(a, {}))
                                           for a in ("group", "hfm", "mdfa", "correlation")})):
            out = base / f"out_{name}_{kind}"
            if out.exists():
                import shutil

                shutil.rmtree(out)
            cfg = config(inp, out, audits, args.master)
            if kind == "connect":  # pyspark's local Connect server, started by the run
                cfg["spark"]["remote"] = args.master
            r = run_cli(base, f"{name}_{kind}", cfg, args.timeout)
            r["kind"] = kind
            runs.append(r)
            print(json.dumps(r, indent=1), flush=True)
    wall = {(r["kind"], r["name"].rsplit("_", 1)[0]): r["wall_s"] for r in runs}
    table = md_table(
        ["session", "run", "exit", "wall s", "load before / after", "stages (s)"],
        [[r["kind"], r["name"].rsplit("_", 1)[0], r["exit"], r["wall_s"],
          f"{r['load_before']} / {r['load_after']}",
          ", ".join(f"{k} {v:.1f}" for k, v in r["stages"].items()
                    if isinstance(v, int | float))] for r in runs])
    lines = [f"{k}: all four audits / group only: "
             f"**{wall[(k, 'all_four')] / wall[(k, 'group_only')]:.1f}x**" for k in args.kinds]
    if len(args.kinds) == 2:
        lines += [f"{run}: Connect / classic: "
                  f"**{wall[('connect', run)] / wall[('classic', run)]:.2f}x**"
                  f" (target at most {target})"
                  for run, target in (("all_four", "1.3x"), ("group_only", "1.5x"))]
    text = table + "\n\n" + "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if all(r["exit"] in (0, 3) for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
