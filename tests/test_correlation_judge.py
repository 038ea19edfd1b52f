"""The oracle's judge computes the catalogue metrics without the inequality indices it
does not need; its numbers must be exactly catalogue_from_counts' (no Spark; fast)."""

from __future__ import annotations

import numpy as np
import pytest

from fairspark.correlation._oracle import (
    DEFAULT_METRICS,
    OracleData,
    _judge,
    make_model,
    split_round,
)
from fairspark.metrics._core import catalogue_from_counts


def _counts(y, pred, w):
    yb, pb = y > 0.5, pred > 0.5
    return {"tp": float(w[yb & pb].sum()), "fp": float(w[~yb & pb].sum()),
            "tn": float(w[~yb & ~pb].sum()), "fn": float(w[yb & ~pb].sum())}


@pytest.mark.parametrize("case", range(40))
def test_judge_equals_the_full_catalogue(case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(8, 60))
    data = OracleData(x=np.zeros((n, 1)), y=(rng.random(n) < 0.5).astype(float),
                      priv=rng.random(n) < 0.5, w=rng.choice([0.5, 1.0, 2.0], n))
    split = split_round(data, seed=case, round_id=0, test_fraction=0.5)
    t = split.test
    # constant predictions in some cases: rates with a zero denominator (NaN metrics)
    kind = case % 4
    pred = (np.ones(len(t)) if kind == 0 else np.zeros(len(t)) if kind == 1
            else (rng.random(len(t)) < 0.5).astype(float))
    res = _judge(data, split, pred, metrics=DEFAULT_METRICS, min_accuracy=0.5)
    y, w, p = data.y[t], data.w[t], data.priv[t]
    with np.errstate(all="ignore"):
        cat = catalogue_from_counts(_counts(y[~p], pred[~p], w[~p]),
                                    _counts(y[p], pred[p], w[p]))
    want = np.array([float(cat[m]) for m in DEFAULT_METRICS])
    np.testing.assert_array_equal(res.metrics, want)  # NaN == NaN here, bit for bit
    acc = float(cat["accuracy"])
    if np.isnan(acc):
        assert np.isnan(res.accuracy)
    else:
        assert res.accuracy == acc
        # accuracy by hand: weighted share of correct predictions
        assert acc == pytest.approx(float(w[y == pred].sum() / w.sum()))
    assert (str(res.status) == "accepted") == (acc >= 0.5)


def test_make_model_still_refuses_unknown_hyperparameters_after_caching():
    make_model("logistic_regression", {"C": 2.0}, random_state=0)
    with pytest.raises(ValueError, match="unknown hyperparameters"):
        make_model("logistic_regression", {"n_trees": 5}, random_state=0)
    m = make_model("random_forest", None, random_state=3)
    assert m.random_state == 3 and m.n_estimators == 50
