"""The bad-input sweep: every case gets its exit code and a message naming it.

The expectations (values seen, counts, metrics) are computed here from the pandas
frame, never by fairspark.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import test_exit_codes
from test_exit_codes import _assert_input_error, _metric, _run, _spd

from fairspark import prepare as prepare_mod

STATUS = ("_status", "run_date=2026-11-29.json")

#: the 400-row table of tests/test_exit_codes.py (the same fixture, built here once)
small_table = test_exit_codes.small_table


def _status(out):
    return json.loads(out.parent.joinpath(*STATUS).read_text())


@pytest.fixture(params=["one pass", "staged"])
def flow(request, monkeypatch):
    """Both preparation flows: the one aggregation and the staged one (more groups)."""
    if request.param == "staged":
        monkeypatch.setattr(prepare_mod, "ONE_PASS_MAX_GROUPS", 0)
    return request.param


# ---------------------------------------------------------------- not decisions


def test_probabilities_in_the_decision_column_are_an_input_error(spark, small_table, tmp_path,
                                                                  capsys, flow):
    pdf = small_table[0].copy()
    pdf["p"] = np.random.default_rng(1).uniform(0.01, 0.99, len(pdf)).round(4)
    n = pdf["p"].nunique()

    def edit(c):
        c["columns"]["prediction"] = {"column": "p", "positive": 1.0}
    code, err, out = _run(spark, tmp_path, pdf, capsys, cfg_edit=edit)
    _assert_input_error(code, err, out, "decision column 'p' ('columns.prediction.column') is "
                        "not binary", f"({n} distinct)",
                        "configure 'columns.score: {column: p, threshold: <cut-off>}'")
    top = pdf["p"].value_counts().sort_index(kind="mergesort")
    first = top.sort_values(ascending=False, kind="mergesort").index[0]
    assert f"{first:.6g}" in err


def test_a_third_numeric_decision_value_is_an_input_error(spark, small_table, tmp_path, capsys,
                                                          flow):
    pdf = small_table[0].copy()
    pdf.loc[0:4, "p"] = 2                       # a third class among the decisions
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    _assert_input_error(code, err, out, "decision column 'p' ('columns.prediction.column') is "
                        "not binary", "(3 distinct)")


def test_a_third_numeric_label_value_is_an_input_error(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf.loc[0:9, "y"] = 2
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    _assert_input_error(code, err, out, "label column 'y' ('columns.label.column') is not "
                        "binary", "(3 distinct)")


def test_a_continuous_label_is_an_input_error(spark, small_table, tmp_path, capsys, flow):
    pdf = small_table[0].copy()
    pdf["y"] = np.linspace(0.0, 1.0, len(pdf))
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    _assert_input_error(code, err, out, "label column 'y' ('columns.label.column') is not "
                        "binary", f"({pdf['y'].nunique()} distinct)", "'columns.label.positive'")


def test_yes_no_label_with_positive_1_names_the_values_seen(spark, small_table, tmp_path,
                                                            capsys, flow):
    pdf = small_table[0].copy()
    pdf["y"] = pdf["y"].map({1: "yes", 0: "no"})
    code, err, out = _run(spark, tmp_path, pdf, capsys)   # positive: 1 (the config's)
    counts = pdf["y"].value_counts()
    shown = ", ".join(repr(v) for v in counts.index)      # most frequent first
    _assert_input_error(code, err, out, "label column 'y' ('columns.label.column') holds the "
                        f"values {shown} (2 distinct); none of them is the configured positive "
                        "value 1 ('columns.label.positive')")


def test_yes_no_decision_with_positive_1_names_the_values_seen(spark, small_table, tmp_path,
                                                               capsys):
    pdf = small_table[0].copy()
    pdf["p"] = pdf["p"].map({1: "yes", 0: "no"})
    code, err, out = _run(spark, tmp_path, pdf, capsys)
    _assert_input_error(code, err, out, "decision column 'p' ('columns.prediction.column') "
                        "holds the values", "none of them is the configured positive value 1")


def test_a_category_against_the_rest_is_still_a_decision(spark, small_table, tmp_path, capsys,
                                                         flow):
    # a string decision High / Medium / Low with positive High (as COMPAS's v_score_text)
    pdf = small_table[0].copy()
    pdf["p"] = np.array(["Low", "Medium", "High"])[np.arange(len(pdf)) % 3]

    def edit(c):
        c["columns"]["prediction"] = {"column": "p", "positive": "High"}
    code, err, out = _run(spark, tmp_path, pdf, capsys, cfg_edit=edit)
    assert code == 0, err
    row = _metric(out, "sex", "statistical_parity_difference")
    assert abs(row.value - _spd(pdf, (pdf["p"] == "High").astype(float))) < 1e-12


def _write_with_nans(pdf, path):
    """Parquet with real NaN values (pandas' writer would store them as nulls)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(pdf.drop(columns=["when"]), preserve_index=False)
    for c in pdf.columns:
        if c != "when" and pdf[c].dtype == float:
            table = table.set_column(table.schema.get_field_index(c), c,
                                     pa.array(pdf[c].to_numpy(), from_pandas=False))
    path.mkdir()
    pq.write_table(table, path / "part-0.parquet")
    return str(path)


def test_real_nan_labels_and_decisions_are_warned_once_each(spark, small_table, tmp_path,
                                                            capsys, flow):
    import yaml
    from test_exit_codes import _config

    from fairspark import cli

    pdf = small_table[0].copy()
    pdf["y"] = pdf["y"].astype(float)
    pdf["p"] = pdf["p"].astype(float)
    pdf.loc[0:9, "y"] = np.nan                  # 10 unknown labels
    pdf.loc[100:103, "p"] = np.nan              # 4 unknown decisions: dropped
    cfg = _config(tmp_path, _write_with_nans(pdf, tmp_path / "in"))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(tmp_path / "c.yaml"), "-q"], under_submit=True)
    err = capsys.readouterr().err
    assert code == 0, err
    out = tmp_path / "out" / "run_date=2026-11-29"
    s = json.loads((out / "summary.json").read_text())
    kept = pdf[pdf["p"].notna()]
    assert s["rows"]["dropped"] == {"total": 4, "null_p": 4}
    assert s["rows"]["unlabelled"] == int(kept["y"].isna().sum()) == 10
    # no "about 3 distinct values" warning: a NaN label is unknown, not a third value
    assert s["warnings"] == [
        "10 rows have a NaN label in 'y': counted as unlabelled, like null",
        "4 rows have a NaN decision in 'p': dropped like a null one (counted in "
        "rows.dropped.null_p)"]
    row = _metric(out, "sex", "statistical_parity_difference")
    assert abs(row.value - _spd(kept, kept["p"])) < 1e-12


