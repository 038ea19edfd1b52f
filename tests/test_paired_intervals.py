"""The paired-difference kernel (``fairspark.metrics._paired``) with numpy only, no Spark.

Expectations are computed independently: metrics from row-level arrays by hand, the
standard error of a difference of selection-rate gaps from its textbook formula, and
coverage against the true difference of a known population.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fairspark.metrics._core import CELLS
from fairspark.metrics._intervals import comparison_intervals
from fairspark.metrics._paired import marginal_cells, paired_comparison

#: the 24 joint cells: (side: 0 unprivileged / 1 privileged, label, challenger, baseline)
#: with label 1, 0 or -1 (unknown)
JOINT = list(itertools.product((0, 1), (1, 0, -1), (1, 0), (1, 0)))
_CELL = {(1, 1): "tp", (0, 1): "fp", (0, 0): "tn", (1, 0): "fn", (-1, 1): "up", (-1, 0): "un"}


def _joint(w: np.ndarray, w2: np.ndarray | None = None, n: np.ndarray | None = None):
    """Joint counts of both sides from per-cell weight sums (order of :data:`JOINT`)."""
    w2 = w if w2 is None else w2
    n = w if n is None else n
    sides = ({1: {}, 0: {}}, {1: {}, 0: {}})
    for k, (s, y, c, b) in enumerate(JOINT):
        d = sides[s][b]
        cell = _CELL[(y, c)]
        for suffix, arr in (("", w), ("_w2", w2), ("_n", n)):
            d[cell + suffix] = d.get(cell + suffix, 0.0) + float(arr[k])
    return sides


def _population() -> np.ndarray:
    """A known population: cell probabilities from a generative story.

    35% unprivileged; 6% of labels unknown; favourable label 25% (unprivileged) or
    35% (privileged); the challenger says yes with a probability that depends on the
    label and the group; the baseline agrees with the challenger 85% of the time.
    """
    p = np.zeros(len(JOINT))
    for k, (s, y, c, b) in enumerate(JOINT):
        ps = 0.35 if s == 0 else 0.65
        base_rate = 0.25 if s == 0 else 0.35
        py = 0.06 if y == -1 else 0.94 * (base_rate if y == 1 else 1 - base_rate)
        yes = {(0, 1): 0.55, (0, 0): 0.12, (0, -1): 0.2,
               (1, 1): 0.70, (1, 0): 0.10, (1, -1): 0.3}[(s, y)]
        pc = yes if c == 1 else 1 - yes
        pb = 0.85 if b == c else 0.15
        p[k] = ps * py * pc * pb
    return p / p.sum()


def test_values_equal_a_direct_computation_from_rows():
    rng = np.random.default_rng(1)
    n = 3000
    side = rng.random(n) < 0.4  # True: unprivileged
    y = rng.random(n) < 0.3
    c = rng.random(n) < np.where(y, 0.6, 0.2)
    b = np.where(rng.random(n) < 0.8, c, ~c)
    w = np.zeros(len(JOINT))
    for k, (s, yy, cc, bb) in enumerate(JOINT):
        if yy == -1:
            continue
        w[k] = np.sum((side == (s == 0)) & (y == bool(yy)) & (c == bool(cc)) & (b == bool(bb)))
    u, p = _joint(w)
    res = paired_comparison(u, p)

    def metrics(pred):
        tpr = lambda m: pred[m & y].mean()
        fpr = lambda m: pred[m & ~y].mean()
        ppv = lambda m: y[m & pred].mean()
        return {"statistical_parity_difference": pred[side].mean() - pred[~side].mean(),
                "disparate_impact": pred[side].mean() / pred[~side].mean(),
                "tpr_difference": tpr(side) - tpr(~side),
                "fpr_ratio": fpr(side) / fpr(~side),
                "ppv_difference": ppv(side) - ppv(~side),
                "eo": abs(tpr(side) - tpr(~side))}

    mc, mb = metrics(c), metrics(b)
    for m in mc:
        assert res[m].challenger == pytest.approx(mc[m], abs=1e-12)
        assert res[m].baseline == pytest.approx(mb[m], abs=1e-12)
        assert res[m].difference == pytest.approx(mc[m] - mb[m], abs=1e-12)
    # the standard error of a difference of selection-rate gaps, by its textbook formula:
    # D = mean_u(c - b) - mean_p(c - b), two independent means of the paired differences
    dd = c.astype(float) - b.astype(float)
    se = np.sqrt(dd[side].var() / side.sum() + dd[~side].var() / (~side).sum())
    assert res["statistical_parity_difference"].se == pytest.approx(se, rel=1e-4)
    # worse = distance from parity of the challenger minus the baseline's: |ln DI|
    di = res["disparate_impact"]
    assert di.worse == pytest.approx(abs(np.log(mc["disparate_impact"]))
                                     - abs(np.log(mb["disparate_impact"])), abs=1e-12)


def test_marginal_cells_are_the_two_models_cells():
    u, _ = _joint(np.arange(1, 25, dtype=float))
    chal, base = marginal_cells(u)
    # challenger tp: label 1, challenger 1, either baseline: JOINT index 0 and 1
    assert chal["tp"] == 1 + 2
    # baseline fn: label 1, baseline 0, either challenger: indices 1 and 3
    assert base["fn"] == 2 + 4
    assert sum(chal[c] for c in CELLS) == sum(base[c] for c in CELLS) == sum(range(1, 13))


_COVERAGE_METRICS = ("statistical_parity_difference", "disparate_impact", "tpr_difference",
                     "fpr_difference", "ppv_ratio", "average_odds_difference",
                     "error_rate_ratio")


def _family_coverage(draws: int, *, weighted: bool, seed: int, rows: int = 4000,
                     level: float = 0.95, quantity: str = "difference",
                     ) -> tuple[int, dict[str, int]]:
    """(draws whose intervals cover every metric's truth at once, covering draws per
    metric) over ``draws`` samples of ``rows`` rows from the known population.

    ``quantity``: ``"difference"`` (challenger minus baseline) or ``"worse"`` (further
    from parity, what the decision box and ``no_worse_than_baseline`` judge).
    """
    lo_hi = {"difference": ("lower", "upper"), "worse": ("worse_lower", "worse_upper")}
    lo, hi = lo_hi[quantity]
    p = _population()
    truth = paired_comparison(*_joint(p * 1e9))  # degree-0 metrics: counts or shares alike
    rng = np.random.default_rng(seed)
    covered = dict.fromkeys(_COVERAGE_METRICS, 0)
    together = 0
    for _ in range(draws):
        cell = rng.choice(len(p), size=rows, p=p)
        wt = rng.lognormal(0.0, 0.5, size=rows) if weighted else np.ones(rows)
        w = np.bincount(cell, weights=wt, minlength=len(p))
        w2 = np.bincount(cell, weights=wt * wt, minlength=len(p))
        n = np.bincount(cell, minlength=len(p)).astype(float)
        res = paired_comparison(*_joint(w, w2, n), level=level)
        ok = {m: getattr(res[m], lo) <= getattr(truth[m], quantity) <= getattr(res[m], hi)
              for m in _COVERAGE_METRICS}
        together += all(ok.values())
        for m, o in ok.items():
            covered[m] += o
    return together, covered


def _coverage(draws: int, *, weighted: bool, seed: int, rows: int = 4000) -> dict[str, int]:
    """How many of ``draws`` samples of ``rows`` rows from the known population give an
    interval that covers the true paired difference, per metric."""
    return _family_coverage(draws, weighted=weighted, seed=seed, rows=rows)[1]


@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "sampling-weights"])
def test_coverage_in_100_draws(weighted):
    """100 draws of 4000 rows from a known population (seed 0): the 95% intervals cover
    the true paired difference at least 93 times in 100 on average over the metrics,
    and at least 90 times for each (one metric's count out of 100 has a binomial
    spread of about 2: at a true 94.5% a count of 92 happens)."""
    covered = _coverage(100, weighted=weighted, seed=0)
    assert np.mean(list(covered.values())) >= 93, covered
    assert min(covered.values()) >= 90, covered


def test_coverage_in_1000_draws_per_metric():
    """1000 draws (seed 1): every metric's interval covers in at least 93% (the 95%
    Wald-type interval covers about 94.5% here; 93% is 2 standard errors below that)."""
    covered = _coverage(1000, weighted=False, seed=1)
    assert min(covered.values()) >= 930, covered
    assert max(covered.values()) <= 970, covered  # and not too wide


#: the family of the coverage test: its 7 metrics at a family level of 95%
_FAMILY_ALPHA = 0.05


@pytest.mark.parametrize("quantity", ["difference", "worse"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "sampling-weights"])
def test_family_adjusted_intervals_cover_all_metrics_at_once(weighted, quantity):
    """With the multiplicity control the limits use, the 7 metrics' paired intervals
    cover all their true values at once in at least 93 of 100 draws (seed 0), and each
    metric's in at least 93 of 100.

    The control: Holm over the family of 7 at alpha = 0.05. Which of Holm's levels an
    interval gets depends on the run (alpha / (m - K) after K rejections); the one that
    holds for every run, and the one Holm's first step uses, is Bonferroni's alpha / m,
    here ``family_level`` of a family with nothing rejected: each interval at level
    1 - 0.05 / 7 (z = 2.69). (The gate's own intervals for ``no_worse_than_baseline``
    are one-sided, over whatever family of checks the config makes, at ``limits.alpha``
    per side: not a fixed two-sided family, so the fixed one is tested here.)

    The binomial derivation. Bonferroni: P(some metric missed) <= sum of the 7 miss
    probabilities = 0.05, so the draws covering all at once are Binomial(100, q) with
    q >= 0.95. At q = 0.95 exactly a count below 93 has probability
    binom.cdf(92, 100, 0.95) = 0.128, too often for a test; but the 7 metrics are
    strongly correlated (they share the cells), so Bonferroni is conservative: in 1000
    draws at another seed (7) all 7 were covered at once in 974 (unit weights) and 979
    (sampling weights) for the difference, 974 (unit) for "worse". At q = 0.97,
    binom.cdf(92, 100, 0.97) = 0.011: the threshold 93 fails a correct interval about
    once in 100 and an interval that covers only 95% at once one time in eight. Each
    metric alone: nominal 1 - 0.05 / 7 = 0.9929, binom.cdf(92, 100, 0.9929) = 7e-7.
    At seed 0 the counts at once are 94 (unit) and 98 (sampling weights) for the
    difference, 97 and 98 for "worse"; the unadjusted 95% intervals cover all 7 at once
    in only 80 (so the test can fail).
    """
    from scipy.stats import binom

    from fairspark.stats import family_level

    m = len(_COVERAGE_METRICS)
    alpha_each = family_level(np.ones(m), "holm", _FAMILY_ALPHA)  # nothing rejected
    assert alpha_each == pytest.approx(_FAMILY_ALPHA / m)  # Bonferroni
    assert binom.cdf(92, 100, 1 - _FAMILY_ALPHA) == pytest.approx(0.128, abs=1e-3)
    assert binom.cdf(92, 100, 0.97) < 0.012
    assert binom.cdf(92, 100, 1 - alpha_each) < 1e-6
    together, covered = _family_coverage(100, weighted=weighted, seed=0,
                                         level=1 - alpha_each, quantity=quantity)
    assert together >= 93, (together, covered)
    assert min(covered.values()) >= 93, covered


def test_unpaired_intervals_overlap_where_the_paired_one_excludes_zero():
    """Two models that agree on most rows: 60 of 2000 unprivileged rows turned from no
    to yes by the challenger. Each model's own interval of the selection-rate gap
    overlaps the other's; the paired interval of their difference excludes 0."""
    w = np.zeros(len(JOINT))
    idx = {k: i for i, k in enumerate(JOINT)}
    for y in (1, 0):  # half of each decision pattern has the favourable label
        w[idx[(0, y, 1, 1)]] = 370
        w[idx[(0, y, 1, 0)]] = 30
        w[idx[(0, y, 0, 0)]] = 600
        w[idx[(1, y, 1, 1)]] = 450
        w[idx[(1, y, 0, 0)]] = 550
    u, p = _joint(w)
    (cu, bu), (cp, bp) = marginal_cells(u), marginal_cells(p)
    lo_c, hi_c = comparison_intervals(cu, cp)["statistical_parity_difference"]
    lo_b, hi_b = comparison_intervals(bu, bp)["statistical_parity_difference"]
    assert lo_c < hi_b and lo_b < hi_c  # the two separate intervals overlap
    d = paired_comparison(u, p)["statistical_parity_difference"]
    assert d.difference == pytest.approx(0.03)
    assert d.lower > 0  # the paired interval excludes 0


