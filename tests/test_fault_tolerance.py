"""Fault tolerance on ``local-cluster[2,1,1024]``: injected task failures, killed executors.

One real ``spark-submit`` run of group + hfm + mdfa + correlation where (a) a test
hook makes the first attempt of a HFM, mdfa and correlation task fail, and (b) one
executor process is killed (SIGKILL, by its process id) while a task of a HFM stage
runs on it, and one while a task of a correlation stage runs on it. Spark retries and
relaunches; the numbers must equal those of an undisturbed in-process run on
``local[2]``. This is also the check that HFM, mdfa and correlation give the same
results with separate executor processes as with local threads.

The kills are driven and proven by Spark's own status store, read through the REST
API of the driver's UI: a watcher polls the running jobs, picks a job whose group is
the audit's (the runner gives every audit the job group ``fairspark-<audit>-<id>``),
an active stage of it and a task in state RUNNING, kills the executor process that
runs the task (found by its ``--executor-id`` and ``--app-id``), and then reads the
task's end: it must have failed with ``ExecutorLostFailure``, i.e. it was still
running when its executor died. A kill that lands after the task finished does not
count and the watcher tries again on another task. The hook also holds retried
partition-0 tasks of those stages a little (``FAIRSPARK_TEST_HOLD_S``) so that a
running task is there to be seen; nothing is asserted about time.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_parquet

from fairspark.config import parse_config
from fairspark.runner import run_audit_job

ROOT = Path(__file__).resolve().parents[1]
#: audits whose stages lose an executor mid-task
KILL_DURING = ("hfm", "correlation")
#: kills tried per audit before giving up (a kill can land just after the task ended)
MAX_TRIES = 4


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
            # the Spark passes: a 3000-row table is otherwise searched on the driver
            "hfm": {"method": "certified",
                    "advanced": {"rows_per_partition": 500, "local_max_bytes": 0}},
            "mdfa": {"sample_rows": 1500, "splits": 4, "auditor": "logistic_regression",
                     "epochs": 2},
            "correlation": {"models": ["logistic_regression"], "n_samples": 12, "rounds": 3,
                            "k": 200, "sample_rows": 1500},
        },
        "output": {"path": out, "report": False},
        "spark": {"conf": {"spark.sql.shuffle.partitions": 4}},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def _executor_pid(root_pid: int, app_id: str, executor_id: str) -> int | None:
    """The process of executor ``executor_id`` of application ``app_id`` under ``root_pid``."""
    for pid, args in _descendants(root_pid):
        if "CoarseGrainedExecutorBackend" not in args:
            continue
        argv = args.split()
        opts = dict(itertools.pairwise(argv))
        if opts.get("--executor-id") == executor_id and opts.get("--app-id") == app_id:
            return pid
    return None


@dataclass
class Kill:
    """One executor killed while Spark's status store showed a task of ``audit`` on it."""

    audit: str
    job_group: str
    stage: str
    task_id: int
    executor_id: str
    pid: int
    status_before: str
    status_after: str | None = None
    error: str | None = None

    @property
    def landed(self) -> bool:
        """The task ended because its executor was lost: it was running at the kill."""
        return self.status_after == "FAILED" and "ExecutorLostFailure" in (self.error or "")


