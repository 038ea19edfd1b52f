"""A 1 GB driver never loses the run (issue 57 item 2).

Each case runs the real console command (its own JVM, so the heap is really small).
A table that fits once nothing is held needlessly; one whose row groups two tasks
cannot hold at once, read by one task after the heap check; and the same table on a
driver where not even one task fits: exit 2 before any output.


With ``spark.driver.memory: 1g`` (Spark's own default under ``spark-submit``) a table of
904,220 rows x 48 numeric features is audited by ``group`` and ``hfm`` through the real
console command (its own JVM, so the heap is really 1 GB). The encoded feature table
used to be cached in memory and the driver JVM died of ``OutOfMemoryError`` while
building that cache: exit 1, nothing published, the group audit's rows lost with HFM's.
After that, Java serialization's stream kept 100 cached batches live per task
(``spark.serializer.objectStreamReset``, now 1 in ``fairspark.session.DEFAULT_CONF``).
Now the run publishes: the group audit's rows are there and equal pandas' selection
rates, and HFM completes (the heap check finds the table fits).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

ROWS, DIM = 904_220, 48
RUN_DATE = "2026-11-29"


def _table(path, *, seed: int = 5, rows: int = ROWS,
           row_group_size: int = 200_000) -> pd.DataFrame:
    """The wide table, written as Parquet in row groups; returns its role columns."""
    rng = np.random.default_rng(seed)
    x = rng.random((rows, DIM))
    sex = np.where(rng.random(rows) < 0.4, "F", "M")
    y = (x[:, 0] + 0.2 * (sex == "M") + rng.normal(0, 0.2, rows) > 0.6).astype(np.int32)
    p = (x[:, 0] + x[:, 1] * 0.3 + 0.15 * (sex == "M") > 0.7).astype(np.int32)
    cols = {f"f{j:02d}": x[:, j] for j in range(DIM)}
    cols.update(sex=sex, y=y, p=p)
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)
    return pd.DataFrame({"sex": sex, "y": y, "p": p})


def _run(tmp_path, data, *, audits, memory: str = "1g"):
    """The console command on ``data`` with a small driver: (process, summary, rows)."""
    cfg = {
        "dataset": "wide", "run_date": RUN_DATE,
        "input": {"path": str(data)},
        "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"}},
        "audits": audits,
        "output": {"path": str(tmp_path / "out")},
        "spark": {"conf": {"spark.driver.memory": memory, "spark.ui.enabled": "false"}},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "fairspark.cli", "audit", "--config", str(tmp_path / "c.yaml"),
         "-q"], capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    out = tmp_path / "out" / f"run_date={RUN_DATE}"
    if not (out / "summary.json").exists():
        return proc, None, None
    return (proc, json.loads((out / "summary.json").read_text()),
            pd.read_parquet(out / "metrics.parquet"))


def _selection_rates_equal_pandas(rows: pd.DataFrame, roles: pd.DataFrame) -> None:
    rate = rows[(rows.audit == "group") & (rows.attribute == "sex")
                & (rows.metric == "selection_rate")].set_index("group")["value"]
    want = roles.groupby("sex")["p"].mean()
    assert abs(rate["privileged"] - want["M"]) < 1e-12
    assert abs(rate["unprivileged"] - want["F"]) < 1e-12


def test_a_1g_driver_publishes_the_group_audit_of_a_wide_table(tmp_path):
    roles = _table(tmp_path / "wide.parquet")
    proc, summary, rows = _run(tmp_path, tmp_path / "wide.parquet",
                               audits={"group": {}, "hfm": {}})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert summary["audits"]["group"]["status"] == "ok"
    assert summary["audits"]["hfm"]["status"] == "ok", summary["audits"]["hfm"]
    _selection_rates_equal_pandas(rows, roles)


def test_a_1g_driver_runs_hfms_spark_path_to_the_driver_paths_distances(tmp_path):
    """HFM's Spark path (the engine for tables past the driver's budget; forced here by
    ``local_max_bytes``) on a 1 GB driver: its working table (about 550 bytes a row)
    was persisted ``MEMORY_AND_DISK`` and the JVM died of ``OutOfMemoryError`` filling
    it (the audit failed); now ``DISK_ONLY``. D and D_f equal the driver path's, run on
    the same table and driver (its budget given, 2 GB: sized from the memory available
    when it runs, a loaded machine sent the table to the Spark path)."""
    _table(tmp_path / "wide.parquet")
    got = {}
    for path, hfm in (("driver", {"local_max_bytes": 2 << 30}),
                      ("spark", {"local_max_bytes": 1})):
        run = tmp_path / path
        run.mkdir()
        proc, summary, _ = _run(run, tmp_path / "wide.parquet", audits={"hfm": hfm})
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert "OutOfMemoryError" not in proc.stderr
        h = summary["audits"]["hfm"]
        assert h["status"] == "ok" and h["cost"]["engine"] == path, h
        got[path] = {(a, m): v[m]["value"] for a, v in h["attributes"].items()
                     for m in ("D", "D_f")}
    assert got["spark"].keys() == got["driver"].keys() and len(got["spark"]) == 2
    for k, v in got["driver"].items():
        assert got["spark"][k] == pytest.approx(v, rel=1e-12, abs=0), k


def _largest_group_mib(path) -> str:
    """The largest row group's column chunks (MiB, as the message prints them)."""
    meta = pq.ParquetFile(path).metadata
    largest = max(sum(meta.row_group(g).column(c).total_compressed_size
                      for c in range(meta.num_columns)) for g in range(meta.num_row_groups))
    return f"{largest / 2**20:,.0f} MiB"


