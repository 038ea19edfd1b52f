"""Every number the report prints from a result row names that row and agrees with it.

A real audit (group, hfm and mdfa, small, on the bundled Adult with limits judged per
group under Holm) writes ``report.html`` and ``metrics.parquet``. Each number printed
from a row is a ``<span class="num" data-audit data-attribute data-group data-metric
data-check data-stat>``; this test walks the page with ``html.parser`` and checks, from
the Parquet file read with pandas:

- the row it names exists, once;
- the printed number is that row's value / lower / upper to the printed precision
  (as many decimals as the text shows);
- every appearance of one (row, stat) is printed identically, and a limit's value
  reads as the value of the group row it judges;
- where a limit is judged per group, no pooled number is stated as the gated one.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from html import unescape
from html.parser import HTMLParser

import pandas as pd
import pytest
import yaml
from conftest import printed_number, unmark, write_parquet

from fairspark import cli

RUN_DATE = "2026-12-01"
_KEY = ("audit", "attribute", "group", "metric", "check", "model")
_COLUMN = {"value": "value", "ci_low": "lower", "ci_high": "upper"}


class _Numbers(HTMLParser):
    """Every ``span.num``: (its data-* attributes, its text, the section it is in)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[dict[str, str], str, str]] = []
        self._open: dict[str, str] | None = None
        self._text = ""
        self._where = "top"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and a.get("id"):
            self._where = a["id"]
        if tag == "table" and "decision" in (a.get("class") or "").split():
            self._where = "decision"
        if tag == "span" and "num" in (a.get("class") or "").split():
            assert self._open is None, "a marked number inside another"
            self._open = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
            self._text = ""

    def handle_data(self, data):
        if self._open is not None:
            self._text += data

    def handle_endtag(self, tag):
        if tag == "span" and self._open is not None:
            self.found.append((self._open, self._text, self._where))
            self._open = None


def numbers(html: str) -> list[tuple[dict[str, str], str, str]]:
    p = _Numbers()
    p.feed(html)
    return p.found


def _parse(text: str) -> tuple[float, int]:
    """(number, decimals shown) of a printed number: ``−0.058``, ``+0.009``, ``1.626``."""
    t = text.replace("\u2212", "-").strip()
    if t in ("∞", "-∞"):
        return (math.inf if t == "∞" else -math.inf), 0
    assert re.fullmatch(r"[+-]?\d+(\.\d+)?", t), f"not a number as printed: {text!r}"
    return float(t), len(t.partition(".")[2])


def _row_of(m: pd.DataFrame, key: dict[str, str]) -> pd.Series:
    sel = pd.Series(True, index=m.index)
    for k in _KEY:
        col = "metric_b" if k == "check" else k
        v = key.get(k)
        sel &= m[col].isna() if v is None else m[col].astype(str) == v
    hit = m[sel]
    assert len(hit) == 1, f"{key} names {len(hit)} rows of metrics.parquet"
    return hit.iloc[0]


def walk(html: str, m: pd.DataFrame) -> tuple[list[str], dict]:
    """(every disagreement in words, (row key, stat) -> [(text, section)])."""
    problems: list[str] = []
    seen: dict[tuple, list[tuple[str, str]]] = defaultdict(list)
    for key, text, where in numbers(html):
        stat = key.get("stat")
        assert stat in _COLUMN, key
        row = _row_of(m, key)
        want = row[_COLUMN[stat]]
        got, d = _parse(text)
        if want is None or (isinstance(want, float) and math.isnan(want)):
            problems.append(f"{key} in {where}: printed {text} for a missing number")
        elif math.isinf(got) or math.isinf(want):
            if got != want:
                problems.append(f"{key} in {where}: printed {text}, the row has {want}")
        elif abs(got - float(want)) > 0.5 * 10 ** -d * (1 + 1e-9) + 1e-12:
            problems.append(f"{key} in {where}: printed {text}, the row has {want!r}")
        seen[tuple(key.get(k) for k in (*_KEY, "stat"))].append((text, where))
    for k, texts in seen.items():
        if len({t for t, _ in texts}) > 1:
            problems.append(f"{dict(zip((*_KEY, 'stat'), k, strict=True))} printed "
                            f"differently: {texts}")
    return problems, seen


@pytest.fixture(scope="module")
def run(spark, adult_pdf, tmp_path_factory):
    base = tmp_path_factory.mktemp("numbers")
    cols = ["row_id", "age", "education_num", "hours_per_week", "sex", "race", "income",
            "prediction"]
    inp = write_parquet(adult_pdf[cols], base / "in")
    cfg = {"dataset": "adult_numbers", "run_date": RUN_DATE, "seed": 3, "input": {"path": inp},
           "columns": {"features": ["age", "education_num", "hours_per_week"],
                       "sensitive": [{"column": "sex", "privileged": "Male"},
                                     {"column": "race", "privileged": "White"}],
                       "intersections": [["sex", "race"]],
                       "label": {"column": "income", "positive": ">50K"},
                       "prediction": {"column": "prediction", "positive": 1},
                       "row_key": "row_id"},
           "audits": {"group": {},
                      "hfm": {"advanced": {"sample_rows": 256}, "attributes": ["sex"]},
                      "mdfa": {"splits": 2, "sample_rows": 1500, "epochs": 2,
                               "null_draws": 4, "attributes": ["sex"]}},
           "limits": {"rules": [{"metric": "disparate_impact", "min": 0.8},
                                {"metric": "statistical_parity_difference", "abs_max": 0.1}],
                      "correction": "holm", "fail_on_violation": False},
           "output": {"path": str(base / "out")}}
    (base / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(base / "c.yaml"), "-q"], under_submit=True)
    out = base / "out" / f"run_date={RUN_DATE}"
    return code, pd.read_parquet(out / "metrics.parquet"), (out / "report.html").read_text()


