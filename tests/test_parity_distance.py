"""One distance from parity, read by every comparison of "further from parity".

A challenger at disparate impact 0.7 against a baseline at 1.4 (and the other way
round): |ln 0.7| = 0.357 > |ln 1.4| = 0.336, so the challenger at 0.7 is further from
parity, although |0.7 - 1| = 0.3 < |1.4 - 1| = 0.4 would say the opposite. The paired
``worse``, the ``no_worse_than_baseline`` gate, the limits' words, the trends and the
decision box's headline must all say the same. The expected numbers are written here
from ``math.log``; no Spark.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fairspark.audits import DecisionInput
from fairspark.config import LimitsConfig
from fairspark.group.decision import baseline_lines
from fairspark.group.paired import _row
from fairspark.group.params import GroupParams
from fairspark.metrics._core import CATALOGUE, distance_from_parity
from fairspark.metrics._paired import paired_comparison
from fairspark.nightly.gating import evaluate_limits
from fairspark.registry import specs as _registered
from fairspark.report.decision import _limit_distance
from fairspark.report.trends import badness, change_between

#: rows per group: large, so that the 0.02 gap in |ln DI| is far beyond noise
N = 400_000


def _joint(sr_c: float, sr_b: float, n: int = N) -> dict[int, dict[str, float]]:
    """One group's joint counts (all labels unknown): the challenger says yes to a share
    ``sr_c`` of the rows, the baseline to ``sr_b``, agreeing as much as they can."""
    both = min(sr_c, sr_b)
    counts = {1: {"up": both * n, "un": (sr_b - both) * n},   # baseline yes
              0: {"up": (sr_c - both) * n, "un": (1 - max(sr_c, sr_b)) * n}}  # baseline no
    return {b: {**c, **{f"{k}_w2": v for k, v in c.items()},
                **{f"{k}_n": v for k, v in c.items()}} for b, c in counts.items()}


def _pair(di_c: float, di_b: float):
    """Paired comparison where the privileged group's selection rate is 0.5 for both."""
    return paired_comparison(_joint(0.5 * di_c, 0.5 * di_b), _joint(0.5, 0.5))


CASES = [(0.7, 1.4, "less fair"), (1.4, 0.7, "fairer")]


def test_the_one_distance():
    assert float(distance_from_parity("ratio", 0.7)) == pytest.approx(-math.log(0.7))
    assert float(distance_from_parity("ratio", 1.4)) == pytest.approx(math.log(1.4))
    # symmetric in the two groups: M and 1/M are equally far
    assert float(distance_from_parity("ratio", 0.5)) == pytest.approx(
        float(distance_from_parity("ratio", 2.0)))
    assert float(distance_from_parity("ratio", 0.0)) == math.inf
    assert math.isnan(float(distance_from_parity("ratio", -0.1)))
    assert float(distance_from_parity("difference", -0.2)) == pytest.approx(0.2)
    for name, spec in CATALOGUE.items():  # every kind of the catalogue has one
        assert float(distance_from_parity(spec.kind, 1.0 if spec.kind == "ratio" else 0.0)) \
            == 0.0, name
    with pytest.raises(ValueError, match="kind"):
        distance_from_parity("rate", 0.3)


@pytest.mark.parametrize(("di_c", "di_b", "word"), CASES)
def test_paired_worse_is_the_log_distance(di_c, di_b, word):
    di = _pair(di_c, di_b)["disparate_impact"]
    assert (di.challenger, di.baseline) == pytest.approx((di_c, di_b))
    expected = abs(math.log(di_c)) - abs(math.log(di_b))  # +-0.0202
    assert di.worse == pytest.approx(expected, rel=1e-9)
    assert (di.worse > 0) == (word == "less fair")
    assert di.worse_lower > 0 if word == "less fair" else di.worse_upper < 0


def _rows(di_c: float, di_b: float) -> list[dict]:
    params = GroupParams()
    row = _row("race", "unprivileged", "disparate_impact", _pair(di_c, di_b)["disparate_impact"],
               params=params, statuses={})
    return [dataclasses.asdict(row) if dataclasses.is_dataclass(row) else dict(row.__dict__)]


