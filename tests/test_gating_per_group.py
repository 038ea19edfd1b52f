"""Per-group limits with sample weights, under Holm and Benjamini-Hochberg, against
references computed here; and a second night whose data really move.

The values come from fairlearn's ``MetricFrame`` (by group, the weights passed as
``sample_params``); the intervals by hand (Wilson on Kish's effective size, Newcombe's
MOVER-D for a difference, MOVER-R for a ratio: docs/intervals.md); the one-sided
p-values from those intervals (the gating module's docstring); the Holm and BH
decisions by their step-down and step-up definitions, written out below and not through
adjusted p-values as the code computes them.
"""

from __future__ import annotations

import json
import re
from html import unescape
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_parquet
from scipy.stats import norm

from fairspark import cli

ALPHA = 0.05
Z = norm.ppf(0.975)
REF = "White"
#: (metric, fairlearn rate, kind, rule)
RULES = [
    ("statistical_parity_difference", "selection_rate", "difference",
     {"abs_max": 0.1}),
    ("tpr_difference", "true_positive_rate", "difference", {"abs_max": 0.1}),
    ("fpr_difference", "false_positive_rate", "difference", {"abs_max": 0.1}),
    ("disparate_impact", "selection_rate", "ratio", {"min": 0.8}),
]
#: per race value: rows, P(decision 1 | label 1), P(decision 1 | label 0)
GROUPS = {"White": (3000, 0.70, 0.20), "Black": (2000, 0.46, 0.08),
          "Asian": (900, 0.76, 0.24), "Other": (600, 0.60, 0.16),
          "Pacific": (400, 0.66, 0.30)}


def _table(seed: int = 41) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for g, (n, tpr, fpr) in GROUPS.items():
        y = (rng.random(n) < 0.4).astype(int)
        p = (rng.random(n) < np.where(y == 1, tpr, fpr)).astype(int)
        # sampling weights that lean on the decision: the weighted rates differ from the
        # unweighted ones, so a run that ignored them would not match
        w = rng.uniform(0.5, 1.5, n) * np.where(p == 1, 1.6, 1.0)
        parts.append(pd.DataFrame({"race": g, "y": y, "p": p, "w": w}))
    pdf = pd.concat(parts, ignore_index=True)
    pdf["id"] = np.arange(len(pdf)).astype(str)
    pdf["x"] = rng.normal(size=len(pdf))
    return pdf


def _config(base, inp, correction: str) -> str:
    cfg = {"dataset": "weighted_groups", "input": {"path": inp},
           "columns": {"features": ["x"],
                       "sensitive": [{"column": "race", "privileged": REF}],
                       "label": {"column": "y"}, "prediction": {"column": "p"},
                       "weight": "w", "row_key": "id"},
           "audits": {"group": {}},
           "limits": {"rules": [{"metric": m, **r} for m, _, _, r in RULES],
                      "correction": correction, "alpha": ALPHA},
           "output": {"path": str(base / "out")}}
    p = base / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return str(p)


def _main(cfg, date, *extra):
    return cli.main(["audit", "--config", cfg, "--run-date", date, "-q", *extra],
                    under_submit=True)


@pytest.fixture(scope="module")
def table():
    return _table()


@pytest.fixture(scope="module", params=["holm", "bh"])
def run(request, spark, table, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"pergroup_{request.param}")
    inp = write_parquet(table, base / "in")
    cfg = _config(base, inp, request.param)
    code = _main(cfg, "2026-12-01", "--no-fail-on-violation")
    m = pd.read_parquet(base / "out" / "run_date=2026-12-01" / "metrics.parquet")
    return request.param, code, m


# ----------------------------------------------------------------- references


