"""Incremental nightlies (``window``): states per partition against a full rescan.

The expectation of every comparison is a from-scratch audit of the same rows (the
window's partitions read with an ``input.where`` filter), or a hash-rank sample the
test draws itself from the union of the partitions.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairspark.config import parse_config
from fairspark.errors import ConfigError
from fairspark.runner import compute_run, run_audit_job

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(6)]


def _write_days(pdf, base: Path, days=DAYS) -> str:
    """One ``day=D`` folder per day (pyarrow, no Spark); rows dealt round-robin."""
    if base.exists():
        shutil.rmtree(base)
    for i, d in enumerate(days):
        part = pdf.iloc[i::len(days)]
        _write_part(part, base, d)
    return str(base)


def _write_part(part, base: Path, d: dt.date) -> None:
    folder = base / f"day={d.isoformat()}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    part.to_parquet(folder / "part-00000.parquet", index=False)


def _raw(base: str, out: str, *, days: int = 6, weight: bool = True, **extra):
    raw = {
        "dataset": "adult_window", "seed": 11, "run_date": DAYS[-1].isoformat(),
        "input": {"path": base, "partition_column": "day"},
        "columns": {
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": ["White"]}],
            "intersections": [["sex", "race"]],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": {"column": "prediction", "positive": 1},
            "row_key": "row_id", **({"weight": "fnlwgt"} if weight else {}),
        },
        "audits": {"group": {}},
        "output": {"path": out, "report": False},
        "window": {"days": days},
    }
    raw.update(extra)
    return raw


def _rescan(raw: dict, first: dt.date, last: dt.date) -> dict:
    """The same audit from scratch: the window's rows read with a filter, no states."""
    raw = json.loads(json.dumps(raw))
    raw.pop("window")
    raw["input"]["where"] = f"day >= '{first.isoformat()}' and day <= '{last.isoformat()}'"
    return raw


def _by_key(rows):
    return {(r["audit"], r["attribute"], r["group"], r["metric"], r["metric_b"]): r
            for r in rows if r["audit"] == "group"}


#: the inequality indices' intervals take their gradients by central differences
#: (step 1e-6 of a share): two float sums of non-integer weights (two summation orders;
#: two partitionings of the same rescan too) differ in their last bits, and the rounding
#: of each evaluation (eps * S, S <= 4 the terms' size) over the step moves an interval
#: end by up to z (eps S / 1e-6) sqrt(sum 1/pi / n_eff), about 1.2e-9 on the weighted
#: Adult window (docs/operations.md derives it): held to 1e-8, absolute
_NUMERIC_GRADIENT = ("gei", "theil", "between_group_gei", "between_group_theil")


def _assert_same_rows(got, want, *, weighted: bool = False):
    a, b = _by_key(got), _by_key(want)
    assert set(a) == set(b) and a
    for k in a:
        assert a[k]["status"] == b[k]["status"], k
        for c in ("value", "lower", "upper"):
            x, y = a[k][c], b[k][c]
            if y is None or x is None or y != y:
                assert (x is None or x != x) == (y is None or y != y), (k, c, x, y)
            else:
                if weighted and c != "value" and k[3] in _NUMERIC_GRADIENT:
                    assert abs(x - y) <= 1e-8, (k, c, x, y)  # absolute: see above
                else:
                    assert abs(x - y) <= 1e-12 * max(1.0, abs(y)), (k, c, x, y)


@pytest.fixture()
def adult_days(adult_pdf, tmp_path):
    pdf = adult_pdf.copy()
    pdf["fnlwgt"] = pdf["fnlwgt"].astype(float) / 1e5
    return pdf, Path(_write_days(pdf, tmp_path / "in")), tmp_path / "out"


def test_window_metrics_equal_a_full_rescan_and_rerun_reuses_states(spark, adult_days):
    pdf, base, out = adult_days
    raw = _raw(str(base), str(out))
    first = compute_run(spark, parse_config(raw))
    full = compute_run(spark, parse_config(_rescan(raw, DAYS[0], DAYS[-1])))
    _assert_same_rows(first.long_rows, full.long_rows, weighted=True)
    assert first.summary["rows"]["audited"] == full.summary["rows"]["audited"] == len(pdf)
    win = first.summary["window"]
    assert set(win["aggregated"]) == {d.isoformat() for d in DAYS} and not win["missing"]
    # a rerun of the date is idempotent: nothing aggregated, the same numbers
    again = compute_run(spark, parse_config(raw))
    assert again.summary["window"]["aggregated"] == {}
    assert again.summary["window"]["reused"] == [d.isoformat() for d in DAYS]
    _assert_same_rows(again.long_rows, first.long_rows)  # bit for bit: the same states
    # the next night: a new partition, a 6-day window drops the first day
    nxt = DAYS[-1] + dt.timedelta(days=1)
    extra = pdf.sample(n=900, random_state=3).assign(row_id=lambda d: "n" + d["row_id"])
    _write_part(extra, base, nxt)
    raw_next = {**raw, "run_date": nxt.isoformat()}
    night = compute_run(spark, parse_config(raw_next))
    assert night.summary["window"]["aggregated"] == {nxt.isoformat(): "new"}
    assert DAYS[0].isoformat() not in night.summary["window"]["partitions"]
    full_next = compute_run(spark, parse_config(_rescan(raw_next, DAYS[1], nxt)))
    _assert_same_rows(night.long_rows, full_next.long_rows, weighted=True)