# ---------------------------------------------------------------- a status for every exit


def test_a_misspelled_limit_metric_leaves_a_status_with_the_key(spark, small_table, tmp_path,
                                                                capsys):
    def edit(c):
        c["limits"] = {"rules": [{"metric": "statistical_parity_diference", "abs_max": 0.1}]}
    code, err, out = _run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit)
    msg = ("config key 'limits.rules[0].metric': 'statistical_parity_diference' is not a "
           "metric of the enabled audits")
    _assert_input_error(code, err, out, msg)
    s = _status(out)
    assert s["state"] == "finished" and s["exit_code"] == 2 and s["output"] is None, s
    assert msg in s["error"] and s["key"] == "limits.rules[0].metric", s


def test_an_unknown_attribute_in_two_audits_names_both_in_the_status(spark, small_table,
                                                                      tmp_path, capsys):
    def edit(c):
        c["audits"] = {"group": {"attributes": ["sx"]}, "hfm": {"attributes": ["sex", "sx"]}}
    code, err, out = _run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit)
    _assert_input_error(code, err, out, "config key 'audits.group.attributes': 'sx' is not a "
                        "sensitive attribute", "config key 'audits.hfm.attributes': 'sx'")
    s = _status(out)
    assert s["exit_code"] == 2 and s["key"] == "audits.group.attributes", s
    assert s["keys"] == ["audits.group.attributes", "audits.hfm.attributes"], s


