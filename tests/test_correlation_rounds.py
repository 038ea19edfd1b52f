"""``rounds: auto``: the correlation rounds stop by the Monte-Carlo standard error.

The stopping rule is checked against a brute-force computation written here (loops
over prefixes and metric pairs, ``np.std``), the audit against a fixed-rounds run of
the same rounds (round r depends only on its seed), and both across partition counts.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairspark.correlation import CorrelationParams, correlation_audit
from fairspark.correlation._estimate import (
    decide_rounds,
    estimate_correlations,
    matrix_se_path,
)
from fairspark.correlation.audit import outcome_from_result
from fairspark.correlation.report import render


# ---------------------------------------------------------------- brute force
def _without_cost(summary: dict) -> dict:
    """A summary without its CPU seconds (``cost``), which no two runs share."""
    out = {k: v for k, v in summary.items() if k != "cost"}
    out["attributes"] = {a: {m: {k: v for k, v in d.items() if k != "cost"}
                             if isinstance(d, dict) else d for m, d in ms.items()}
                         for a, ms in summary["attributes"].items()}
    return out


def _brute_se(per_round: np.ndarray, upto: int) -> float:
    """max over pairs i < j of sd(r_ij over the defined rounds) / sqrt(#defined)."""
    m = per_round.shape[1]
    best = -1.0
    for i in range(m):
        for j in range(i + 1, m):
            v = [per_round[t, i, j] for t in range(upto) if np.isfinite(per_round[t, i, j])]
            if len(v) >= 2:
                best = max(best, float(np.std(v, ddof=1)) / math.sqrt(len(v)))
    return best if best >= 0 else float("nan")


def _brute_stop(per_round: np.ndarray, ids: list[int], *, rounds_min: int,
                target: float) -> int | None:
    """Round ids used by the first kept round k >= rounds_min with SE <= target."""
    for k in range(rounds_min, len(ids) + 1):
        se = _brute_se(per_round, k)
        if np.isfinite(se) and se <= target:
            return ids[k - 1] + 1
    return None


def _brute_pearson(values: np.ndarray) -> np.ndarray:
    """Per-pair Pearson r over the rows where both are finite (NaN: < 3 rows or constant)."""
    m = values.shape[1]
    r = np.full((m, m), np.nan)
    for i in range(m):
        for j in range(m):
            ok = np.isfinite(values[:, i]) & np.isfinite(values[:, j])
            a, b = values[ok, i], values[ok, j]
            if ok.sum() >= 3 and np.ptp(a) > 1e-12 and np.ptp(b) > 1e-12:
                r[i, j] = np.corrcoef(a, b)[0, 1]
    return r


def _per_round(rng: np.random.Generator, rounds: int, m: int = 5) -> np.ndarray:
    """Symmetric per-round correlations with noise, an identity pair and missing values."""
    base = rng.uniform(-0.9, 0.9, (m, m))
    base = (base + base.T) / 2
    out = np.empty((rounds, m, m))
    for t in range(rounds):
        noise = rng.normal(0, 0.05, (m, m))
        out[t] = np.clip(base + (noise + noise.T) / 2, -1, 1)
        np.fill_diagonal(out[t], 1.0)
    out[:, 0, 1] = out[:, 1, 0] = -1.0  # an identity: the same in every round
    out[rng.random(rounds) < 0.3, 2, 3] = np.nan  # a pair undefined in some rounds
    out[:, 3, 2] = out[:, 2, 3]
    return out


# ---------------------------------------------------------------- the kernel
def test_se_path_matches_brute_force():
    rng = np.random.default_rng(3)
    per = _per_round(rng, 12)
    path = matrix_se_path(per)
    assert math.isnan(path[0])  # one round: no standard deviation
    for t in range(1, 12):
        assert path[t] == pytest.approx(_brute_se(per, t + 1), rel=1e-9)
    all_nan = np.full((4, 3, 3), np.nan)
    assert np.isnan(matrix_se_path(all_nan)).all()


def test_se_path_is_the_intervals_spread():
    rng = np.random.default_rng(5)
    rounds = [rng.normal(size=(30, 4)) + rng.normal(size=(30, 1)) for _ in range(6)]
    est = estimate_correlations(rounds, metrics=list("abcd"), ci_level=0.9)
    z = 1.6448536269514722
    iu = np.triu_indices(4, 1)
    assert matrix_se_path(est.per_round)[-1] == pytest.approx(float(np.max(est.e[iu] / z)))


@pytest.mark.parametrize("target", [0.004, 0.008, 0.012, 0.02, 0.05])
def test_decide_rounds_against_brute_force(target):
    rng = np.random.default_rng(11)
    per = _per_round(rng, 20)
    ids = [r for r in range(23) if r not in (4, 9, 17)]  # three dropped rounds
    want = _brute_stop(per, ids, rounds_min=4, target=target)
    d = decide_rounds(ids, per, rounds_run=23, rounds_min=4, rounds_max=40, target_se=target)
    if want is None:
        assert not d.stopped and d.reason == "running" and d.next_rounds > 23
    else:
        assert d.stopped and d.reason == "target_se" and d.rounds == want
        k = ids.index(want - 1) + 1
        assert d.kept == k and d.se == pytest.approx(_brute_se(per, k)) and d.se <= target
        # rounds run past the stop change nothing: the rule reads prefixes
        cut = [i for i in ids if i < want]
        d2 = decide_rounds(cut, per[: len(cut)], rounds_run=want, rounds_min=4, rounds_max=40,
                           target_se=target)
        assert (d2.stopped, d2.rounds, d2.kept, d2.se) == (True, d.rounds, d.kept, d.se)


def test_decide_rounds_other_stops_and_the_next_wave():
    rng = np.random.default_rng(2)
    per = _per_round(rng, 10)
    ids = list(range(10))
    # rounds_max reached: the SE of the kept rounds below it
    d = decide_rounds(ids, per, rounds_run=10, rounds_min=3, rounds_max=10, target_se=1e-9)
    assert (d.stopped, d.reason, d.rounds, d.kept) == (True, "rounds_max", 10, 10)
    assert d.se == pytest.approx(_brute_se(per, 10))
    # not yet: the next wave is what SE ~ 1/sqrt(L) predicts, capped by rounds_max
    se6 = _brute_se(per, 6)
    d = decide_rounds(ids[:6], per[:6], rounds_run=6, rounds_min=3, rounds_max=100,
                      target_se=se6 / 2)
    assert not d.stopped and d.next_rounds == math.ceil(6 * (se6 / (se6 / 2)) ** 2)
    d = decide_rounds(ids[:6], per[:6], rounds_run=6, rounds_min=3, rounds_max=9,
                      target_se=se6 / 2)
    assert d.next_rounds == 9
    # below rounds_min no stop even at SE 0 (an identity only)
    ident = np.full((5, 2, 2), -1.0)
    d = decide_rounds([0, 1], ident[:2], rounds_run=2, rounds_min=3, rounds_max=9,
                      target_se=0.01)
    assert not d.stopped and d.next_rounds == 3
    d = decide_rounds([0, 1, 2], ident[:3], rounds_run=3, rounds_min=3, rounds_max=9,
                      target_se=0.01)
    assert (d.stopped, d.reason, d.rounds, d.se) == (True, "target_se", 3, 0.0)
    # no round complete after rounds_min rounds; nothing defined after rounds_min kept
    d = decide_rounds([], None, rounds_run=3, rounds_min=3, rounds_max=9, target_se=0.01)
    assert (d.stopped, d.reason, d.kept) == (True, "no_round", 0)
    d = decide_rounds([0, 1, 2], np.full((3, 2, 2), np.nan), rounds_run=3, rounds_min=3,
                      rounds_max=9, target_se=0.01)
    assert (d.stopped, d.reason) == (True, "undefined")


def test_params_rounds_auto_and_integer():
    p = CorrelationParams()
    assert (p.rounds, p.rounds_min, p.rounds_max, p.target_se) == ("auto", 10, 30, 0.05)
    assert p.auto_rounds and p.max_rounds == 30
    q = CorrelationParams(rounds=30)
    assert not q.auto_rounds and q.max_rounds == 30
    with pytest.raises(ValueError, match=r"rounds_min \(12\) is above rounds_max \(11\)"):
        CorrelationParams(rounds_min=12, rounds_max=11)
    with pytest.raises(ValueError):
        CorrelationParams(rounds=1)
    with pytest.raises(ValueError):
        CorrelationParams(rounds="many")


# ---------------------------------------------------------------- the audit on Spark
def _table(n: int = 1000, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3))
    priv = rng.random(n) < 0.5
    logit = 4 * (x[:, 0] - 0.5) + 1.5 * (x[:, 1] - 0.5) + 0.8 * priv
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    return pd.DataFrame({
        "_fs_key": [f"k{i}" for i in range(n)],
        "_fs_label": y,
        "_fs_x": [list(r) for r in x],
        "_fs_w": 1.0,
        "_fs_p_0": priv,
    })