def test_changed_partition_restate_and_definition_change(spark, adult_days):
    pdf, base, out = adult_days
    raw = _raw(str(base), str(out), weight=False)
    compute_run(spark, parse_config(raw))
    # a partition rewritten upstream (other rows) is aggregated again
    changed = pdf.iloc[2::6].iloc[:-50].copy()
    changed["prediction"] = 1 - changed["prediction"]
    _write_part(changed, base, DAYS[2])
    run = compute_run(spark, parse_config(raw))
    assert run.summary["window"]["aggregated"] == {
        DAYS[2].isoformat(): "its files changed since its state was written"}
    _assert_same_rows(run.long_rows, compute_run(
        spark, parse_config(_rescan(raw, DAYS[0], DAYS[-1]))).long_rows)
    # an explicit restatement
    raw_r = json.loads(json.dumps(raw))
    raw_r["window"]["restate"] = [DAYS[4].isoformat()]
    run = compute_run(spark, parse_config(raw_r))
    assert run.summary["window"]["aggregated"] == {DAYS[4].isoformat():
                                                   "restated (window.restate)"}
    # restate is not part of the config hash: the trends still compare the runs
    assert parse_config(raw_r).config_hash() == parse_config(raw).config_hash()
    # another definition (a weight column now): no old state is reused, and it says so
    raw_w = _raw(str(base), str(out), weight=True)
    run = compute_run(spark, parse_config(raw_w))
    win = run.summary["window"]
    assert len(win["aggregated"]) == 6 and win["other_definitions"]
    assert any("another definition" in w for w in run.summary.get("warnings", []))
    _assert_same_rows(run.long_rows, compute_run(
        spark, parse_config(_rescan(raw_w, DAYS[0], DAYS[-1]))).long_rows, weighted=True)


def test_missing_partitions_are_reported(spark, adult_days):
    _, base, out = adult_days
    shutil.rmtree(base / f"day={DAYS[3].isoformat()}")
    raw = _raw(str(base), str(out), days=8)
    run = compute_run(spark, parse_config(raw))
    want = [(DAYS[-1] - dt.timedelta(days=i)).isoformat() for i in (7, 6)] + [
        DAYS[3].isoformat()]
    assert run.summary["window"]["missing"] == sorted(want)
    assert any("no partition for 3 of its 8 days" in w for w in run.summary["warnings"])


