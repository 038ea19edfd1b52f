"""The cheap mdfa kernels: the LightGBM forest's vote, leaf votes re-estimated from new
weights, Algorithm 1 grown once, one balancing net per view, several null draws a split."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fairspark.mdfa import MDFAParams, MDFASample, make_synthetic, run_split
from fairspark.mdfa.auditors import Forest, LeafVotes
from fairspark.mdfa.certify import balance_split, prepare_view
from fairspark.mdfa.null import corrected_gamma, draws_of_split, null_reference


def _rows(n: int = 3000, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 4))
    target = np.where(z[:, 0] + 0.5 * z[:, 1] + rng.normal(0, 1, n) > 0, 1, -1)
    w = rng.uniform(0.2, 3.0, n)
    return z, target, w


def test_lightgbm_leaf_value_is_the_weighted_vote_of_its_rows():
    """With boost_from_average off a tree's leaf value is 4 (p - 1/2), p the weighted
    share of target +1 among the leaf's rows: checked by hand on every leaf of a forest
    grown on all rows (bagging and feature sampling off), so the sign of the mean leaf
    value is scikit-learn's rule (mean of the leaves' p above 1/2)."""
    import lightgbm as lgb

    z, target, w = _rows()
    f = Forest(trees=5, seed=3).fit(z, target, w)
    params = dict(f.model.params)
    # every row in every tree (rf mode needs some sampling: 3 of the 4 features a tree)
    params.update(bagging_fraction=1.0, bagging_freq=0, feature_fraction_bynode=1.0,
                  feature_fraction=0.75)
    ds = lgb.Dataset(z, label=(target > 0).astype(float), weight=w,
                     params={"max_bin": 63, "min_data_in_leaf": 1,
                             "feature_pre_filter": False, "verbose": -1})
    params.pop("num_iterations", None)
    booster = lgb.train(params, ds, num_boost_round=3)
    assert booster.num_trees() == 3
    leaves = booster.predict(z, pred_leaf=True)
    for tree in range(3):
        for leaf in np.unique(leaves[:, tree]):
            rows = leaves[:, tree] == leaf
            p = np.sum(w[rows] * (target[rows] > 0)) / np.sum(w[rows])
            got = booster.get_leaf_output(tree, int(leaf))
            assert got == pytest.approx(4 * (p - 0.5), rel=1e-6, abs=1e-9)
    # the raw score is the sum of the leaf values, so its sign is the mean's
    raw = booster.predict(z, raw_score=True)
    votes = np.sum([[booster.get_leaf_output(t, int(leaves[i, t])) for t in range(3)]
                     for i in range(len(z))], axis=1)
    np.testing.assert_allclose(raw, votes, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("library", ["lightgbm", "sklearn"])
def test_leaf_votes_under_new_weights_match_a_brute_force_count(library):
    """LeafVotes: each leaf's share of target +1 under the new weights, the mean over
    trees above 1/2, computed here row by row from the leaf numbers."""
    z, target, w = _rows(n=1500, seed=1)
    forest = Forest(trees=7, seed=2, library=library).fit(z, target, w)
    lv = LeafVotes(forest, z, target)
    w_new = w * (1 + 2.0 * (target < 0))
    c = lv.predictor(w_new)
    ids = forest.leaves(z)
    want = np.empty(len(z), dtype=int)
    for i in range(len(z)):
        ps = []
        for t in range(ids.shape[1]):
            rows = ids[:, t] == ids[i, t]
            ps.append(np.sum(w_new[rows] * (target[rows] > 0)) / np.sum(w_new[rows]))
        want[i] = 1 if np.mean(ps) > 0.5 else -1
    np.testing.assert_array_equal(c(z), want)
    np.testing.assert_array_equal(c(z, ids), want)
    # the heavier -1 rows move some votes to -1
    assert (c(z) == -1).sum() > (lv.predictor(w)(z) == -1).sum()


def test_lightgbm_forest_gives_gamma_close_to_the_sklearn_forest():
    """The same concept class from two libraries: held-out gamma on the synthetic
    design agrees within the split-to-split spread, at about a tenth of the cost."""
    d = make_synthetic(n=4000, nu=0.6, mu=0.0, seed=4)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    base = MDFAParams(epochs=2, l2_grid=[1e-3], splits=6, null_draws=0,
                      worst_violation=False, certificate_features="raw")
    got = {}
    for lib in ("lightgbm", "sklearn"):
        p = base.model_copy(update={"forest": lib})
        got[lib] = np.array([run_split(smp, split=i, seed=100 + i, params=p).gamma_pos
                             for i in range(6)])
    spread = got["sklearn"].std(ddof=1)
    assert abs(got["lightgbm"].mean() - got["sklearn"].mean()) < 2 * spread + 1e-3
    assert got["lightgbm"].mean() > 0.01  # the planted violation is found


def test_algorithm_one_grown_once_finds_the_planted_subgroup_like_refits():
    """violation_regrow = 0 (one forest, leaf votes re-estimated per step) against
    refitting at every step: the held-out subgroup's F1 against the planted G (Y = +1)
    is as good within 0.1, and the steps' masses fall as t grows."""
    d = make_synthetic(n=4000, nu=0.8, mu=0.0, seed=5)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    base = MDFAParams(epochs=2, l2_grid=[1e-3], splits=4, null_draws=0,
                      certificate_features="raw", violation_outcome="favourable")
    f1 = {}
    for regrow in (1, 0):
        p = base.model_copy(update={"violation_regrow": regrow})
        scores = []
        for i in range(4):
            st = balance_split(smp, seed=200 + i, params=p)
            from fairspark.mdfa.violation import worst_violation

            wv = worst_violation(st.train, st.test, y_value=1, params=p, seed=200 + i)
            found = wv.in_g_test & (st.test.y == 1)
            truth = d.in_g[st.te] & (st.test.y == 1)
            scores.append(2 * np.sum(found & truth) / max(1, found.sum() + truth.sum()))
            if regrow == 0:
                masses = [s["mass"] for s in wv.trace]
                assert masses[-1] <= masses[0]
        f1[regrow] = float(np.mean(scores))
    assert f1[0] > 0.5
    assert f1[0] >= f1[1] - 0.1


