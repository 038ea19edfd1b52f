"""The input's resolved schema is part of what makes two runs comparable.

Day 1 audits a 3,000-row sample of UCI Adult; on day 2 ``age`` arrives as a string and
``hours_per_week`` is renamed ``hours_pw`` (``features: all_others``). The expected
changes (columns, Spark types, encoded dimensions) are computed here from the pandas
frames, never by fairspark.
"""

from __future__ import annotations

import json
import re
import shutil
from html import unescape

import pytest
import yaml
from conftest import write_parquet

from fairspark import cli

#: the Spark type a pandas column written by pyarrow reads back as
SPARK_TYPE = {"int64": "bigint", "float64": "double", "object": "string"}
DAY1, DAY2 = "2026-11-28", "2026-11-29"


def _expected_schema(pdf, features):
    """(column -> (type, kind)) and the encoded dimension, from the pandas frame."""
    cols, dim = {}, 0
    for c in features:
        t = SPARK_TYPE[str(pdf[c].dtype)]
        kind = "categorical" if t == "string" else "numeric"
        cols[c] = (t, kind)
        dim += pdf[c].nunique() if kind == "categorical" else 1
    return cols, dim


def _features(pdf):
    roles = {"sex", "race", "income", "prediction", "row_id"}
    return [c for c in pdf.columns if c not in roles]


def _config(inp: str, out: str, *, report: bool) -> dict:
    return {
        "dataset": "adult-sample",
        "input": {"path": inp},
        "columns": {
            "features": "all_others",
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": "White"}],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": {"column": "prediction", "positive": 1},
            "row_key": "row_id",
        },
        "audits": {"group": {}, "hfm": {}},
        "output": {"path": out, "report": report},
    }


def _run(tmp_path, pdf, out, run_date, capsys, *, report=False, name="in", extra=()):
    inp = write_parquet(pdf, tmp_path / f"{name}-{run_date}")
    cfg = tmp_path / f"c-{run_date}.yaml"
    cfg.write_text(yaml.safe_dump(_config(inp, str(out), report=report)))
    code = cli.main(["audit", "--config", str(cfg), "--run-date", run_date, "-q", *extra],
                    under_submit=True)
    return code, capsys.readouterr().err


def _summary(out, run_date):
    return json.loads((out / f"run_date={run_date}" / "summary.json").read_text())


@pytest.fixture(scope="module")
def days(adult_pdf):
    """Day 1: 3,000 rows; day 2: other rows, ``age`` as a string, ``hours_pw``."""
    sample = adult_pdf.sample(n=6000, random_state=29).reset_index(drop=True)
    day1 = sample.iloc[:3000].reset_index(drop=True)
    day2 = sample.iloc[3000:].reset_index(drop=True)
    day2["age"] = day2["age"].astype(str)
    day2 = day2.rename(columns={"hours_per_week": "hours_pw"})
    return day1, day2


@pytest.fixture(scope="module")
def published_day1(days, tmp_path_factory):
    """An output location holding day 1's run (copied by each test)."""
    base = tmp_path_factory.mktemp("drift")
    out = base / "out"
    inp = write_parquet(days[0], base / "in-day1")
    cfg = base / "c.yaml"
    cfg.write_text(yaml.safe_dump(_config(inp, str(out), report=False)))
    code = cli.main(["audit", "--config", str(cfg), "--run-date", DAY1, "-q"],
                    under_submit=True)
    assert code == 0
    return out