def _bottom_k(spark, base: str, days, k: int, seed: int):
    """The test's own draw: the k lowest pmod(xxhash64(key, seed, 30), 2^30) of the union."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(base).where(F.col("day").cast("string").isin(
        [d.isoformat() for d in days]))
    keyed = df.select("row_id", F.pmod(F.xxhash64(F.col("row_id").cast("string"), F.lit(seed),
                                                  F.lit(30)), F.lit(1 << 30)).alias("b"))
    rows = keyed.orderBy("b", "row_id").limit(k).collect()
    return [r["row_id"] for r in rows]


@pytest.mark.parametrize("margin", [2.0, 0.05])
def test_merged_sample_equals_the_sample_of_the_union(spark, adult_days, monkeypatch, margin):
    """With a small margin the partitions store too few rows and are re-read, exactly."""
    from fairspark.nightly import window as W

    monkeypatch.setattr(W, "SAMPLE_MARGIN", margin)
    monkeypatch.setattr(W, "SAMPLE_EXTRA", 0 if margin < 1 else W.SAMPLE_EXTRA)
    _, base, out = adult_days
    raw = _raw(str(base), str(out), weight=False,
               audits={"group": {}, "mdfa": {"enabled": True}})
    raw["window"]["sample_rows"] = 700
    config = parse_config(raw)
    timings: dict = {}
    run = W.prepare_window(spark, config, timings=timings)
    try:
        sample = run.for_audit["mdfa"]
        got = sorted(r["row_id"] for r in sample.rows().select("_fs_key").withColumnRenamed(
            "_fs_key", "row_id").collect())
        assert got == sorted(_bottom_k(spark, str(base), DAYS, 700, config.seed))
        info = run.info["sample"]
        assert info["rows"] == 700
        assert bool(info["partitions_reread"]) == (margin < 1)
        # the second night reads the stored samples (and re-reads what falls short)
        again = W.prepare_window(spark, config, timings=timings)
        got2 = sorted(r[0] for r in again.for_audit["mdfa"].rows().select("_fs_key").collect())
        assert got2 == got and again.info["aggregated"] == {}
        again.unpersist()
    finally:
        run.unpersist()


def test_window_config_errors():
    raw = _raw("/nowhere", "/tmp/x")
    bad = json.loads(json.dumps(raw))
    bad["input"].pop("partition_column")
    with pytest.raises(ConfigError, match="input.partition_column"):
        parse_config(bad)
    bad = json.loads(json.dumps(raw))
    bad["input"]["where"] = "day > '2026-01-01'"
    with pytest.raises(ConfigError, match="input.where"):
        parse_config(bad)
    bad = json.loads(json.dumps(raw))
    bad["window"]["restate"] = ["yesterday"]
    with pytest.raises(ConfigError, match="window.restate"):
        parse_config(bad)


def test_a_killed_state_write_is_never_read(spark, adult_days, tmp_path):
    """SIGKILL while a state is staged; the next run recomputes it and matches a rescan."""
    _, base, out = adult_days
    raw = _raw(str(base), str(out), weight=False)
    raw["spark"] = {"master": "local[1]", "conf": {"spark.ui.enabled": "false"}}
    cfg = tmp_path / "w.yaml"
    cfg.write_text(json.dumps(raw))
    env = {**os.environ, "FAIRSPARK_FAULT": "states:staged"}
    proc = subprocess.run([sys.executable, "-m", "fairspark.cli", "audit", "--config",
                           str(cfg), "-q"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == -9, proc.stderr[-2000:]
    states = list((out / "_states").glob("definition=*/*"))
    assert states and all(p.name.startswith("_tmp-") for p in states)
    res = run_audit_job(spark, parse_config(raw))
    assert res.exit_code == 0
    assert len(res.summary["window"]["aggregated"]) == 6
    assert not list((out / "_states").glob("definition=*/_tmp-*"))
    _assert_same_rows(res.rows, compute_run(
        spark, parse_config(_rescan(raw, DAYS[0], DAYS[-1]))).long_rows)


def _launch(cfg: Path, log: Path, **env: str) -> subprocess.Popen:
    """A real CLI process (its own Python and JVM), stdout and stderr into ``log``."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("FAIRSPARK_FAULT")}
    full.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                 **env})
    with open(log, "w") as fh:
        return subprocess.Popen([sys.executable, "-m", "fairspark.cli", "audit", "--config",
                                 str(cfg), "-q"], env=full, stdout=fh, stderr=subprocess.STDOUT)


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert proc.poll() is None, (text, log.read_text()[-3000:])
        assert time.monotonic() < deadline, (text, log.read_text()[-3000:])
        time.sleep(0.2)