def test_weights_must_be_known():
    u, p = _joint(np.ones(len(JOINT)))
    with pytest.raises(ValueError, match="weights"):
        paired_comparison(u, p, weights="survey")


# ------------------------------------------------- per-group rates and inequality indices


def _rows(n: int, seed: int, *, weighted: bool):
    """Rows of three groups: label (some unknown), challenger and baseline decisions
    that agree on most rows, and weights."""
    rng = np.random.default_rng(seed)
    g = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    y = np.where(rng.random(n) < 0.05, -1, (rng.random(n) < 0.3 + 0.1 * g).astype(int))
    c = (rng.random(n) < np.where(y == 1, 0.6, 0.2) - 0.05 * g).astype(int)
    b = np.where(rng.random(n) < 0.85, c, 1 - c)
    w = rng.lognormal(0.0, 0.5, n) if weighted else np.ones(n)
    return g, y, c, b, w


def _group_joint(y, c, b, w, mask) -> dict[int, dict[str, float]]:
    """One group's joint counts from rows (the layout the audit's aggregation gives)."""
    out: dict[int, dict[str, float]] = {1: {}, 0: {}}
    for (yy, cc), cell in _CELL.items():
        for bb in (1, 0):
            m = mask & (y == yy) & (c == cc) & (b == bb)
            out[bb] |= {cell: w[m].sum(), f"{cell}_w2": (w[m] ** 2).sum(),
                        f"{cell}_n": float(m.sum())}
    return out


