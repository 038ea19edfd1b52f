"""The champion/challenger headline's word follows one family (issue 58, item 1).

Where a ``no_worse_than_baseline`` limit gates on an attribute's pooled comparison,
the headline's word and printed interval are that limit check's adjusted interval
(its ``audit = limits`` row's ``lower``/``upper``); without such a limit they are the
group family's (every comparison of SPD, DI and TPR difference, Holm-adjusted
together). The case is built so the two families disagree: a challenger whose
disparate impact moves 0.03 (in |ln DI|) at about 2.2 standard errors, so that one
one-sided limit check at alpha 0.05 decides while Holm over the group family's two
comparisons (DI and SPD, p about 0.03 each) does not. The expected group word and
interval are computed here from the rows' ``worse`` / ``worse_se`` with scipy's
normal and Holm written out by hand; the limit's from its returned row. No Spark: the
rows are the audit's own paired rows (``fairspark.group.paired._row``) judged by
``evaluate_limits`` and rendered by ``decision_box``, as the runner does.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from headline_check import _RE
from scipy.stats import norm
from test_parity_distance import _joint

from fairspark.config import LimitsConfig
from fairspark.group.paired import _row
from fairspark.group.params import GroupParams
from fairspark.metrics._paired import paired_comparison
from fairspark.nightly.gating import evaluate_limits
from fairspark.registry import specs as _registered
from fairspark.report.decision import decision_box

#: rows per group: sized so that "worse" is about 2.2 standard errors from 0
N = 320
METRICS = ("disparate_impact", "statistical_parity_difference")
SUMMARY = {"audits": {"group": {"baseline": {"column": "p_old", "decision": "p_old = 1"}}}}


def _rows(di_c: float, di_b: float) -> list[dict]:
    pv = paired_comparison(_joint(0.5 * di_c, 0.5 * di_b, N), _joint(0.5, 0.5, N))
    return [dataclasses.asdict(_row("sex", "unprivileged", m, pv[m], params=GroupParams(),
                                    statuses={})) for m in METRICS]


def _num(text: str) -> float:
    return float(text.replace("−", "-").replace("+", ""))


def _word(lo: float, hi: float) -> str:
    return "less fair" if lo > 0 else "fairer" if hi < 0 else "no difference beyond noise"


def _group_family(rows: list[dict], alpha: float = 0.05) -> tuple[str, float, float]:
    """(word, lower, upper) of the DI comparison under Holm over the rows, by hand."""
    ps = {r["metric"]: json.loads(r["params"]) for r in rows}
    pvals = {m: 2 * norm.sf(abs(p["worse"]) / p["worse_se"]) for m, p in ps.items()}
    m = len(pvals)
    rejected = 0
    for k, p in enumerate(sorted(pvals.values())):  # Holm's step-down
        if p > alpha / (m - k):
            break
        rejected += 1
    level = alpha / (m - rejected) if rejected < m else alpha
    z = norm.isf(level / 2)
    di = ps["disparate_impact"]
    lo, hi = di["worse"] - z * di["worse_se"], di["worse"] + z * di["worse_se"]
    return _word(lo, hi), lo, hi


def _headline(rows: list[dict]) -> dict:
    (text,) = decision_box(SUMMARY, rows, anchors={}, specs=_registered())["headlines"]
    m = _RE.search(text.replace("−", "-"))
    assert m, text
    return {"text": text, **m.groupdict()}


@pytest.mark.parametrize(("di_c", "di_b", "limit_word"), [
    (0.90, 0.93, "less fair"), (0.93, 0.90, "fairer")])
def test_with_a_no_worse_limit_the_word_and_interval_are_the_checks(di_c, di_b, limit_word):
    rows = _rows(di_c, di_b)
    group_word, _, _ = _group_family(rows)
    assert group_word == "no difference beyond noise"  # the families disagree here
    limits = LimitsConfig.model_validate({"rules": [
        {"no_worse_than_baseline": {"metric": "disparate_impact", "margin": 0}}]})
    _, limit_rows, _ = evaluate_limits(rows, limits=limits, specs=_registered())
    (lim,) = [dataclasses.asdict(r) for r in limit_rows]
    assert lim["group"] == "unprivileged" and json.loads(lim["params"])["role"] == "gate"
    assert _word(lim["lower"], lim["upper"]) == limit_word
    assert lim["status"] == ("violated" if limit_word == "less fair" else "passed")
    seen = _headline([*rows, lim])
    assert seen["word"] == limit_word, seen["text"]
    assert seen["metric"] == "disparate impact"
    # the printed size and interval are the limit row's (3 significant digits)
    assert _num(seen["size"]) == pytest.approx(lim["value"], rel=5e-3)
    assert _num(seen["lo"]) == pytest.approx(lim["lower"], rel=5e-3)
    assert _num(seen["hi"]) == pytest.approx(lim["upper"], rel=5e-3)
    assert seen["label"] == json.loads(lim["params"])["interval"] == "Holm-adjusted"
    assert seen["status"] == lim["status"]
    assert seen["check"] == "disparate impact no worse than baseline (margin 0)"
    assert "But " not in seen["text"]  # a passed/violated check that agrees: no caveat


@pytest.mark.parametrize(("di_c", "di_b"), [(0.90, 0.93), (0.93, 0.90)])
def test_without_a_limit_the_word_and_interval_are_the_group_familys(di_c, di_b):
    rows = _rows(di_c, di_b)
    word, lo, hi = _group_family(rows)
    seen = _headline(rows)
    assert seen["word"] == word == "no difference beyond noise", seen["text"]
    assert seen["level"] == "95" and seen["check"] is None
    assert _num(seen["lo"]) == pytest.approx(lo, rel=5e-3)
    assert _num(seen["hi"]) == pytest.approx(hi, rel=5e-3)