@dataclass
class ExecutorKiller:
    """Watches a live application through its UI's REST API and kills executors."""

    root_pid: int
    ui_port: int
    kills: list[Kill] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    app_id: str | None = None

    def _get(self, path: str):
        url = f"http://127.0.0.1:{self.ui_port}/api/v1/{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return json.load(r)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def _app(self) -> str | None:
        if self.app_id is None:
            apps = self._get("applications") or []
            self.app_id = apps[0]["id"] if apps else None
        return self.app_id

    def _running_task(self, audit: str) -> tuple[dict, dict, dict] | None:
        """(job, stage, task): a RUNNING task of an active stage of ``audit``'s jobs."""
        app = self._app()
        if app is None:
            return None
        jobs = [j for j in self._get(f"applications/{app}/jobs?status=running") or []
                if (j.get("jobGroup") or "").startswith(f"fairspark-{audit}-")]
        if not jobs:
            return None
        active = {s["stageId"]: s for s in self._get(f"applications/{app}/stages?status=active")
                  or [] if s.get("numActiveTasks", 0) > 0}
        for job in jobs:
            for sid in job["stageIds"]:
                stage = active.get(sid)
                if stage is None:
                    continue
                tasks = self._get(f"applications/{app}/stages/{sid}/{stage['attemptId']}"
                                  "/taskList?length=10000") or []
                running = [t for t in tasks if t["status"] == "RUNNING"]
                if running:  # the longest-running task is the least likely to end now
                    return job, stage, min(running, key=lambda t: t["launchTime"])
        return None

    def _task_end(self, stage: dict, task_id: int) -> dict | None:
        tasks = self._get(f"applications/{self.app_id}/stages/{stage['stageId']}/"
                          f"{stage['attemptId']}/taskList?length=10000") or []
        for t in tasks:
            if t["taskId"] == task_id and t["status"] != "RUNNING":
                return t
        return None

    def kill_during(self, audit: str, done: threading.Event) -> None:
        """Kill executors until one dies under a running task of ``audit``."""
        while not done.is_set() and sum(k.audit == audit for k in self.kills) < MAX_TRIES:
            found = self._running_task(audit)
            if found is None:
                time.sleep(0.2)
                continue
            job, stage, task = found
            pid = _executor_pid(self.root_pid, self.app_id, task["executorId"])
            if pid is None:
                self.notes.append(f"no process for executor {task['executorId']}")
                time.sleep(0.2)
                continue
            os.kill(pid, signal.SIGKILL)
            kill = Kill(audit=audit, job_group=job["jobGroup"],
                        stage=f"{stage['stageId']}.{stage['attemptId']} {stage['name']}",
                        task_id=task["taskId"], executor_id=task["executorId"], pid=pid,
                        status_before=task["status"])
            self.kills.append(kill)
            while not done.is_set():
                end = self._task_end(stage, task["taskId"])
                if end is not None:
                    kill.status_after, kill.error = end["status"], end.get("errorMessage")
                    break
                time.sleep(0.2)
            if kill.landed:
                return

    def run(self, done: threading.Event) -> None:
        """The audits run in order group, hfm, mdfa, correlation."""
        for audit in KILL_DURING:
            self.kill_during(audit, done)


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
           "FAIRSPARK_TEST_FAIL_FIRST_ATTEMPT": "hfm,mdfa,correlation",
           "FAIRSPARK_TEST_HOLD_S": "2"}
    port = _free_port()
    proc = subprocess.Popen(
        ["spark-submit", "--master", "local-cluster[2,1,1024]",
         "--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={port}",
         "--conf", "spark.port.maxRetries=0",
         "--conf", "spark.task.maxFailures=4",
         "--conf", "spark.sql.shuffle.partitions=4",
         "jobs/audit.py", "--config", str(base / "c.yaml")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    killer = ExecutorKiller(root_pid=proc.pid, ui_port=port)
    done = threading.Event()
    threads = [threading.Thread(target=drain, daemon=True),
               threading.Thread(target=killer.run, args=(done,), daemon=True)]
    for t in threads:
        t.start()
    try:
        code = proc.wait(timeout=1200)
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
    for t in threads:
        t.join(10)
    log = "".join(lines)
    assert code == 0, log[-6000:]
    for audit in KILL_DURING:
        landed = [k for k in killer.kills if k.audit == audit and k.landed]
        assert landed, (f"no executor died under a running {audit} task", killer.kills,
                        killer.notes)
        k = landed[0]
        assert k.status_before == "RUNNING" and k.job_group.startswith(f"fairspark-{audit}-")
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