def _copy(published, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(published, out)
    return out


def test_a_changed_schema_is_reported_and_trends_are_not_compared(days, published_day1,
                                                                   tmp_path, capsys):
    day1, day2 = days
    out = _copy(published_day1, tmp_path)
    code, err = _run(tmp_path, day2, out, DAY2, capsys, report=True)
    assert code == 0, err

    _, dim1 = _expected_schema(day1, _features(day1))
    new, dim2 = _expected_schema(day2, _features(day2))
    assert dim2 > dim1 + 50  # age is one-hot now: one column per age seen
    s1, s2 = _summary(out, DAY1), _summary(out, DAY2)
    assert s1["config_hash"] == s2["config_hash"]  # the config did not change
    assert "schema_change" not in s1
    assert s1["input_schema"]["encoded_dimension"] == dim1
    assert s2["input_schema"]["encoded_dimension"] == dim2
    assert {f["column"]: (f["type"], f["kind"]) for f in s2["input_schema"]["features"]} == new

    change = s2["schema_change"]
    assert change["previous_run_date"] == DAY1
    assert change["appeared"] == [{"column": "hours_pw", "type": "bigint"}]
    assert change["vanished"] == [{"column": "hours_per_week", "type": "bigint"}]
    assert change["changed_type"] == [{"column": "age", "before": "bigint", "after": "string"}]
    assert change["changed_kind"] == [{"column": "age", "before": "numeric",
                                       "after": "categorical"}]
    assert change["encoded_dimension"] == {"before": dim1, "after": dim2}
    assert change["action"] == "warn"

    text = (f"the input schema changed since the run of {DAY1}: age changed type bigint -> "
            "string; hours_per_week (bigint) vanished; hours_pw (bigint) appeared; encoded "
            f"dimension {dim1} -> {dim2}; its numbers are not comparable with that run's")
    assert text in err                      # the log
    assert text in s2["warnings"]           # summary.json
    assert change["message"] == text

    html = (out / f"run_date={DAY2}" / "report.html").read_text()
    # the first screen: the decision box's change note, no "since" column
    decision = unescape(html[html.index('id="decision"'):html.index('id="audited"')])
    assert "not comparable: " + text in decision
    assert f"since {DAY1}" not in decision
    # the trends: every series says "not comparable", none is better or worse
    trends = html[html.index("Every headline series"):]
    trends = trends[:trends.index("</table>")]
    rows = re.findall(r"<tr class='[a-z]*'>(.*?)</tr>", trends)
    assert any(r.startswith("<td>hfm · race · df</td>") for r in rows), rows
    for r in rows:
        assert "not comparable: schema changed" in r, r
        assert "<b>worse</b>" not in r and "<b>better</b>" not in r, r


def test_an_unchanged_schema_keeps_the_runs_comparable(days, published_day1, tmp_path,
                                                       capsys):
    # the same columns, types and category values (another sample may lack a rare
    # native_country, which changes the encoded dimension: a schema change too)
    out = _copy(published_day1, tmp_path)
    same = days[0].sample(frac=1.0, random_state=3).reset_index(drop=True)
    code, err = _run(tmp_path, same, out, DAY2, capsys, report=True)
    assert code == 0, err
    s1, s2 = _summary(out, DAY1), _summary(out, DAY2)
    assert "schema_change" not in s2
    assert s1["input_schema"]["hash"] == s2["input_schema"]["hash"]
    assert "schema changed" not in err
    html = (out / f"run_date={DAY2}" / "report.html").read_text()
    assert "not comparable: schema changed" not in html
    assert f"since {DAY1}" in html  # the decision box compares with day 1


def test_fail_on_a_changed_schema_is_exit_2_before_any_output(days, published_day1, tmp_path,
                                                              capsys):
    day2 = days[1]
    out = _copy(published_day1, tmp_path)
    code, err = _run(tmp_path, day2, out, DAY2, capsys,
                     extra=["--set", "preparation.on_schema_change=fail"])
    assert code == 2, err
    assert "Traceback" not in err
    for part in ("age changed type bigint -> string", "hours_per_week (bigint) vanished",
                 "hours_pw (bigint) appeared", "'preparation.on_schema_change'"):
        assert part in err, (part, err)
    assert not (out / f"run_date={DAY2}").exists()
    assert sorted(p.name for p in out.iterdir()) == ["_status", f"run_date={DAY1}"]
    status = json.loads((out / "_status" / f"run_date={DAY2}.json").read_text())
    assert status["exit_code"] == 2 and status["state"] == "finished"
    assert "age changed type bigint -> string" in status["error"]
    assert status["key"] == "preparation.on_schema_change"
    assert status["run_id"]


def test_fail_on_a_new_category_value_names_the_encoded_dimension(days, published_day1,
                                                                  tmp_path, capsys):
    day1 = days[0]
    out = _copy(published_day1, tmp_path)
    more = day1.copy()
    more.loc[:9, "workclass"] = "Space-agency"   # a value day 1 never saw: one more column
    _, dim1 = _expected_schema(day1, _features(day1))
    _, dim2 = _expected_schema(more, _features(more))
    assert dim2 == dim1 + 1
    code, err = _run(tmp_path, more, out, DAY2, capsys,
                     extra=["--set", "preparation.on_schema_change=fail"])
    assert code == 2, err
    assert f"encoded dimension {dim1} -> {dim2}" in err, err
    assert "changed type" not in err and "appeared" not in err
    assert not (out / f"run_date={DAY2}").exists()


def test_a_run_without_a_recorded_schema_or_dimension_is_not_a_change():
    from fairspark.nightly.history import schema_change, schema_hash

    feats = [{"column": "x", "type": "double", "kind": "numeric"}]
    now = {"features": feats, "encoded_dimension": 5}
    assert schema_change(None, now) is None           # a run of an older fairspark
    assert schema_hash(None) is None
    # a run whose audits encoded nothing has no dimension: only the columns compare
    assert schema_change({"features": feats, "encoded_dimension": None}, now) is None
    other = {"features": [{"column": "x", "type": "string", "kind": "categorical"}],
             "encoded_dimension": 5}
    change = schema_change({"features": feats, "encoded_dimension": 5}, other)
    assert change["changed_type"] == [{"column": "x", "before": "double", "after": "string"}]
    assert change["appeared"] == change["vanished"] == []
    assert schema_hash(now) != schema_hash(other)
