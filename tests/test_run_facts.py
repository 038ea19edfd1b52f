"""One owner per run fact: a run without a configured date resolves it
once, so a run that crosses midnight UTC publishes folder D with rows, summary and
status all dated D."""

from __future__ import annotations

import datetime as real_dt
import json
import types
from pathlib import Path

import pandas as pd
from conftest import synthetic_scored, write_parquet

from fairspark.config import parse_config
from fairspark.runner import run_audit_job


def _clock_crossing_midnight(monkeypatch) -> list[real_dt.date]:
    """``fairspark.config``'s clock: 2026-12-01 on the first reading, 2026-12-02 after."""
    seen: list[real_dt.date] = []

    class _Now(real_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            day = real_dt.date(2026, 12, 1) if not seen else real_dt.date(2026, 12, 2)
            seen.append(day)
            return real_dt.datetime(day.year, day.month, day.day, 23, 59, 59, tzinfo=tz)

    shim = types.SimpleNamespace(datetime=_Now, date=real_dt.date, timezone=real_dt.timezone)
    monkeypatch.setattr("fairspark.config_model._dt", shim)
    return seen


def test_a_run_crossing_midnight_publishes_one_date(spark, tmp_path, monkeypatch):
    inp = write_parquet(synthetic_scored(n=600, seed=4), tmp_path / "in")
    cfg = parse_config({
        "dataset": "midnight", "seed": 1, "input": {"path": inp},
        "columns": {"features": ["x1", "x2", "city"], "categorical": ["city"],
                    "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}, "row_key": "id"},
        "audits": {"group": {}}, "output": {"path": str(tmp_path / "out"), "report": False},
    })
    assert cfg.run_date is None
    seen = _clock_crossing_midnight(monkeypatch)
    res = run_audit_job(spark, cfg)
    assert res.exit_code == 0
    assert seen and seen[0] == real_dt.date(2026, 12, 1)  # the clock was read ...
    # ... and everything carries the first reading, though later readings say 12-02
    assert Path(res.output_dir).name == "run_date=2026-12-01"
    assert res.summary["run_date"] == "2026-12-01"
    rows = pd.read_parquet(Path(res.output_dir) / "metrics.parquet")
    assert set(rows["run_date"].astype(str)) == {"2026-12-01"}
    status = json.loads((tmp_path / "out" / "_status" / "run_date=2026-12-01.json").read_text())
    assert status["exit_code"] == 0
    assert not (tmp_path / "out" / "_status" / "run_date=2026-12-02.json").exists()
