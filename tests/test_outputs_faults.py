"""Faults round 5, items 3-6 (issue 57): the outputs' cases, one test per case.

3. the metastore write is part of the publish (a name that cannot be written is exit 2
   before any work; a failing write publishes nothing, exit 1, one line; reruns of a
   date in fresh sessions on the default in-memory catalog replace only that date);
4. the output and the input never overlap (exit 2 before any work);
5. paths are literal (glob characters in ``output.path`` keep trends and persistence);
6. a status belongs to its run (a run date that does not parse files no status under
   another date; a locked date is refused before the Spark session starts).

Real CLI runs on real files: in process (``under_submit``: this session) where one
session is enough, real processes where the case is a fresh session or its start-up.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
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


@pytest.fixture(scope="module")
def biased(tmp_path_factory) -> str:
    """A table where men get the favourable decision far more often (SPD ~ 0.3)."""
    rng = np.random.default_rng(57)
    n = 2000
    sex = rng.choice(["M", "F"], n)
    pdf = pd.DataFrame({
        "id": np.arange(n).astype(str), "x": rng.normal(size=n), "sex": sex,
        "y": rng.integers(0, 2, n),
        "p": (rng.random(n) < np.where(sex == "M", 0.6, 0.3)).astype(int),
    })
    return write_parquet(pdf, tmp_path_factory.mktemp("faults-in") / "in")


def _config(tmp_path: Path, inp: str, *, out_path: str | None = None,
            run_date: str | None = DATE, **extra) -> Path:
    cfg = {
        "dataset": "faults", "run_date": run_date, "input": {"path": inp},
        "columns": {"features": ["x"], "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"},
                    "row_key": "id"},
        "audits": {"group": {}},
        "output": {"path": out_path or str(tmp_path / "out"), "report": False},
    }
    if run_date is None:
        del cfg["run_date"]
    for k, v in extra.items():
        cfg[k] = {**cfg.get(k, {}), **v} if isinstance(v, dict) else v
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _main(cfg: Path, capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["audit", "--config", str(cfg), "-q", *args], under_submit=True)
    return code, capsys.readouterr().err


def _status(out: Path, date: str = DATE) -> dict:
    return json.loads((out / "_status" / f"run_date={date}.json").read_text())


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _process(cfg: Path, *args: str, timeout: float = 600) -> tuple[int, str, float]:
    """A real CLI process (its own Python and JVM): (exit code, output, seconds)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "fairspark.cli", "audit", "--config",
                           str(cfg), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0


# ------------------------------------------------------------ 3. output.table


@pytest.mark.parametrize("table, why", [
    ("not a name", "not a table name"),
    ("no_such_database_57.metrics", "does not exist"),
])
def test_a_table_that_cannot_be_written_is_exit_2_before_any_work(spark, biased, tmp_path,
                                                                   capsys, table, why):
    cfg = _config(tmp_path, biased, output={"table": table})
    code, err = _main(cfg, capsys)
    assert code == 2, err
    assert "config key 'output.table'" in err and why in err
    out = tmp_path / "out"
    assert not (out / f"run_date={DATE}").exists()
    status = _status(out)
    assert status["exit_code"] == 2 and status["key"] == "output.table"
    assert "\n" not in status["error"]


def test_a_failing_table_write_publishes_nothing_and_says_so_in_one_line(spark, biased,
                                                                          tmp_path, capsys):
    out = tmp_path / "out"
    code, err = _main(_config(tmp_path, biased), capsys)
    assert code == 0, err
    before = _snapshot(out / f"run_date={DATE}")
    # a table of that name that the rows cannot go into (no such columns)
    table = f"faults_wrong_{os.getpid()}"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (a INT) USING parquet")
    try:
        code, err = _main(_config(tmp_path, biased, output={"table": table}), capsys)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    assert code == 1, err
    status = _status(out)
    assert status["exit_code"] == 1 and status["output"] is None
    assert "\n" not in status["error"] and f"'{table}' ('output.table')" in status["error"]
    assert "nothing was published" in status["error"]
    # the earlier run of the date is the date, byte for byte; nothing staged is left
    assert _snapshot(out / f"run_date={DATE}") == before
    assert not [p for p in out.iterdir() if p.name.startswith(("_tmp-", "_old-"))]
    assert "Traceback" not in err


