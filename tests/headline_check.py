"""The decision box's challenger-against-baseline headline read back and checked
against the published rows (shared by tests/test_baseline.py, without a browser, and
tests/test_report_browser.py, in Chromium).

The headline reads *"Challenger against baseline on sex: less fair (statistical parity
difference −0.25 vs baseline −0.10; change in distance from parity (challenger −
baseline) +0.15, 95% Holm-adjusted interval [+0.12, +0.18])"*. The checks, from the
rows alone: the metric's two values are the audited decision's and the baseline's
rows; the signed size is the paired row's ``worse`` and equals, by hand, the distance
from parity of the challenger minus the baseline's (|M| for a difference, |ln M| for a
ratio); the size lies inside its printed interval; the word follows the interval's
sign (less fair: above 0, fairer: below 0, no difference: straddles 0).
"""

from __future__ import annotations

import json
import math
import re
from html import unescape

import pandas as pd

_RE = re.compile(
    r"Challenger against baseline(?: \((?P<baseline>[^)]+)\))? on (?P<attr>[^:]+): "
    r"(?P<word>less fair|not less fair|fairer|inconclusive|no difference beyond noise) "
    r"\((?:group (?P<group>[^:]+): )?(?P<metric>[a-z ]+?) "
    r"(?P<chal>\S+) vs baseline (?P<base>\S+); change in "
    r"distance from parity \(challenger - baseline\) (?P<size>\S+), (?:(?P<level>[\d.]+)% )?"
    r"(?P<label>Holm-adjusted|BH-adjusted|unadjusted) interval \[(?P<lo>\S+), (?P<hi>\S+)\]"
    r"(?:\)| of the limit check (?P<check>[^:]+): (?P<status>\w+)\))")


def first_screen_headlines(html: str) -> list[str]:
    """The texts of the decision box's headline items, tags removed."""
    i = html.index('id="headlines"')
    block = html[i:html.index("</ul>", i)]
    return [re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", li.split(">", 1)[1]))).strip()
            for li in block.split("<li")[1:]]


def _num(text: str) -> float:
    return float(text.replace("−", "-").replace("+", ""))


def check_headline(items: list[str], rows: pd.DataFrame, attr: str, word: str,
                   baseline: str | None = None) -> dict:
    """Check the headline on ``attr`` against ``rows`` (metrics.parquet's); returns the
    parsed numbers. ``baseline``: the baseline's name the headline must give."""
    texts = [t.replace("−", "-") for t in items
             if re.match(rf"Challenger against baseline( \([^)]+\))? on {re.escape(attr)}:", t)]
    assert len(texts) == 1, items
    m = _RE.search(texts[0])
    assert m, texts[0]
    assert m["word"] == word, texts[0]
    if baseline is not None:
        assert m["baseline"] == baseline, texts[0]
    metric = m["metric"].replace(" ", "_")
    sel = rows[(rows.audit == "group") & (rows.attribute == attr)
               & (rows.group == (m["group"] or "unprivileged")) & (rows.metric == metric)]
    own = sel[sel.model.isna()].iloc[0]
    base = sel[sel.model == "baseline"].iloc[0]
    diff = sel[sel.model == "challenger_minus_baseline"].iloc[0]
    worse = json.loads(diff.params)["worse"]
    ratio = metric == "disparate_impact" or metric.endswith("_ratio")
    dist = (lambda v: abs(math.log(v))) if ratio else abs
    assert worse == _Approx(dist(own.value) - dist(base.value))
    chal, prod, size, lo, hi = (_num(m[k]) for k in ("chal", "base", "size", "lo", "hi"))
    assert chal == _Approx(own.value, 3) and prod == _Approx(base.value, 3), texts[0]
    # the printed size is the row's signed "worse" (3 significant digits) ...
    assert size == _Approx(worse, 3), (texts[0], worse)
    # ... and lies inside its own printed interval, whose sign the word follows
    assert lo <= size <= hi, texts[0]
    if word == "less fair":
        assert 0 < lo and size > 0, texts[0]
    elif word == "fairer":
        assert hi < 0 and size < 0, texts[0]
    elif word == "no difference beyond noise":
        assert lo <= 0 <= hi, texts[0]
    else:  # judged per group: the word is the named check's verdict (against its margin)
        assert m["status"] == {"inconclusive": "inconclusive",
                               "not less fair": "passed"}[word], texts[0]
    if m["group"]:  # a violated check per group makes the word "less fair"
        assert (word == "less fair") == (m["status"] == "violated"), texts[0]
    return {"metric": metric, "size": size, "lo": lo, "hi": hi, "worse": worse,
            "check": m["check"], "status": m["status"], "label": m["label"],
            "group": m["group"]}


class _Approx:
    """Equal to ``x`` to ``digits`` significant digits (all digits: 1e-12)."""

    def __init__(self, x: float, digits: int | None = None) -> None:
        self.x, self.digits = float(x), digits

    def __eq__(self, other: object) -> bool:
        y = float(other)  # type: ignore[arg-type]
        if self.digits is None:
            return abs(y - self.x) <= 1e-12 * max(1.0, abs(self.x))
        return abs(y - self.x) <= 0.5 * 10 ** (math.floor(math.log10(abs(self.x) or 1))
                                               - self.digits + 1) + 1e-15

    def __repr__(self) -> str:
        return f"~{self.x!r}"