def test_view_nets_are_the_first_splits_nets_cycled_over_the_splits():
    """prepare_view trains the nets of the first view_nets splits once: those splits
    equal a per-split run, and split i weighs each row by the raw u of net i mod B."""
    d = make_synthetic(n=1500, nu=0.5, mu=0.5, seed=6)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    p = MDFAParams(epochs=3, l2_grid=[1e-4, 1e-2], splits=3, null_draws=0,
                   worst_violation=False)
    seeds = [11, 12, 13]
    view, pv = prepare_view(smp, seeds=seeds, params=p.model_copy(update={"view_nets": 2}))
    per, pp = prepare_view(smp, seeds=seeds,
                           params=p.model_copy(update={"balancing_nets": "split"}))
    assert per.view_balance is None and view.view_balance.u.shape == (2, 1500)
    assert pv.l2 == pp.l2  # the same grid search on the first split's folds
    for i in (0, 1):  # the view's nets are these splits' own
        a = run_split(view, split=i, seed=seeds[i], params=pv)
        b = run_split(per, split=i, seed=seeds[i], params=pp)
        assert (a.gamma_pos, a.gamma_neg) == (b.gamma_pos, b.gamma_neg)
    for split in (2, 3):  # net split mod 2: s = -1 rows weigh 1, s = +1 rows u rescaled
        st = balance_split(view, seed=20 + split, params=pv, split=split)
        u = view.view_balance.u[split % 2]
        pos = st.train.s > 0
        ratio = st.train.w[pos] / u[st.tr][pos]
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
        np.testing.assert_array_equal(st.train.w[~pos], 1.0)
        np.testing.assert_allclose(st.train.z, view.view_balance.z[split % 2][st.tr], rtol=1e-6)
    assert not np.allclose(view.view_balance.u[0], view.view_balance.u[1])


def test_view_nets_trained_in_threads_are_the_serial_nets_to_the_bit():
    """prepare_view with a pool of two threads (the L2 grid's nets, then the other
    nets, side by side) gives the serial run's weights, representations, MMDs and L2
    to the bit: a net's initialisation is seeded under a lock and each net trains
    single-threaded. The CPU of the threads' jobs is counted by CpuTimedPool."""
    from concurrent.futures import ThreadPoolExecutor

    from fairspark._threads import CpuTimedPool

    d = make_synthetic(n=1500, nu=0.5, mu=0.5, seed=4)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    p = MDFAParams(epochs=4, l2_grid=[1e-4, 1e-3, 1e-2], splits=4, null_draws=0,
                   worst_violation=False, view_nets=3)
    seeds = [31, 32, 33, 34]
    serial, ps = prepare_view(smp, seeds=seeds, params=p)
    with ThreadPoolExecutor(max_workers=2) as threads:
        pool = CpuTimedPool(threads)
        par, pp = prepare_view(smp, seeds=seeds, params=p, pool=pool)
    assert pool.cpu_s > 0
    assert pp.l2 == ps.l2
    np.testing.assert_array_equal(par.view_balance.u, serial.view_balance.u)
    np.testing.assert_array_equal(par.view_balance.z, serial.view_balance.z)
    assert par.view_balance.mmd == serial.view_balance.mmd
    assert len({float(v) for v in serial.view_balance.u[:, 0]}) > 1  # three nets differ


