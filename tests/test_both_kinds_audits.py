"""The group, mdfa and correlation audits and the feature encoding through the notebook
API, on a classic and on a Spark Connect session: the same rows on both.

Every test here is marked ``both_kinds``: the classic run records its rows
(``same_on_both_kinds``), the Connect run (``FAIRSPARK_TEST_SESSION=connect``) asserts
its rows equal them. Each test also checks numbers against a reference computed here
(pandas/numpy), so the classic record is itself checked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import synthetic_scored

import fairspark

pytestmark = pytest.mark.both_kinds

#: the columns of ``AuditResult.rows`` that are not numbers of the data (timings, CPU
#: seconds and the like live in the summary, not in the rows)
_NUMBERS = ["value", "lower", "upper"]


def _table(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    """A scored table: two numeric features (one already in [0, 1]), a categorical one,
    a binary attribute and a decision that depends on it."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(2.0, 3.0, n), rng.uniform(0.0, 1.0, n)
    x2[:2] = [0.0, 1.0]  # x2's range is exactly [0, 1]: its scaling is skipped
    grp = np.where(rng.random(n) < 0.4, "b", "a")
    pred = ((x1 / 3 + 0.4 * (grp == "b") + rng.normal(0, 0.5, n)) > 0.6).astype(int)
    return pd.DataFrame({
        "id": np.arange(n).astype(str), "x1": x1, "x2": x2,
        "colour": rng.choice(["red", "green", "blue", "Ünïcode", "blue green"], n),
        "grp": grp, "label": rng.integers(0, 2, n), "pred": pred,
    })


def _rows(result: fairspark.AuditResult, audit: str) -> pd.DataFrame:
    rows = result.rows
    rows = rows[rows["audit"] == audit].reset_index(drop=True)
    keep = [c for c in rows.columns if c in _NUMBERS or rows[c].dtype == object]
    return rows[keep].astype({c: float for c in _NUMBERS if c in keep})


def _options(audits: dict) -> dict:
    return dict(sensitive={"grp": "a"}, label={"column": "label", "positive": [1]},
                prediction={"column": "pred", "positive": [1]}, row_key="id",
                audits=audits, seed=7)


def test_group_audit_same_on_both_kinds(spark, same_on_both_kinds):
    pdf = _table()
    result = fairspark.audit(spark.createDataFrame(pdf), **_options({"group": {}}))
    rows = _rows(result, "group")
    di = rows[(rows.metric == "disparate_impact") & (rows.attribute == "grp")]
    rate = lambda g: (pdf.pred[pdf.grp == g] == 1).mean()
    assert di.value.iloc[0] == pytest.approx(rate("b") / rate("a"), rel=1e-12)
    same_on_both_kinds("notebook_group", rows)


def test_encoded_features_are_min_max_and_one_hot(spark, same_on_both_kinds):
    """``_fs_x`` against numpy: min-max scaling by the formula, x2 (already in [0, 1])
    as it is, one indicator per value in sorted (code point) order; bit for bit."""
    from fairspark.columns import KEY, X
    from fairspark.notebook import _config
    from fairspark.prepare import prepare

    pdf = _table(n=600, seed=3)
    config = _config({**_options({"hfm": {}}), "features": ["x1", "x2", "colour"]})
    prepared = prepare(spark.createDataFrame(pdf), config=config)
    try:
        got = prepared.df.select(KEY, X).toPandas()
        names = prepared.feature_names
    finally:
        prepared.unpersist()
    labels = sorted(pdf.colour.unique())
    assert names == ["x1", "x2", *[f"colour={v}" for v in labels]]
    lo, hi = pdf.x1.min(), pdf.x1.max()
    want = np.column_stack([(pdf.x1 - lo) / (hi - lo), pdf.x2,
                            *[(pdf.colour == v).astype(float) for v in labels]])
    by_key = dict(zip(got[KEY], got[X], strict=True))
    x = np.array([by_key[k] for k in pdf.id])
    np.testing.assert_array_equal(x, want)
    same_on_both_kinds("encoded_features", pd.DataFrame(
        {"id": pdf.id.to_numpy(), **{f"x{j}": x[:, j] for j in range(x.shape[1])}}))


def test_mdfa_same_on_both_kinds(spark, same_on_both_kinds):
    pdf = _table(n=1500, seed=1)
    mdfa = {"epochs": 3, "l2_grid": [0.001], "splits": 2, "auditor": "logistic_regression",
            "min_rows": 50, "null_draws": 2}
    result = fairspark.audit(spark.createDataFrame(pdf), **_options({"mdfa": mdfa}))
    info = result.summary["audits"]["mdfa"]
    assert info["status"] in ("ok", "inconclusive"), info
    rows = _rows(result, "mdfa")
    ratio = rows[(rows.metric == "outcome_ratio_overall") & (rows.attribute == "grp")]
    detail = ratio.detail.iloc[0]
    y_val = 1 if "Y=+1" in detail else 0
    rate = lambda g: ((pdf.pred == y_val) & (pdf.grp == g)).sum() / (pdf.grp == g).sum()
    assert ratio.value.iloc[0] == pytest.approx(rate("b") / rate("a"), rel=1e-12)
    same_on_both_kinds("notebook_mdfa", rows)


def test_correlation_same_on_both_kinds(spark, same_on_both_kinds):
    pdf = synthetic_scored(n=900, seed=11)
    corr = {"n_samples": 20, "rounds": 3, "k": 150, "models": ["linear_svm"],
            "n_representatives": 3}
    result = fairspark.audit(
        spark.createDataFrame(pdf), sensitive={"sex": "M"},
        label={"column": "y", "positive": [1]}, prediction={"column": "p", "positive": [1]},
        row_key="id", features=["x1", "x2", "city"], audits={"correlation": corr}, seed=5)
    info = result.summary["audits"]["correlation"]
    assert result.exit_code == 0, info
    rows = _rows(result, "correlation")
    pair = rows[(rows.metric == "fnr_difference") & (rows.metric_b == "tpr_difference")]
    assert abs(pair.value.iloc[0] + 1) < 1e-9  # FNR = 1 - TPR in each group
    assert (rows.metric == "representative").sum() == 3
    same_on_both_kinds("notebook_correlation", rows)