def _gei_rows(benefit, w, alpha: float) -> float:
    """GEI(alpha) (Theil at alpha = 1) of weighted benefits, straight from its formula."""
    mu = np.sum(w * benefit) / w.sum()
    r = benefit / mu
    if alpha == 1.0:
        terms = np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0)
    else:
        terms = (r ** alpha - 1.0) / (alpha * (alpha - 1.0))
    return float(np.sum(w * terms) / w.sum())


def _indices_rows(g, y, pred, w, alpha=0.5) -> dict[str, float]:
    """GEI, Theil and their between-group parts over the labelled rows, by hand."""
    lab = y >= 0
    ben = (pred - y + 1.0)[lab]
    gl, wl = g[lab], w[lab]
    means = {k: np.sum(wl[gl == k] * ben[gl == k]) / wl[gl == k].sum() for k in set(gl)}
    between = np.array([means[k] for k in gl])
    return {"gei": _gei_rows(ben, wl, alpha), "theil": _gei_rows(ben, wl, 1.0),
            "between_group_gei": _gei_rows(between, wl, alpha),
            "between_group_theil": _gei_rows(between, wl, 1.0)}


def _row_se(f, w) -> dict[str, float]:
    """The linearisation's standard errors from rows: sqrt(sum_i w_i^2 (dF/dw_i)^2)
    for each value F of ``f(weights)`` (a dict), each derivative by central
    differences on the rows themselves."""
    h = 1e-6 * w.sum()
    grads: dict[str, np.ndarray] = {}
    for i in range(len(w)):
        up, dn = w.copy(), w.copy()
        up[i] += h
        dn[i] -= h
        fu, fd = f(up), f(dn)
        for k in fu:
            grads.setdefault(k, np.empty(len(w)))[i] = (fu[k] - fd[k]) / (2 * h)
    return {k: float(np.sqrt(np.sum(w ** 2 * gr ** 2))) for k, gr in grads.items()}