_BASE = {"n_samples": 15, "k": 100, "models": ["linear_svm"], "sample_rows": 600,
         "tau": 0.6, "repeats": 5}


def _audit(spark, df, **params):
    p = CorrelationParams(**{**_BASE, **params})
    return correlation_audit(spark, df, attributes=[("sex", "_fs_p_0")], params=p, seed=21)


@pytest.fixture(scope="module")
def fixed12(spark):
    """A fixed 12-round run: the rounds every auto run below draws from."""
    df = spark.createDataFrame(_table()).repartition(2)
    res = _audit(spark, df, rounds=12)
    return df, res


def test_fixed_rounds_keep_the_old_behaviour(fixed12):
    _, res = fixed12
    (m,) = res.models
    out = outcome_from_result(res)
    assert res.waves == 1 and m.rounds.reason == "fixed" and m.rounds_run == 12
    assert m.rounds.rounds == 12 and m.rounds.kept == len(m.selection.values) == 12
    # its SE is reported, by the brute force over the 12 rounds
    per = np.stack([_brute_pearson(v) for v in m.selection.values])
    assert m.rounds.se == pytest.approx(_brute_se(per, 12), rel=1e-9)
    info = out.summary["attributes"]["sex"]["linear_svm"]
    assert info["stopped_by"] == "fixed" and info["target_se"] is None
    assert (info["rounds"], info["rounds_run"], info["rounds_used"]) == (12, 12, 12)
    (row,) = [r for r in out.rows if r.metric == "monte_carlo_se"]
    assert row.value == pytest.approx(m.rounds.se) and row.detail.startswith("rounds: 12:")


