"""A run whose driver JVM dies of a real out-of-memory error still leaves its status.

A real ``fairspark audit`` process with ``spark.driver.memory: 512m`` (Spark's smallest
heap) on a 230 MB table of 200 features in one ORC file of one stripe: Spark's
uncaught-exception handler ends the JVM during the run. (ORC, because a Parquet input's
row groups are checked against the heap before the scan, ``fairspark._memory``, and
that run now stops with exit 2 instead; the check cannot see every input, so a JVM
that dies must still leave its status.) The status file used to stay at ``"running"`` for
ever (it was written through the JVM) and ``spark.stop()`` ended the run in a Py4J
traceback; now it is written with plain file I/O and says what happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_a_dead_jvm_leaves_a_finished_status_with_the_reason(tmp_path):
    n, d = 150_000, 200
    rng = np.random.default_rng(0)
    cols = {f"f{j}": rng.random(n) for j in range(d)}
    cols.update(sex=np.where(rng.random(n) < 0.3, "F", "M"), y=rng.integers(0, 2, n),
                p=rng.integers(0, 2, n), id=np.arange(n).astype(str))
    (tmp_path / "in").mkdir()
    # one stripe: a reading task holds all of it
    orc.write_table(pa.table(cols), tmp_path / "in" / "part-0.orc", stripe_size=1 << 30)
    out = tmp_path / "out"
    cfg = {
        "dataset": "oom", "run_date": "2026-12-03",
        "input": {"path": str(tmp_path / "in"), "format": "orc"},
        "columns": {"features": [f"f{j}" for j in range(d)],
                    "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}, "row_key": "id"},
        "audits": {"group": {}, "hfm": {"advanced": {"local_max_bytes": 0}}},
        "output": {"path": str(out), "report": False},
        "spark": {"master": "local[2]", "conf": {"spark.driver.memory": "512m"}},
    }
    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "fairspark.cli", "audit", "--config", str(conf)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert "OutOfMemoryError" in proc.stderr, proc.stderr[-3000:]  # the JVM really ran out
    assert proc.returncode == 1, proc.stderr[-3000:]
    status = json.loads((out / "_status" / "run_date=2026-12-03.json").read_text())
    assert status["state"] == "finished" and status["exit_code"] == 1
    assert "OutOfMemoryError" in status["error"] or "JVM died" in status["error"]
    assert not (out / "run_date=2026-12-03").exists()  # nothing half-published
    # the run ends on its own message: no traceback through fairspark's frames
    # (spark.stop() on the dead JVM used to end in one)
    assert str(ROOT / "fairspark") not in proc.stderr
    assert "spark.driver.memory" in proc.stderr
    # the lock it leaves is stale (its process is gone): the next run is not refused
    from fairspark.outputs import _stale

    lock = out / "_status" / "run_date=2026-12-03.lock"
    if lock.exists():
        assert _stale(json.loads(lock.read_text()), 86_400)