def _fairlearn_rates(pdf: pd.DataFrame) -> pd.DataFrame:
    """Weighted selection rate, TPR and FPR of every race value, with fairlearn."""
    from fairlearn.metrics import (
        MetricFrame,
        false_positive_rate,
        selection_rate,
        true_positive_rate,
    )

    metrics = {"selection_rate": selection_rate, "true_positive_rate": true_positive_rate,
               "false_positive_rate": false_positive_rate}
    mf = MetricFrame(metrics=metrics, y_true=pdf["y"], y_pred=pdf["p"],
                     sensitive_features=pdf["race"],
                     sample_params={k: {"sample_weight": pdf["w"].to_numpy()}
                                    for k in metrics})
    return mf.by_group


def _wilson(w: np.ndarray, hit: np.ndarray) -> tuple[float, float, float]:
    """(rate, lower, upper): Wilson at Kish's effective size of the weights ``w``."""
    p = float(np.sum(w * hit) / np.sum(w))
    n = float(np.sum(w) ** 2 / np.sum(w ** 2))
    c = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    h = Z / (1 + Z * Z / n) * np.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return p, c - h, c + h


def _rows_of(pdf: pd.DataFrame, rate: str) -> tuple[pd.Series, pd.Series]:
    """The denominator rows of a rate and whether each is in the numerator."""
    if rate == "selection_rate":
        return pd.Series(True, index=pdf.index), pdf["p"] == 1
    den = pdf["y"] == (1 if rate == "true_positive_rate" else 0)
    return den, pdf["p"] == 1


def _interval(pdf: pd.DataFrame, group: str, rate: str, kind: str) -> tuple[float, float]:
    """The comparison's interval of ``group`` against the reference, by hand."""
    den, hit = _rows_of(pdf, rate)
    ends = []
    for g in (group, REF):
        keep = den & (pdf["race"] == g)
        ends.append(_wilson(pdf.loc[keep, "w"].to_numpy(), hit[keep].to_numpy(float)))
    (p1, l1, u1), (p2, l2, u2) = ends
    if kind == "difference":  # Newcombe's MOVER-D
        d = p1 - p2
        return d - np.hypot(p1 - l1, u2 - p2), d + np.hypot(u1 - p1, p2 - l2)
    # MOVER-R (Donner & Zou)
    lo = l1 * (2 * p1 - l1) / (p1 * p2 + np.sqrt((p1 * p2) ** 2
                                                 - l1 * (2 * p1 - l1) * u2 * (2 * p2 - u2)))
    hi = (p1 * p2 + np.sqrt((p1 * p2) ** 2 - u1 * (2 * p1 - u1) * l2 * (2 * p2 - l2))) / (
        l2 * (2 * p2 - l2))
    return lo, hi


def _p_values(v: float, lo: float, hi: float, rule: dict, kind: str = "difference"
              ) -> tuple[float, float]:
    """(p of "violated", p of "passed"), one-sided from the interval's facing side; a
    ratio on the log scale (its interval is symmetric there)."""
    if kind == "ratio":
        v, lo, hi = np.log(v), np.log(lo), np.log(hi)
        rule = {k: float(np.log(x)) for k, x in rule.items()}

    def side(limit: float, is_max: bool) -> tuple[float, float]:
        excess = (v - limit) if is_max else (limit - v)
        facing = (v - lo if is_max else hi - v) if excess > 0 else (hi - v if is_max
                                                                   else v - lo)
        t = excess / (facing / Z)
        return norm.sf(t), norm.cdf(t)

    if "abs_max" in rule:
        (a1, b1), (a2, b2) = side(rule["abs_max"], True), side(-rule["abs_max"], False)
        return min(2 * min(a1, a2), 1.0), max(b1, b2)  # Bonferroni / intersection-union
    return side(rule["min"], False)


