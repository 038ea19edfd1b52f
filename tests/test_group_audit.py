"""The group audit on Spark, end to end through the runner, against pandas/fairlearn."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import write_parquet
from fairlearn.metrics import MetricFrame, selection_rate, true_positive_rate

from fairspark.config import parse_config
from fairspark.runner import run_audit_job


def _adult_config(inp: str, out: str, **extra) -> dict:
    cfg = {
        "dataset": "adult_test",
        "run_date": "2026-11-29",
        "input": {"path": inp},
        "columns": {
            "features": ["age", "education_num", "hours_per_week", "workclass", "occupation"],
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": "White"}],
            "intersections": [["sex", "race"]],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": {"column": "prediction", "positive": 1},
            "row_key": "row_id",
        },
        "audits": {"group": {"min_group_size": 30}},
        "output": {"path": out, "report": False},
    }
    for k, v in extra.items():
        cfg[k] = v
    return cfg


def _rows(result) -> pd.DataFrame:
    return pd.DataFrame(result.rows)


def _value(df, attribute, group, metric):
    sel = df[(df.attribute == attribute) & (df.group == group) & (df.metric == metric)]
    assert len(sel) == 1, (attribute, group, metric, len(sel))
    return sel.iloc[0]


@pytest.fixture(scope="module")
def adult_run(spark, adult_pdf, tmp_path_factory):
    base = tmp_path_factory.mktemp("adult")
    inp = write_parquet(adult_pdf, base / "in8", n_files=8)
    res = run_audit_job(spark, parse_config(_adult_config(inp, str(base / "out"))))
    return res, base


def test_adult_catalogue_equals_fairlearn(adult_run, adult_pdf):
    res, _ = adult_run
    assert res.exit_code == 0
    df = _rows(res)
    y = (adult_pdf.income == ">50K").astype(int)
    p = adult_pdf.prediction
    for attr, priv in (("sex", "Male"), ("race", "White")):
        g = np.where(adult_pdf[attr] == priv, "p", "u")
        mf = MetricFrame(metrics={"sr": selection_rate, "tpr": true_positive_rate},
                         y_true=y, y_pred=p, sensitive_features=g).by_group
        sp = _value(df, attr, "unprivileged", "statistical_parity_difference")
        assert sp.value == pytest.approx(mf.loc["u", "sr"] - mf.loc["p", "sr"], abs=1e-12)
        di = _value(df, attr, "unprivileged", "disparate_impact")
        assert di.value == pytest.approx(mf.loc["u", "sr"] / mf.loc["p", "sr"], rel=1e-12)
        eo = _value(df, attr, "unprivileged", "tpr_difference")
        assert eo.value == pytest.approx(mf.loc["u", "tpr"] - mf.loc["p", "tpr"], abs=1e-12)
        assert sp.lower <= sp.value <= sp.upper
    # per value of a multi-valued attribute vs the privileged group, with plain pandas
    black = adult_pdf[adult_pdf.race == "Black"]
    white = adult_pdf[adult_pdf.race == "White"]
    ppv = lambda d: ((d.prediction == 1) & (d.income == ">50K")).sum() / (d.prediction == 1).sum()
    row = _value(df, "race", "Black", "ppv_ratio")
    assert row.value == pytest.approx(ppv(black) / ppv(white), rel=1e-12)
    # intersection: privileged = Male|White, a specific cell compared with it
    fb = adult_pdf[(adult_pdf.sex == "Female") & (adult_pdf.race == "Black")]
    mw = adult_pdf[(adult_pdf.sex == "Male") & (adult_pdf.race == "White")]
    row = _value(df, "sex*race", "Female|Black", "statistical_parity_difference")
    assert row.value == pytest.approx(fb.prediction.mean() - mw.prediction.mean(), abs=1e-12)


def test_small_groups_are_inconclusive_with_count(adult_run, adult_pdf):
    df = _rows(adult_run[0])
    n_other = int((adult_pdf.race == "Other").sum())
    n_other_pos = int(((adult_pdf.race == "Other") & (adult_pdf.income == ">50K")).sum())
    assert n_other_pos < 30 <= n_other
    row = _value(df, "race", "Other", "tpr_difference")
    assert row.status == "inconclusive"
    assert f"only {n_other_pos} rows with favourable label in the unprivileged group" in row.detail
    assert _value(df, "race", "Other", "statistical_parity_difference").status == "ok"


def test_outputs_layout_and_summary(adult_run):
    res, base = adult_run
    folder = base / "out" / "run_date=2026-11-29"
    assert (folder / "_SUCCESS").exists()
    pq = pd.read_parquet(folder / "metrics.parquet")
    for c in ("run_date", "dataset", "audit", "attribute", "group", "metric", "metric_b", "model",
              "value", "lower", "upper", "status", "detail", "params", "config_hash",
              "fairspark_version", "schema_version"):
        assert c in pq.columns
    assert len(pq) == len(res.rows)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["rows"]["read"] == summary["rows"]["audited"] > 10000
    assert summary["audits"]["group"]["status"] == "ok"
    assert set(summary["stage_timings"]) >= {"read", "prepare", "audit group"}
    assert summary["versions"]["spark"].startswith("4.")
    assert not [p for p in (base / "out").iterdir() if p.name.startswith("_tmp")]


def test_results_do_not_depend_on_partitions(spark, adult_pdf, adult_run, tmp_path):
    inp1 = write_parquet(adult_pdf, tmp_path / "in1", n_files=1)
    old = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        one = _rows(run_audit_job(spark, parse_config(_adult_config(inp1, str(tmp_path / "o")))))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", old)
    eight = _rows(adult_run[0])
    key = ["attribute", "group", "metric"]
    m = one.merge(eight, on=key, suffixes=("_1", "_8"))
    assert len(m) == len(one) == len(eight)
    for c in ("value", "lower", "upper"):
        a, b = m[f"{c}_1"].to_numpy(float), m[f"{c}_8"].to_numpy(float)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0, equal_nan=True)


def test_weights_and_unlabelled_rows(spark, compas_pdf, tmp_path):
    pdf = compas_pdf.copy()
    rng = np.random.default_rng(11)
    pdf["w"] = rng.uniform(0.5, 2.0, len(pdf))
    pdf["label"] = pdf.two_year_recid.astype("float")
    late = rng.random(len(pdf)) < 0.2
    pdf.loc[late, "label"] = np.nan  # labels that have not arrived yet
    inp = write_parquet(pdf, tmp_path / "in", n_files=3)
    cfg = {
        "dataset": "compas", "run_date": "2026-11-29", "input": {"path": inp},
        "columns": {
            "features": ["age", "priors_count", "c_charge_degree"],
            "sensitive": [{"column": "race", "privileged": "Caucasian"}],
            "label": {"column": "label", "positive": 1},
            "favourable": "negative",
            "score": {"column": "decile_score", "threshold": 5},
            "weight": "w", "row_key": "id",
        },
        "output": {"path": str(tmp_path / "out"), "report": False},
    }
    res = run_audit_job(spark, parse_config(cfg))
    df = _rows(res)
    # favourable = not re-offending, not flagged (score < 5)
    fav_pred = (pdf.decile_score < 5).astype(float)
    u = pdf.race != "Caucasian"
    sr = lambda m: np.average(fav_pred[m], weights=pdf.w[m])
    assert _value(df, "race", "unprivileged", "statistical_parity_difference").value == \
        pytest.approx(sr(u) - sr(~u), abs=1e-12)
    lab = ~late
    fav_y = (pdf.label == 0).astype(float)
    def tpr(m):
        sel = m & lab & (fav_y == 1)
        return np.average(fav_pred[sel], weights=pdf.w[sel])
    assert _value(df, "race", "unprivileged", "tpr_difference").value == \
        pytest.approx(tpr(u) - tpr(~u), abs=1e-12)
    assert res.summary["rows"]["unlabelled"] == int(late.sum())
    assert res.summary["rows"]["weighted"] is True