@pytest.mark.parametrize(("di_c", "di_b", "word"), CASES)
def test_gate_limits_trends_and_headline_agree(di_c, di_b, word):
    rows = _rows(di_c, di_b)
    # the no-worse gate at margin 0
    limits = LimitsConfig.model_validate({"rules": [
        {"no_worse_than_baseline": {"metric": "disparate_impact", "margin": 0}}]})
    checks, limit_rows, _ = evaluate_limits(rows, limits=limits, specs=_registered())
    (check,) = [c for c in checks if c.role == "gate"]
    assert check.verdict == ("violated" if word == "less fair" else "passed")
    # the limits' words
    lr = dataclasses.asdict(limit_rows[0])
    words, excess = _limit_distance(lr, {"metric": "disparate_impact",
                                         "no_worse_than_baseline": {"margin": 0}})
    side = "further from parity" if word == "less fair" else "closer to parity"
    assert side in words, words
    assert (excess > 0) == (word == "less fair")
    # the trends: the baseline's run, then the challenger's
    assert (badness("disparate_impact", di_c) > badness("disparate_impact", di_b)) == (
        word == "less fair")
    move, _ = change_between("disparate_impact",
                             {"value": di_b, "lower": di_b * 0.99, "upper": di_b * 1.01},
                             {"value": di_c, "lower": di_c * 0.99, "upper": di_c * 1.01})
    assert move == ("worse" if word == "less fair" else "better")
    # the decision box's headline
    (line,) = baseline_lines(DecisionInput(audit="group", rows=rows, info={}, anchor=None))
    assert line.what == f"challenger against baseline: {word}"
    assert f": {word} (" in line.headline


def test_every_catalogue_metric_worse_uses_the_one_distance():
    """For every metric of the catalogue, ``worse`` equals the distance of the challenger
    minus the baseline's, each by hand (|M| for differences, |ln M| for ratios)."""
    res = _pair(0.8, 1.1)
    for name, spec in CATALOGUE.items():
        pv = res[name]
        if not (np.isfinite(pv.challenger) and np.isfinite(pv.baseline)):
            continue
        hand = ((lambda v: abs(math.log(v))) if spec.kind == "ratio" else abs)
        assert pv.worse == pytest.approx(hand(pv.challenger) - hand(pv.baseline)), name


def test_the_worst_group_of_a_no_worse_check_is_the_one_that_moved_away():
    """Two groups' no-worse checks, both inconclusive: the one whose challenger moved
    further from parity ranks worst (it did not, for a rule without min/max, before)."""
    from fairspark.nightly.trend_groups import limit_excess
    from fairspark.nightly.worst import excess, rank_key

    rule = {"metric": "disparate_impact",
            "no_worse_than_baseline": {"metric": "disparate_impact", "margin": 0.01}}
    away = {"value": 0.05, "lower": -0.01, "upper": 0.11, "status": "inconclusive"}
    towards = {"value": -0.05, "lower": -0.11, "upper": 0.02, "status": "inconclusive"}
    assert excess(0.05, rule) == pytest.approx(0.04)
    assert limit_excess(0.05, rule) == pytest.approx(0.04)
    assert sorted([towards, away], key=lambda r: rank_key(r, rule))[0] is away


@pytest.mark.parametrize(("di_c", "di_b", "word"), [
    (0.7, 1.4, "less fair"), (1.4, 0.7, "fairer"), (0.9, 0.9, "no difference beyond noise")])
def test_the_headlines_sign_and_size_are_the_rows(di_c, di_b, word):
    """The decision box's headline, read back as text and checked against the rows it
    was made from (tests/headline_check.py): the word, the signed size (the row's
    ``worse``, by hand |ln DI_c| - |ln DI_b|) inside its own printed interval."""
    import pandas as pd
    from headline_check import check_headline

    diff = _rows(di_c, di_b)
    own = {**diff[0], "model": None, "value": di_c, "params": "{}"}
    base = {**diff[0], "model": "baseline", "value": di_b, "params": "{}"}
    info = {"baseline": {"column": "p_old", "decision": "p_old = 1"}}
    (line,) = baseline_lines(DecisionInput(audit="group", rows=diff, info=info, anchor=None))
    seen = check_headline([line.headline], pd.DataFrame([own, base, *diff]), "race", word,
                          baseline="p_old = 1")
    assert seen["worse"] == pytest.approx(abs(math.log(di_c)) - abs(math.log(di_b)),
                                          abs=1e-12)
