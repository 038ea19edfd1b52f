"""Spark's Python workers run the driver's interpreter, and a wrong one fails the run early.

Real ``fairspark audit`` processes (a fresh JVM each), with ``PATH`` led by a bare virtual
environment whose ``python3`` has neither pandas nor fairspark: the situation of a cron
line that runs a venv's ``fairspark`` by its path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_parquet

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("workers")
    bare = base / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)  # python3 without pandas or fairspark
    bare_python = bare / "bin" / "python3"
    probe = subprocess.run([str(bare_python), "-c", "import pandas"], capture_output=True)
    assert probe.returncode != 0, "the bare venv must lack pandas for this test to mean much"
    rng = np.random.default_rng(3)
    n = 300
    pdf = pd.DataFrame({"x": rng.normal(size=n), "sex": rng.choice(["M", "F"], n),
                        "y": rng.integers(0, 2, n), "p": rng.integers(0, 2, n)})
    inp = write_parquet(pdf, base / "in")
    cfg = {
        "dataset": "workers", "run_date": "2026-12-03", "input": {"path": inp},
        "columns": {"features": ["x"], "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}},
        # HFM runs Python tasks (its points reach the driver through Arrow batches),
        # so the good run shows the workers import fairspark; a group-only run has
        # none, and the CLI skips its worker probe where the workers run the driver's
        # interpreter (fairspark.session.workers_are_the_drivers)
        "audits": {"group": {}, "hfm": {}},
        "output": {"path": str(base / "out"), "report": False},
        "spark": {"master": "local[1]"},
    }
    conf = base / "c.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    cfg["spark"]["conf"] = {"spark.pyspark.python": str(bare / "bin" / "python3")}
    (base / "bare.yaml").write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = os.pathsep.join([str(bare / "bin"), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return base, conf, env, bare_python


def _audit(setup, *args, config=None):
    base, conf, env, _ = setup
    argv = [sys.executable, "-m", "fairspark.cli", "audit", "--config", str(config or conf),
            "-q", *args]
    return subprocess.run(argv, cwd=base, env=env, capture_output=True, text=True, timeout=300)


def test_workers_get_the_drivers_interpreter_not_python3_on_path(setup):
    base = setup[0]
    proc = _audit(setup, "--output", str(base / "good"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (base / "good" / "run_date=2026-12-03" / "_SUCCESS").exists()
    summary = json.loads((base / "good" / "run_date=2026-12-03" / "summary.json").read_text())
    assert summary["audits"]["hfm"]["status"] == "ok", summary["audits"]["hfm"]["status"]


def test_a_worker_interpreter_without_fairspark_fails_before_any_output(setup):
    base, _, _, bare_python = setup
    out = base / "bad"
    proc = _audit(setup, "--output", str(out), config=base / "bare.yaml")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert str(bare_python) in proc.stderr
    assert "ModuleNotFoundError" in proc.stderr and "spark.pyspark.python" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "run_date=2026-12-03").exists()
    status = json.loads((out / "_status" / "run_date=2026-12-03.json").read_text())
    assert status["exit_code"] == 2 and str(bare_python) in status["error"]
