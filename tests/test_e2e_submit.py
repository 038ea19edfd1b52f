"""End to end through real ``spark-submit`` on ``local-cluster[2,1,1024]`` and ``local[2]``.

Separate executor processes, a ~50 MB Parquet table, and
``spark.driver.maxResultSize=1m``: the audit can only succeed if no raw rows are
collected to the driver. Subprocess tests cost ~30 s each, so there are few; the
``local[2]`` one (a small table, the submit's master against the config's ``spark:``
block) is the fast profile's ``spark-submit`` (``tests/profiles.py``).
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


def _submit_with_1m_result_size(cfg: dict, tmp_path, *conf: str) -> subprocess.CompletedProcess:
    """``jobs/audit.py`` with ``cfg`` through spark-submit on local-cluster[2,1,1024],
    ``spark.driver.maxResultSize=1m`` and the extra ``--conf`` settings ``conf``."""
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    return _submit([
        "--master", "local-cluster[2,1,1024]",
        "--conf", "spark.driver.maxResultSize=1m",
        *[a for c in conf for a in ("--conf", c)],
        "--conf", "spark.ui.enabled=false",
        "jobs/audit.py", "--config", str(tmp_path / "c.yaml"), "--run-date", "2026-11-29",
    ])


def test_spark_submit_on_local_2_uses_the_submits_session_not_the_configs(tmp_path):
    """``jobs/audit.py`` under ``spark-submit --master local[2]`` on a small table: the
    session is the one spark-submit configured (its master and conf, not the config's
    ``spark:`` block, which only ``fairspark audit`` reads), the run publishes, and the
    group audit's selection rates equal pandas'."""
    import numpy as np

    rng = np.random.default_rng(11)
    n = 2_000
    x = rng.random(n)
    sex = np.where(rng.random(n) < 0.4, "F", "M")
    pdf = pd.DataFrame({"row_id": [f"r{i}" for i in range(n)], "x1": x, "sex": sex,
                        "y": (x + 0.2 * (sex == "M") > 0.6).astype(int),
                        "p": (x + 0.1 * (sex == "M") > 0.55).astype(int)})
    inp = tmp_path / "in.parquet"
    pdf.to_parquet(inp, index=False)
    cfg = {
        "dataset": "submit_local", "seed": 3, "input": {"path": str(inp)},
        "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}, "row_key": "row_id"},
        "audits": {"group": {}},
        "output": {"path": str(tmp_path / "out")},
        # what `fairspark audit` would start; spark-submit's session must win
        "spark": {"master": "local[1]"},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = _submit(["--master", "local[2]", "--conf", "spark.ui.enabled=false",
                    "jobs/audit.py", "--config", str(tmp_path / "c.yaml"),
                    "--run-date", "2026-11-29"])
    assert proc.returncode == 0, proc.stderr[-5000:]
    out = tmp_path / "out" / "run_date=2026-11-29"
    assert f"outputs: {out}/" in proc.stdout and "fairspark: exit 0 (ok)" in proc.stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["spark"]["master"] == "local[2]", s["spark"]
    # nor does the job size the driver from the machine as `fairspark audit` does
    assert s["spark"]["driver_memory_set_by"] != "machine", s["spark"]
    assert s["rows"]["audited"] == n
    m = pd.read_parquet(out / "metrics.parquet")
    rate = m[(m.audit == "group") & (m.attribute == "sex")
             & (m.metric == "selection_rate")].set_index("group")["value"]
    want = pdf.groupby("sex")["p"].mean()
    assert rate["privileged"] == pytest.approx(want["M"], abs=1e-12)
    assert rate["unprivileged"] == pytest.approx(want["F"], abs=1e-12)
    assert (out / "_SUCCESS").exists()


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
    proc = _submit_with_1m_result_size(cfg, tmp_path, "spark.sql.shuffle.partitions=8")
    assert proc.returncode == 0, proc.stderr[-5000:]
    out = tmp_path / "out" / "run_date=2026-11-29"
    assert f"outputs: {out}/" in proc.stdout and "fairspark: exit 0 (ok)" in proc.stdout
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


def test_hfm_certified_exact_with_1m_result_size(tmp_path):
    """HFM's default method on separate executors with ``maxResultSize=1m``.

    60,000 rows are ~7 MB of points, far above the driver path's cap (a quarter of the
    limit), so the Spark passes run and every collect larger than the limit allows (the
    pass-C blocks) comes in pages; D and D_f must still be scipy's exact values.
    """
    import numpy as np
    from scipy.spatial.distance import directed_hausdorff

    rng = np.random.default_rng(13)
    n = 60_000
    X = rng.random((n, 4))
    fem = rng.random(n) < 0.4
    y = (X[:, 0] + 0.2 * fem + rng.normal(0, 0.2, n) > 0.6).astype(int)
    p = (X[:, 1] + 0.1 * fem > 0.55).astype(int)
    pdf = pd.DataFrame({f"x{j}": X[:, j] for j in range(4)})
    pdf["sex"] = np.where(fem, "F", "M")
    pdf["y"], pdf["p"] = y, p
    pdf["row_id"] = [f"k{i:06d}" for i in range(n)]
    inp = tmp_path / "in"
    inp.mkdir()
    for i, part in enumerate(np.array_split(np.arange(n), 4)):
        pdf.iloc[part].to_parquet(inp / f"part-{i}.parquet", index=False)
    cfg = {
        "dataset": "hfm_1m", "seed": 5, "input": {"path": str(inp)},
        "columns": {"features": [f"x{j}" for j in range(4)],
                    "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}, "row_key": "row_id"},
        "audits": {"group": {"enabled": False}, "hfm": {}},
        "output": {"path": str(tmp_path / "out")},
    }
    proc = _submit_with_1m_result_size(cfg, tmp_path)
    assert proc.returncode == 0, proc.stderr[-5000:]
    m = pd.read_parquet(tmp_path / "out" / "run_date=2026-11-29" / "metrics.parquet")
    # the prepared table (docs/architecture.md): scaled features, the outcome as first coordinate
    Xs = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    for metric, t in (("D", y), ("D_f", p)):
        V = np.column_stack([t == 1, Xs]).astype(float)
        a, b = V[fem], V[~fem]
        want = max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0])
        r = m[(m.audit == "hfm") & (m.attribute == "sex") & (m.metric == metric)].iloc[0]
        assert r.status == "ok", r.detail
        assert r.value == pytest.approx(want, abs=1e-9)
        assert r.lower == r.upper == r.value
