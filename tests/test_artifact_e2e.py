"""The deployable artefact end to end: build it, then ``spark-submit`` with nothing else.

``tools/build_artifact.py`` builds the wheel (``--py-files``) and the packed
environment (``--archives ...#env``). The job then runs on ``local-cluster[2,1,1024]``
(separate executor JVMs with their own Python workers) with
``spark.pyspark.python=./env/bin/python``: executors can only run Python from the
unpacked archive. The driver runs the unpacked environment too (as in YARN cluster
mode), with fairspark coming only from the wheel. The correlation audit trains
scikit-learn models in pandas-UDF tasks, so the executors really import the env's
numpy, pandas, pyarrow and scikit-learn.

Cost: the environment is cached by ``build/artifact-cache/<hash>`` (first build ~2-4
minutes: install and pack torch); the submit itself takes about a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import synthetic_scored

ROOT = Path(__file__).resolve().parents[1]
VERSION = next(
    line.split('"')[1]
    for line in (ROOT / "fairspark" / "_version.py").read_text().splitlines()
    if line.startswith("__version__")
)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> dict[str, Path]:
    dist = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_artifact.py"), "--dist", str(dist)],
        cwd=ROOT, capture_output=True, text=True, timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = dist / f"fairspark-{VERSION}-py3-none-any.whl"
    env = dist / "fairspark-env.tar.gz"
    assert wheel.is_file() and env.is_file(), sorted(p.name for p in dist.iterdir())
    pyfiles = wheel.with_suffix(".zip")
    assert pyfiles.read_bytes() == wheel.read_bytes()
    return {"wheel": wheel, "pyfiles": pyfiles, "env": env, "dist": dist}


def test_artifact_contents(artifact):
    with zipfile.ZipFile(artifact["wheel"]) as zf:
        names = set(zf.namelist())
    assert "fairspark/metrics/_intervals.py" in names
    assert "fairspark/report/templates/report.html.j2" in names
    assert "jobs/audit.py" not in names  # the entry script is shipped separately
    pins = (artifact["dist"] / "fairspark-env.requirements.txt").read_text().split()
    pinned = {p.split("==")[0].lower() for p in pins}
    assert {"numpy", "pandas", "pyarrow", "scikit-learn", "torch"} <= pinned
    assert "pyspark" not in pinned  # Spark provides pyspark on every node
    with tarfile.open(artifact["env"]) as tf:
        members = set(tf.getnames())
    for needed in ("bin/python", "bin/activate",
                   "lib/python3.11/site-packages/torch/__init__.py",
                   "lib/python3.11/site-packages/sklearn/__init__.py"):
        assert needed in members, needed
    assert not any("nvidia" in m.split("/")[3:4] for m in members if m.count("/") > 3)


def _table(path: Path) -> dict[str, float]:
    pdf = synthetic_scored(n=900, seed=17)
    sex, y, p = pdf["sex"].to_numpy(), pdf["y"].to_numpy(), pdf["p"].to_numpy()
    path.mkdir()
    pdf.to_parquet(path / "part-0.parquet", index=False)
    f, m = sex == "F", sex == "M"
    return {"sp": p[f].mean() - p[m].mean(),
            "eo": p[f & (y == 1)].mean() - p[m & (y == 1)].mean()}


def test_spark_submit_with_the_artifact_on_local_cluster(artifact, tmp_path):
    expected = _table(tmp_path / "in")
    cfg = {
        "dataset": "artifact_e2e", "run_date": "2026-11-29", "seed": 5,
        "input": {"path": str(tmp_path / "in")},
        "columns": {"features": ["x1", "x2", "city"],
                    "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}, "row_key": "id"},
        "audits": {"group": {"ci_level": 0.95, "min_group_size": 30},
                   "correlation": {"n_samples": 6, "rounds": 2, "k": 100,
                                   "models": ["logistic_regression"], "n_representatives": 3}},
        "output": {"path": str(tmp_path / "out")},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    # The driver uses the same packed environment, unpacked here (YARN cluster mode
    # would unpack it for the driver too).
    driver_env = tmp_path / "driver-env"
    with tarfile.open(artifact["env"]) as tf:
        # the filter argument exists from Python 3.11.4 (Debian 12's 3.11.2 lacks it);
        # the archive is our own build, so no filter is the same as "fully_trusted"
        if hasattr(tarfile, "fully_trusted_filter"):
            tf.extractall(driver_env, filter="fully_trusted")
        else:
            tf.extractall(driver_env)
    job_dir = tmp_path / "job"  # run from outside the checkout: fairspark only from the wheel
    job_dir.mkdir()
    (job_dir / "audit.py").write_text((ROOT / "jobs" / "audit.py").read_text())
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["PYTHONNOUSERSITE"] = "1"
    cmd = [
        "spark-submit", "--master", "local-cluster[2,1,1024]",
        "--archives", f"{artifact['env']}#env",
        # the wheel's bytes as .zip: Spark adds only .zip/.egg/.jar to executors' path
        "--py-files", str(artifact["pyfiles"]),
        "--conf", "spark.pyspark.python=./env/bin/python",
        "--conf", f"spark.pyspark.driver.python={driver_env / 'bin' / 'python'}",
        "--conf", "spark.executor.memory=640m",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=4",
        "--conf", "spark.executorEnv.OMP_NUM_THREADS=1",
        str(job_dir / "audit.py"), "--config", str(tmp_path / "c.yaml"),
    ]
    proc = subprocess.run(cmd, cwd=job_dir, env=env, capture_output=True, text=True,
                          timeout=900)
    log = proc.stdout[-4000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, log
    out = tmp_path / "out" / "run_date=2026-11-29"
    assert (out / "_SUCCESS").exists(), log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["audits"]["group"]["status"] == "ok"
    assert summary["audits"]["correlation"]["status"] == "ok", summary["audits"]["correlation"]
    assert summary["versions"]["python"].startswith("3.11")
    rows = pd.read_parquet(out / "metrics.parquet")
    g = rows[(rows.audit == "group") & (rows.group == "unprivileged")].set_index("metric")
    assert g.loc["statistical_parity_difference", "value"] == pytest.approx(expected["sp"])
    assert g.loc["tpr_difference", "value"] == pytest.approx(expected["eo"])
    lo, hi = g.loc["statistical_parity_difference", ["lower", "upper"]]
    assert lo < expected["sp"] < hi
    assert (rows.audit == "correlation").sum() > 0
    html = (out / "report.html").read_text()
    assert "Group fairness metrics" in html and "data:image/png;base64," in html
