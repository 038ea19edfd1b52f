"""No printed interval leaves its metric's range (issue 58, item 3).

A ratio (disparate impact, every ``*_ratio``) is judged on the log scale, where its own
interval is symmetric, so the interval a limit's verdict uses (adjusted over the
family) stays positive: the report's "0.057, Holm-adjusted interval [-0.012, 0.387]" for
Female|Amer-Indian-Eskimo (own interval [0.010, 0.305]) becomes a positive interval.
Every other catalogue metric's adjusted ends stay in its range. Expectations by hand:
the log-scale rescaling written here.
"""

from __future__ import annotations

import json
import math

import pytest
from scipy.stats import norm

from fairspark.config import LimitsConfig
from fairspark.metrics._core import BASELINES, CATALOGUE, metric_range
from fairspark.nightly.gating import evaluate_limits
from fairspark.registry import specs as _registered

SPECS = _registered()


def _row(metric, value, lower, upper, group):
    return {"audit": "group", "metric": metric, "attribute": "race", "group": group,
            "metric_b": None, "model": None, "value": value, "lower": lower, "upper": upper,
            "status": "ok", "params": json.dumps({"ci_level": 0.95})}


def test_the_small_groups_disparate_impact_interval_stays_positive():
    """17 checks (Holm), one of them DI 0.057 with its own log-scale interval
    [0.010, 0.305] against the minimum 0.8: its adjusted interval is the own one
    rescaled on the log scale, by hand, and positive."""
    rows = [_row("disparate_impact", 0.057, 0.0105, 0.305, "Amer-Indian-Eskimo")]
    rows += [_row("disparate_impact", 0.9 + 0.001 * i, 0.85, 0.95 + 0.001 * i, f"g{i}")
             for i in range(16)]
    limits = LimitsConfig.model_validate({"rules": [{"metric": "disparate_impact",
                                                     "attribute": "race", "min": 0.8}]})
    checks, lim_rows, _ = evaluate_limits(rows, limits=limits, specs=SPECS)
    c = next(c for c in checks if c.row["group"] == "Amer-Indian-Eskimo")
    assert c.verdict == "violated"
    z = norm.ppf(0.975)
    lv, llo, lhi = math.log(0.057), math.log(0.0105), math.log(0.305)
    # violated against a minimum: the upper end decides it, at the Holm level
    zv = norm.ppf(1 - c.alpha_violated)
    zp = norm.ppf(1 - c.alpha_passed)
    assert c.upper_adj == pytest.approx(math.exp(lv + (lhi - lv) * zv / z), rel=1e-12)
    assert c.lower_adj == pytest.approx(math.exp(lv - (lv - llo) * zp / z), rel=1e-12)
    assert 0 < c.lower_adj < 0.057 < c.upper_adj < 0.8
    # the p-value of "violated" is the log-scale one
    p_v = norm.sf((math.log(0.8) - lv) / ((lhi - lv) / z))
    assert c.p_violated == pytest.approx(min(1.0, p_v * 17), rel=1e-9)  # Holm's first step
    for r in lim_rows:
        assert r.lower > 0 and r.upper > 0


def _edge(metric: str) -> tuple[float, float, float]:
    """A value near the edge of the metric's range with a wide own interval inside it."""
    lo, hi = metric_range(metric)
    if math.isinf(hi):  # a ratio: log-symmetric around 0.05
        return 0.05, 0.05 / 6, 0.05 * 6
    if lo == 0.0:
        return 0.04, 0.0, 0.2
    return -0.95, -1.0, -0.7


@pytest.mark.parametrize("metric", [*CATALOGUE, *BASELINES])
def test_every_metric_kinds_adjusted_interval_stays_in_range(metric):
    v, lo, hi = _edge(metric)
    rows = [_row(metric, v, lo, hi, "edge")]
    rows += [_row(metric, v, lo, hi, f"g{i}") for i in range(19)]  # Holm over 20
    rule = ({"metric": metric, "min": 0.8} if metric_range(metric)[1] == math.inf
            else {"metric": metric, "abs_max": 0.5})
    limits = LimitsConfig.model_validate({"rules": [{**rule, "attribute": "race"}]})
    checks, lim_rows, _ = evaluate_limits(rows, limits=limits, specs=SPECS)
    assert len(lim_rows) == 20
    a, b = metric_range(metric)
    for r, c in zip(lim_rows, checks, strict=True):
        assert a <= r.lower <= r.value <= r.upper <= b, (metric, r.lower, r.value, r.upper)
        # and says the verdict: beyond the limit exactly when violated
        lim = rule.get("min", rule.get("abs_max"))
        beyond = r.upper < lim if "min" in rule else (r.lower > lim or r.upper < -lim)
        assert beyond == (c.verdict == "violated"), (metric, c.verdict, r.lower, r.upper)
