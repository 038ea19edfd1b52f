"""The challenger-against-baseline headline of an attribute with more than two values
(issue 58, item 1): its ``no_worse_than_baseline`` limit is judged on each unprivileged
value against the reference, so no pooled check gates, and the headline's word must
never contradict those checks. A violated group check makes the word "less fair" and
names that group; else an inconclusive one makes it "inconclusive" (naming it); only
when every group's check passed may it say "fairer" (every adjusted interval below 0)
or "not less fair".

A 3-valued attribute (``a`` privileged, ``b`` and ``c``) whose two values move apart:
the cases are built so the pooled comparison (both values together) and the group
family say something else than the worst group's check, which the old headline
followed. The expected word is derived here from the limit rows' verdicts (the rule
above), and each case first checks that the rows really give the intended mix of
verdicts. No Spark: the audit's own paired rows (``fairspark.group.paired._row``)
judged by ``evaluate_limits`` and rendered by ``decision_box``, as the runner does.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from headline_check import _RE

from fairspark.config import LimitsConfig
from fairspark.group.paired import _row
from fairspark.group.params import GroupParams
from fairspark.metrics._paired import paired_comparison
from fairspark.nightly.gating import evaluate_limits
from fairspark.registry import specs as _registered
from fairspark.report.decision import decision_box

N = 400
METRICS = ("disparate_impact", "statistical_parity_difference")
SUMMARY = {"audits": {"group": {"baseline": {"column": "p_old", "decision": "p_old = 1"}}}}


def _joint(sr_c: float, sr_b: float, n: int = N, swap: float = 0.1) -> dict:
    """One group's joint counts of the two decisions (labels unknown): the challenger
    says yes to a share ``sr_c``, the baseline to ``sr_b``, and they disagree on a
    further ``swap`` of the rows each way (so the paired interval has a width)."""
    both = min(sr_c, sr_b) - swap
    counts = {1: {"up": both * n, "un": (sr_b - both) * n},   # baseline yes
              0: {"up": (sr_c - both) * n, "un": (1 - sr_c - sr_b + both) * n}}
    return {b: {**c, **{f"{k}_w2": v for k, v in c.items()},
                **{f"{k}_n": v for k, v in c.items()}} for b, c in counts.items()}


def _sum(*joints: dict) -> dict:
    """The joint counts of several groups together (the pooled unprivileged group)."""
    out: dict = {}
    for j in joints:
        for b, cells in j.items():
            for k, v in cells.items():
                out.setdefault(b, {}).setdefault(k, 0.0)
                out[b][k] += v
    return out


def _rows(di: dict[str, tuple[float, float]]) -> list[dict]:
    """Paired rows of race: each unprivileged value's (challenger DI, baseline DI)
    against the privileged ``a`` (selection rate 0.5 under both), and the pooled row."""
    ref = _joint(0.5, 0.5, N)
    joints = {g: _joint(0.5 * c, 0.5 * b, N) for g, (c, b) in di.items()}
    out = []
    for g, j in [*joints.items(), ("unprivileged", _sum(*joints.values()))]:
        pv = paired_comparison(j, ref)
        out += [dataclasses.asdict(_row("race", g, m, pv[m], params=GroupParams(),
                                        statuses={})) for m in METRICS]
    return out


def _judge(rows: list[dict], margin: float) -> list[dict]:
    limits = LimitsConfig.model_validate({"rules": [
        {"no_worse_than_baseline": {"metric": "disparate_impact", "margin": margin}}]})
    _, limit_rows, _ = evaluate_limits(rows, limits=limits, specs=_registered())
    return [dataclasses.asdict(r) for r in limit_rows]


def _headline(rows: list[dict]) -> str:
    (text,) = decision_box(SUMMARY, rows, anchors={}, specs=_registered())["headlines"]
    return text.replace("−", "-")


def _num(text: str) -> float:
    return float(text.replace("+", ""))


@pytest.mark.parametrize(("di", "margin", "mix", "word", "group"), [
    # b: much further from parity (violated); c: much closer. Pooled: about even.
    ({"b": (0.6, 0.9), "c": (0.95, 0.7)}, 0.0, {"violated": 1, "passed": 1},
     "less fair", "b"),
    # b: unchanged, its interval straddles the margin 0 (inconclusive); c: closer.
    # Pooled and the group family: fairer.
    ({"b": (0.9, 0.9), "c": (0.95, 0.7)}, 0.0, {"inconclusive": 1, "passed": 1},
     "inconclusive", "b"),
    # both clearly closer to parity: every check passed, every interval below 0
    ({"b": (0.95, 0.7), "c": (0.97, 0.75)}, 0.0, {"passed": 2}, "fairer", None),
    # both about unchanged, within a wide margin: passed, yet not shown fairer
    ({"b": (0.9, 0.9), "c": (0.8, 0.8)}, 0.15, {"passed": 2}, "not less fair", None),
])
def test_the_word_never_contradicts_a_group_check(di, margin, mix, word, group):
    rows = _rows(di)
    lim = _judge(rows, margin)
    gating = [r for r in lim if json.loads(r["params"])["role"] == "gate"]
    # the limit is judged per group: b and c gate, the pooled row is an extra view
    assert sorted(r["group"] for r in gating) == ["b", "c"]
    assert [r["group"] for r in lim if r not in gating] == ["unprivileged"]
    seen_mix: dict[str, int] = {}
    for r in gating:
        seen_mix[r["status"]] = seen_mix.get(r["status"], 0) + 1
    assert seen_mix == mix, [(r["group"], r["status"], r["lower"], r["upper"]) for r in lim]
    # the word by the rule, from the checks' verdicts and intervals
    want = ("less fair" if "violated" in mix else "inconclusive" if "inconclusive" in mix
            else "fairer" if all(r["upper"] < 0 for r in gating) else "not less fair")
    assert want == word
    text = _headline([*rows, *lim])
    m = _RE.search(text)
    assert m, text
    assert m["attr"] == "race" and m["baseline"] == "p_old = 1", text
    assert m["word"] == word, text
    # the numbers are the named group's check (its limits row), in its own units
    named = m["group"]
    if group is not None:
        assert named == group, text
    else:  # all passed: the check whose interval reaches highest
        assert named == max(gating, key=lambda r: r["upper"])["group"], text
    check = next(r for r in gating if r["group"] == named)
    assert m["status"] == check["status"], text
    assert _num(m["size"]) == pytest.approx(check["value"], rel=5e-3, abs=5e-4)
    assert _num(m["lo"]) == pytest.approx(check["lower"], rel=5e-3, abs=5e-4)
    assert _num(m["hi"]) == pytest.approx(check["upper"], rel=5e-3, abs=5e-4)
    assert _num(m["lo"]) <= _num(m["size"]) <= _num(m["hi"])
    # the challenger's and the baseline's values are that group's, by hand
    c, b = di[named]
    assert _num(m["chal"]) == pytest.approx(c, rel=5e-3)
    assert _num(m["base"]) == pytest.approx(b, rel=5e-3)
    # the counts of the group checks follow, as the Limits section counts them
    counts = re.search(r"(\d+) check\(s\) of each group against the reference: (\d+) "
                       r"violated, (\d+) inconclusive, (\d+) passed", text)
    assert counts, text
    assert [int(x) for x in counts.groups()] == [
        2, mix.get("violated", 0), mix.get("inconclusive", 0), mix.get("passed", 0)]
    # and never a word that a check contradicts, with or without a caveat
    if "violated" in mix or "inconclusive" in mix:
        assert not re.search(r": (fairer|not less fair|no difference beyond noise) \(", text)
