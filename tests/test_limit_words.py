"""A limit's words agree with the interval printed beside them.

The verdict of every limit check is compared with the interval its ``limits`` row
(and the report) prints: violated exactly when that interval lies wholly beyond the
limit, passed exactly when it lies wholly within, inconclusive exactly when it
straddles. The expectations are computed here: the side of the limit from the printed
endpoints, Holm and Benjamini-Hochberg by hand, and for one group the interval from
the raw counts (Wilson, Newcombe) rescaled to the per-check level by hand.
"""

from __future__ import annotations

import json
import math
import re
from html import unescape

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import holm_adjusted as _holm
from conftest import printed_number, unmark, write_parquet
from scipy.stats import norm

from fairspark import cli
from fairspark.config import LimitsConfig
from fairspark.nightly.gating import evaluate_limits
from fairspark.registry import specs as _registered

SPECS = _registered()

#: group -> (rows, favourable decisions); A is the privileged (reference) group
GROUPS = {"A": (2000, 1000), "B": (500, 225), "C": (300, 120), "D": (400, 148),
          "E": (1000, 362), "L": (800, 120), "M": (60, 8), "T": (12, 1)}
RULES = [{"metric": "disparate_impact", "min": 0.8},
         {"metric": "statistical_parity_difference", "abs_max": 0.1},
         {"metric": "tpr_difference", "min": -0.15, "max": 0.15}]


def _side(lo: float, hi: float, rule: dict) -> str:
    """Where [lo, hi] lies against the rule: beyond, within or straddles (by hand)."""
    if rule.get("abs_max") is not None:
        a = rule["abs_max"]
        beyond = lo > a or hi < -a
        within = -a <= lo and hi <= a
    else:
        mn, mx = rule.get("min"), rule.get("max")
        beyond = (mx is not None and lo > mx) or (mn is not None and hi < mn)
        within = (mn is None or lo >= mn) and (mx is None or hi <= mx)
    return "beyond" if beyond else "within" if within else "straddles"


_WORD = {"violated": "beyond", "passed": "within", "inconclusive": "straddles"}


def _bh(p):
    p = np.asarray(p, dtype=float)
    m = len(p)
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    adj = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    out = np.empty(m)
    out[order] = adj
    return out


def _row(i, value, lower, upper, metric):
    return {"audit": "group", "metric": metric, "attribute": f"a{i}", "group": "unprivileged",
            "metric_b": None, "model": None, "value": value, "lower": lower, "upper": upper,
            "status": "ok", "params": json.dumps({"ci_level": 0.95})}


@pytest.mark.parametrize("correction", ["holm", "bh", "none"])
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r["metric"])
def test_every_verdict_agrees_with_its_printed_interval(correction, rule):
    # 120 checks near the limits, with asymmetric intervals, judged as one family
    rng = np.random.default_rng(42)
    centre = rule.get("min", rule.get("abs_max"))
    v = centre + rng.normal(0, 0.08, 120)
    rows = [_row(i, float(x), float(x - rng.uniform(0.005, 0.1)),
                 float(x + rng.uniform(0.005, 0.1)), rule["metric"]) for i, x in enumerate(v)]
    limits = LimitsConfig.model_validate({"rules": [rule], "correction": correction})
    _, out, _ = evaluate_limits(rows, limits=limits, specs=SPECS)
    assert len(out) == 120
    verdicts = [r.status for r in out]
    assert {"violated", "passed", "inconclusive"} <= set(verdicts) or rule.get("min") == -0.15
    for r in out:
        assert _WORD[r.status] == _side(r.lower, r.upper, rule), (r.value, r.lower, r.upper)
    # the verdicts are the corrected tests' (adjusted p by hand from the rows' intervals)
    z = norm.ppf(0.975)
    sides = ([(rule["abs_max"], True), (-rule["abs_max"], False)] if "abs_max" in rule else
             [(rule[k], k == "max") for k in ("max", "min") if k in rule])
    pv, pp = [], []
    ratio = rule["metric"] == "disparate_impact" or rule["metric"].endswith("_ratio")
    for r in rows:
        x, lo, hi = r["value"], r["lower"], r["upper"]
        a, b = [], []
        for lim, upper in sides:
            if ratio:  # judged on the log scale (all positive here)
                x, lo, hi, lim = (math.log(u) for u in (r["value"], r["lower"], r["upper"],
                                                        lim))
            excess = (x - lim) if upper else (lim - x)
            facing = (x - lo) if (excess > 0) == upper else (hi - x)
            t = excess / (facing / z)
            a.append(norm.sf(t))
            b.append(norm.cdf(t))
        pv.append(min(min(a) * len(a), 1.0))
        pp.append(max(b))
    adj = {"holm": _holm, "bh": _bh, "none": np.asarray}[correction]
    av, ap = adj(pv), adj(pp)
    expected = ["violated" if a <= 0.05 else "passed" if b <= 0.05 else "inconclusive"
                for a, b in zip(av, ap, strict=True)]
    assert verdicts == expected