def test_two_nights_of_different_dates_at_once_share_the_states_safely(
        spark, adult_days, tmp_path):
    """Night A (day 5) is held while it stages a state; night B (day 6, the same states)
    waits for the states' lock instead of deleting A's staging, then reuses A's states; a
    night (day 4) that may not wait that long fails fast (exit 2) with its own status. Both
    nights match a rescan of their windows."""
    _, base, out = adult_days
    raws, cfgs = {}, {}
    for name, day, extra in (("a", DAYS[-2], {}), ("b", DAYS[-1], {}),
                             ("c", DAYS[-3], {"states_wait_s": 2})):
        raw = _raw(str(base), str(out), weight=False, run_date=day.isoformat())
        raw["output"].update(extra)
        raw["spark"] = {"master": "local[1]", "conf": {"spark.ui.enabled": "false"}}
        raws[name], cfgs[name] = raw, tmp_path / f"{name}.yaml"
        cfgs[name].write_text(json.dumps(raw))
    logs = {n: tmp_path / f"{n}.log" for n in cfgs}
    release = tmp_path / "release"
    a = _launch(cfgs["a"], logs["a"], FAIRSPARK_FAULT="states:staged",
                FAIRSPARK_FAULT_SLEEP_S="400", FAIRSPARK_FAULT_RELEASE_FILE=str(release))
    procs = [a]
    try:
        _wait_for(logs["a"], "sleep 400 s at states:staged", a)
        staged = list((out / "_states").glob("definition=*/_tmp-*"))
        assert len(staged) == 1, staged
        b, c = _launch(cfgs["b"], logs["b"]), _launch(cfgs["c"], logs["c"])
        procs += [c, b]
        assert c.wait(timeout=400) == 2, logs["c"].read_text()[-3000:]
        _wait_for(logs["b"], "window: waiting for the states", b)
        # A's staging survived B's start (B has not cleaned up: it waits for the lock)
        assert staged[0].is_dir() and a.poll() is None
    finally:
        release.touch()
    codes = [p.wait(timeout=600) for p in procs]
    texts = {n: p.read_text() for n, p in logs.items()}
    assert codes == [0, 2, 0], (codes, {n: t[-2000:] for n, t in texts.items()})
    assert all("Traceback" not in t for t in texts.values()), texts
    c_text = " ".join(texts["c"].split())
    assert "the window's states (definition" in c_text and "run date 2026-11-05" in c_text
    assert "waited 2 s ('output.states_wait_s')" in c_text and "states_definition=" in c_text
    # C failed with its own status (it held its date's lock, not A's)
    status_c = json.loads((out / "_status" / f"run_date={DAYS[-3]}.json").read_text())
    assert status_c["state"] == "finished" and status_c["exit_code"] == 2, status_c
    assert "output.states_wait_s" in status_c["error"], status_c
    assert not (out / f"run_date={DAYS[-3]}").exists()
    # B waited for A's states and reused them: it aggregated only its own new day
    sa = json.loads((out / f"run_date={DAYS[-2]}" / "summary.json").read_text())["window"]
    sb = json.loads((out / f"run_date={DAYS[-1]}" / "summary.json").read_text())["window"]
    assert set(sa["aggregated"]) == {d.isoformat() for d in DAYS[:-1]}
    assert sb["aggregated"] == {DAYS[-1].isoformat(): "new"}
    assert sb["reused"] == [d.isoformat() for d in DAYS[:-1]]
    assert not list((out / "_states").glob("definition=*/_*"))  # no staging, no aside copy
    assert not list((out / "_status").glob("*.lock"))
    import pandas as pd

    for name, last in (("a", DAYS[-2]), ("b", DAYS[-1])):
        got = pd.read_parquet(out / f"run_date={last}" / "metrics.parquet")
        got = got.astype(object).where(got.notna(), None).to_dict("records")
        want = compute_run(spark, parse_config(_rescan(raws[name], DAYS[0], last))).long_rows
        _assert_same_rows(got, want)


def test_all_four_audits_in_a_window(spark, adult_days):
    """mdfa and correlation audit the merged sample, HFM the newest partition."""
    pdf, base, out = adult_days
    audits = {"group": {}, "hfm": {"max_rows": 3000},
              "mdfa": {"splits": 2, "sample_rows": 1500, "epochs": 3},
              "correlation": {"n_samples": 40, "rounds": 2, "k": 80, "sample_rows": 1200}}
    raw = _raw(str(base), str(out), weight=False, audits=audits)
    run = compute_run(spark, parse_config(raw))
    assert run.exit_code == 0, {k: v.get("detail") for k, v in run.summary["audits"].items()}
    win = run.summary["window"]
    assert win["sample"]["rows"] == 1500  # the larger of the two audits' sample_rows
    assert win["audits_on_sample"] == ["correlation", "mdfa"]
    assert win["audits_on_newest"] == ["hfm"]
    assert win["newest"] == DAYS[-1].isoformat()
    assert run.summary["rows"]["audited"] == len(pdf)
    for name in ("hfm", "mdfa", "correlation"):
        assert run.summary["audits"][name]["status"] in ("ok", "not_certified"), name


def test_states_table_in_the_metastore(spark, adult_days):
    """With ``output.table`` the window's states are rows of ``<table>_states``."""
    _, base, out = adult_days
    raw = _raw(str(base), str(out), weight=False)
    raw["output"]["table"] = "default.window_metrics"
    run = compute_run(spark, parse_config(raw))
    rows = spark.table("default.window_metrics_states").collect()
    assert sorted(r["partition"] for r in rows) == [d.isoformat() for d in DAYS]
    assert {r["definition"] for r in rows} == {run.summary["window"]["definition"]}
    for r in rows:  # each row is the published state, read back
        state = json.loads((Path(r["folder"]) / "state.json").read_text())
        assert json.loads(r["groups"]) == json.loads(json.dumps(state["groups"]))
        assert r["rows_kept"] == state["rows_kept"]
    compute_run(spark, parse_config(raw))  # a rerun replaces, does not append
    assert spark.table("default.window_metrics_states").count() == len(DAYS)
