"""Publishing survives real kills and concurrent runs, end to end.

Real CLI processes (``python -m fairspark.cli audit``) are killed with ``SIGKILL`` at
two points of publishing, chosen with the documented hook ``FAIRSPARK_FAULT`` (see
:mod:`fairspark._testing`; the process sends the signal to itself, so the kill lands
exactly there): while the staging folder is being written, and between the two
renames of :meth:`~fairspark.outputs.OutputLocation.publish`. A reader thread lists the
date folder in a loop the whole time (through an open directory handle, so a listing
is of one folder even while folders are renamed) and records every listing without
``_SUCCESS``. The runs after a kill are in-process (they share this session's Spark)
and must recover: the previous run put back byte for byte, no ``_old-``/``_tmp-``
leftovers, the lock taken over, ``_status`` naming the run that wrote it last.

Two real CLI processes started together for one date: exactly one takes the lock and
publishes (exit 0); the other fails fast with exit 2 naming the lock file, and leaves
the winner's status alone. The winner holds the lock at ``lock:acquired``
(``FAIRSPARK_FAULT_SLEEP_S`` with ``FAIRSPARK_FAULT_RELEASE_FILE``) until the test has
seen the other run refused, so the two runs overlap however slowly the machine starts
the second one. (A fixed 25 s hold raced a slow start-up in CI: both runs took the
lock one after the other and both exited 0.) The test waits on the runs themselves: the
loser's exit, or both runs' logs at the hold, which is the fault (two runs that both
took the lock; Hadoop's local create-without-overwrite was not atomic) and fails at
once instead of hanging on two held runs.

Small table, group audit only, no report: each subprocess costs a Spark start-up.
"""

from __future__ import annotations

import json
import os
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

from fairspark import cli

ROOT = Path(__file__).resolve().parents[1]
DATE = "2026-11-29"
DATE_DIR = f"run_date={DATE}"


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    rng = np.random.default_rng(15)
    n = 300
    pdf = pd.DataFrame({
        "id": np.arange(n).astype(str),
        "x1": rng.normal(size=n),
        "sex": rng.choice(["M", "F"], n),
        "y": rng.integers(0, 2, n),
        "p": rng.integers(0, 2, n),
    })
    return write_parquet(pdf, tmp_path_factory.mktemp("publish-in") / "in")