# ------------------------------------------------------------ a real run and its report


def _table() -> pd.DataFrame:
    """Rows with exact counts per group; the label follows the decision 70 / 30."""
    parts = []
    for g, (n, fav) in GROUPS.items():
        pred = np.r_[np.ones(fav, int), np.zeros(n - fav, int)]
        # 70% of the favourable and 30% of the others have the favourable label
        lab = np.r_[(np.arange(fav) % 10 < 7), (np.arange(n - fav) % 10 < 3)]
        parts.append(pd.DataFrame({"grp": g, "prediction": pred,
                                   "income": np.where(lab, ">50K", "<=50K")}))
    df = pd.concat(parts, ignore_index=True)
    df["region"] = np.array(["R0", "R1", "R2"])[np.arange(len(df)) % 3]
    df["age"] = 30 + np.arange(len(df)) % 40
    df["row_id"] = np.arange(len(df))
    return df


def _main(cfg, date):
    return cli.main(["audit", "--config", cfg, "--run-date", date, "-q"], under_submit=True)


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("limit_words")
    pdf = _table()
    cfg = {"dataset": "limit_words", "input": {"path": write_parquet(pdf, base / "in")},
           "columns": {"features": ["age"],
                       "sensitive": [{"column": "grp", "privileged": "A"},
                                     {"column": "region", "privileged": "R0"}],
                       "label": {"column": "income", "positive": ">50K"},
                       "prediction": {"column": "prediction", "positive": 1},
                       "row_key": "row_id"},
           "audits": {"group": {}},
           "limits": {"rules": RULES, "correction": "holm", "fail_on_violation": False},
           "output": {"path": str(base / "out")}}
    p = base / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    assert _main(str(p), "2026-12-05") == 0
    out = base / "out" / "run_date=2026-12-05"
    m = pd.read_parquet(out / "metrics.parquet")
    return pdf, m, (out / "report.html").read_text()


def _limits(m: pd.DataFrame, role: str = "gate") -> pd.DataFrame:
    lim = m[m.audit == "limits"].copy()
    lim["p"] = lim["params"].map(json.loads)
    return lim[lim["p"].map(lambda p: p["role"]) == role]


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", unmark(html))).split())


def _fmt(r, stat: str = "value", own: bool = False) -> str:
    """A limits row's number as printed (its own decimals: conftest.printed_number);
    ``own``: the audit's own interval, printed as the group row it comes from."""
    lo, hi = r.p["own_interval"] if own else (r.lower, r.upper)
    x = {"value": r.value, "lower": lo, "upper": hi}[stat]
    return printed_number(x, lo, hi, value=r.value, signed=r.metric.endswith("difference"))


