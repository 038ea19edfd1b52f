"""HFM with a baseline decision (``columns.baseline``): the baseline's D_f.

On 1,500 rows of ProPublica's COMPAS table two transparent rules decide: the challenger
flags more than three priors, the baseline (today's rule) flags more than two priors
for African-American defendants and more than five for everyone else. The baseline's
D_f must equal an independent HFM run with the baseline column as the prediction and
the symmetric Hausdorff distance that scipy computes on the baseline's points, written
here; the difference rows must be the differences, and a run without a baseline must
give today's rows.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import TEST_DATA, write_parquet
from scipy.spatial.distance import directed_hausdorff

from fairspark.audits.base import MetricRow
from fairspark.config import parse_config
from fairspark.hfm.paired import difference_rows
from fairspark.runner import run_audit_job
from fairspark.status import Status

PAIRED = ("D_f", "D_f_avg", "df", "df_avg")
ATTRS = (("sex", "Female"), ("race", "Caucasian"))


@pytest.fixture(scope="module")
def compas() -> pd.DataFrame:
    df = pd.read_csv(TEST_DATA / "propublica-recidivism_original.csv.gz").iloc[:1500].copy()
    df["row_id"] = np.arange(len(df)).astype(str)
    df["p_new"] = (df.priors_count > 3).astype(int)
    df["p_old"] = (((df.priors_count > 2) & (df.race == "African-American"))
                   | (df.priors_count > 5)).astype(int)
    return df.reset_index(drop=True)


def _config(inp: str, out: str, *, prediction: str, baseline: str | None) -> object:
    cols = {"features": ["age", "c_charge_degree"], "categorical": ["c_charge_degree"],
            "sensitive": [{"column": a, "privileged": p} for a, p in ATTRS],
            "label": {"column": "two_year_recid", "positive": [0]},
            "prediction": {"column": prediction, "positive": [0]}, "row_key": "row_id"}
    if baseline is not None:
        cols["baseline"] = {"column": baseline, "positive": [0]}
    return parse_config({
        "dataset": "hfm_baseline", "run_date": "2026-12-05", "input": {"path": inp},
        "columns": cols, "audits": {"group": {"enabled": False}, "hfm": {"m1": 4}},
        "output": {"path": out, "report": True}})


@pytest.fixture(scope="module")
def runs(spark, compas, tmp_path_factory):
    """The paired run, the baseline audited alone, the challenger audited alone."""
    base = tmp_path_factory.mktemp("hfm_baseline")
    inp = write_parquet(compas, base / "in", n_files=2)
    out = {}
    for name, pred, bl in (("paired", "p_new", "p_old"), ("baseline_alone", "p_old", None),
                           ("challenger_alone", "p_new", None)):
        res = run_audit_job(spark, _config(inp, str(base / name), prediction=pred,
                                           baseline=bl))
        rows = pd.DataFrame(res.rows)
        out[name] = (res, rows[rows.audit == "hfm"].reset_index(drop=True), base / name)
    return out


def _one(rows: pd.DataFrame, attr: str, metric: str, model: str | None) -> pd.Series:
    sel = rows[(rows.attribute == attr) & (rows.metric == metric)
               & (rows.model.isna() if model is None else rows.model == model)]
    assert len(sel) == 1, (attr, metric, model, len(sel))
    return sel.iloc[0]


def _scaled(df: pd.DataFrame) -> np.ndarray:
    """The prepared table (docs/architecture.md): min-max age, one-hot charge degree."""
    age = (df.age - df.age.min()) / (df.age.max() - df.age.min())
    cols = [age.to_numpy(float)]
    cols += [(df.c_charge_degree.astype(str) == v).to_numpy(float)
             for v in sorted(df.c_charge_degree.astype(str).unique())]
    return np.column_stack(cols)


def _hausdorff(t: np.ndarray, x: np.ndarray, priv: np.ndarray) -> float:
    v = np.column_stack([t, x])
    a, b = v[priv], v[~priv]
    return max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0])


def test_baseline_d_f_equals_scipy_on_the_baseline_points(runs, compas):
    rows = runs["paired"][1]
    x = _scaled(compas)
    t = {m: (compas[c] == 0).to_numpy(float) for m, c in
         (("label", "two_year_recid"), ("challenger", "p_new"), ("baseline", "p_old"))}
    for attr, priv_value in ATTRS:
        priv = (compas[attr] == priv_value).to_numpy()
        d, d_c, d_b = (_hausdorff(t[m], x, priv) for m in ("label", "challenger", "baseline"))
        assert d_c != pytest.approx(d_b)  # the two rules do differ here
        r = _one(rows, attr, "D_f", "baseline")
        assert r.status == "ok"
        assert r.value == pytest.approx(d_b, abs=1e-9)
        assert r.lower == r.upper == r.value  # certified exact
        assert _one(rows, attr, "df", "baseline").value == pytest.approx(d_b / d - 1, abs=1e-9)
        assert _one(rows, attr, "D_f", None).value == pytest.approx(d_c, abs=1e-9)
        assert _one(rows, attr, "D", None).value == pytest.approx(d, abs=1e-9)
        diff = _one(rows, attr, "D_f", "challenger_minus_baseline")
        assert diff.value == pytest.approx(d_c - d_b, abs=1e-9)
        assert diff.lower == diff.upper == diff.value  # both exact: the difference is exact


def test_baseline_rows_equal_an_independent_run_with_the_baseline_as_prediction(runs):
    paired, alone = runs["paired"][1], runs["baseline_alone"][1]
    mine = paired[paired.model == "baseline"]
    assert not mine.metric.isin(["D", "D_avg", "D_exact_searches"]).any()  # D is shared
    assert set(mine.attribute) == {"sex", "race", "*"}
    for _, r in mine.iterrows():
        other = _one(alone, r.attribute, r.metric, None)
        for col in ("value", "lower", "upper"):
            a, b = r[col], other[col]
            assert (pd.isna(a) and pd.isna(b)) or a == pytest.approx(b, abs=1e-12), (
                r.attribute, r.metric, col)
        assert r.status == other.status
    # D is the challenger's, unchanged by which decision is audited
    for attr in ("sex", "race", "*"):
        assert _one(paired, attr, "D", None).value == _one(alone, attr, "D", None).value


def test_difference_rows_are_challenger_minus_baseline(runs):
    rows = runs["paired"][1]
    diffs = rows[rows.model == "challenger_minus_baseline"]
    assert len(diffs) == 3 * len(PAIRED)  # sex, race and the aggregate *
    for _, d in diffs.iterrows():
        c = _one(rows, d.attribute, d.metric, None)
        b = _one(rows, d.attribute, d.metric, "baseline")
        assert d.value == pytest.approx(c.value - b.value, abs=1e-12)
        p = json.loads(d.params)
        assert p["challenger"] == c.value and p["baseline"] == b.value
        assert p["interval"] == "certified bounds" and p["method"] == "certified"
        if d.metric in ("D_f", "df"):  # both certified: sound bounds that are exact
            assert d.lower == pytest.approx(c.lower - b.upper, abs=1e-12)
            assert d.upper == pytest.approx(c.upper - b.lower, abs=1e-12)


def test_without_a_baseline_the_rows_are_todays(runs):
    paired, alone = runs["paired"][1], runs["challenger_alone"][1]
    assert alone.model.isna().all()
    cols = ["attribute", "group", "metric", "value", "lower", "upper", "status", "detail",
            "params"]
    mine = paired[paired.model.isna()][cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, alone[cols].reset_index(drop=True))
    assert "baseline" not in runs["challenger_alone"][0].summary["audits"]["hfm"]


def test_summary_cost_and_report(runs):
    res, _, out = runs["paired"]
    summary = res.summary["audits"]["hfm"]
    info = summary["baseline"]
    assert info["column"] == "p_old"
    assert set(info["attributes"]) == {"sex", "race"}
    assert {"D_f", "df", "D_f_difference", "df_difference"} <= set(info["attributes"]["sex"])
    steps = [s["step"] for s in summary["steps"]]
    assert "baseline D_f (engine)" in steps  # its own line of the cost
    assert "cost" in info  # the baseline engine's passes
    html = next(out.rglob("report.html")).read_text()
    section = html[html.index("HFM: harmonic"):]
    assert "Challenger (the audited decision) against the baseline" in section
    plain = next(runs["challenger_alone"][2].rglob("report.html")).read_text()
    assert "against the baseline" not in plain


def _row(metric: str, value: float | None, lower: float | None, upper: float | None,
         status: Status = Status.OK, model: str | None = None) -> MetricRow:
    return MetricRow(audit="hfm", attribute="a", group="binary", metric=metric, value=value,
                     lower=lower, upper=upper, status=status, model=model)


def test_difference_bounds_are_sound_when_not_certified():
    c = [_row("D_f", 0.9, 0.5, 0.9, Status.NOT_CERTIFIED), _row("D_f_avg", 0.2, None, 0.2),
         _row("df", 0.1, -0.2, 0.4), _row("D", 1.0, 1.0, 1.0)]
    b = [_row("D_f", 0.7, 0.7, 0.7, model="baseline"),
         _row("D_f_avg", 0.1, 0.1, None, model="baseline"),
         _row("df", float("inf"), float("inf"), float("inf"), model="baseline")]
    out = {r.metric: r for r in difference_rows(c, b)}
    assert set(out) == {"D_f", "D_f_avg", "df"}  # D is shared: no difference
    d_f = out["D_f"]
    assert d_f.value == pytest.approx(0.2)
    assert (d_f.lower, d_f.upper) == (pytest.approx(-0.2), pytest.approx(0.2))
    assert d_f.status == Status.NOT_CERTIFIED and d_f.model == "challenger_minus_baseline"
    # an upper bound minus an exact mean: only an upper bound
    avg = out["D_f_avg"]
    assert avg.lower is None and avg.upper == pytest.approx(0.1)
    assert out["df"].value == float("-inf") and out["df"].status == Status.OK


def test_limits_judge_the_challenger_and_say_hfm_has_no_worse(runs, spark):
    from fairspark.config_model import LimitsConfig
    from fairspark.nightly.gating import evaluate_limits

    res, _, _ = runs["paired"]
    rows = [r for r in res.rows if r["audit"] == "hfm"]
    specs = _config("unused", "unused", prediction="p_new",
                    baseline="p_old").audits.audit_specs()
    plain = LimitsConfig.model_validate({"rules": [{"metric": "D_f", "audit": "hfm",
                                                    "attribute": "sex", "max": 10.0}]})
    checks, _, _ = evaluate_limits(rows, limits=plain, specs=specs)
    assert len(checks) == 1 and checks[0].row.get("model") is None  # the challenger only
    paired = LimitsConfig.model_validate({"rules": [
        {"no_worse_than_baseline": {"metric": "df", "margin": 0.0}}]})
    checks, _, unmatched = evaluate_limits(rows, limits=paired, specs=specs)
    assert not checks  # HFM's differences carry no "worse": never silently passed
    assert "not evaluated (0 checks: no paired row says how much further from parity" in \
        unmatched[0]