def _config(tmp_path: Path, table: str) -> Path:
    cfg = {
        "dataset": "publish_e2e",
        "run_date": DATE,
        "input": {"path": table},
        "columns": {
            "features": ["x1"],
            "sensitive": [{"column": "sex", "privileged": "M"}],
            "label": {"column": "y", "positive": 1},
            "prediction": {"column": "p", "positive": 1},
            "row_key": "id",
        },
        "audits": {"group": {}},
        "limits": {"fail_on_violation": False},
        "output": {"path": str(tmp_path / "out"), "report": False},
        "spark": {"master": "local[1]",
                  "conf": {"spark.driver.memory": "1g", "spark.ui.enabled": "false",
                           "spark.sql.shuffle.partitions": "2"}},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _launch(cfg: Path, log: Path, **env: str) -> subprocess.Popen:
    """A real CLI process (its own Python and JVM), stdout and stderr into ``log``."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable, **env}
    for k in ("FAIRSPARK_FAULT", "FAIRSPARK_FAULT_SLEEP_S", "FAIRSPARK_FAULT_RELEASE_FILE"):
        if k not in env:
            full_env.pop(k, None)
    with open(log, "w") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "fairspark.cli", "audit", "--config", str(cfg), "-q"],
            cwd=ROOT, env=full_env, stdout=fh, stderr=subprocess.STDOUT)


def _in_process(cfg: Path, capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["audit", "--config", str(cfg), "-q", *args], under_submit=True)
    return code, capsys.readouterr().err


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _status(out: Path) -> dict:
    path = out / "_status" / f"{DATE_DIR}.json"
    for _ in range(50):  # a run may be rewriting it this instant
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            time.sleep(0.1)
    return json.loads(path.read_text())


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(("_old-", "_tmp-")))


class DateReader(threading.Thread):
    """Lists ``out/run_date=D`` in a loop, as a downstream reader would.

    The folder is opened once per listing and listed through that handle, so every
    listing shows one folder's content even while publish renames folders around it.
    A listing counts only if the folder listed is still ``run_date=D`` once the listing
    is done (an earlier run that was renamed aside and is being deleted while the
    reader lists it is not the date any more). ``bad`` collects the listings of the
    date folder without ``_SUCCESS`` (or without its metrics and summary).
    """

    def __init__(self, out: Path):
        super().__init__(daemon=True)
        self.path = out / DATE_DIR
        self.stop = threading.Event()
        self.complete = self.absent = self.moved = 0
        self.bad: list[list[str]] = []

    def run(self) -> None:
        while not self.stop.is_set():
            time.sleep(0.001)
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                self.absent += 1
                continue
            try:
                names = os.listdir(fd)
                listed = os.fstat(fd)
                try:
                    now = os.stat(self.path)
                    still = (now.st_ino, now.st_dev) == (listed.st_ino, listed.st_dev)
                except FileNotFoundError:
                    still = False
            finally:
                os.close(fd)
            if not still:
                self.moved += 1
            elif "_SUCCESS" in names and {"metrics.parquet", "summary.json"} <= set(names):
                self.complete += 1
            else:
                self.bad.append(sorted(names))

    def finish(self) -> DateReader:
        self.stop.set()
        self.join()
        return self


def _killed(proc: subprocess.Popen, log: Path, point: str) -> None:
    rc = proc.wait(timeout=600)
    text = log.read_text()
    assert rc == -9, (rc, text[-3000:])
    assert f"fairspark test hook: SIGKILL at {point}" in text, text[-3000:]


def _good_run_then_killed_run(table: str, tmp_path: Path, capsys,
                              point: str) -> tuple[Path, Path, dict[str, bytes], DateReader]:
    """A good run of the date, then a second run SIGKILLed at ``point`` while a reader
    lists the date folder; returns the config, the output folder, the good run's files
    and the (still running) reader."""
    cfg = _config(tmp_path, table)
    out = tmp_path / "out"
    code, err = _in_process(cfg, capsys)
    assert code == 0, err
    old = _snapshot(out / DATE_DIR)
    reader = DateReader(out)
    reader.start()
    log = tmp_path / "killed.log"
    _killed(_launch(cfg, log, FAIRSPARK_FAULT=point), log, point)
    return cfg, out, old, reader


def _reader_saw_only_complete_folders(reader: DateReader) -> None:
    reader.finish()
    assert reader.bad == [], reader.bad[:5]
    assert reader.complete > 0


def test_kill_between_the_renames_loses_nothing(spark, table, tmp_path, capsys):
    cfg, out, old, reader = _good_run_then_killed_run(table, tmp_path, capsys,
                                                      "publish:between_renames")
    old_run = json.loads(old["summary.json"])["run_id"]
    # the killed run moved the old run aside; its own complete staging folder waits
    assert not (out / DATE_DIR).exists()
    aside = [p for p in out.iterdir() if p.name.startswith(f"_old-{DATE_DIR}-")]
    staged = [p for p in out.iterdir() if p.name.startswith(f"_tmp-{DATE_DIR}-")]
    assert len(aside) == 1 and len(staged) == 1, sorted(p.name for p in out.iterdir())
    assert _snapshot(aside[0]) == old
    assert (staged[0] / "_SUCCESS").exists()
    status = _status(out)
    assert status["state"] == "running" and status["run_id"] != old_run, status
    assert (out / "_status" / f"{DATE_DIR}.lock").exists()   # left by the dead process

    # the next run takes the stale lock over and recovers before it does anything else;
    # it then fails on its input (exit 2), so the date shows what recovery left
    code, err = _in_process(cfg, capsys, "--where", "1 = 0")
    assert code == 2, err
    assert f"restored the previous run of {DATE}" in err, err
    assert "deleted the leftover" in err, err
    assert _snapshot(out / DATE_DIR) == old
    assert _leftovers(out) == []
    assert not (out / "_status" / f"{DATE_DIR}.lock").exists()
    status = _status(out)
    assert status["state"] == "finished" and status["exit_code"] == 2, status
    assert "no rows" in status["error"], status

    # a good rerun replaces the date while the reader watches
    code, err = _in_process(cfg, capsys)
    assert code == 0, err
    _reader_saw_only_complete_folders(reader)
    new_run = json.loads((out / DATE_DIR / "summary.json").read_text())["run_id"]
    status = _status(out)
    assert status["exit_code"] == 0 and status["run_id"] == new_run != old_run, status
    assert _leftovers(out) == []


def test_kill_while_staging_is_written_keeps_the_old_run(spark, table, tmp_path, capsys):
    cfg, out, old, reader = _good_run_then_killed_run(table, tmp_path, capsys,
                                                      "publish:staging")
    # the date was never touched; a half-written staging folder is left
    assert _snapshot(out / DATE_DIR) == old
    staged = [p for p in out.iterdir() if p.name.startswith(f"_tmp-{DATE_DIR}-")]
    assert len(staged) == 1, sorted(p.name for p in out.iterdir())
    assert (staged[0] / "metrics.parquet").exists()
    assert not (staged[0] / "_SUCCESS").exists()
    assert not (staged[0] / "summary.json").exists()
    killed_status = _status(out)
    assert killed_status["state"] == "running", killed_status

    code, err = _in_process(cfg, capsys)
    assert code == 0, err
    _reader_saw_only_complete_folders(reader)
    assert f"deleted the leftover {staged[0]}" in err, err
    assert _leftovers(out) == []
    new = _snapshot(out / DATE_DIR)
    assert {"_SUCCESS", "summary.json"} <= set(new)
    status = _status(out)
    assert status["state"] == "finished" and status["exit_code"] == 0, status
    assert status["run_id"] == json.loads(new["summary.json"])["run_id"]
    assert status["run_id"] != killed_status["run_id"]


def test_two_runs_of_one_date_at_once_one_wins_one_fails_fast(spark, table, tmp_path, capsys):
    cfg = _config(tmp_path, table)
    out = tmp_path / "out"
    code, err = _in_process(cfg, capsys)   # an earlier run of the date, with its status
    assert code == 0, err
    before = _status(out)
    release = tmp_path / "release"
    # the hold ends only with the release file (3600 s is never reached)
    hold = {"FAIRSPARK_FAULT": "lock:acquired", "FAIRSPARK_FAULT_SLEEP_S": "3600",
            "FAIRSPARK_FAULT_RELEASE_FILE": str(release)}
    holding = "fairspark test hook: sleep 3600 s at lock:acquired"
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [_launch(cfg, logs[0], **hold), _launch(cfg, logs[1], **hold)]
    try:
        # the loser ends by itself (refused by the lock); the winner holds the lock until
        # the release file exists. Both at the hold means both took the lock: the fault
        # this test is about, reported at once instead of waiting on two held runs.
        while not any(p.poll() is not None for p in procs):
            if all(holding in log.read_text() for log in logs):
                break
            time.sleep(0.2)
        both_held = all(holding in log.read_text() for log in logs)
        first = next((i for i, p in enumerate(procs) if p.poll() is not None), 0)
        winner = 1 - first
        winner_running = procs[winner].poll() is None
        status_meanwhile = _status(out)
    finally:
        release.touch()
    codes = [p.wait(timeout=600) for p in procs]
    texts = [p.read_text() for p in logs]

    assert not both_held, ("both runs took the lock of the date", codes, texts)
    assert winner_running, texts
    assert codes[first] == 2 and codes[winner] == 0, (codes, texts)
    loser_text = texts[first]
    assert f"run date {DATE} is being written by another run" in loser_text, loser_text
    assert f"_status/{DATE_DIR}.lock" in loser_text, loser_text
    assert "Traceback" not in loser_text, loser_text
    assert holding in texts[winner]
    assert holding not in loser_text

    summary = json.loads((out / DATE_DIR / "summary.json").read_text())
    assert (out / DATE_DIR / "_SUCCESS").exists()
    assert (out / DATE_DIR / "metrics.parquet").is_dir()
    status = _status(out)
    assert status["exit_code"] == 0 and status["run_id"] == summary["run_id"], status
    # the refused run left the status alone: still the earlier run's, or the winner's
    # "running" once the winner is past its hold
    assert status_meanwhile == before or (
        status_meanwhile["state"] == "running"
        and status_meanwhile["run_id"] == summary["run_id"]), (before, status_meanwhile)
    assert summary["run_id"] != before["run_id"]
    assert _leftovers(out) == []
    assert not (out / "_status" / f"{DATE_DIR}.lock").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith("run_date=")] == [DATE_DIR]


# ---------------------------------------------------------------- signals


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text():
            return
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in the log: {log.read_text()[-3000:]}")


@pytest.mark.parametrize(("point", "sig"), [
    ("lock:acquired", "SIGTERM"),
    ("publish:staging", "SIGTERM"),
    ("publish:between_renames", "SIGTERM"),
    ("publish:between_renames", "SIGINT"),
])
def test_a_signal_at_a_fault_point_ends_the_run_cleanly(spark, table, tmp_path, capsys, point,
                                                        sig):
    import signal

    cfg = _config(tmp_path, table)
    out = tmp_path / "out"
    code, err = _in_process(cfg, capsys)      # the earlier run of the date
    assert code == 0, err
    old = _snapshot(out / DATE_DIR)
    old_run = json.loads(old["summary.json"])["run_id"]
    log = tmp_path / "signalled.log"
    proc = _launch(cfg, log, FAIRSPARK_FAULT=point, FAIRSPARK_FAULT_SLEEP_S="400",
                   FAIRSPARK_FAULT_RELEASE_FILE=str(tmp_path / "never"))
    try:
        _wait_for(log, f"fairspark test hook: sleep 400 s at {point}", proc)
        proc.send_signal(getattr(signal, sig))
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    expected = 128 + int(getattr(signal, sig))             # 143 / 130, by POSIX convention
    assert rc == expected, (rc, text[-3000:])
    assert "Traceback" not in text and "\tat " not in text, text[-3000:]
    # staging removed, the earlier run back in place byte for byte, the lock released
    assert _snapshot(out / DATE_DIR) == old
    assert _leftovers(out) == []
    assert not (out / "_status" / f"{DATE_DIR}.lock").exists()
    status = _status(out)
    assert status["state"] == "terminated" and status["exit_code"] == expected, status
    assert status["run_id"] and status["run_id"] != old_run, status
    # SIGINT arrives as pyspark's KeyboardInterrupt (its SparkContext installs a SIGINT
    # handler that cancels the jobs), SIGTERM through fairspark's handler
    assert status["error"] == (f"terminated by {sig}" if sig == "SIGTERM" else
                               "interrupted (SIGINT)") + (": the run stopped and cleaned up "
                                                          "after itself"), status