def test_the_run_prints_the_interval_its_verdict_uses(run):
    _, m, html = run
    gate = _limits(m)
    assert len(gate) >= 20  # 7 groups of grp, 2 of region, three rules
    for _, r in gate.iterrows():
        assert _WORD[r.status] == _side(r.lower, r.upper, r.p["rule"]), (r.group, r.metric)
        assert r.p["interval"] == "Holm-adjusted"
    # the case of the issue: the audit's own interval lies wholly beyond the limit, the
    # Holm-adjusted one straddles it, and the verdict is inconclusive
    own = gate.apply(lambda r: _side(*r.p["own_interval"], r.p["rule"]), axis=1)
    flipped = gate[(own == "beyond") & (gate.status == "inconclusive")]
    assert len(flipped), "the data have a check that only Holm makes inconclusive"
    # the report's Limits table prints that adjusted interval beside the verdict, the
    # own interval beside it, and says "straddles" of the adjusted one
    i = html.index("<h2>Limits</h2>")
    table = html[i:html.index("</table>", i)]
    for _, r in gate.iterrows():
        row = re.search(
            rf"<td>{re.escape(r.metric_b)}</td><td>{r.attribute}</td><td>{r.group}(<br>.*?)?"
            r"</td>.*?</tr>",
            unescape(unmark(table))).group(0)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        assert len(cells) == 8, cells
        assert cells[3] == _fmt(r)
        assert cells[4].startswith(f"[{_fmt(r, 'lower')}, {_fmt(r, 'upper')}]")
        assert "Holm-adjusted" in cells[4]
        assert cells[5] == f"[{_fmt(r, 'lower', own=True)}, {_fmt(r, 'upper', own=True)}]"
        how = unescape(re.sub(r"<[^>]+>", "", cells[7]))
        word = {"violated": "is beyond", "passed": "is within",
                "inconclusive": "straddles"}[r.status]
        assert (f"Holm-adjusted interval [{_fmt(r, 'lower')}, {_fmt(r, 'upper')}] {word}"
                in how)


def _wilson(k, n, z):
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return p, c - h, c + h


def test_one_adjusted_interval_by_hand_from_the_counts(run):
    pdf, m, _ = run
    gate = _limits(m)
    z = norm.ppf(0.975)
    # SPD of D against A from the raw counts: Wilson for each rate, Newcombe's difference
    sel = pdf.groupby("grp")["prediction"].agg(["sum", "count"])
    p1, l1, u1 = _wilson(sel.loc["D", "sum"], sel.loc["D", "count"], z)
    p2, l2, u2 = _wilson(sel.loc["A", "sum"], sel.loc["A", "count"], z)
    d = p1 - p2
    lo = d - math.hypot(p1 - l1, u2 - p2)
    hi = d + math.hypot(u1 - p1, p2 - l2)
    r = gate[(gate.attribute == "grp") & (gate.group == "D")
             & (gate.metric == "statistical_parity_difference")].iloc[0]
    assert r.value == pytest.approx(d, abs=1e-12)
    assert r.p["own_interval"] == pytest.approx([lo, hi], abs=1e-12)
    # Holm over the family, by hand from the own intervals: K rejections, the
    # step-down threshold alpha / (m - K) is each family's per-check level
    pv, pp = [], []
    for _, c in gate.iterrows():
        v, (a, b), rule = c.value, c.p["own_interval"], c.p["rule"]
        sides = ([(rule["abs_max"], True), (-rule["abs_max"], False)]
                 if rule.get("abs_max") is not None else
                 [(rule[k], k == "max") for k in ("max", "min") if rule.get(k) is not None])
        if c.metric == "disparate_impact" or c.metric.endswith("_ratio"):
            # a ratio is judged on the log scale, where its own interval is symmetric
            v, a, b = math.log(v), math.log(a), math.log(b)
            sides = [(math.log(lim), up) for lim, up in sides]
        ps, qs = [], []
        for lim, upper in sides:
            excess = (v - lim) if upper else (lim - v)
            facing = (v - a) if (excess > 0) == upper else (b - v)
            ps.append(norm.sf(excess / (facing / z)))
            qs.append(norm.cdf(excess / (facing / z)))
        pv.append(min(min(ps) * len(ps), 1.0))
        pp.append(max(qs))
    a_v = 0.05 / (len(pv) - int((_holm(pv) <= 0.05).sum()))
    a_p = 0.05 / (len(pp) - int((_holm(pp) <= 0.05).sum()))
    assert r.p["alpha_violated"] == pytest.approx(a_v, rel=1e-12)
    assert r.p["alpha_passed"] == pytest.approx(a_p, rel=1e-12)
    # SPD of D is -0.13, below -0.1: the upper end decides "violated" against -0.1 at
    # a_v / 2 (two sides, Bonferroni) and "passed" against +0.1 at a_p; violated, it is
    # at the first level; inconclusive, at the wider of the two
    assert d < -0.1
    zv, zp = norm.ppf(1 - a_v / 2), norm.ppf(1 - a_p)
    up_v = d + (hi - d) * zv / z
    if up_v <= -0.1:
        assert r.status == "violated" and r.upper == pytest.approx(up_v, rel=1e-9)
    else:
        assert r.status == "inconclusive"
        assert r.upper == pytest.approx(d + (hi - d) * max(zv, zp) / z, rel=1e-9)
    assert r.lower == pytest.approx(d - (d - lo) * (zv if r.status == "violated"
                                                     else max(zv, zp)) / z, rel=1e-9)