def test_every_marked_number_is_its_row_and_prints_one_way(run):
    code, m, html = run
    assert code == 0
    problems, seen = walk(html, m)
    assert problems == []
    # the walk covers every audit's numbers and the decision box, and numbers repeat
    audits = {k[0] for k in seen}
    assert {"group", "limits", "hfm", "mdfa"} <= audits, audits
    assert any(w == "decision" for texts in seen.values() for _, w in texts)
    repeated = [k for k, texts in seen.items() if len(texts) >= 2]
    assert len(repeated) >= 20, len(repeated)
    # the decision box's worst group (race: Black, by the interval nearest the limit) is
    # printed with its row's value where the Limits table prints it
    lim = m[(m.audit == "limits") & (m.attribute == "race")
            & (m.metric_b == "disparate_impact >= 0.8")]
    gate = lim[lim["params"].map(lambda p: json.loads(p)["role"]) == "gate"]
    worst = gate[gate.status == "violated"].sort_values("upper").iloc[0]
    key = ("limits", "race", worst.group, "disparate_impact", "disparate_impact >= 0.8",
           None, "value")
    wheres = {w for _, w in seen[key]}
    assert "decision" in wheres and len(seen[key]) >= 3, seen[key]


def test_a_limit_prints_the_value_of_the_row_it_judges(run):
    """The limits row and the group row it judges hold one number: printed alike."""
    _, m, html = run
    _, seen = walk(html, m)
    pairs = 0
    for k, texts in seen.items():
        audit, attr, group, metric, _check, model, stat = k
        if audit != "limits" or stat != "value":
            continue
        src = seen.get(("group", attr, group, metric, None, model, "value"))
        if src:
            a, da = _parse(texts[0][0])
            b, db = _parse(src[0][0])
            d = min(da, db)
            assert round(a, d) == round(b, d), (k, texts[0], src[0])
            pairs += 1
    assert pairs >= 5


def test_the_walk_fails_on_a_perturbed_number(run):
    """The check can fail: one printed number moved in its last digit is caught."""
    _, m, html = run
    i = html.index('<span class="num" data-audit="limits"')
    j = html.index("</span>", i)
    head, text = html[i:j].rsplit(">", 1)
    last = text[-1]
    bumped = text[:-1] + ("1" if last != "1" else "2")
    problems, _ = walk(html[:i] + head + ">" + bumped + html[j:], m)
    assert any(f"printed {bumped}" in p for p in problems), problems
    assert any("printed differently" in p for p in problems), problems


def _section_text(html: str, sid: str) -> str:
    i = html.index(f'<section id="{sid}"')
    part = unmark(html[i:html.index("</section>", i)])
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", part)).split())


def test_a_pooled_number_is_never_stated_as_the_gated_one(run, adult_pdf):
    """Where a limit is judged per group (race, sex*race), the decision box prints no
    number of the pooled ``unprivileged`` row and the verdicts call that number pooled;
    on a binary attribute (sex) the unprivileged row is the gated one and is printed."""
    _, m, html = run
    _, seen = walk(html, m)
    in_box = {(k[0], k[1], k[2]) for k, texts in seen.items()
              if any(w == "decision" for _, w in texts)}
    for attr in ("race", "sex*race"):
        assert not any(a == attr and g == "unprivileged" for _, a, g in in_box), in_box
        assert any(a == attr and au == "limits" for au, a, _ in in_box)
    assert ("limits", "sex", "unprivileged") in in_box
    # the verdicts: race's pooled disparate impact, by hand from the data, is called
    # pooled over its four unprivileged values and not the number a limit judges
    text = _section_text(html, "summary")
    white = adult_pdf["race"] == "White"
    di = adult_pdf.loc[~white, "prediction"].mean() / adult_pdf.loc[white, "prediction"].mean()
    row = m[(m.audit == "group") & (m.attribute == "race") & (m.group == "unprivileged")
            & (m.metric == "disparate_impact")].iloc[0]
    assert row.value == pytest.approx(di, rel=1e-9)
    n_values = adult_pdf["race"].nunique() - 1
    assert (f"pooled over its {n_values} unprivileged values (a limit on race judges each "
            "value against the reference, not this pooled number), disparate impact "
            f"{printed_number(di, row.lower, row.upper)} is below the four-fifths threshold"
            ) in text
    sex = text[text.index("sex: "):text.index("race: ")]
    assert "disparate impact" in sex and "pooled" not in sex
    # the limits' verdicts name each violated group, never the pooled row
    lim = [s for s in text.split("LIMIT VIOLATED")[1:]]
    assert lim and not any("/ unprivileged" in s.split(").")[0] for s in lim)