@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "sampling-weights"])
def test_paired_rates_equal_a_direct_computation_from_rows(weighted):
    from fairspark.metrics._paired import paired_rates

    g, y, c, b, w = _rows(2000, 3, weighted=weighted)
    mask = g == 1
    res = paired_rates(_group_joint(y, c, b, w, mask))
    lab = mask & (y >= 0)

    def rates(pred):
        wm = lambda m: w[m].sum()
        return {"selection_rate": wm(mask & (pred == 1)) / wm(mask),
                "base_rate": wm(lab & (y == 1)) / wm(lab),
                "tpr": wm(lab & (y == 1) & (pred == 1)) / wm(lab & (y == 1)),
                "fpr": wm(lab & (y == 0) & (pred == 1)) / wm(lab & (y == 0)),
                "ppv": wm(lab & (y == 1) & (pred == 1)) / wm(lab & (pred == 1)),
                "for": wm(lab & (y == 1) & (pred == 0)) / wm(lab & (pred == 0)),
                "accuracy": wm(lab & (y == pred)) / wm(lab),
                "error_rate": wm(lab & (y != pred)) / wm(lab)}

    rc, rb = rates(c), rates(b)
    for m in rc:
        assert res[m].challenger == pytest.approx(rc[m], abs=1e-12), m
        assert res[m].baseline == pytest.approx(rb[m], abs=1e-12), m
        assert res[m].difference == pytest.approx(rc[m] - rb[m], abs=1e-12), m
        assert np.isnan(res[m].worse)  # a rate has no parity
    assert res["base_rate"].difference == pytest.approx(0.0, abs=1e-12)  # label only
    assert res["base_rate"].se == pytest.approx(0.0, abs=1e-9)
    # the selection-rate difference is the weighted mean of c - b over the group: its
    # linearisation's standard error is sqrt(sum w^2 (d - D)^2) / sum w
    d = (c - b)[mask].astype(float)
    wg = w[mask]
    big_d = np.sum(wg * d) / wg.sum()
    se = np.sqrt(np.sum(wg ** 2 * (d - big_d) ** 2)) / wg.sum()
    assert res["selection_rate"].se == pytest.approx(se, rel=1e-4)
    lo, hi = res["selection_rate"].lower, res["selection_rate"].upper
    assert (lo, hi) == pytest.approx((big_d - 1.959964 * se, big_d + 1.959964 * se), rel=1e-4)