# ---------------------------------------------- the worst group, ranked with its size


def _decision(html: str) -> str:
    i = html.index('id="decision"')
    return _text(html[i:html.index("</section>", i)])


def _g(x: float) -> str:
    return f"{x:.3g}"


def test_the_worst_group_is_ranked_by_its_bound_and_a_tiny_one_is_flagged(run):
    pdf, m, html = run
    gate = _limits(m)
    di = gate[(gate.attribute == "grp") & (gate.metric == "disparate_impact")]
    # by hand from the table: each group's size, favourable decisions and DI against A
    size = pdf.groupby("grp")["prediction"].agg(["count", "sum"])
    rate = size["sum"] / size["count"]
    point = {g: rate[g] / rate["A"] for g in GROUPS if g != "A"}
    small = {g for g in point if size.loc[g, "count"] < 30 or size.loc[g, "sum"] < 5}
    assert small == {"T"}
    # the tiny group has the lowest point estimate; among the others M is lower than L
    assert min(point, key=point.get) == "T" and point["M"] < point["L"]
    # ranked: violated first, then by the interval's bound nearest the limit (for a
    # minimum the upper end of the printed interval: the group is at least that far below)
    ranked = di[~di.group.isin(small)].copy()
    ranked["order"] = ranked.status.map({"violated": 0, "inconclusive": 1, "passed": 2})
    worst = ranked.sort_values(["order", "upper"]).iloc[0]
    assert worst.group == "L"  # not T (too small) and not M (lower point, wider interval)
    assert di.set_index("group").loc["M", "upper"] > worst.upper
    n, fav = int(size.loc["L", "count"]), int(size.loc["L", "sum"])
    t_status = di.set_index("group").loc["T", "status"]
    n_v = int((di.status == "violated").sum())
    # the decision box: value first, then the distance, with its size and the tiny one
    box = _decision(html)
    expected = (f"worst group L (n {n:,}, {fav:,} favourable): DI {_fmt(worst)} "
                f"[{_fmt(worst, 'lower')}, {_fmt(worst, 'upper')}], "
                f"{_g(0.8 - worst.value)} below the "
                "minimum 0.8 (whole Holm-adjusted interval below); "
                f"{n_v} of {len(di)} groups violated (each against the reference); "
                f"too small to rank: T (n 12, 1 favourable, {t_status})")
    assert expected in box, box
    # the Limits section's sentence and table say the same
    text = _text(html[html.index("<h2>Limits</h2>"):])
    assert (f"grp: disparate_impact >= 0.8 checked on each of {len(di)} group(s) against "
            f"the reference; worst L (n {n:,}, {fav:,} favourable): DI {_fmt(worst)} "
            f"[{_fmt(worst, 'lower')}, {_fmt(worst, 'upper')}], violated; {n_v} of {len(di)} "
            "violated. "
            f"Too small to rank: T (n 12, 1 favourable, {t_status}).") in text
    assert "T n 12, 1 favourable; too small to rank" in text
    # the rows carry the counts the report shows, and the flag
    t = di.set_index("group").loc["T", "p"]
    assert (t["n"], t["favourable"], t["rankable"]) == (12, 1, False)
    assert worst.p["rankable"] is True and (worst.p["n"], worst.p["favourable"]) == (n, fav)
