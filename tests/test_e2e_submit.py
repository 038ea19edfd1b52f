"""End to end through real ``spark-submit`` on ``local-cluster[2,1,1024]``.

Separate executor processes, a ~50 MB Parquet table, and
``spark.driver.maxResultSize=1m``: the audit can only succeed if no raw rows are
collected to the driver. Subprocess tests cost ~30 s each, so there are few.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def big_table(spark, tmp_path_factory) -> tuple[str, dict]:
    """~50 MB of synthetic scored rows, written by Spark; expectations by Spark SQL."""
    from pyspark.sql import functions as F

    base = tmp_path_factory.mktemp("big")
    n = 900_000
    df = (
        spark.range(n, numPartitions=8)
        .select(
            F.col("id").cast("string").alias("row_id"),
            *[F.rand(seed=i).alias(f"x{i}") for i in range(1, 6)],
            F.element_at(F.array(*[F.lit(c) for c in "abcde"]),
                         (F.floor(F.rand(seed=9) * 5) + 1).cast("int")).alias("city"),
            F.when(F.rand(seed=10) < 0.6, "M").otherwise("F").alias("sex"),
            F.element_at(F.array(F.lit("w"), F.lit("b"), F.lit("o")),
                         (F.floor(F.rand(seed=11) * 3) + 1).cast("int")).alias("race"),
        )
        .withColumn("y", (F.rand(seed=12) < 0.3 + 0.2 * F.col("x1")).cast("int"))
        .withColumn("p", (F.col("x1") + 0.1 * (F.col("sex") == "M").cast("double")
                          + 0.3 * F.rand(seed=13) > 0.7).cast("int"))
    )
    path = str(base / "scored.parquet")
    df.write.mode("overwrite").parquet(path)
    size = sum(f.stat().st_size for f in Path(path).glob("*.parquet"))
    assert size > 40e6, size
    t = spark.read.parquet(path)
    sr = {r["sex"]: r["sr"] for r in t.groupBy("sex").agg(F.avg("p").alias("sr")).collect()}
    tpr = {r["sex"]: r["tpr"] for r in
           t.where("y = 1").groupBy("sex").agg(F.avg("p").alias("tpr")).collect()}
    return path, {"sp": sr["F"] - sr["M"], "eo": tpr["F"] - tpr["M"], "n": n}


def _submit(args: list[str], *, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run(["spark-submit", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_spark_submit_local_cluster_50mb_with_1m_result_size(big_table, tmp_path):
    path, expected = big_table
    cfg = {
        "dataset": "synthetic_50mb",
        "seed": 3,
        "input": {"path": path},
        "columns": {
            "features": "all_others",
            "sensitive": [{"column": "sex", "privileged": "M"},
                          {"column": "race", "privileged": "w"}],
            "label": {"column": "y", "positive": 1},
            "prediction": {"column": "p", "positive": 1},
            "row_key": "row_id",
        },
        "audits": {"group": {}},
        "output": {"path": str(tmp_path / "out")},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = _submit([
        "--master", "local-cluster[2,1,1024]",
        "--conf", "spark.driver.maxResultSize=1m",
        "--conf", "spark.sql.shuffle.partitions=8",
        "--conf", "spark.ui.enabled=false",
        "jobs/audit.py", "--config", str(tmp_path / "c.yaml"), "--run-date", "2026-11-29",
    ])
    assert proc.returncode == 0, proc.stderr[-5000:]
    out = tmp_path / "out" / "run_date=2026-11-29"
    assert f"outputs in {out}" in proc.stdout
    logs = proc.stdout + proc.stderr
    assert "stage prepare" in logs and "stage audit group" in logs
    m = pd.read_parquet(out / "metrics.parquet")
    sp = m[(m.attribute == "sex") & (m.group == "unprivileged")
           & (m.metric == "statistical_parity_difference")].iloc[0]
    assert sp.value == pytest.approx(expected["sp"], abs=1e-12)
    eo = m[(m.attribute == "sex") & (m.group == "unprivileged")
           & (m.metric == "tpr_difference")].iloc[0]
    assert eo.value == pytest.approx(expected["eo"], abs=1e-12)
    s = json.loads((out / "summary.json").read_text())
    assert s["rows"]["audited"] == expected["n"]
    assert s["spark"]["master"].startswith("local-cluster")
    assert (out / "_SUCCESS").exists()