def test_auto_stops_where_the_brute_force_says_for_any_partitioning(spark, fixed12):
    df, ref = fixed12
    (m12,) = ref.models
    per = np.stack([_brute_pearson(v) for v in m12.selection.values])
    ids = m12.selection.round_ids
    path = [_brute_se(per, k) for k in range(1, 13)]
    # a target first met after a few rounds: the SE after 6 rounds, a hair above
    target = path[5] * (1 + 1e-9)
    want = _brute_stop(per, ids, rounds_min=3, target=target)
    assert want is not None and 3 <= want <= 6
    kept = ids.index(want - 1) + 1
    runs = [_audit(spark, df, rounds="auto", rounds_min=3, rounds_max=12, target_se=target,
                   stable_rounds=None, advanced={"partitions": parts}) for parts in (1, 4)]
    for res in runs:
        (m,) = res.models
        assert m.rounds.reason == "target_se" and m.rounds.rounds == want
        assert m.rounds.se == pytest.approx(path[kept - 1], rel=1e-9)
        assert m.rounds_run >= want and res.waves >= 2  # the first wave is rounds_min
        # the rounds used are the fixed run's first rounds: r* is theirs
        fixed = estimate_correlations(m12.selection.values[:kept], metrics=res.metrics,
                                      ci_level=0.95)
        np.testing.assert_array_equal(m.estimate.r, fixed.r)
        info = outcome_from_result(res).summary["attributes"]["sex"]["linear_svm"]
        assert info["stopped_by"] == "target_se" and info["rounds"] == want
        assert info["target_se"] == target and info["monte_carlo_se"] <= target
    a, b = (outcome_from_result(r) for r in runs)
    assert [(r.metric, r.metric_b, r.value, r.detail) for r in a.rows] == [
        (r.metric, r.metric_b, r.value, r.detail) for r in b.rows
    ]
    # the same numbers; only the CPU seconds measured in the tasks differ between runs
    strip = _without_cost
    assert strip(a.summary) == strip(b.summary)


