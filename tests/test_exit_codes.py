"""Every bad input gets its own message and exit code; nothing is written on exit 2."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_parquet

from fairspark import cli, registry


@pytest.fixture(scope="module")
def small_table(tmp_path_factory):
    rng = np.random.default_rng(5)
    n = 400
    pdf = pd.DataFrame({
        "id": np.arange(n).astype(str),
        "x1": rng.normal(size=n),
        "x2": rng.integers(0, 5, n),
        "city": rng.choice(["a", "b", "c"], n),
        "sex": rng.choice(["M", "F"], n),
        "region": rng.choice(["north", "south", "east"], n),
        "y": rng.integers(0, 2, n),
        "p": rng.integers(0, 2, n),
        "when": pd.date_range("2026-01-01", periods=n, freq="h"),
    })
    base = tmp_path_factory.mktemp("small")
    return pdf, base


def _config(base: Path, inp: str, **over) -> dict:
    cfg = {
        "dataset": "small",
        "run_date": "2026-11-29",
        "input": {"path": inp},
        "columns": {
            "features": ["x1", "x2", "city"],
            "sensitive": [{"column": "sex", "privileged": "M"},
                          {"column": "region", "privileged": "north"}],
            "label": {"column": "y", "positive": 1},
            "prediction": {"column": "p", "positive": 1},
            "row_key": "id",
        },
        "output": {"path": str(base / "out"), "report": False},
    }
    cfg.update(over)
    return cfg


def _run(spark, tmp_path, pdf, capsys, *, cfg_edit=None, raw_yaml=None, extra_args=()):
    inp = write_parquet(pdf, tmp_path / "in")
    cfg = _config(tmp_path, inp)
    if cfg_edit:
        cfg_edit(cfg)
    p = tmp_path / "c.yaml"
    p.write_text(raw_yaml if raw_yaml is not None else yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(p), "-q", *extra_args], under_submit=True)
    err = capsys.readouterr().err
    return code, err, tmp_path / "out" / "run_date=2026-11-29"


def _assert_input_error(code, err, out, *fragments):
    assert code == 2, err
    for f in fragments:
        assert f in err, (f, err)
    assert "Traceback" not in err
    assert not out.exists()
    status = out.parent / "_status" / "run_date=2026-11-29.json"
    if status.exists():  # written whenever the config was readable
        s = json.loads(status.read_text())
        assert s["exit_code"] == 2 and s["output"] is None and fragments[0] in s["error"]


def test_ok_run_exit_0(spark, small_table, tmp_path, capsys):
    code, err, out = _run(spark, tmp_path, small_table[0], capsys)
    assert code == 0, err
    assert (out / "_SUCCESS").exists()


def test_unknown_config_key(spark, small_table, tmp_path, capsys):
    def edit(c):
        c["audits"] = {"group": {"ci_levl": 0.9}}
    _assert_input_error(*_run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit),
                        "config key 'audits.group.ci_levl': unknown key")


def test_wrong_config_type(spark, small_table, tmp_path, capsys):
    def edit(c):
        c["preparation"] = {"max_dropped_fraction": "lots"}
    _assert_input_error(*_run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit),
                        "config key 'preparation.max_dropped_fraction'", "'lots'")


def test_malformed_yaml(spark, small_table, tmp_path, capsys):
    _assert_input_error(
        *_run(spark, tmp_path, small_table[0], capsys, raw_yaml="dataset: [x\ncolumns: {\n"),
        "is not valid YAML at line")


def test_missing_column_names_it_and_the_available_ones(spark, small_table, tmp_path, capsys):
    def edit(c):
        c["columns"]["label"]["column"] = "outcome"
    _assert_input_error(*_run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit),
                        "column 'outcome' (configured as label", "available columns: id, x1")


def test_wrong_column_type(spark, small_table, tmp_path, capsys):
    def edit(c):
        c["columns"]["features"] = ["x1", "when"]
    _assert_input_error(*_run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit),
                        "feature column 'when' has type timestamp")
    def edit2(c):
        c["columns"].pop("prediction")
        c["columns"]["score"] = {"column": "city", "threshold": 0.5}
    _assert_input_error(*_run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit2),
                        "score column 'city' has type string; expected a numeric type")


def test_empty_after_filter(spark, small_table, tmp_path, capsys):
    def edit(c):
        c["input"]["where"] = "x2 > 100"
    _assert_input_error(*_run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit),
                        "has no rows after the filter 'input.where: x2 > 100'")


def test_bad_where_filter(spark, small_table, tmp_path, capsys):
    def edit(c):
        c["input"]["where"] = "no_such_col > 1"
    _assert_input_error(*_run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit),
                        "config key 'input.where'")


def test_nan_and_inf_in_features(spark, small_table, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pdf = small_table[0].copy()
    x1 = pdf["x1"].to_numpy().copy()
    x1[3], x1[7], x1[9] = np.nan, np.inf, -np.inf
    table = pa.Table.from_pandas(pdf.drop(columns=["when"]), preserve_index=False)
    table = table.set_column(table.schema.get_field_index("x1"), "x1",
                             pa.array(x1, from_pandas=False))  # a real NaN, not a null
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part-0.parquet")
    cfg = _config(tmp_path, str(tmp_path / "in"))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(tmp_path / "c.yaml"), "-q"], under_submit=True)
    _assert_input_error(code, capsys.readouterr().err, tmp_path / "out" / "run_date=2026-11-29",
                        "feature columns hold NaN or infinite values: 'x1' (3 rows)")


def test_too_many_null_rows(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf["city"] = pdf["city"].where(np.arange(len(pdf)) % 5 != 0, None)
    _assert_input_error(*_run(spark, tmp_path, pdf, capsys),
                        "80 of 400 rows (20.0%) have a missing", "'city': 80")


def test_few_null_rows_are_dropped_and_counted(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf["sex"] = pdf["sex"].where(np.arange(len(pdf)) % 100 != 0, None)
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    assert code == 0, err
    s = json.loads((out / "summary.json").read_text())
    assert s["rows"]["dropped"] == {"total": 4, "null_sex": 4}
    assert s["rows"]["audited"] == 396


def test_single_group_attribute_fails_that_attribute_only(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf["region"] = "north"
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    assert code == 4, err
    m = pd.read_parquet(out / "metrics.parquet")
    bad = m[m.attribute == "region"]
    assert (bad.status == "failed").all()
    msg = "attribute 'region' has a single group: all 400 rows are privileged"
    assert msg in bad.detail.iloc[0]
    assert (m[(m.attribute == "sex") & (m.metric == "statistical_parity_difference")].status
            == "ok").all()


def test_no_positive_labels_fails_label_metrics(spark, small_table, tmp_path, capsys):
    # one label value, not the positive one: a night without a favourable label (two or
    # more values none of which is positive is a config error, tests/test_bad_input_round2.py)
    pdf = small_table[0].copy()
    pdf["y"] = 0
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    assert code == 4, err
    m = pd.read_parquet(out / "metrics.parquet")
    tpr = m[(m.attribute == "sex") & (m.metric == "tpr_difference")].iloc[0]
    assert tpr.status == "failed" and "favourable label" in tpr.detail
    sp = m[(m.attribute == "sex") & (m.metric == "statistical_parity_difference")].iloc[0]
    assert sp.status == "ok"


def test_an_audit_that_raises_is_failed_and_others_complete(
        spark, small_table, tmp_path, capsys, monkeypatch):
    # a test hook: register an audit entry point that raises
    monkeypatch.setitem(registry.specs(), "hfm", dataclasses.replace(
        registry.get_spec("hfm"), run=_raising_audit, render=None))
    def edit(c):
        c["audits"] = {"group": {}, "hfm": {}}
    code, _err, out = _run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit)
    assert code == 4
    s = json.loads((out / "summary.json").read_text())
    assert s["audits"]["hfm"]["status"] == "failed"
    assert "RuntimeError: boom from a test hook" in s["audits"]["hfm"]["detail"]
    assert s["audits"]["group"]["status"] == "ok"
    assert s["exit_code"] == 4


def _raising_audit(ctx, params):
    raise RuntimeError("boom from a test hook")


def test_an_output_location_that_is_a_file_is_exit_2(spark, small_table, tmp_path, capsys):
    # found before the input is read; was an exit-1 crash with Java
    # frames. A write that fails later (a full disk) is exit 1: test_bad_input_round2.py
    (tmp_path / "out").write_text("not a folder")
    code, err, _out = _run(spark, tmp_path, small_table[0], capsys)
    assert code == 2 and "it is a file, not a folder" in err, err


def test_rerun_replaces_the_date_and_keeps_others(spark, small_table, tmp_path, capsys):
    pdf = small_table[0]
    code, _, out = _run(spark, tmp_path, pdf, capsys)
    assert code == 0
    first = json.loads((out / "summary.json").read_text())["started_utc"]
    code, _, _ = _run(spark, tmp_path, pdf, capsys, extra_args=("--run-date", "2026-11-28"))
    assert code == 0
    (out / "marker-from-first-run").write_text("x")
    code, _, out2 = _run(spark, tmp_path, pdf, capsys)
    assert code == 0 and out2 == out
    assert not (out / "marker-from-first-run").exists()
    assert (tmp_path / "out" / "run_date=2026-11-28" / "_SUCCESS").exists()
    assert json.loads((out / "summary.json").read_text())["started_utc"] >= first
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["_status", "run_date=2026-11-28", "run_date=2026-11-29"]
    status = json.loads((tmp_path / "out" / "_status" / "run_date=2026-11-29.json").read_text())
    assert status["exit_code"] == 0 and status["output"].endswith("run_date=2026-11-29")


def test_java_check_reports_missing_java(monkeypatch):
    from fairspark._java import check_java
    from fairspark.errors import JavaVersionError

    monkeypatch.setenv("JAVA_HOME", "/nonexistent-jdk")
    with pytest.raises(JavaVersionError, match="no 'java' was found"):
        check_java()


def test_java_check_rejects_old_java(monkeypatch, tmp_path):
    from fairspark._java import check_java
    from fairspark.errors import JavaVersionError

    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    (fake / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(JavaVersionError, match="needs Java 17 or newer, found Java 11"):
        check_java()


def test_truncated_parquet_input_is_an_input_error(spark, small_table, tmp_path, capsys):
    inp = Path(write_parquet(small_table[0], tmp_path / "in"))
    part = next(inp.glob("*.parquet"))
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    cfg = _config(tmp_path, str(inp))
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(p), "-q"], under_submit=True)
    err = capsys.readouterr().err
    _assert_input_error(code, err, tmp_path / "out" / "run_date=2026-11-29",
                        f"cannot read input {inp}", "FAILED_READ_FILE")


def test_out_of_memory_gets_one_line_naming_the_setting():
    from fairspark.errors import out_of_memory_hint

    err = RuntimeError("An error occurred while calling o123.collect.\n"
                       ": java.lang.OutOfMemoryError: Java heap space\n\tat java.base/...")
    hint = out_of_memory_hint(err)
    assert hint is not None and "spark.driver.memory" in hint and "\n" not in hint
    assert out_of_memory_hint(RuntimeError("AnalysisException: no such column")) is None


def test_local_session_memory_is_sized_from_the_machine():
    from fairspark.cli import local_driver_memory

    kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal:"))
    expected = min(max(kib * 1024 // 2 // 2**30, 1), 32)
    assert local_driver_memory() == f"{expected}g"


# ---------------------------------------------------------------- input sweep


def test_repeated_row_key_is_an_input_error(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf.loc[7, "id"] = pdf.loc[3, "id"]

    def with_hfm(c):  # HFM joins rows by key: a repeated key would merge two rows
        c["audits"] = {"group": {}, "hfm": {}}
    _assert_input_error(*_run(spark, tmp_path, pdf, capsys, cfg_edit=with_hfm),
                        "row key column 'id' ('columns.row_key') repeats: '3' is on 2 rows")


def test_repeated_row_key_does_not_matter_to_the_group_audit(spark, small_table, tmp_path,
                                                              capsys):
    # no enabled audit joins by key, so preparation skips the key scan; the group
    # metrics must equal those of the same table with unique keys
    pdf = small_table[0].copy()
    for d in ("unique", "repeated"):
        (tmp_path / d).mkdir()
    code, err, out = _run(spark, tmp_path / "unique", pdf, capsys)
    assert code == 0, err
    pdf.loc[7, "id"] = pdf.loc[3, "id"]
    code2, err2, out2 = _run(spark, tmp_path / "repeated", pdf, capsys)
    assert code2 == 0, err2
    keys = ["audit", "attribute", "group", "metric", "metric_b"]

    def rows(path):
        df = pd.read_parquet(path / "metrics.parquet").drop(columns=["config_hash"])
        return df.sort_values(keys).reset_index(drop=True)
    a, b = rows(out), rows(out2)
    assert len(a) > 50
    pd.testing.assert_frame_equal(a, b)


def test_an_identifier_listed_as_categorical_is_an_input_error(spark, small_table, tmp_path,
                                                               capsys):
    # 400 distinct ids against max_categories 50: refused by name before any output,
    # not encoded into 400 one-hot entries
    pdf = small_table[0].copy()
    pdf["account"] = pdf["id"]

    def id_as_category(c):
        c["columns"]["features"] = ["x1", "x2", "city", "account"]
        c["columns"]["categorical"] = ["city", "account"]
        c["preparation"] = {"max_categories": 50}
        c["audits"] = {"group": {}, "hfm": {}}
    _assert_input_error(*_run(spark, tmp_path, pdf, capsys, cfg_edit=id_as_category),
                        "categorical feature 'account' has more than 50 distinct values "
                        "('preparation.max_categories' = 50)")


def test_null_row_key_is_an_input_error(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf["id"] = pdf["id"].astype(object)
    pdf.loc[[4, 9], "id"] = None

    def with_hfm(c):  # the audit that joins rows by key
        c["audits"] = {"group": {}, "hfm": {}}
    _assert_input_error(*_run(spark, tmp_path, pdf, capsys, cfg_edit=with_hfm),
                        "row key column 'id' ('columns.row_key') is null on 2 rows")


def test_all_zero_weights_are_an_input_error(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf["w"] = 0.0

    def edit(c):
        c["columns"]["weight"] = "w"
    _assert_input_error(*_run(spark, tmp_path, pdf, capsys, cfg_edit=edit),
                        "the weights of the 400 audited rows sum to 0")


def _spd(pdf, pred) -> float:
    """Statistical parity difference F - M by hand (unprivileged F, privileged M)."""
    return float(pred[pdf.sex == "F"].mean() - pred[pdf.sex == "M"].mean())


def _metric(out, attr, metric, group="unprivileged"):
    m = pd.read_parquet(out / "metrics.parquet")
    return m[(m.attribute == attr) & (m.metric == metric) & (m.group == group)].iloc[0]


def test_decision_stored_as_strings_matches_a_numeric_positive(spark, small_table, tmp_path,
                                                                capsys):
    pdf = small_table[0].copy()
    pdf["p"] = pdf["p"].map({1: "1.0", 0: "0.0"})

    def edit(c):
        c["columns"]["prediction"] = {"column": "p", "positive": 1.0}
    code, err, out = _run(spark, tmp_path, pdf, capsys, cfg_edit=edit)
    assert code == 0, err
    row = _metric(out, "sex", "statistical_parity_difference")
    expected = _spd(pdf, (pdf["p"] == "1.0").astype(float))
    assert abs(row.value - expected) < 1e-12 and abs(expected) > 0


def test_nan_labels_are_unknown_and_nan_decisions_are_dropped(spark, small_table, tmp_path,
                                                               capsys):
    pdf = small_table[0].copy()
    pdf["y"] = pdf["y"].astype(float)
    pdf["p"] = pdf["p"].astype(float)
    pdf.loc[0:39, "y"] = np.nan                 # 40 unknown labels
    pdf.loc[100:109, "p"] = np.nan              # 10 unknown decisions: dropped, counted
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    assert code == 0, err
    s = json.loads((out / "summary.json").read_text())
    assert s["rows"]["dropped"]["total"] == 10 and s["rows"]["dropped"]["null_p"] == 10
    kept = pdf[pdf["p"].notna()]
    assert s["rows"]["unlabelled"] == int(kept["y"].isna().sum())
    row = _metric(out, "sex", "statistical_parity_difference")
    assert abs(row.value - _spd(kept, kept["p"])) < 1e-12
    labelled = kept[kept["y"].notna()]
    base = _metric(out, "sex", "base_rate", group="privileged")
    assert abs(base.value - labelled[labelled.sex == "M"]["y"].mean()) < 1e-12


def test_undefined_ratio_is_not_computed_never_ok(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf["p"] = 0                                # no favourable decision at all
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    assert code == 0, err
    m = pd.read_parquet(out / "metrics.parquet")
    undefined = m[m.value.isna() & (m.audit == "group")]
    assert len(undefined) and set(undefined.status) <= {"not_computed", "failed"}
    di = _metric(out, "sex", "disparate_impact")
    assert di.status == "not_computed" and di.detail


def test_unparsable_where_names_the_reason(spark, small_table, tmp_path, capsys):
    def edit(c):
        c["input"]["where"] = "x1 > (2"
    code, err, out = _run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit)
    _assert_input_error(code, err, out, "config key 'input.where': 'x1 > (2' is not a valid "
                                        "filter")
    reason = err.split("is not a valid filter", 1)[1]
    assert "PARSE_SYNTAX_ERROR" in reason or "syntax" in reason.lower(), reason


def test_duplicate_csv_header_is_named(spark, small_table, tmp_path, capsys):
    pdf = small_table[0][["id", "x1", "sex", "region", "y", "p"]].copy()
    csv = tmp_path / "dup.csv"
    # the header repeats x1 (as COMPAS repeats priors_count)
    lines = ["id,x1,sex,region,y,p,x1"] + [
        f"{r.id},{r.x1},{r.sex},{r.region},{r.y},{r.p},{r.x1}" for r in pdf.itertuples()]
    csv.write_text("\n".join(lines) + "\n")
    cfg = _config(tmp_path, str(csv))
    cfg["input"]["format"] = "csv"
    cfg["columns"]["features"] = ["x1"]
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(p), "-q"], under_submit=True)
    err = capsys.readouterr().err
    _assert_input_error(code, err, tmp_path / "out" / "run_date=2026-11-29",
                        "the CSV header names 'x1' more than once and Spark renamed the copies "
                        "to x11, x16")


def test_third_label_value_and_scores_outside_0_1_are_warned(spark, small_table, tmp_path,
                                                             capsys):
    pdf = small_table[0].copy()
    # a third (string) label value: counted as negative (a third numeric value is an
    # input error, tests/test_bad_input_round2.py)
    pdf["y"] = pdf["y"].map({1: "yes", 0: "no"})
    pdf.loc[0:9, "y"] = "maybe"
    pdf["s"] = np.linspace(-3.0, 3.0, len(pdf))  # a logit, not a probability

    def edit(c):
        c["columns"]["label"]["positive"] = "yes"
        c["columns"].pop("prediction")
        c["columns"]["score"] = {"column": "s"}
        c["columns"]["features"] = ["x1", "x2", "city"]
    code, err, out = _run(spark, tmp_path, pdf, capsys, cfg_edit=edit)
    assert code == 0, err
    warnings = json.loads((out / "summary.json").read_text())["warnings"]
    assert any("label column 'y' has about 3 distinct values" in w for w in warnings), warnings
    assert any("ranges over [-3, 3], outside [0, 1]" in w for w in warnings), warnings


# ---------------------------------------------------------------- one writer per date


def _lock_file(tmp_path, **fields):
    import socket
    import time

    lock = tmp_path / "out" / "_status" / "run_date=2026-11-29.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    held = {"run_id": "other-run", "host": socket.gethostname(), "pid": os.getpid(),
            "started_unix": time.time(), **fields}
    lock.write_text(json.dumps(held))
    return lock


def test_second_run_of_a_date_fails_fast_while_the_first_holds_the_lock(
        spark, small_table, tmp_path, capsys):
    lock = _lock_file(tmp_path)               # held by a live process: this test's own
    code, err, out = _run(spark, tmp_path, small_table[0], capsys)
    _assert_input_error(code, err, out, "run date 2026-11-29 is being written by another run "
                                        "(run id other-run")
    assert lock.exists()                       # the holder's lock is left alone


def test_a_stale_lock_is_taken_over(spark, small_table, tmp_path, capsys):
    _lock_file(tmp_path, pid=2**22 + 12345)   # no such process on this host
    code, err, out = _run(spark, tmp_path, small_table[0], capsys)
    assert code == 0, err
    assert (out / "_SUCCESS").exists()
    assert not (tmp_path / "out" / "_status" / "run_date=2026-11-29.lock").exists()
    status = json.loads((tmp_path / "out" / "_status" / "run_date=2026-11-29.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert status["state"] == "finished" and status["run_id"] == summary["run_id"]


def test_recover_restores_a_run_moved_aside_by_a_killed_run(spark, small_table, tmp_path,
                                                             capsys):
    import datetime as dt

    from fairspark.outputs import OutputLocation

    code, err, out = _run(spark, tmp_path, small_table[0], capsys)
    assert code == 0, err
    before = (out / "summary.json").read_text()
    base = tmp_path / "out"
    # what a run killed between publish's two renames leaves: the old run aside, a staging
    out.rename(base / "_old-run_date=2026-11-29-abc")
    (base / "_tmp-run_date=2026-11-29-def").mkdir()
    (base / "_tmp-run_date=2026-11-29-def" / "metrics.parquet").write_text("half")
    done = OutputLocation(spark, str(base)).recover(dt.date(2026, 11, 29))
    assert len(done) == 2
    assert (out / "_SUCCESS").exists() and (out / "summary.json").read_text() == before
    assert sorted(p.name for p in base.iterdir()) == ["_status", "run_date=2026-11-29"]