def test_a_config_error_leaves_a_live_runs_status_alone(spark, small_table, tmp_path, capsys):
    from test_exit_codes import _lock_file

    _lock_file(tmp_path)                       # a live run (this process) holds the date
    status = tmp_path.joinpath("out", *STATUS)
    status.write_text('{"state": "running", "run_id": "other-run"}')

    def edit(c):
        c["limits"] = {"rules": [{"metric": "nope", "abs_max": 0.1}]}
    code, err, _out = _run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit)
    assert code == 2, err
    assert json.loads(status.read_text()) == {"state": "running", "run_id": "other-run"}


# ---------------------------------------------------------------- write failures


def _no_java(err: str) -> None:
    assert "Traceback" not in err and "\tat " not in err and "py4j" not in err.lower(), err
    assert len([ln for ln in err.splitlines() if ln.strip()]) <= 2, err  # log line + console


def test_an_output_path_that_is_a_file_is_one_line_exit_2(spark, small_table, tmp_path, capsys):
    (tmp_path / "out").write_text("not a folder")
    code, err, _ = _run(spark, tmp_path, small_table[0], capsys)
    assert code == 2, err
    assert f"cannot write to the output location '{tmp_path / 'out'}' ('output.path'): it is " \
           "a file, not a folder" in err, err
    _no_java(err)
    assert (tmp_path / "out").read_text() == "not a folder"


@pytest.fixture
def tmpfs(tmp_path):
    """A mount point for a small tmpfs (root only: skipped elsewhere); unmounted after."""
    import subprocess

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = []

    def mount(options: str):
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            # one line without this test's path, so the skip summary groups the tests
            first = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[0]
            pytest.skip(f"cannot mount a tmpfs here: {first.rsplit(': ', 1)[-1]}")
        mounted.append(mnt)
        return mnt

    yield mount
    for m in mounted:
        subprocess.run(["umount", "-l", str(m)], check=False)


def test_a_read_only_output_folder_is_one_line_exit_2(spark, small_table, tmp_path, capsys,
                                                     tmpfs):
    mnt = tmpfs("ro,size=1m")                  # read-only even for root
    pdf = small_table[0]

    def edit(c):
        c["output"]["path"] = str(mnt / "out")
    code, err, _ = _run(spark, tmp_path, pdf, capsys, cfg_edit=edit)
    assert code == 2, err
    assert f"cannot write to the output location '{mnt / 'out'}' ('output.path')" in err, err
    _no_java(err)
    assert list(mnt.iterdir()) == []


def test_a_full_disk_during_the_write_is_one_line_exit_1_with_a_readable_status(
        spark, small_table, tmp_path, capsys, tmpfs):
    import os

    mnt = tmpfs("size=256k")
    base = mnt / "out"
    page = os.statvfs(mnt).f_frsize
    # fill the disk but for a few pages: the lock and the status files fit, the metrics not
    with open(mnt / "filler", "wb") as fh:
        fh.write(b"\0" * (os.statvfs(mnt).f_bavail * page - 3 * page))

    def edit(c):
        c["output"]["path"] = str(base)
    code, err, _ = _run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit)
    assert code == 1, err
    assert f"cannot write the outputs of 2026-11-29 under {base}" in err, err
    assert "No space left on device" in err, err
    _no_java(err)
    status = json.loads(base.joinpath(*STATUS).read_text())
    assert status["exit_code"] == 1 and status["state"] == "finished", status
    assert status["run_id"] and "No space left on device" in status["error"], status
    assert "\n" not in status["error"] and "\tat " not in status["error"], status
    assert sorted(p.name for p in base.iterdir()) == ["_status"]   # no staging left
    assert sorted(p.name for p in (base / "_status").iterdir()) == ["run_date=2026-11-29.json"]


