"""SIGTERM and SIGINT while real Spark work runs end a run cleanly, end to end.

Real CLI processes (``python -m fairspark.cli audit``, started as
``tests/test_publish_e2e.py`` starts them) get SIGTERM or SIGINT while a Spark job of
one phase runs: the first scan of the input, mdfa's splits, HFM's pass A (on Spark),
a window's partition-state write (its sample's Parquet write) and the metrics' write.
The documented hook ``FAIRSPARK_FAULT=<point>`` with ``FAIRSPARK_FAULT_SIGNAL`` (see
:mod:`fairspark._testing`) starts a thread at the point that waits until Spark's
status tracker shows a job started after the point running and then sends the process
the signal with ``os.kill``, as a scheduler would: the signal lands inside that job,
without any timing in the test. The hook's marker line names the job.

Each case checks: exit 143 / 130, no traceback and no Java frames, the job named by
the hook cancelled (the run's log line lists it), status ``terminated`` with the exit
code, no lock and no ``_tmp-``/``_old-`` folder (the window's states included), the
earlier run of the date byte for byte (its states too), and the next run of the date
(in this process's session) publishing ``metrics.parquet`` equal to the uninterrupted
reference run's. One reference run per config (module fixtures), copied as the
earlier run of every case.

A few thousand rows of the bundled UCI Adult (``fairspark/data/adult.test.gz``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import write_parquet
from test_publish_e2e import _launch, _leftovers, _snapshot, _wait_for

DATE = "2026-11-29"
DATE_DIR = f"run_date={DATE}"
ROWS = 3000
DAYS = [dt.date(2026, 11, 24) + dt.timedelta(days=i) for i in range(6)]  # ends at DATE
_SPARK = {"master": "local[1]",
          "conf": {"spark.driver.memory": "1g", "spark.ui.enabled": "false",
                   "spark.sql.shuffle.partitions": "2"}}
_COLUMNS = {
    "features": ["age", "education_num", "hours_per_week", "capital_gain"],
    "sensitive": [{"column": "sex", "privileged": "Male"}],
    "label": {"column": "income", "positive": ">50K"},
    "prediction": {"column": "prediction", "positive": 1},
    "row_key": "row_id",
}
#: the audits of each phase's config: what runs before and in the signalled job
_AUDITS = {
    "group": {"group": {}},
    "mdfa": {"group": {}, "mdfa": {"splits": 2, "sample_rows": 800, "epochs": 2}},
    # advanced.local_max_bytes 0: HFM's passes run as Spark jobs (not on the driver)
    "hfm": {"group": {}, "hfm": {"advanced": {"local_max_bytes": 0, "sample_rows": 64}}},
}
#: phase -> (fault point, config)
_PHASES = {
    "input read": ("input:read", "group"),
    "mdfa's splits": ("fan_out:mdfa", "mdfa"),
    "HFM's pass A": ("hfm:pass A", "hfm"),
    "metrics write": ("publish:metrics", "group"),
}


def _small(adult_pdf) -> pd.DataFrame:
    return adult_pdf.iloc[:ROWS].reset_index(drop=True)


@pytest.fixture(scope="module")
def table(adult_pdf, tmp_path_factory) -> str:
    return write_parquet(_small(adult_pdf), tmp_path_factory.mktemp("signals-in") / "in")


_REFERENCES: dict[str, dict] = {}


@pytest.fixture()
def plain(spark, table, tmp_path_factory):
    """``plain(audits)``: the config of those audits and its reference run (one per
    audits, shared by the cases)."""
    def get(audits: str) -> dict:
        if audits not in _REFERENCES:
            base = tmp_path_factory.mktemp(f"signals-{audits}")
            raw = {"dataset": "signals", "run_date": DATE, "input": {"path": table},
                   "columns": _COLUMNS, "audits": _AUDITS[audits],
                   "limits": {"fail_on_violation": False},
                   "output": {"path": str(base / "ref"), "report": False}, "spark": _SPARK}
            _REFERENCES[audits] = _reference(raw, base)
        return _REFERENCES[audits]
    return get


@pytest.fixture(scope="module")
def windowed(adult_pdf, spark, tmp_path_factory):
    """Six daily partitions, a 6-day window whose sample correlation audits (so every
    partition state holds a sample, written by Spark) and the reference run."""
    base = tmp_path_factory.mktemp("signals-window")
    pdf = _small(adult_pdf)
    for i, d in enumerate(DAYS):
        folder = base / "in" / f"day={d.isoformat()}"
        folder.mkdir(parents=True)
        pdf.iloc[i::len(DAYS)].to_parquet(folder / "part-00000.parquet", index=False)
    raw = {"dataset": "signals_window", "run_date": DATE,
           "input": {"path": str(base / "in"), "partition_column": "day"},
           "columns": _COLUMNS,
           "audits": {"group": {}, "correlation": {"n_samples": 40, "rounds": 2, "k": 80,
                                                   "sample_rows": 1200}},
           "limits": {"fail_on_violation": False},
           "output": {"path": str(base / "ref"), "report": False},
           "window": {"days": len(DAYS)}, "spark": _SPARK}
    return _reference(raw, base)


def _reference(raw: dict, base: Path) -> dict:
    """Run ``raw`` once in this process (the uninterrupted reference run)."""
    cfg = base / "ref.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    code = _main(cfg)
    assert code == 0, code
    return {"raw": raw, "out": Path(raw["output"]["path"]),
            "metrics": _metrics(Path(raw["output"]["path"]))}


def _main(cfg: Path, *args: str) -> int:
    from fairspark import cli

    return cli.main(["audit", "--config", str(cfg), "-q", *args], under_submit=True)


def _metrics(out: Path) -> pd.DataFrame:
    df = pd.read_parquet(out / DATE_DIR / "metrics.parquet")
    keys = ["audit", "attribute", "group", "metric", "metric_b", "model"]
    return df.sort_values(keys, na_position="first").reset_index(drop=True)


def _case_config(ref: dict, tmp_path: Path) -> tuple[Path, Path]:
    """The reference's outputs copied as the earlier run of the date, and a config
    writing to the copy."""
    out = tmp_path / "out"
    shutil.copytree(ref["out"], out)
    raw = json.loads(json.dumps(ref["raw"]))
    raw["output"]["path"] = str(out)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    return cfg, out


def _state_leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "_states").glob("definition=*/*")
                  if p.name.startswith(("_tmp-", "_old-")))


def _signalled(cfg: Path, log: Path, point: str, sig: str) -> tuple[int, str, list[str]]:
    """A real CLI process signalled during the first Spark job after ``point``."""
    proc = _launch(cfg, log, FAIRSPARK_FAULT=point, FAIRSPARK_FAULT_SIGNAL=sig)
    try:
        _wait_for(log, f"fairspark test hook: {sig} during Spark job", proc, timeout=500)
        rc = proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"still running after {sig}: {log.read_text()[-3000:]}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    jobs = re.search(rf"test hook: {sig} during Spark job ([\d, ]+) after {re.escape(point)}",
                     text)
    assert jobs, text[-3000:]
    return rc, text, [j.strip() for j in jobs.group(1).split(",")]


def _assert_clean_end(text: str, rc: int, sig: str, jobs: list[str], out: Path,
                      old: dict[str, bytes]) -> None:
    expected = 128 + int(getattr(signal, sig))             # 143 / 130
    assert rc == expected, (rc, text[-3000:])
    assert "Traceback" not in text and "\tat " not in text, text[-3000:]
    assert f"received {sig}: stopping the run" in text, text[-3000:]
    cancelled = re.search(r"cancelled the running Spark jobs? ([\d, ]+)", text)
    assert cancelled and set(jobs) <= {j.strip() for j in cancelled.group(1).split(",")}, (
        jobs, text[-3000:])
    assert "no Spark job is running" in text, text[-3000:]
    status = json.loads((out / "_status" / f"{DATE_DIR}.json").read_text())
    assert status["state"] == "terminated" and status["exit_code"] == expected, status
    assert not (out / "_status" / f"{DATE_DIR}.lock").exists()
    assert _leftovers(out) == [] and _state_leftovers(out) == []
    assert _snapshot(out) == old    # the earlier run (and its states) byte for byte


def _assert_next_run_equals_the_reference(cfg: Path, out: Path, ref: dict) -> None:
    assert _main(cfg) == 0
    got, want = _metrics(out), ref["metrics"]
    pd.testing.assert_frame_equal(got, want)
    status = json.loads((out / "_status" / f"{DATE_DIR}.json").read_text())
    assert status["state"] == "finished" and status["exit_code"] == 0, status


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("phase", list(_PHASES))
def test_a_signal_during_a_spark_job_ends_the_run_cleanly(plain, tmp_path, phase, sig):
    point, audits = _PHASES[phase]
    ref = plain(audits)
    cfg, out = _case_config(ref, tmp_path)
    old = _snapshot(out)
    rc, text, jobs = _signalled(cfg, tmp_path / "signalled.log", point, sig)
    # the status file is rewritten by the signalled run: compare everything else
    _assert_clean_end(text, rc, sig, jobs, out, _without_status(old, out))
    _assert_next_run_equals_the_reference(cfg, out, ref)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_a_window_state_write_ends_the_run_cleanly(windowed, tmp_path, sig):
    cfg, out = _case_config(windowed, tmp_path)
    old = _snapshot(out)
    # a restate rewrites a state that exists: the signal lands in its sample's write
    _restate(cfg, DAYS[2].isoformat())
    rc, text, jobs = _signalled(cfg, tmp_path / "signalled.log", "states:write", sig)
    _assert_clean_end(text, rc, sig, jobs, out, _without_status(old, out))
    _assert_next_run_equals_the_reference(cfg, out, windowed)


def _without_status(old: dict[str, bytes], out: Path) -> dict[str, bytes]:
    """``old`` but the status file the signalled run rewrites (read from ``out``)."""
    key = f"_status/{DATE_DIR}.json"
    return {**old, key: (out / key).read_bytes()} if (out / key).exists() else old


def _restate(cfg: Path, day: str) -> None:
    """``window.restate: [day]`` in the config (as ``--restate day`` would set it)."""
    raw = yaml.safe_load(cfg.read_text())
    raw["window"]["restate"] = [day]
    cfg.write_text(yaml.safe_dump(raw))


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_a_spark_job_on_a_connect_session_ends_the_run_cleanly(plain, tmp_path,
                                                                               sig):
    """The same on a Spark Connect session (``spark.remote: local[2]``, pyspark's local
    server, whose jobs the hook sees): the run interrupts the session's operations
    (session tags, not job groups) and ends as on a classic session."""
    point, audits = _PHASES["HFM's pass A"]
    ref = plain(audits)
    cfg, out = _case_config(ref, tmp_path)
    raw = yaml.safe_load(cfg.read_text())
    raw["spark"] = {"remote": "local[2]", "conf": dict(_SPARK["conf"])}
    cfg.write_text(yaml.safe_dump(raw))
    old = _snapshot(out)
    proc = _launch(cfg, tmp_path / "signalled.log", FAIRSPARK_FAULT=point,
                   FAIRSPARK_FAULT_SIGNAL=sig)
    try:
        _wait_for(tmp_path / "signalled.log", f"fairspark test hook: {sig} during Spark job",
                  proc, timeout=500)
        rc = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = (tmp_path / "signalled.log").read_text()
    expected = 128 + int(getattr(signal, sig))
    assert rc == expected, (rc, text[-3000:])
    assert "Traceback" not in text and "\tat " not in text, text[-3000:]
    assert f"received {sig}: stopping the run" in text, text[-3000:]
    assert re.search(r"cancelled the running Spark operations? \S+", text), text[-3000:]
    assert "no Spark job is running" in text, text[-3000:]
    status = json.loads((out / "_status" / f"{DATE_DIR}.json").read_text())
    assert status["state"] == "terminated" and status["exit_code"] == expected, status
    assert not (out / "_status" / f"{DATE_DIR}.lock").exists()
    assert _leftovers(out) == []
    assert _snapshot(out) == _without_status(old, out)  # the earlier run byte for byte
    _assert_next_run_equals_the_reference(_classic(cfg, ref), out, ref)


def _classic(cfg: Path, ref: dict) -> Path:
    """``cfg`` with the reference's (classic) Spark settings back, for the next run in
    this process."""
    raw = yaml.safe_load(cfg.read_text())
    raw["spark"] = ref["raw"]["spark"]
    cfg.write_text(yaml.safe_dump(raw))
    return cfg
