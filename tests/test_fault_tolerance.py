"""Fault tolerance on ``local-cluster[2,1,1024]``: injected task failures, killed executors.

One real ``spark-submit`` run of group + hfm + mdfa + correlation where (a) a test
hook makes the first attempt of a HFM, mdfa and correlation task fail, and (b) one
executor process is killed (SIGKILL, by its process id) during the HFM stage and
another during the correlation stage. Spark retries and relaunches; the numbers must
equal those of an undisturbed in-process run on ``local[2]``. This is also the check
that HFM, mdfa and correlation give the same results with separate executor processes
as with local threads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_parquet

from fairspark.config import parse_config
from fairspark.runner import run_audit_job

ROOT = Path(__file__).resolve().parents[1]


def _config(inp: str, out: str) -> dict:
    return {
        "dataset": "fault_tolerance", "seed": 99, "run_date": "2026-11-29",
        "input": {"path": inp},
        "columns": {
            "features": ["age", "education_num", "hours_per_week", "capital_gain"],
            "sensitive": [{"column": "sex", "privileged": "Male"}],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": {"column": "prediction", "positive": 1},
            "row_key": "row_id",
        },
        "audits": {
            "group": {},
            "hfm": {"method": "certified", "rows_per_partition": 500},
            "mdfa": {"sample_rows": 1500, "splits": 4, "auditor": "logistic_regression",
                     "epochs": 2},
            "correlation": {"models": ["logistic_regression"], "n_samples": 12, "rounds": 3,
                            "k": 200, "sample_rows": 1500},
        },
        "output": {"path": out, "report": False},
        "spark": {"conf": {"spark.sql.shuffle.partitions": 4}},
    }


def _descendants(pid: int) -> list[tuple[int, str]]:
    # -ww: never cut the command line to the terminal width (COLUMNS may be set)
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True,
                         text=True).stdout
    procs = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            procs.append((int(parts[0]), int(parts[1]), parts[2]))
    found, frontier = [], {pid}
    while frontier:
        nxt = {p for p, pp, _ in procs if pp in frontier}
        found += [(p, a) for p, pp, a in procs if pp in frontier]
        frontier = nxt
    return found


def _kill_one_executor(root_pid: int, notes: list[str]) -> int | None:
    tree = _descendants(root_pid)
    execs = [p for p, a in tree if "CoarseGrainedExecutorBackend" in a]
    if not execs:
        notes.append(f"no executor under pid {root_pid}: {[(p, a[:80]) for p, a in tree]}")
        return None
    os.kill(execs[0], signal.SIGKILL)
    return execs[0]


@pytest.fixture(scope="module")
def table(adult_pdf, tmp_path_factory):
    pdf = adult_pdf.sample(n=3000, random_state=4).reset_index(drop=True)
    base = tmp_path_factory.mktemp("ft")
    return write_parquet(pdf, base / "in", n_files=3), base


def test_injected_failures_and_killed_executors_do_not_change_results(spark, table):
    inp, base = table
    reference = run_audit_job(spark, parse_config(_config(inp, str(base / "ref"))))
    assert reference.exit_code == 0, reference.summary["audits"]

    cfg = _config(inp, str(base / "disturbed"))
    (base / "c.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable,
           "FAIRSPARK_TEST_FAIL_FIRST_ATTEMPT": "hfm,mdfa,correlation"}
    proc = subprocess.Popen(
        ["spark-submit", "--master", "local-cluster[2,1,1024]",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.task.maxFailures=4",
         "--conf", "spark.sql.shuffle.partitions=4",
         "jobs/audit.py", "--config", str(base / "c.yaml")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed: dict[str, int | None] = {}
    lines: list[str] = []
    notes: list[str] = []

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            # the audits run in order group, hfm, mdfa, correlation: the end of one
            # stage is the start of the next
            if "stage audit group" in line and "hfm" not in killed:
                time.sleep(2.0)
                killed["hfm"] = _kill_one_executor(proc.pid, notes)
            if "stage audit mdfa" in line and "correlation" not in killed:
                time.sleep(2.0)
                killed["correlation"] = _kill_one_executor(proc.pid, notes)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        code = proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    t.join(10)
    log = "".join(lines)
    assert code == 0, log[-6000:]
    assert killed.get("hfm") and killed.get("correlation"), (killed, notes)
    assert "injected failure of the first attempt" in log, "the task-failure hook never fired"

    got = pd.read_parquet(base / "disturbed" / "run_date=2026-11-29" / "metrics.parquet")
    ref = pd.DataFrame(reference.rows)
    key = ["audit", "attribute", "group", "metric", "metric_b", "model"]
    for df in (got, ref):
        for c in key:
            df[c] = df[c].fillna("")
    m = ref.merge(got, on=key, how="outer", suffixes=("_ref", "_got"), indicator=True)
    assert (m["_merge"] == "both").all(), m[m["_merge"] != "both"][[*key, "_merge"]]
    for audit in ("group", "hfm", "mdfa", "correlation"):
        assert (m["audit"] == audit).any(), audit
    for c in ("value", "lower", "upper"):
        a = m[f"{c}_ref"].to_numpy(float)
        b = m[f"{c}_got"].to_numpy(float)
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=f"column {c}")
    assert (m["status_ref"] == m["status_got"]).all()