def _rejected(p: list[float], method: str) -> list[bool]:
    """Holm's step-down or BH's step-up rejections at ALPHA, from their definitions."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [False] * m
    if method == "holm":
        for k, i in enumerate(order):  # k = 0 .. m-1: compare with alpha / (m - k)
            if p[i] > ALPHA / (m - k):
                break
            out[i] = True
        return out
    big_k = max((k + 1 for k, i in enumerate(order) if p[i] <= (k + 1) * ALPHA / m),
                default=0)
    for i in order[:big_k]:
        out[i] = True
    return out


def _expected(pdf: pd.DataFrame, method: str) -> pd.DataFrame:
    """Every per-group check: value, own interval and verdict, computed here."""
    rates = _fairlearn_rates(pdf)
    rows = []
    for metric, rate, kind, rule in RULES:
        for g in GROUPS:
            if g == REF:
                continue
            a, b = rates.loc[g, rate], rates.loc[REF, rate]
            v = a - b if kind == "difference" else a / b
            lo, hi = _interval(pdf, g, rate, kind)
            pv, pp = _p_values(v, lo, hi, rule, kind)
            rows.append({"metric": metric, "group": g, "value": v, "lower": lo, "upper": hi,
                         "pv": pv, "pp": pp})
    exp = pd.DataFrame(rows)
    exp["rej_v"] = _rejected(list(exp["pv"]), method)
    exp["rej_p"] = _rejected(list(exp["pp"]), method)
    exp["verdict"] = np.where(exp["rej_v"], "violated",
                              np.where(exp["rej_p"], "passed", "inconclusive"))
    return exp


# ----------------------------------------------------------------------- tests


def _gate_rows(m: pd.DataFrame) -> pd.DataFrame:
    lim = m[m.audit == "limits"].copy()
    lim["role"] = lim["params"].map(lambda p: json.loads(p)["role"])
    return lim[lim.role == "gate"]


def test_weighted_values_differ_from_unweighted(table):
    """Guard: the weights move every rate, so a run that ignored them would fail."""
    from fairlearn.metrics import MetricFrame, selection_rate

    plain = MetricFrame(metrics=selection_rate, y_true=table["y"], y_pred=table["p"],
                        sensitive_features=table["race"]).by_group
    weighted = _fairlearn_rates(table)["selection_rate"]
    assert (abs(plain - weighted) > 0.02).all()


def test_per_group_values_intervals_and_verdicts(run, table):
    method, code, m = run
    gate = _gate_rows(m)
    exp = _expected(table, method)
    got = gate.set_index(["metric", "group"])
    assert set(got.index) == set(zip(exp.metric, exp.group, strict=True))
    label = {"holm": "Holm-adjusted", "bh": "BH-adjusted"}[method]
    n = len(exp)
    for e in exp.itertuples():
        r = got.loc[(e.metric, e.group)]
        where = f"{e.metric} {e.group} ({method})"
        assert r.value == pytest.approx(e.value, rel=1e-9), where
        params = json.loads(r.params)
        assert params["own_interval"] == pytest.approx([e.lower, e.upper], rel=1e-9), where
        assert params["interval"] == label
        assert f"{method} over {n} checks" in r.detail
        assert r.status == e.verdict, where
        # the printed interval is the one the verdict uses: wholly beyond the limit,
        # wholly within, or across it
        rule = dict(RULES[[x[0] for x in RULES].index(e.metric)][3])
        lo_lim, hi_lim = ((-rule["abs_max"], rule["abs_max"]) if "abs_max" in rule
                          else (rule["min"], np.inf))
        within = lo_lim <= r.lower and r.upper <= hi_lim
        beyond = r.lower > hi_lim or r.upper < lo_lim
        assert (e.verdict == "passed") == within, where
        assert (e.verdict == "violated") == beyond, where
    # every verdict occurs, and some check is decided differently by Holm and by BH
    # (the branch where the two corrections disagree is taken)
    assert set(exp.verdict) == {"violated", "passed", "inconclusive"}
    holm, bh = _expected(table, "holm"), _expected(table, "bh")
    assert (holm.verdict != bh.verdict).any()
    assert code == 0  # --no-fail-on-violation


# ------------------------------------------- a second night whose data really move


def _flip(pdf: pd.DataFrame, *, group: str, frm: int, share: float, seed: int) -> pd.DataFrame:
    """A copy where ``share`` of ``group``'s decisions equal to ``frm`` are flipped."""
    rng = np.random.default_rng(seed)
    out = pdf.copy()
    hit = (out["race"] == group) & (out["p"] == frm) & (rng.random(len(out)) < share)
    out.loc[hit, "p"] = 1 - frm
    return out