@pytest.mark.parametrize("k,per", [(20, 2), (20, 3), (6, 2), (3, 2), (7, 1)])
def test_draws_of_split_sees_every_draw_per_split_times_over_k_splits(k, per):
    seen = [draws_of_split(i, k=k, per_split=per) for i in range(k)]
    assert all(len(set(s)) == min(per, k) for s in seen)  # distinct draws in a split
    counts = np.bincount([d for s in seen for d in s], minlength=k)
    np.testing.assert_array_equal(counts, min(per, k))
    assert [s[0] for s in seen] == list(range(k))  # the first draw is split mod k
    if per == 2 and k > 3:  # no two draws share both of their splits
        pairs = [tuple(sorted(s)) for s in seen]
        assert len(set(pairs)) == len(pairs)


def test_several_null_draws_a_split_enter_the_components_by_hand():
    """A split table whose splits evaluate two draws each (the second in null_more):
    the verdict's components pool the within-draw variance over both, by hand."""
    rng = np.random.default_rng(8)
    n, k = 6, 6
    obs = 0.03 + rng.normal(0, 0.003, n)
    vals = {i: [(d, 0.006 + 0.001 * d + rng.normal(0, 0.002))
                for d in draws_of_split(i, k=k, per_split=2)] for i in range(n)}
    frame = pd.DataFrame({
        "gamma_max": obs, "gamma_pos": obs, "n_train": 700, "n_test": 300,
        "null_draw": [vals[i][0][0] for i in range(n)],
        "gamma_null_max": [vals[i][0][1] for i in range(n)],
        "gamma_null_pos": [vals[i][0][1] for i in range(n)],
        "null_more": [json.dumps([[d, v, v - 0.01] for d, v in vals[i][1:]]) for i in range(n)],
    })
    long = pd.DataFrame([(d, v) for i in range(n) for d, v in vals[i]], columns=["d", "v"])
    by = long.groupby("d")["v"]
    per, sizes = by.mean().to_numpy(), by.size().to_numpy(float)
    assert (sizes == 2).all()
    var_w = float(by.var(ddof=1).mean())
    sd = per.std(ddof=1)
    var_b = max(0.0, sd**2 - var_w / 2)
    ref = null_reference(frame, level=0.01)
    assert ref.draws == k and ref.mean == pytest.approx(per.mean())
    assert ref.sd_within == pytest.approx(math.sqrt(var_w))
    assert ref.scale == pytest.approx(math.sqrt(var_b + var_w / n + sd**2 / k))
    c = corrected_gamma(frame, observed="gamma_pos")
    a_obs, a_ref = obs.var(ddof=1) * (1 / n + 3 / 7), sd**2 / k
    nu = (a_obs + a_ref) ** 2 / (a_obs**2 / (n - 1) + a_ref**2 / (k - 1))
    assert c.dof == pytest.approx(nu)
    half = stats.t.ppf(0.975, nu) * math.sqrt(a_obs + a_ref)
    assert c.upper - c.value == pytest.approx(half)


def test_run_split_evaluates_its_null_draws_with_fresh_certificates():
    d = make_synthetic(n=1200, nu=0.5, mu=0.0, seed=2)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"]).with_null_model(seed=9)
    p = MDFAParams(epochs=2, l2_grid=[1e-3], splits=6, null_draws=6, null_per_split=3,
                   worst_violation=False)
    got = run_split(smp, split=4, seed=5, params=p)
    more = json.loads(got.null_more)
    assert [got.null_draw] + [m[0] for m in more] == draws_of_split(4, k=6, per_split=3)
    one = run_split(smp, split=4, seed=5, params=p.model_copy(update={"null_per_split": 1}))
    assert (one.null_draw, one.gamma_null_pos) == (got.null_draw, got.gamma_null_pos)
    assert json.loads(one.null_more) == []
    assert got.cpu_null is not None and got.cpu_null >= 0
    assert dataclasses.asdict(got)["cpu_violation"] is None  # Algorithm 1 off