def test_auto_at_rounds_max_reports_the_se_reached(spark, fixed12):
    df, ref = fixed12
    (m12,) = ref.models
    per = np.stack([_brute_pearson(v) for v in m12.selection.values])
    res = _audit(spark, df, rounds="auto", rounds_min=3, rounds_max=5, target_se=1e-6,
                 stable_rounds=None)
    (m,) = res.models
    assert (m.rounds.reason, m.rounds.rounds, m.rounds_run) == ("rounds_max", 5, 5)
    assert m.rounds.se == pytest.approx(_brute_se(per, 5), rel=1e-9)
    out = outcome_from_result(res)
    (row,) = [r for r in out.rows if r.metric == "monte_carlo_se"]
    assert "rounds_max reached before target_se" in row.detail
    assert "rounds_max=5" in row.detail and row.value == pytest.approx(m.rounds.se)
    # the pair with an identity is still exactly -1
    (pair,) = [r for r in out.rows
               if r.metric == "tpr_difference" and r.metric_b == "fnr_difference"]
    assert abs(pair.value + 1) < 1e-9
    (sec,) = render(out, ctx=None, params=res.params)
    assert "Rounds: rounds: auto (target_se=1e-06" in sec.html
    assert "as many rounds as it takes" in sec.html


# ---------------------------------------------------------------- representatives stable
def _brute_stable_stop(reps: list, *, rounds_min: int, stable: int) -> int | None:
    """The first kept round k >= rounds_min whose representatives equal those of each
    of the ``stable`` prefixes before it (k counted from 1)."""
    for k in range(rounds_min, len(reps) + 1):
        window = reps[k - 1 - stable:k]
        if k - 1 - stable >= 0 and reps[k - 1] is not None and len(set(window)) == 1:
            return k
    return None


def test_decide_rounds_stable_representatives_against_brute_force():
    rng = np.random.default_rng(11)
    per = _per_round(rng, 14)
    ids = list(range(14))
    a, b = ("m0", "m2"), ("m1", "m2")
    for reps in ([a, b, b, a, a, a, a, a, b, b, b, b, b, b],
                 [a, b] * 7,
                 [None, a, a, a, a, None, a, a, a, a, a, a, a, a]):
        for stable in (1, 3, 5):
            want = _brute_stable_stop(reps, rounds_min=3, stable=stable)
            d = decide_rounds(ids, per, rounds_run=14, rounds_min=3, rounds_max=30,
                              target_se=1e-9, representatives=reps, stable_rounds=stable)
            if want is None:
                assert not d.stopped and d.reason == "running"
            else:
                assert (d.stopped, d.reason, d.rounds, d.kept) == (True, "stable", want, want)
                assert d.se == pytest.approx(_brute_se(per, want), rel=1e-9)
    # the SE rule still wins when it is met first
    se6 = _brute_se(per, 6) * (1 + 1e-9)
    d = decide_rounds(ids, per, rounds_run=14, rounds_min=3, rounds_max=30, target_se=se6,
                      representatives=[a, b] * 7, stable_rounds=2)
    assert d.reason == "target_se"
    # not stopped yet: the next wave reaches the earliest possible stable stop
    reps = [a, a, a, b, b]
    d = decide_rounds(ids[:5], per[:5], rounds_run=5, rounds_min=3, rounds_max=30,
                      target_se=1e-9, representatives=reps, stable_rounds=4)
    assert not d.stopped and d.next_rounds == 4 + 4  # b first after 4 rounds, + 4 more
    # without stable_rounds the representatives are ignored
    d = decide_rounds(ids, per, rounds_run=14, rounds_min=3, rounds_max=14, target_se=1e-9,
                      representatives=[a] * 14, stable_rounds=None)
    assert d.reason == "rounds_max"