# ---------------------------------------------------------------- weights


def test_weights_that_overflow_are_an_input_error(spark, small_table, tmp_path, capsys):
    pdf = small_table[0].copy()
    pdf["w"] = 1e308                            # 400 of them sum to inf in double precision
    assert not np.isfinite(pdf["w"].sum())

    def edit(c):
        c["columns"]["weight"] = "w"
    _assert_input_error(*_run(spark, tmp_path, pdf, capsys, cfg_edit=edit),
                        "the weights in column 'w' ('columns.weight') overflow: their sum over "
                        "the 400 audited rows is not a finite double")


def test_squared_weights_that_overflow_are_an_input_error(spark, small_table, tmp_path,
                                                          capsys):
    pdf = small_table[0].copy()
    pdf["w"] = 1e200                            # the sum is finite, the squares are not
    assert np.isfinite(pdf["w"].sum()) and not np.isfinite((pdf["w"] ** 2).sum())

    def edit(c):
        c["columns"]["weight"] = "w"
    _assert_input_error(*_run(spark, tmp_path, pdf, capsys, cfg_edit=edit),
                        "the weights in column 'w' ('columns.weight') overflow: their sum of "
                        "squares")


def test_a_group_whose_weight_sits_on_one_row_is_inconclusive(spark, small_table, tmp_path,
                                                              capsys):
    pdf = small_table[0].copy()
    pdf["w"] = 1.0
    first_m = pdf.index[pdf.sex == "M"][0]
    pdf.loc[first_m, "w"] = 1e4                 # one man carries almost all the men's weight

    def edit(c):
        c["columns"]["weight"] = "w"
    code, err, out = _run(spark, tmp_path, pdf, capsys, cfg_edit=edit)
    assert code == 0, err
    men = pdf[pdf.sex == "M"]
    n_eff = men["w"].sum() ** 2 / (men["w"] ** 2).sum()   # Kish, by hand
    assert n_eff < 30 < len(men)
    row = _metric(out, "sex", "selection_rate", group="privileged")
    assert row.status == "inconclusive", row
    assert f"{len(men)} rows but an effective sample size of {n_eff:.1f}" in row.detail, row
    spd = _metric(out, "sex", "statistical_parity_difference")
    assert spd.status == "inconclusive" and f"{n_eff:.1f}" in spd.detail, spd
    women = _metric(out, "sex", "selection_rate", group="unprivileged")
    assert women.status == "ok", women          # the women's weights are all 1


def _not_computed_audit(ctx, params):
    from fairspark.audits.base import AuditOutcome, MetricRow
    from fairspark.status import Status

    rows = [MetricRow(audit="hfm", attribute=a.name, metric="df", value=None,
                      status=Status.NOT_COMPUTED, detail=f"nothing to compare for {a.name}")
            for a in ctx.attributes(params)]
    return AuditOutcome(rows=rows)


def test_an_audit_whose_every_metric_is_not_computed_has_failed(spark, small_table, tmp_path,
                                                                capsys, monkeypatch):
    import dataclasses

    from fairspark import registry

    # a test hook: an audit entry point whose every row is not_computed
    monkeypatch.setitem(registry.specs(), "hfm", dataclasses.replace(
        registry.get_spec("hfm"), run=_not_computed_audit, render=None))

    def edit(c):
        c["audits"] = {"group": {}, "hfm": {}}
    code, err, out = _run(spark, tmp_path, small_table[0], capsys, cfg_edit=edit)
    assert code == 4, err
    s = json.loads((out / "summary.json").read_text())
    assert s["audits"]["hfm"]["status"] == "failed", s["audits"]["hfm"]
    assert s["audits"]["hfm"]["detail"] == ("no metric of audit hfm could be computed: nothing "
                                            "to compare for sex; nothing to compare for region")
    assert s["audits"]["group"]["status"] == "ok"
    assert _status(out)["failed_audits"] == {"hfm": s["audits"]["hfm"]["detail"]}