@pytest.fixture(scope="module")
def big_groups(tmp_path_factory):
    """Two 780k-row groups of 48 doubles, about 300 MB of column chunks each: two
    tasks reading them at once killed a 1 GB driver in the preparation's scan
    (OutOfMemoryError, measured before the heap check); (path, role columns)."""
    path = tmp_path_factory.mktemp("big") / "big.parquet"
    rows_n = 1_560_000
    roles = _table(path, rows=rows_n, row_group_size=rows_n // 2)
    assert pq.ParquetFile(path).metadata.num_row_groups == 2
    return path, roles


def test_row_groups_two_tasks_cannot_hold_are_read_by_one_and_every_audit_publishes(
        tmp_path, big_groups):
    """The check reads the footers before the scan: one task's row group fits the
    1 GB heap, two do not, so the input is read in one task (a warning line says so,
    with the setting to change). Group and HFM both publish; the group audit's
    selection rates equal pandas'."""
    path, roles = big_groups
    proc, summary, rows = _run(tmp_path, path,
                               audits={"group": {}, "hfm": {"max_rows": 100_000}})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert summary["audits"]["group"]["status"] == "ok"
    assert summary["audits"]["hfm"]["status"] == "ok", summary["audits"]["hfm"]
    _selection_rates_equal_pandas(rows, roles)
    warning = [ln for ln in proc.stderr.splitlines() if "reading it in 1 task(s)" in ln]
    assert warning, proc.stderr[-3000:]
    assert "spark.driver.memory" in warning[0] and _largest_group_mib(path) in warning[0]
    assert "OutOfMemoryError" not in proc.stderr


def test_row_groups_no_task_of_a_small_driver_can_hold_stop_the_run_before_any_output(
        tmp_path, big_groups):
    """The same table with a 512 MB driver: not even one task's row group fits. Exit 2
    before any Spark job, naming the setting and the row groups' size; nothing is
    written under the output path."""
    path, _ = big_groups
    proc, summary, _ = _run(tmp_path, path, audits={"group": {}}, memory="512m")
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert summary is None
    assert "spark.driver.memory" in proc.stderr
    assert _largest_group_mib(path) in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "out" / f"run_date={RUN_DATE}").exists()
    assert "OutOfMemoryError" not in proc.stderr


def test_the_heap_check_stops_the_run_before_any_output_in_process(spark, tmp_path,
                                                                   monkeypatch, capsys):
    """The refusal above without a 600 MB table: the same check (the footers against
    this session's real heap, ``local[2]``'s two task slots) with the heap each byte of
    a row group needs (``SCAN_FACTOR``) raised until not even one task of a small table
    fits. Exit 2 before any Spark job, naming the setting and the row groups' size;
    nothing is written under the output path. The fast profile's heap check."""
    from fairspark import _memory, cli

    path = tmp_path / "small.parquet"
    _table(path, rows=2_000, row_group_size=1_000)
    monkeypatch.setattr(_memory, "SCAN_FACTOR", 1e12)
    cfg = {
        "dataset": "wide", "run_date": RUN_DATE, "input": {"path": str(path)},
        "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"}},
        "audits": {"group": {}}, "output": {"path": str(tmp_path / "out")},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(tmp_path / "c.yaml"), "-q"], under_submit=True)
    err = capsys.readouterr().err
    assert code == 2, err[-3000:]
    assert "config key 'spark.conf.spark.driver.memory'" in err, err[-3000:]
    assert f"row group of up to {_largest_group_mib(path)} of column chunks" in err, err[-2000:]
    assert "holds 0 of the 2 task(s)" in err, err[-2000:]
    assert not (tmp_path / "out" / f"run_date={RUN_DATE}").exists()
