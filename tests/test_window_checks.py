"""Windows' folder and restate checks, on a synthetic table.

A window reads only folders named exactly ``<column>=YYYY-MM-DD`` with a real date;
``--restate`` takes real dates inside the window and needs a window; a corrupt state is
named as a state with the ``--restate`` that repairs it. The data is built here (no
``../shared``); every expected count is computed from the pandas frame.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import synthetic_scored

from fairspark import cli
from fairspark.config import parse_config
from fairspark.runner import compute_run

DAYS = [dt.date(2026, 11, 17) + dt.timedelta(days=i) for i in range(4)]  # 17..20
RUN_DATE = DAYS[-1].isoformat()


def _write_day(part, base: Path, name: str) -> None:
    folder = base / name
    folder.mkdir(parents=True)
    part.drop(columns=["day"]).to_parquet(folder / "part-00000.parquet", index=False)


@pytest.fixture()
def days_table(tmp_path):
    """Four ``day=D`` folders of a synthetic table; each day's rows differ in size."""
    pdf = synthetic_scored(n=1200, seed=41)
    sizes = [200, 250, 300, 450]
    pdf["day"] = [d.isoformat() for d, k in zip(DAYS, sizes, strict=True) for _ in range(k)]
    base = tmp_path / "in"
    for d in DAYS:
        _write_day(pdf[pdf["day"] == d.isoformat()], base, f"day={d.isoformat()}")
    return pdf, base, tmp_path / "out"


def _raw(base: Path, out: Path, *, days: int = 3, window: bool = True) -> dict:
    raw = {
        "dataset": "window_checks", "seed": 3, "run_date": RUN_DATE,
        "input": {"path": str(base), "partition_column": "day"},
        "columns": {
            "features": ["x1", "x2", "city"],
            "sensitive": [{"column": "sex", "privileged": "M"}],
            "label": {"column": "y", "positive": 1},
            "prediction": {"column": "p", "positive": 1},
            "row_key": "id",
        },
        "audits": {"group": {}},
        "output": {"path": str(out), "report": False},
    }
    if window:
        raw["window"] = {"days": days}
    return raw


def test_stray_folders_are_named_in_one_warning_and_never_read(spark, days_table):
    pdf, base, out = days_table
    # a backup copy beside the newest partition, an impossible date, another name
    shutil.copytree(base / f"day={RUN_DATE}", base / f"day={RUN_DATE}.bak")
    _write_day(pdf[pdf["day"] == DAYS[1].isoformat()], base, "day=2026-11-31")
    _write_day(pdf.iloc[:40], base, "day=2026-11-19-old")
    run = compute_run(spark, parse_config(_raw(base, out, days=3)))
    # brute force: the rows of the three real days 18..20 of the frame
    want = int(pdf["day"].isin([d.isoformat() for d in DAYS[1:]]).sum())
    assert want == 250 + 300 + 450
    assert run.summary["rows"]["audited"] == want
    win = run.summary["window"]
    assert win["partitions"] == [d.isoformat() for d in DAYS[1:]]
    strays = ["day=2026-11-19-old", "day=2026-11-31", f"day={RUN_DATE}.bak"]
    assert win["ignored"] == sorted(strays)
    lines = [w for w in run.summary["warnings"] if "not a partition folder" in w]
    assert len(lines) == 1 and all(s in lines[0] for s in strays), run.summary["warnings"]
    # the group audit's selection rates are those of the real days' rows only
    window_pdf = pdf[pdf["day"].isin([d.isoformat() for d in DAYS[1:]])]
    rates = {r["group"]: r["value"] for r in run.long_rows if r["audit"] == "group"
             and r["metric"] == "selection_rate" and r["attribute"] == "sex"}
    by_sex = window_pdf.groupby("sex")["p"].mean()
    want_rates = {"privileged": by_sex["M"], "unprivileged": by_sex["F"]}
    assert set(rates) == set(want_rates)
    for g, v in want_rates.items():
        assert rates[g] == pytest.approx(v, abs=1e-12), g


def test_a_table_without_date_folders_names_what_it_found(spark, days_table, tmp_path,
                                                           capsys):
    pdf, _, out = days_table
    base = tmp_path / "undated"
    _write_day(pdf.iloc[:100], base, "day=20261120")
    _write_day(pdf.iloc[100:200], base, "day=2026-11-20.bak")
    raw = _raw(base, out)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    code = cli.main(["audit", "--config", str(cfg), "-q"], under_submit=True)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no partition folders 'day=YYYY-MM-DD'" in err
    assert "day=20261120" in err and "day=2026-11-20.bak" in err
    assert not (out / f"run_date={RUN_DATE}").exists()