# ---------------------------------------------------------------- optional parts fail alone


@pytest.fixture(scope="module")
def aged_table():
    rng = np.random.default_rng(29)
    n = 300
    x1 = rng.normal(size=n)
    age = rng.integers(18, 80, n)
    male = rng.integers(0, 2, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(x1 + 0.03 * (age - 45) + 0.8 * male)))).astype(int)
    return pd.DataFrame({"id": np.arange(n).astype(str), "x1": x1, "age": age, "male": male,
                         "y": y, "p": (x1 > 0).astype(int)})


def _dr_run(spark, tmp_path, pdf, capsys, model_cols):
    import joblib
    from sklearn.linear_model import LogisticRegression

    frame = pdf[model_cols].copy()
    model = LogisticRegression(max_iter=500).fit(frame, pdf["y"])
    path = tmp_path / "model.joblib"
    joblib.dump(model, path)

    def edit(c):
        c["columns"] = {
            "features": ["x1"],
            "sensitive": [{"column": "male", "privileged": 1},
                          {"column": "age", "name": "age_band",
                           "privileged_expr": "age >= 25 AND age < 60"}],
            "label": {"column": "y", "positive": 1},
            "prediction": {"column": "p", "positive": 1},
            "row_key": "id",
        }
        c["audits"] = {"hfm": {"method": "approx", "m1": 2, "dr_model": str(path),
                               "dr_ratio": 1.0}}
    code, err, out = _run(spark, tmp_path, pdf, capsys, cfg_edit=edit)
    return model, code, err, out


def test_dr_gets_the_source_column_of_an_expression_attribute(spark, aged_table, tmp_path,
                                                              capsys):
    pdf = aged_table
    model, code, err, out = _dr_run(spark, tmp_path, pdf, capsys, ["x1", "age", "male"])
    assert code == 0, err
    m = pd.read_parquet(out / "metrics.parquet")
    dr = m[(m.audit == "hfm") & (m.metric == "DR")].iloc[0]
    assert dr.status == "ok", dr.detail
    # dr_ratio 1: every row's binary attribute is flipped; by hand with the same model
    frame = pdf[["x1", "age", "male"]]
    flipped = frame.assign(male=1 - frame["male"])
    expected = float(np.mean(model.predict(frame) != model.predict(flipped)))
    assert abs(dr.value - expected) < 1e-12 and expected > 0, (dr.value, expected)


def test_a_failed_dr_row_fails_alone(spark, aged_table, tmp_path, capsys):
    pdf = aged_table.assign(zzz=aged_table["x1"] * 2)    # a column the audit never sees
    _, code, err, out = _dr_run(spark, tmp_path, pdf, capsys, ["x1", "age", "male", "zzz"])
    assert code == 0, err                                 # was 4
    m = pd.read_parquet(out / "metrics.parquet")
    dr = m[(m.audit == "hfm") & (m.metric == "DR")].iloc[0]
    assert dr.status == "failed" and "audits.hfm.dr_model" in dr.detail, dr
    d = m[(m.audit == "hfm") & (m.metric.isin(["D", "D_f"]))]
    assert len(d) and (d.status == "ok").all(), d[["attribute", "metric", "status"]]
    s = json.loads((out / "summary.json").read_text())
    assert s["audits"]["hfm"]["status"] == "ok" and s["audits"]["hfm"]["dr"]["status"] == \
        "failed", s["audits"]["hfm"]
    assert _status(out)["failed_audits"] == {}