@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "sampling-weights"])
def test_paired_inequality_equals_a_direct_computation_from_rows(weighted):
    from fairspark.metrics._paired import INEQUALITY_KEYS, paired_inequality

    g, y, c, b, w = _rows(1200, 4, weighted=weighted)
    res = paired_inequality([_group_joint(y, c, b, w, g == k) for k in range(3)])
    ic, ib = _indices_rows(g, y, c, w), _indices_rows(g, y, b, w)

    def diff(ww):
        a, z = _indices_rows(g, y, c, ww), _indices_rows(g, y, b, ww)
        return {k: a[k] - z[k] for k in a}

    se = _row_se(diff, w)
    for k in INEQUALITY_KEYS:
        assert res[k].challenger == pytest.approx(ic[k], rel=1e-10), k
        assert res[k].baseline == pytest.approx(ib[k], rel=1e-10), k
        assert res[k].difference == pytest.approx(ic[k] - ib[k], rel=1e-9, abs=1e-12), k
        assert res[k].worse == pytest.approx(res[k].difference)  # 0 is equality
        # the standard error from the rows' own derivatives (every row, not cells)
        assert res[k].se == pytest.approx(se[k], rel=1e-3), k
    # one group holding every row: the between-group parts are 0 for both decisions
    overall = paired_inequality([_group_joint(y, c, b, w, np.ones(len(g), bool))])
    assert overall["gei"].difference == pytest.approx(res["gei"].difference)
    assert overall["between_group_theil"].challenger == pytest.approx(0.0, abs=1e-12)


def test_paired_inequality_covers_in_200_draws():
    """200 draws of 4000 rows from the known population (seed 2): the 95% interval of
    the paired GEI and Theil differences covers the truth at least 181 times
    (binom.cdf(180, 200, 0.95) = 0.003 for an exact interval)."""
    from scipy.stats import binom

    from fairspark.metrics._paired import paired_inequality

    assert binom.cdf(180, 200, 0.95) < 0.005
    p = _population()

    def groups(w, w2, n):
        u, q = _joint(w, w2, n)
        return [u, q]

    truth = paired_inequality(groups(p * 1e9, p * 1e9, p * 1e9))
    rng = np.random.default_rng(2)
    covered = {"gei": 0, "theil": 0, "between_group_gei": 0}
    for _ in range(200):
        cell = np.bincount(rng.choice(len(p), size=4000, p=p), minlength=len(p))
        res = paired_inequality(groups(*(cell.astype(float),) * 3))
        for k in covered:
            covered[k] += res[k].lower <= truth[k].difference <= res[k].upper
    assert min(covered.values()) >= 181, covered