def _word(metric: str, a, b) -> str:
    """worse / better / within noise between two limits rows, by hand: beyond noise when
    the move exceeds the interval of the difference of two independent estimates (ratios
    on the log scale); worse = further from the fair value."""
    f = np.log if metric == "disparate_impact" else (lambda x: x)
    h = np.hypot((f(a.upper) - f(a.lower)) / 2, (f(b.upper) - f(b.lower)) / 2)
    if abs(f(b.value) - f(a.value)) <= h:
        return "within noise"
    return "worse" if abs(f(b.value)) > abs(f(a.value)) else "better"


def _since_cell(html: str, check: str) -> str:
    i = html.index('id="decision"')
    box = html[i:html.index("</section>", i)]
    (line,) = [tr for tr in box.split("<tr")[2:] if check in unescape(tr)]
    cells = [unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in line.split("<td")[1:]]
    assert "worst group Black" in cells[3], cells
    return cells[4].split(">", 1)[-1].strip()


def _trend_flag(html: str, metric: str) -> str:
    i = html.index("Every headline series")
    table = html[i:html.index("</table>", i)]
    (row,) = re.findall(rf"<tr class='\w*'><td>group · race · {metric} · worst group Black"
                        r"</td>.*?</tr>", table)
    return re.search(r"<td>(?:<b>([^<]+)</b>|–)</td><td class='small'>", row).group(1)


def test_a_night_whose_data_move_is_called_worse_then_better(spark, table, tmp_path):
    """Night 2 takes favourable decisions from Black rows (less fair), night 3 gives some
    back (fairer): the decision box and the trends say worse, then better, the words
    computed here from the two nights' limits rows; the values are fairlearn's."""
    nights = {"2026-12-01": table}
    nights["2026-12-02"] = _flip(table, group="Black", frm=1, share=0.3, seed=7)
    nights["2026-12-03"] = _flip(nights["2026-12-02"], group="Black", frm=0, share=0.1,
                                 seed=8)
    cfg = None
    for d, pdf in nights.items():
        inp = write_parquet(pdf, tmp_path / "in")  # the nightly table, rewritten in place
        cfg = cfg or _config(tmp_path, inp, "holm")
        assert _main(cfg, d, "--no-fail-on-violation") == 0
    out = tmp_path / "out"
    rows = {}
    for d, pdf in nights.items():
        m = pd.read_parquet(out / f"run_date={d}" / "metrics.parquet")
        g = _gate_rows(m).set_index(["metric", "group"])
        rows[d] = g
        rates = _fairlearn_rates(pdf)["selection_rate"]
        assert g.loc[("statistical_parity_difference", "Black")].value == pytest.approx(
            rates["Black"] - rates[REF], rel=1e-9)
        assert g.loc[("disparate_impact", "Black")].value == pytest.approx(
            rates["Black"] / rates[REF], rel=1e-9)
    checks = {"statistical_parity_difference": "|statistical parity difference| ≤ 0.1",
              "disparate_impact": "disparate impact ≥ 0.8"}
    dates = list(nights)
    for (before, now), expected in zip(pairwise(dates), ("worse", "better"),
                                       strict=True):
        html = (out / f"run_date={now}" / "report.html").read_text()
        for metric, check in checks.items():
            a, b = rows[before].loc[(metric, "Black")], rows[now].loc[(metric, "Black")]
            assert a.status == b.status == "violated", (metric, now)  # a problem still there
            word = _word(metric, a, b)
            # guard: the data moved enough that the better/worse branch is the one taken
            assert word == expected, (metric, now, a.value, b.value)
            assert _since_cell(html, check) == word, (metric, now)
            assert _trend_flag(html, metric) == word, (metric, now)