@pytest.mark.parametrize("catalog", ["in-memory", "hive"])
def test_reruns_of_a_date_in_fresh_sessions_replace_only_that_date(biased, tmp_path, catalog):
    """The default session's in-memory catalog forgets the table between runs; its folder
    stays in the warehouse. A Hive metastore (an embedded Derby one here) remembers it.
    Each run is its own process (a fresh session)."""
    table = "faults_metrics"
    warehouse = tmp_path / "warehouse"
    conf = {"spark.sql.warehouse.dir": str(warehouse), "spark.driver.memory": "1g",
            "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    if catalog == "hive":
        conf.update({"spark.sql.catalogImplementation": "hive",
                     "spark.hadoop.javax.jdo.option.ConnectionURL":
                         f"jdbc:derby:;databaseName={tmp_path / 'metastore_db'};create=true"})
    cfg = _config(tmp_path, biased, output={"table": table},
                  spark={"master": "local[1]", "conf": conf})
    out = tmp_path / "out"
    for date in (DATE, "2026-11-30", DATE):  # the last one reruns the first date
        code, text, _ = _process(cfg, "-q", "--run-date", date)
        assert code == 0, text[-3000:]
        assert _status(out, date)["exit_code"] == 0
    stored = pd.read_parquet(warehouse / table)
    stored["run_date"] = stored["run_date"].astype(str)
    for date in (DATE, "2026-11-30"):
        published = pd.read_parquet(out / f"run_date={date}" / "metrics.parquet")
        mine = stored[stored["run_date"] == date]
        assert len(mine) == len(published) > 0  # replaced, not appended
        key = ["audit", "attribute", "group", "metric"]
        assert (mine.sort_values(key)["value"].tolist()
                == published.sort_values(key)["value"].tolist())
    assert sorted(stored["run_date"].unique()) == [DATE, "2026-11-30"]


# ----------------------------------------------------- 4. output and input apart


@pytest.mark.parametrize("where, how", [
    ("same", "is the input"),
    ("inside", "is inside the input"),
    ("around", "contains the input"),
])
def test_an_output_overlapping_the_input_is_exit_2_before_any_work(spark, tmp_path, capsys,
                                                                   biased, where, how):
    inp = tmp_path / "data" / "table"
    inp.mkdir(parents=True)
    for f in Path(biased).iterdir():
        (inp / f.name).write_bytes(f.read_bytes())
    output = {"same": inp, "inside": inp / "audits", "around": tmp_path / "data"}[where]
    before = _snapshot(tmp_path / "data")
    code, err = _main(_config(tmp_path, str(inp), out_path=str(output)), capsys)
    assert code == 2, err
    assert how in err and "('output.path')" in err and "('input.path')" in err
    assert _snapshot(tmp_path / "data") == before  # nothing written, not even a status


# --------------------------------------------------------- 5. literal paths


def test_glob_characters_in_the_output_path_keep_trends_and_persistence(spark, biased,
                                                                        tmp_path, capsys):
    out = tmp_path / "[ab]{x,y}*?"
    # a sibling the glob would match: a glob read would find the wrong folder or none
    (tmp_path / "ax").mkdir()
    limits = {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1,
                         "persistence": 2}]}
    cfg = _config(tmp_path, biased, output={"path": str(out), "report": True},
                  limits=limits)
    code, err = _main(cfg, capsys, "--run-date", "2026-11-01")
    assert code == 0, err  # violated once: not yet
    code, err = _main(cfg, capsys, "--run-date", "2026-11-02")
    assert code == 3, err  # violated on both nights: gates
    night2 = out / "run_date=2026-11-02"
    summary = json.loads((night2 / "summary.json").read_text())
    assert summary["previous"]["run_date"] == "2026-11-01"
    m = pd.read_parquet(night2 / "metrics.parquet")
    assert "violated 2 run(s) in a row, gates at 2" in m[m.audit == "limits"].iloc[0].detail
    html = (night2 / "report.html").read_text()
    assert "Trends over previous runs" in html and "No previous runs." not in html


# ------------------------------------------------------ 6. a status is its run's


def test_a_run_date_that_does_not_parse_files_no_status_under_another_date(spark, biased,
                                                                          tmp_path, capsys):
    out = tmp_path / "out"
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    theirs = out / "_status" / f"run_date={today}.json"
    theirs.parent.mkdir(parents=True)
    theirs.write_text(json.dumps({"run_date": today, "exit_code": 0, "state": "finished"}))
    cfg = _config(tmp_path, biased, run_date=None)  # the machine's date, but for --set
    before = _snapshot(tmp_path)
    code, err = _main(cfg, capsys, "--set", "run_date=2026-11-29/../../x")
    assert code == 2 and "run_date" in err, err
    assert _snapshot(tmp_path) == before  # today's status untouched, nothing new anywhere


def test_a_locked_date_is_refused_before_the_spark_session_starts(biased, tmp_path):
    out = tmp_path / "out"
    lock = out / "_status" / f"run_date={DATE}.lock"
    lock.parent.mkdir(parents=True)
    # a live run's lock: this test's own process holds it
    lock.write_text(json.dumps({"run_id": "holder-57", "host": socket.gethostname(),
                                "pid": os.getpid(), "started_unix": time.time()}))
    cfg = _config(tmp_path, biased, spark={"master": "local[1]"})
    code, text, seconds = _process(cfg)
    assert code == 2, text[-3000:]
    assert "being written by another run" in text and "holder-57" in text
    # no JVM was started: Spark's start-up writes its log4j banner and its session line
    assert "log4j" not in text and "spark.driver.memory" not in text, text[-3000:]
    assert json.loads(lock.read_text())["run_id"] == "holder-57"
    assert not (out / "_status" / f"run_date={DATE}.json").exists()
    print(f"a locked date refused in {seconds:.1f} s (a whole process)")