def _cli(tmp_path, raw, *args, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    code = cli.main(["audit", "--config", str(cfg), "-q", *args], under_submit=True)
    return code, capsys.readouterr().err


def _nothing_written(out: Path) -> None:
    """Exit 2 before any output: no run folder, no state, no status but the error's."""
    assert not (out / f"run_date={RUN_DATE}").exists()
    assert not (out / "_states").exists()
    status = out / "_status" / f"run_date={RUN_DATE}.json"
    if status.exists():
        s = json.loads(status.read_text())
        assert s["exit_code"] == 2 and s["output"] is None
    leftovers = [p.name for p in out.iterdir() if p.name != "_status"] if out.exists() else []
    assert not leftovers, leftovers


@pytest.mark.parametrize("value", ["2026-11-31", "2026-02-29", "20261118"])
def test_restate_of_an_impossible_date_is_exit_2_naming_it(spark, days_table, tmp_path,
                                                           capsys, value):
    _, base, out = days_table
    code, err = _cli(tmp_path, _raw(base, out), "--restate", value, capsys=capsys)
    assert code == 2, err
    assert f"'{value}'" in err and "window.restate" in err and "YYYY-MM-DD" in err
    assert "Traceback" not in err
    _nothing_written(out)


@pytest.mark.parametrize("value", ["2026-11-17", "2026-11-21", "2025-11-19"])
def test_restate_outside_the_window_is_exit_2_naming_it_and_the_window(
        spark, days_table, tmp_path, capsys, value):
    _, base, out = days_table
    # days: 3 ending at 2026-11-20 -> 2026-11-18..2026-11-20 (computed by hand)
    code, err = _cli(tmp_path, _raw(base, out, days=3), "--restate", "2026-11-19",
                     "--restate", value, capsys=capsys)
    assert code == 2, err
    assert f"'{value}'" in err and "outside the window 2026-11-18..2026-11-20" in err
    _nothing_written(out)


def test_restate_without_a_window_is_refused(spark, days_table, tmp_path, capsys):
    """It used to turn a plain audit of the partitioned folder into a 30-day window."""
    _, base, out = days_table
    raw = _raw(base, out, window=False)
    code, err = _cli(tmp_path, raw, "--restate", "2026-11-19", capsys=capsys)
    assert code == 2, err
    assert "--restate 2026-11-19" in err and "needs 'window'" in err
    _nothing_written(out)
    # the same config without --restate audits every row of the folder, as before
    code, err = _cli(tmp_path, raw, capsys=capsys)
    assert code == 0, err
    summary = json.loads((out / f"run_date={RUN_DATE}" / "summary.json").read_text())
    assert summary["rows"]["audited"] == 1200 and "window" not in summary


def test_restate_inside_the_window_aggregates_that_day_again(spark, days_table, tmp_path,
                                                             capsys):
    _, base, out = days_table
    raw = _raw(base, out, days=3)
    assert _cli(tmp_path, raw, capsys=capsys)[0] == 0
    code, err = _cli(tmp_path, raw, "--restate", "2026-11-18", capsys=capsys)
    assert code == 0, err
    summary = json.loads((out / f"run_date={RUN_DATE}" / "summary.json").read_text())
    assert summary["window"]["aggregated"] == {"2026-11-18": "restated (window.restate)"}


def _sample_raw(base: Path, out: Path) -> dict:
    raw = _raw(base, out, days=3)
    raw["audits"] = {"group": {}, "mdfa": {"splits": 2, "sample_rows": 400, "epochs": 2}}
    return raw


def test_a_corrupt_state_sample_is_named_as_a_state_with_its_restate(spark, days_table,
                                                                     tmp_path, capsys):
    _, base, out = days_table
    raw = _sample_raw(base, out)
    code, err = _cli(tmp_path, raw, capsys=capsys)
    assert code == 0, err
    published = out / f"run_date={RUN_DATE}" / "summary.json"
    first = json.loads(published.read_text())
    samples = sorted((out / "_states").glob("definition=*/day=2026-11-19/sample.parquet"))
    assert len(samples) == 1
    files = [f for f in samples[0].iterdir() if f.suffix == ".parquet"]
    assert files
    for f in files:  # a truncated write: the bytes of a Parquet file cut in half
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])
    code, err = _cli(tmp_path, raw, capsys=capsys)
    assert code == 2, err
    assert "corrupt state" in err and "day=2026-11-19" in err, err
    assert str(samples[0]) in err, err  # the state's own path
    assert "--restate 2026-11-19" in err, err
    assert "cannot read input" not in err and "Traceback" not in err, err
    # nothing published over the first run
    assert json.loads(published.read_text())["run_id"] == first["run_id"]
    # the --restate the message gives repairs it
    code, err = _cli(tmp_path, raw, "--restate", "2026-11-19", capsys=capsys)
    assert code == 0, err
    again = json.loads(published.read_text())
    assert again["window"]["aggregated"] == {"2026-11-19": "restated (window.restate)"}
    assert again["window"]["sample"]["rows"] == first["window"]["sample"]["rows"] == 400


def test_an_unreadable_state_file_is_named_and_aggregated_again(spark, days_table, tmp_path,
                                                                capsys, caplog):
    _, base, out = days_table
    raw = _raw(base, out, days=3)
    assert _cli(tmp_path, raw, capsys=capsys)[0] == 0
    state = next((out / "_states").glob("definition=*/day=2026-11-18/state.json"))
    state.write_text(state.read_text()[:100])  # cut mid-JSON
    code, err = _cli(tmp_path, raw, capsys=capsys)
    assert code == 0, err
    summary = json.loads((out / f"run_date={RUN_DATE}" / "summary.json").read_text())
    why = summary["window"]["aggregated"]
    assert list(why) == ["2026-11-18"] and "corrupt state" in why["2026-11-18"]
    assert str(state) in why["2026-11-18"]
    assert json.loads(state.read_text())["partition"] == "2026-11-18"  # rewritten whole
