"""Walk every number of the first screens an analyst signs alone (issue 58, acceptance 1).

The champion/challenger example (``conf/champion_challenger.yaml``, as shipped: its
baseline, its group audit and its ``no_worse_than_baseline`` limit) and the README's
demo (``fairspark audit`` without ``--config``: it trains the model, writes the scored
table and runs every audit of ``fairspark/conf/demo.yaml``, with each audit's
shrink settings (``audit_settings.SHRINK``) and mdfa at 4 splits so that it has a null
reference and a p) run through the CLI. Their ``report.html`` (read with the stdlib
``html.parser``: the text a reader sees, cell by cell), ``summary.json``,
``metrics.parquet`` and the CLI's closing lines are walked, and:

- every challenger-minus-baseline number has one sign wherever it is printed and lies
  inside its printed interval: the metric's paired difference (challenger − baseline,
  recomputed here from the challenger's and the baseline's rows) and the change in
  distance from parity (|M| or |ln M| of the challenger minus the baseline's, recomputed
  here), in the rows of both audits, ``summary.json``, the paired table, the headlines,
  the box lines and the Limits table;
- every interval of a ratio (disparate impact and every ``*_ratio``) printed in a table,
  a sentence or a row lies in [0, inf);
- the counts of violated, inconclusive and passed checks are the same in the banner,
  the box, the Verdicts and Limits sections, the CLI and ``summary.json``, and are the
  counts of ``metrics.parquet``'s gating limit rows (pandas), per attribute and rule too;
- mdfa's gamma (y=+1), gamma (y=-1), gamma_max and p are each printed with one value
  (box, section, table, rows, summary), gamma_max is the larger gamma (recomputed), and
  where the null draws cannot give a rank p below the level the text says so;
- the baseline (its column and threshold, from the example's YAML) is named in the
  box's headlines, the report's model line (box and "What was audited") and
  ``summary.json``.

Each check is a function of one run's artefacts; ``test_the_walk_can_fail`` alters one
printed number per check and requires the check to fail on it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import yaml
from audit_settings import shrink_params
from conftest import ROOT

from fairspark import cli
from fairspark.group.report import metric_label
from fairspark.metrics._core import RATES
from fairspark.registry import specs

DATE = "2026-11-20"
NUM = r"[−+-]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[−+-]?\d+)?"
#: an interval as the text reads it (markup may leave a space inside the brackets)
IV = rf"\[ ?({NUM}) ?, ?({NUM}) ?\]"
DIFF, DIST = "challenger_minus_baseline", "distance_challenger_minus_baseline"


# ----------------------------------------------------------------------- HTML as text


INLINE = {"span", "b", "strong", "a", "em", "i", "code", "abbr", "small", "sup", "sub",
          "mark", "time", "var", "kbd", "s", "u"}


@dataclass
class Node:
    tag: str
    attrs: dict
    children: list = field(default_factory=list)
    parent: Node | None = None

    def text(self) -> str:
        """The text a reader sees: blocks and cells apart, inline markup joined."""
        out = []
        for c in self.children:
            if isinstance(c, str):
                out.append(c)
            elif c.tag in INLINE:
                out.append(c.text())
            else:
                out.append(" " + c.text() + " ")
        return re.sub(r"\s+", " ", "".join(out)).strip()

    def all(self, tag: str) -> list[Node]:
        found = []
        for c in self.children:
            if isinstance(c, Node):
                if c.tag == tag:
                    found.append(c)
                found += c.all(tag)
        return found

    def inside(self, tag: str) -> bool:
        p = self.parent
        while p is not None:
            if p.tag == tag:
                return True
            p = p.parent
        return False


VOID = frozenset({"br", "img", "meta", "link", "hr", "input", "col", "wbr", "source"})


class _Tree(HTMLParser):

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("root", {})

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), parent=self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_endtag(self, tag):
        p = self.cur
        while p is not None and p.tag != tag:
            p = p.parent
        if p is not None and p.parent is not None:
            self.cur = p.parent

    def handle_data(self, data):
        if self.cur.tag not in ("script", "style"):
            self.cur.children.append(data)


def parse(html: str) -> Node:
    t = _Tree()
    t.feed(html)
    return t.root


def num(text: str) -> float:
    return float(text.replace("−", "-").replace("+", "").replace(",", ""))


def close(printed: str, value: float) -> bool:
    """``printed`` is ``value`` as printed: to its printed digits (at least 3
    significant ones), sign included."""
    p = num(printed)
    digits = printed.replace("−", "").replace("+", "").replace("-", "").lstrip("0.")
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    tol = max(0.5 * 10 ** -decimals, 5e-3 * abs(value)) + 1e-12
    return abs(p - value) <= tol and (p == 0 or value == 0 or (p > 0) == (value > 0)
                                      or not digits)


# ----------------------------------------------------------------------- the runs


@dataclass
class Run:
    name: str
    html: str
    rows: pd.DataFrame
    summary: dict
    cli: list[str]
    config: dict
    #: the log's INFO messages (after "HH:MM:SS fairspark INFO "); empty for a quiet run
    info: list[str] = field(default_factory=list)

    @property
    def tree(self) -> Node:
        return parse(self.html)

    @property
    def text(self) -> str:
        return self.tree.text()


def _run(args: list[str], out: Path, config: dict, name: str, *, quiet: bool = True) -> Run:
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        code = cli.main(["audit", "--run-date", DATE, *(["-q"] if quiet else []),
                         "--output", str(out), "--no-fail-on-violation", *args],
                        under_submit=True)
    assert code == 0, buf.getvalue()[-2000:] + err.getvalue()[-2000:]
    day = out / f"run_date={DATE}"
    return Run(name=name, html=(day / "report.html").read_text("utf-8"),
               rows=pd.read_parquet(day / "metrics.parquet"),
               summary=json.loads((day / "summary.json").read_text("utf-8")),
               cli=buf.getvalue().splitlines(), config=config,
               info=re.findall(r"^\d\d:\d\d:\d\d fairspark INFO (.*)$", err.getvalue(), re.M))


@pytest.fixture(scope="module")
def champion(spark, tmp_path_factory) -> Run:
    path = ROOT / "conf" / "champion_challenger.yaml"
    return _run(["--config", str(path)], tmp_path_factory.mktemp("walk-cc"),
                yaml.safe_load(path.read_text()), "champion_challenger")


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory) -> Run:
    from importlib import resources

    raw = yaml.safe_load(resources.files("fairspark").joinpath("conf/demo.yaml").read_text())
    args = [f"--set=audits.{a}.{k}={v}" for a in specs()
            if (raw.get("audits") or {}).get(a) is not None
            for k, v in shrink_params(a).items()]
    # mdfa with enough splits for its null reference (and so a p that decides)
    args.append("--set=audits.mdfa.splits=4")
    return _run(args, tmp_path_factory.mktemp("walk-demo"), raw, "demo", quiet=False)


# ----------------------------------------------------------------------- helpers


def _params(p) -> dict:
    return json.loads(p) if isinstance(p, str) and p else {}


def _unpaired(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows.model.isna()]


def _ratio(metric: str) -> bool:
    return metric == "disparate_impact" or metric.endswith("_ratio")


def _dist(metric: str, v: float) -> float:
    if _ratio(metric):
        return math.inf if v == 0 else abs(math.log(v))
    return abs(v)


def _gating(rows: pd.DataFrame) -> pd.DataFrame:
    lim = rows[rows.audit == "limits"]
    role = lim["params"].map(lambda p: _params(p).get("role", "gate"))
    return lim[role == "gate"]


def _tables(tree: Node) -> list[tuple[list[str], list[list[str]], str]]:
    """(header texts, body rows of cell texts, caption) of every table."""
    out = []
    for t in tree.all("table"):
        head = [th.text() for th in t.all("th") if th.inside("thead")]
        body = [[c.text() for c in tr.children if isinstance(c, Node) and c.tag in ("td", "th")]
                for tr in t.all("tr") if not tr.inside("thead")]
        cap = next((c.text() for c in t.all("caption")), "")
        out.append((head, [r for r in body if r], cap))
    return out


def _intervals(text: str) -> list[tuple[str, str]]:
    return re.findall(IV, text)


# ----------------------------------------------------------------------- 1. one sign


def check_changes(run: Run) -> int:
    """Every challenger-minus-baseline number: one sign, inside its interval. Returns
    how many printed numbers were checked."""
    rows = run.rows
    own = _unpaired(rows[rows.audit == "group"]).set_index(["attribute", "group", "metric"])
    base = rows[(rows.audit == "group") & (rows.model == "baseline")].set_index(
        ["attribute", "group", "metric"])
    diff = rows[(rows.audit == "group") & (rows.model == DIFF)]
    assert len(diff) > 0
    worse: dict[tuple, float] = {}
    for r in diff.itertuples():
        key = (r.attribute, r.group, r.metric)
        p = _params(r.params)
        c, b = own.loc[key, "value"], base.loc[key, "value"]
        if pd.isna(r.value) or pd.isna(c) or pd.isna(b):
            continue
        # the paired difference is challenger minus baseline, inside its interval
        assert r.value == pytest.approx(c - b, abs=1e-9), key
        assert r.lower <= r.value <= r.upper, key
        if p.get("worse") is None:  # a rate of one group, or a ratio of 0: no distance
            assert r.metric in RATES or (_ratio(r.metric) and min(c, b) <= 0), key
            continue
        # "worse": the change in distance from parity, challenger minus baseline
        want = _dist(r.metric, c) - _dist(r.metric, b)
        p["worse"] = float(p["worse"])  # JSON keeps an infinite one as "inf" / "-inf"
        assert p["worse"] == (pytest.approx(want, abs=1e-9) if math.isfinite(want)
                              else want), key
        worse[key] = p["worse"]
        if math.isfinite(p["worse"]):
            assert p["worse_lower"] <= p["worse"] <= p["worse_upper"], key
    # the limit rows of a no-worse check carry the same "worse", same sign
    dist = rows[(rows.audit == "limits") & (rows.model == DIST)]
    assert len(dist) > 0
    for r in dist.itertuples():
        key = (r.attribute, r.group, r.metric)
        assert r.value == pytest.approx(worse[key], abs=1e-12), key
        assert r.lower <= r.value <= r.upper, key
    assert not (rows.audit != "group")[rows.model == DIFF].any()  # one name, one audit
    # summary.json: the same two quantities, same signs
    seen = 0
    for attr, metrics in run.summary["audits"]["group"]["baseline"]["attributes"].items():
        for metric, s in metrics.items():
            r = diff[(diff.attribute == attr) & (diff.group == "unprivileged")
                     & (diff.metric == metric)].iloc[0]
            if s.get("difference") is not None and not pd.isna(r.value):
                assert s["difference"] == pytest.approx(r.value, abs=1e-12), (attr, metric)
                assert s["worse"] == pytest.approx(worse[(attr, "unprivileged", metric)],
                                                   abs=1e-12), (attr, metric)
                seen += 1
    assert seen > 0
    text = run.text
    values = list(worse.values())
    # every printed change in distance from parity: a row's "worse", its sign, inside
    # its printed interval
    pat = (rf"change in distance from parity \(challenger − baseline\) ({NUM}),"
           rf"[^;\[\]]*?interval {IV}")
    printed = re.findall(pat, text)
    assert printed, "no change in distance from parity printed"
    for x, lo, hi in printed:
        assert num(lo) <= num(x) <= num(hi), (x, lo, hi)
        assert any(close(x, w) for w in values), (x, "is no row's change, or has its sign "
                                                   "flipped")
    # the paired table: the difference and the change, each with its own interval
    labels = {metric_label(m): m for m in set(diff.metric)}
    tables = [t for t in _tables(run.tree) if any("change in distance" in h for h in t[0])]
    assert tables, "no paired table"
    for _, body, cap in tables:
        attr = cap.split(":")[0].strip()
        for cells in body:
            metric = labels[cells[0]]
            r = diff[(diff.attribute == attr) & (diff.group == "unprivileged")
                     & (diff.metric == metric)].iloc[0]
            d, (lo, hi) = cells[3], _intervals(cells[4])[0]
            assert close(d, r.value) and num(lo) <= num(d) <= num(hi), (attr, cells)
            m = re.match(rf"({NUM}) {IV}: (.*)", cells[5])
            assert m, cells
            w = worse[(attr, "unprivileged", metric)]
            assert close(m[1], w) and num(m[2]) <= num(m[1]) <= num(m[3]), (attr, cells)
            word = ("further from parity" if num(m[2]) > 0 else "closer to parity"
                    if num(m[3]) < 0 else "no difference beyond noise")
            assert m[4] == word, cells
            printed.append((d, lo, hi))
    # the Limits table's no-worse rows: the limit row's "worse", inside its interval
    for head, body, _ in _tables(run.tree):
        if "interval the verdict uses" not in head:
            continue
        for cells in body:
            if "no worse than baseline" not in cells[0]:
                continue
            group = "unprivileged" if "pooled" in cells[2] else cells[2]
            r = dist[(dist.attribute == cells[1]) & (dist.group == group)].iloc[0]
            (lo, hi) = _intervals(cells[4])[0]
            assert close(cells[3], r.value), cells
            assert num(lo) <= num(cells[3]) <= num(hi), cells
            printed.append((cells[3], lo, hi))
    return len(printed)


# ----------------------------------------------------------------------- 1b. spans


def check_spans(run: Run) -> int:
    """Every number the report marks as a row's (``span.num`` with its audit,
    attribute, group, metric, model, check and stat) is that row's value or interval
    end in metrics.parquet, sign included. Returns how many were matched."""
    rows = run.rows.copy()
    rows["model"] = rows.model.fillna("")
    rows["metric_b"] = rows.metric_b.fillna("")
    index = {}
    for r in rows.itertuples():
        index.setdefault((r.audit, r.attribute, str(r.group), r.metric, r.model,
                          r.metric_b), r)
    stats = {"value": "value", "ci_low": "lower", "ci_high": "upper"}
    matched = 0
    for span in run.tree.all("span"):
        a = span.attrs
        if "num" not in a.get("class", "").split() or a.get("data-stat") not in stats:
            continue
        key = (a.get("data-audit"), a.get("data-attribute"), a.get("data-group", "None"),
               a.get("data-metric"), a.get("data-model", ""), a.get("data-check", ""))
        r = index.get(key)
        assert r is not None, key
        text = span.text()
        want = getattr(r, stats[a["data-stat"]])
        if text in ("–", "") or pd.isna(want):
            continue
        assert close(text, want), (key, a["data-stat"], text, want)
        matched += 1
    return matched


# ----------------------------------------------------------------------- 2. ratios


def check_ratio_intervals(run: Run) -> int:
    """Every interval of a ratio, in the rows and as printed, is inside [0, inf)."""
    rows = run.rows
    kinds = rows[rows.metric.map(_ratio) & (rows.model.isna() | (rows.model == "baseline"))]
    kinds = kinds[kinds.lower.notna()]
    assert len(kinds) > 0
    assert (kinds.lower >= 0).all(), kinds[kinds.lower < 0][["audit", "attribute", "group",
                                                            "metric", "lower"]]
    for p in kinds.params:  # a limit row keeps the audit's own interval too
        own = _params(p).get("own_interval")
        if own and own[0] is not None:
            assert own[0] >= 0, own
    seen = 0
    ratio_words = re.compile(r"disparate.impact|\bDI\b|_ratio\b| ratio\b", re.I)
    change_words = re.compile(r"change|challenger|baseline|difference|since|no worse", re.I)
    for head, body, _ in _tables(run.tree):
        if any("change in distance" in h for h in head):
            continue  # the paired table: differences of ratios may be negative
        # a table of a metric's values with their intervals (not, e.g., correlations
        # between metrics, which may be negative)
        values = any(re.search(r"\bCI\b|interval", h) for h in head)
        for cells in body:
            row_ratio = values and bool(ratio_words.search(cells[0])) and not \
                change_words.search(cells[0])
            for i, cell in enumerate(cells):
                h = head[i] if i < len(head) else ""
                if change_words.search(h):
                    continue
                if row_ratio or (ratio_words.search(h) and not change_words.search(h)):
                    for lo, hi in _intervals(cell):
                        assert num(lo) >= 0 and num(hi) >= num(lo), (head, cells)
                        seen += 1
    # every marked interval end of a ratio (not a paired or no-worse quantity)
    for span in run.tree.all("span"):
        a = span.attrs
        if (_ratio(a.get("data-metric") or "") and not a.get("data-model")
                and a.get("data-stat") in ("ci_low", "ci_high") and span.text() != "–"):
            assert num(span.text()) >= 0, a
            seen += 1
    # sentences: "DI 0.396 [0.308, 0.497]", "disparate impact 0.74 (... [a, b])"
    for m in re.finditer(rf"(disparate impact|\bDI\b|\b\w+ ratio\b)([^;\[\]]{{0,80}}?)"
                         rf"{IV}", run.text):
        if change_words.search(m[2]):
            continue
        assert num(m[3]) >= 0, m[0]
        seen += 1
    return seen


# ----------------------------------------------------------------------- 3. one count


def check_counts(run: Run) -> dict:
    """The counts of violated / inconclusive / passed checks, the same everywhere."""
    gate = _gating(run.rows)
    st = gate.status.value_counts()
    want = {"checks": len(gate), "violated": int(st.get("violated", 0)),
            "inconclusive": int(st.get("inconclusive", 0)), "passed": int(st.get("passed", 0))}
    assert want["checks"] == want["violated"] + want["inconclusive"] + want["passed"]
    text = run.text
    assert {k: run.summary["limits"][k] for k in want} == want
    # the banner
    if want["violated"]:
        assert f"{want['violated']} of {want['checks']} fairness limit(s) violated" in text
    else:
        assert (f"no configured limit is violated ({want['passed']} passed, "
                f"{want['inconclusive']} inconclusive)") in text
    # the box's counts
    (box,) = [p for p in run.tree.all("p") if "counts" in p.attrs.get("class", "")]
    chips = dict((k, int(v)) for v, k in re.findall(r"(\d+) (violated|inconclusive|passed)\b",
                                                   box.text()))
    assert box.text().startswith(f"{want['checks']} limit check(s):"), box.text()
    assert chips == {k: v for k, v in want.items() if k != "checks" and v}, box.text()
    # the Verdicts and Limits sections' sentence (printed in both)
    sentence = (f"{want['checks']} limit check(s): {want['violated']} violated, "
                f"{want['passed']} passed, {want['inconclusive']} inconclusive")
    assert sentence in text
    # per attribute and rule, "V of K violated" where a limit is judged per group
    per = 0
    for li in run.tree.all("li"):
        m = re.match(r"(\S+): (.+?) checked on each of (\d+) group\(s\) against the "
                     r"reference;.*; (\d+) of (\d+) violated", li.text())
        if not m:
            continue
        mine = gate[(gate.attribute == m[1]) & (gate.metric_b == m[2])
                    & (gate.group != "unprivileged")]
        assert int(m[3]) == int(m[5]) == len(mine), m[0]
        assert int(m[4]) == int((mine.status == "violated").sum()), m[0]
        per += 1
    # the CLI's closing lines
    assert (f"limits: {want['violated']} of {want['checks']} checks violated, "
            f"{want['inconclusive']} inconclusive, {want['passed']} passed") in run.cli[0], \
        run.cli[:2]
    return {**want, "per_attribute": per}


# ----------------------------------------------------------------------- 4. mdfa


def check_mdfa(run: Run) -> int:
    """gamma (y=+1), gamma (y=-1), gamma_max and p: one value each, wherever printed."""
    rows = run.rows[run.rows.audit == "mdfa"]
    info = run.summary["audits"]["mdfa"]["attributes"]
    tree = run.tree
    seen = 0
    for attr in run.config["audits"]["mdfa"]["attributes"]:
        mine = rows[rows.attribute == attr].set_index("metric")
        g_pos, g_neg = mine.loc["gamma", "value"], mine.loc["gamma_unfavourable", "value"]
        g_max = mine.loc["gamma_max"]
        # gamma_max is the maximum it is named for, with its interval never below either
        assert g_max.value == pytest.approx(max(g_pos, g_neg), abs=1e-12)
        assert g_max.lower >= min(mine.loc["gamma", "lower"],
                                  mine.loc["gamma_unfavourable", "lower"]) - 1e-12
        corr = info[attr]["corrected"]
        assert corr["gamma_pos"]["value"] == pytest.approx(g_pos, abs=1e-12)
        assert corr["gamma_neg"]["value"] == pytest.approx(g_neg, abs=1e-12)
        null = info[attr]["null"]
        p = null["p_value"]
        # every place that speaks of this attribute's mdfa: box rows, the section's
        # table row and its verdict sentence
        texts = []
        for tr in tree.all("tr"):
            cells = [c.text() for c in tr.children if isinstance(c, Node)]
            if attr in cells and any("gamma" in c or "multi-differential" in c
                                     for c in cells):
                texts.append(" | ".join(cells))
        for li in [*tree.all("li"), *tree.all("p")]:
            t = li.text()
            if re.match(rf"^[▲✔?✖]? ?{re.escape(attr)}: gamma", t):
                texts.append(t)
        assert len(texts) >= 3, (attr, texts)  # the box, the table row, the sentence
        joined = " || ".join(texts)
        maxes = re.findall(rf"gamma_max ({NUM})", joined)
        # the table: gamma (y=+1) | gamma (y=-1) | gamma_max [interval]
        table = [t for t in texts if t.startswith(f"{attr} | unprivileged")]
        assert len(table) == 1, texts
        cells = table[0].split(" | ")
        assert close(cells[2], g_pos) and close(cells[3], g_neg), cells
        m = re.match(rf"({NUM}) {IV}", cells[4])
        maxes.append(m[1])
        assert close(m[2], g_max.lower) and close(m[3], g_max.upper), cells
        assert len(maxes) >= 3, (attr, maxes)
        assert all(close(x, g_max.value) for x in maxes), (attr, maxes, g_max.value)
        assert len({num(x) for x in maxes}) == 1, (attr, maxes)  # one number, one precision
        # p: the one that decides, the same wherever printed, never the rank p beside it
        ps = re.findall(rf"\bp = ({NUM})", joined)
        assert len(ps) >= 2, (attr, texts)
        assert all(close(x, p) for x in ps), (attr, ps, p)
        if null["rank_p"] != pytest.approx(p, rel=0.05):
            assert not any(close(x, null["rank_p"]) for x in ps), (attr, ps)
        draws = null["draws"]
        if 1 / (draws + 1) > null["level"]:  # the draws cannot give a smaller rank p
            assert re.search(rf"a rank test over {draws} draws cannot give p below "
                             rf"{1 / (draws + 1):g}", joined), (attr, texts)
        seen += len(maxes) + len(ps) + 2
    return seen


# ----------------------------------------------------------------------- 5. baseline


def check_baseline_named(run: Run) -> str:
    """The baseline by its column and threshold: box, model lines, summary.json."""
    b = run.config["columns"]["baseline"]
    named = f"{b['column']} >= {b['threshold']:g}"
    assert run.summary["audits"]["group"]["baseline"]["decision"] == named
    assert run.summary["audits"]["group"]["baseline"]["column"] == b["column"]
    tree = run.tree
    (box,) = [d for d in tree.all("section") + tree.all("div")
              if d.attrs.get("id") == "decision"]
    heads = [li.text() for li in box.all("li")
             if li.text().startswith("Challenger against baseline")]
    attrs = [s["column"] for s in run.config["columns"]["sensitive"]]
    assert len(heads) == len(attrs), heads
    assert all(h.startswith(f"Challenger against baseline ({named}) on ") for h in heads)
    # the model line, in the box's short form and in "What was audited"
    models = [dd.text() for dt in tree.all("dt") if dt.text() == "Model"
              for dd in [_next(dt)] if dd is not None]
    models += [tr.text() for tr in tree.all("tr") if tr.text().startswith("Model")]
    assert len(models) >= 2, models
    assert all(f"baseline {named}" in m for m in models), models
    return named


def _next(node: Node) -> Node | None:
    sib = node.parent.children
    i = sib.index(node)
    return next((c for c in sib[i + 1:] if isinstance(c, Node)), None)


# ----------------------------------------------------------------------- the tests


def test_champion_challenger_numbers_walk(champion):
    assert check_spans(champion) > 100
    assert check_changes(champion) >= 20
    assert check_ratio_intervals(champion) > 10
    counts = check_counts(champion)
    assert counts["checks"] == 6 and counts["per_attribute"] >= 1
    check_baseline_named(champion)
    # the race limit is judged per group: its headline follows the groups' checks
    gate = _gating(champion.rows)
    race = gate[gate.attribute == "race"]
    (head,) = [t for t in re.findall(r"Challenger against baseline \([^)]*\) on race: [^.]*",
                                     champion.text)]
    word = ("less fair" if (race.status == "violated").any() else "inconclusive"
            if (race.status == "inconclusive").any() else None)
    if word is not None:
        assert f"on race: {word} (group " in head, head


def test_demo_numbers_walk(demo):
    assert not (demo.rows.model == DIFF).any()  # no baseline in the demo
    assert check_spans(demo) > 500
    assert check_ratio_intervals(demo) > 10
    counts = check_counts(demo)
    assert counts["violated"] > 0 and counts["per_attribute"] >= 2
    assert check_mdfa(demo) >= 10


def _edit(run: Run, old: str, new: str, count: int = 1) -> Run:
    assert old in run.html, old
    return replace(run, html=run.html.replace(old, new, count))


def test_the_walk_can_fail(champion, demo):
    """One altered number per check: the check fails on it."""
    text = champion.text
    # a change printed with its sign flipped
    x = re.search(rf"change in distance from parity \(challenger − baseline\) ({NUM}),",
                  text)[1]
    flipped = ("+" + x[1:]) if x.startswith("−") else ("−" + x.lstrip("+"))
    with pytest.raises(AssertionError):
        check_changes(_edit(champion, f"(challenger − baseline) {x},",
                            f"(challenger − baseline) {flipped},"))
    # a ratio interval below 0 (the first DI interval of the Limits sentence / tables)
    m = re.search(r'data-metric="disparate_impact"[^>]*data-stat="ci_low">([\d.]+)<',
                  demo.html)
    with pytest.raises(AssertionError):
        check_ratio_intervals(_edit(demo, m[0], m[0].replace(f">{m[1]}<", ">−0.012<")))
    bad = demo.rows.copy()
    first = bad.index[(bad.metric == "disparate_impact") & bad.lower.notna()][0]
    bad.loc[first, "lower"] = -0.012
    with pytest.raises(AssertionError):
        check_ratio_intervals(replace(demo, rows=bad))
    # a marked number that is not its row's
    m = re.search(r'data-stat="value">([\d.]+)<', champion.html)
    with pytest.raises(AssertionError):
        check_spans(_edit(champion, m[0], m[0].replace(f">{m[1]}<", ">9.99<")))
    # a count that moves
    gate = _gating(demo.rows)
    v = int((gate.status == "violated").sum())
    with pytest.raises(AssertionError):
        check_counts(_edit(demo, f"{v} of {len(gate)} fairness limit(s) violated",
                           f"{v - 1} of {len(gate)} fairness limit(s) violated"))
    # gamma_max printed as another number
    g = re.search(rf"gamma_max ({NUM})", demo.html)
    with pytest.raises(AssertionError):
        check_mdfa(_edit(demo, g[0], "gamma_max 0.0335"))
    # a baseline not named on the model line
    with pytest.raises(AssertionError):
        check_baseline_named(_edit(champion, "compared with the baseline decile_score11",
                                   "compared with the baseline (see Baseline)", count=-1))


def test_the_demo_logs_only_info_lines_a_user_acts_on(demo):
    """The demo's log at INFO: every line is one of the kinds a user reads
    (``tests/test_info_lines.py``'s list, which fails on a new kind), and the stages,
    the rows prepared and the outputs' place are there."""
    from test_info_lines import KINDS

    assert demo.info, "the demo logged nothing at INFO"
    unknown = [m for m in demo.info if not any(re.fullmatch(p, m) for p in KINDS.values())]
    assert not unknown, "INFO lines of no known kind:\n" + "\n".join(unknown)
    seen = {k for k, p in KINDS.items() if any(re.fullmatch(p, m) for m in demo.info)}
    assert {"stage", "prepared", "published"} <= seen, seen