def test_auto_stops_when_the_representatives_are_stable(spark, fixed12):
    from fairspark.audits.base import derive_seed
    from fairspark.correlation._cluster import cluster_metrics

    df, ref = fixed12
    (m12,) = ref.models
    per = np.stack([_brute_pearson(v) for v in m12.selection.values])
    names = ref.metrics
    seed = derive_seed(21, "correlation", "pivot", "sex", "linear_svm")
    reps = []
    for k in range(1, 13):  # the brute-force r* of each prefix, clustered
        with np.errstate(all="ignore"):
            r = np.nanmean(per[:k], axis=0)
        off = r.copy()
        np.fill_diagonal(off, np.nan)
        keep = [j for j in range(len(names)) if np.isfinite(off[j]).any()]
        cl = cluster_metrics(r[np.ix_(keep, keep)], tau=0.6, repeats=5, seed=seed)
        reps.append(tuple(sorted(names[keep[q]] for q in cl.representatives)))
    want = _brute_stable_stop(reps, rounds_min=3, stable=2)
    assert want is not None and want < 12
    runs = [_audit(spark, df, rounds="auto", rounds_min=3, rounds_max=12, target_se=1e-6,
                   stable_rounds=2, advanced={"partitions": parts}) for parts in (1, 3)]
    for res in runs:
        (m,) = res.models
        assert (m.rounds.reason, m.rounds.rounds) == ("stable", want)
        assert m.rounds.se > 1e-6  # the standard error target is not met, and says so
        out = outcome_from_result(res)
        info = out.summary["attributes"]["sex"]["linear_svm"]
        assert info["stopped_by"] == "stable" and info["stable_rounds"] == 2
        # what the user reads is what the rule read
        assert tuple(sorted(info["representatives"])) == reps[want - 1]
        assert [tuple(x) for x in info["representatives_by_round"]] == reps[:want]
        (row,) = [r for r in out.rows if r.metric == "monte_carlo_se"]
        assert "representatives were unchanged over the last 2 kept rounds" in row.detail
        assert "above target_se=1e-06" in row.detail
        (pair,) = [r for r in out.rows
                   if r.metric == "tpr_difference" and r.metric_b == "fnr_difference"]
        assert abs(pair.value + 1) < 1e-9
    a, b = (outcome_from_result(r) for r in runs)
    assert _without_cost(a.summary) == _without_cost(b.summary)


def test_an_se_above_its_target_is_said_whatever_stopped_the_rounds():
    """A fixed number of rounds, or rounds_max, that leaves the Monte-Carlo SE above
    target_se says so beside the SE (the report printed 'SE 0.1610' with no word)."""
    from fairspark.correlation._estimate import RoundsDecision
    from fairspark.correlation.params import CorrelationParams
    from fairspark.correlation.results import rounds_text

    fixed = CorrelationParams(rounds=2, target_se=0.05)
    text = rounds_text(RoundsDecision(True, 2, 2, 0.161, "fixed"), fixed, 2)
    assert "Monte-Carlo SE 0.1610" in text and "above target_se=0.05" in text
    auto = CorrelationParams(rounds="auto", target_se=0.05, rounds_min=2, rounds_max=4)
    text = rounds_text(RoundsDecision(True, 4, 4, 0.09, "rounds_max"), auto, 4)
    assert "above target_se=0.05" in text
    text = rounds_text(RoundsDecision(True, 3, 3, 0.04, "target_se"), auto, 3)
    assert "above target_se" not in text
