"""report.html in a real browser: headless Chromium through chromedriver (Selenium).

Checks that the page logs no console errors, that every image has loaded, that the
decision box and the sentence saying whether the run gates are on the first screen of
a 1400x900 laptop, that the first screen at 1400x900 and 390x844 shows the gate, the
worst group with its number and interval and (with a baseline) the comparison's word
and size, that the page never scrolls sideways at 1400 px or on a 390 px phone, and
that the heading outline has no jumps. The screenshots are test artefacts:
written under pytest's tmp dir and copied to ``out/test-artifacts/``.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, write_parquet
from headline_check import check_headline, first_screen_headlines

from fairspark import cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def report_path(spark, tmp_path_factory) -> Path:
    rng = np.random.default_rng(21)
    n = 2000
    sex = rng.choice(["M", "F"], n)
    pdf = pd.DataFrame({
        "id": np.arange(n).astype(str), "x": rng.normal(size=n),
        "c": rng.choice(["u", "v", "w"], n), "sex": sex,
        "race": rng.choice(["w", "b", "a"], n, p=[0.6, 0.3, 0.1]),
        "y": rng.integers(0, 2, n),
        "p": (rng.random(n) < np.where(sex == "M", 0.55, 0.4)).astype(int),
    })
    base = tmp_path_factory.mktemp("browser")
    inp = write_parquet(pdf, base / "in")
    cfg = {
        "dataset": "browser_check", "input": {"path": inp},
        "columns": {"features": ["x", "c"],
                    "sensitive": [{"column": "sex", "privileged": "M"},
                                  {"column": "race", "privileged": "w"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"}, "row_key": "id"},
        "limits": {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1}]},
        "audits": {"group": {}, "hfm": {}},
        "output": {"path": str(base / "out")},
    }
    (base / "c.yaml").write_text(yaml.safe_dump(cfg))
    # three nights, the third with a --where that drops a slice of rows and half of the
    # favourable decisions of sex F taken away (its data really move): the last report
    # has trends, a change beyond noise since the second and the data-window change
    moved = pdf.copy()
    moved.loc[(moved.sex == "F") & (moved.p == 1) & (rng.random(n) < 0.5), "p"] = 0
    for date, extra in (("2026-11-28", []), ("2026-11-29", []),
                        ("2026-11-30", ["--where", "x > -1"])):
        if date == "2026-11-30":
            write_parquet(moved, base / "in")  # the nightly table, rewritten in place
        code = cli.main(["audit", "--config", str(base / "c.yaml"), "--run-date", date,
                         "-q", "--no-fail-on-violation", *extra], under_submit=True)
        assert code == 0
    return base / "out" / "run_date=2026-11-30" / "report.html"


needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Debian chromium + chromium-driver missing (scripts/test.sh installs them)")


@pytest.fixture(scope="module")
def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--hide-scrollbars",
                 "--disable-component-update", "--disable-sync", "--window-size=1400,900",
                 "--disable-dev-shm-usage"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    try:
        yield drv
    finally:
        drv.quit()


def _open(driver, path: Path, width: int, height: int) -> None:
    """Load ``path`` in a ``width`` x ``height`` viewport (a phone below 500 px)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500})
    driver.get(path.as_uri())
    # chromedriver may hand back control at DOMContentLoaded on a busy machine: wait for
    # the load event (every image decoded) before measuring anything
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.readyState") == "complete")
    assert driver.execute_script("return window.innerWidth") == width


def _keep(driver, tmp_path: Path, name: str) -> Path:
    """Save a screenshot under the test's tmp dir and copy it to out/test-artifacts/."""
    shot = tmp_path / name
    assert driver.save_screenshot(str(shot))
    keep = ROOT / "out" / "test-artifacts"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / name)
    return shot


@needs_chromium
def test_report_renders_in_headless_chromium(driver, report_path, tmp_path):
    _open(driver, report_path, 1400, 900)
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, errors
    images = driver.execute_script(
        "return Array.from(document.images).map(i => "
        "[i.complete && i.naturalWidth > 0, i.alt, i.src.slice(0, 22)])")
    assert images, "the report has no plots"
    assert all(ok for ok, _, _ in images), images
    assert all(src.startswith("data:image/") for _, _, src in images)
    # alt texts say what the figure shows, not just "chart"
    assert all(len(alt.split()) >= 4 for _, alt, _ in images), [a for _, a, _ in images]
    # figure text at 100% zoom: the smallest font (MIN_FONT_PT at the PNG's 110 dpi),
    # scaled as the page shows the image, is at least 9 pt = 12 CSS px
    from fairspark.audits.figures import MIN_FONT_PT

    scales = driver.execute_script(
        "return Array.from(document.images).map(i => "
        "[i.alt, i.getBoundingClientRect().width / i.naturalWidth]);")
    small = [(alt, s) for alt, s in scales if MIN_FONT_PT * 110 / 72 * s < 12]
    assert not small, small
    _keep(driver, tmp_path, "report-1400x900-first-screen.png")


@needs_chromium
def test_decision_box_and_gate_sentence_are_on_the_first_screen(driver, report_path):
    _open(driver, report_path, 1400, 900)
    box = driver.execute_script(
        "const b = document.getElementById('decision'), g = document.getElementById('gate');"
        "if (!b || !g) return null;"
        "const r = b.getBoundingClientRect(), q = g.getBoundingClientRect();"
        "const first = b.querySelector('table.decision tbody tr');"
        "return {top: r.top, gate_bottom: q.bottom, gate_text: g.textContent,"
        "        first_line_bottom: first ? first.getBoundingClientRect().bottom : null};")
    assert box is not None, "no decision box"
    assert 0 <= box["top"] < 900
    assert box["gate_bottom"] <= 900, box
    # the run violates its limit with --no-fail-on-violation: it must say it does not gate
    assert "does not gate (exit code 0)" in box["gate_text"]
    assert "violated" in box["gate_text"]
    assert box["first_line_bottom"] is not None and box["first_line_bottom"] <= 900, box


@needs_chromium
@pytest.mark.parametrize(("width", "height"), [(1400, 900), (390, 844)])
def test_the_page_never_scrolls_sideways(driver, report_path, tmp_path, width, height):
    _open(driver, report_path, width, height)
    sizes = driver.execute_script(
        "const d = document.documentElement;"
        "return [d.scrollWidth, d.clientWidth, document.body.scrollWidth];")
    assert sizes[0] <= width and sizes[2] <= width, sizes
    _keep(driver, tmp_path, f"report-{width}x{height}-top.png")
    if width < 500:  # the phone's view of the group section too
        driver.execute_script(
            "const s = document.querySelector('[id^=\"group-\"]'); s && s.scrollIntoView();")
        _keep(driver, tmp_path, f"report-{width}x{height}-group.png")


@needs_chromium
@pytest.mark.parametrize(("width", "height"), [(1400, 900), (390, 844)])
def test_no_figure_is_narrower_than_its_legible_minimum(driver, report_path, width, height):
    """At 1400 and 390 px every figure's smallest text (MIN_FONT_PT at
    the PNG's 110 dpi, scaled as shown) is at least 12 CSS px; on a phone a wide figure
    scrolls inside itself, and the page never sideways."""
    from fairspark.audits.figures import MIN_FONT_PT

    _open(driver, report_path, width, height)
    shown = driver.execute_script(
        "return Array.from(document.querySelectorAll('figure img')).map(i => {"
        "  const f = i.closest('figure');"
        "  return [i.alt, i.getBoundingClientRect().width, i.naturalWidth,"
        "          f.clientWidth, f.scrollWidth]; });")
    assert len(shown) >= 4, shown  # the DI chart, per-attribute charts, HFM, trends
    minimum = 12 / (MIN_FONT_PT * 110 / 72)  # the smallest legible scale of a PNG
    small = [(alt, w, nat) for alt, w, nat, _, _ in shown if w < minimum * nat - 0.5]
    assert not small, (width, small)
    if width < 500:  # at least one audit figure is wider than the phone: it scrolls inside
        assert any(sw > cw for _, _, _, cw, sw in shown), shown
    page = driver.execute_script("return document.documentElement.scrollWidth")
    assert page <= width, (width, page)


@needs_chromium
def test_heading_outline_has_no_jumps(driver, report_path):
    _open(driver, report_path, 1400, 900)
    levels = driver.execute_script(
        "return Array.from(document.querySelectorAll('h1,h2,h3,h4,h5,h6'))"
        ".map(h => Number(h.tagName[1]));")
    assert levels[0] == 1 and levels.count(1) == 1
    jumps = [(a, b) for a, b in itertools.pairwise(levels) if b > a + 1]
    assert not jumps, levels


@needs_chromium
def test_toc_links_land_on_their_sections(driver, report_path):
    _open(driver, report_path, 1400, 900)
    missing = driver.execute_script(
        "return Array.from(document.querySelectorAll('a[href^=\"#\"]'))"
        ".map(a => a.getAttribute('href').slice(1))"
        ".filter(id => !document.getElementById(id));")
    assert missing == []


@needs_chromium
def test_change_trends_and_hfm_read_on_a_laptop_and_a_phone(driver, report_path, tmp_path):
    _open(driver, report_path, 1400, 900)
    got = driver.execute_script(
        "const h = Array.from(document.querySelectorAll('table.decision th'))"
        "  .map(t => t.textContent);"
        "const s = Array.from(document.querySelectorAll('h2'))"
        "  .find(h => h.textContent.startsWith('Trends'));"
        "const sec = s && s.closest('section');"
        "const img = sec && sec.querySelector('img');"
        "const hfm = Array.from(document.querySelectorAll('h2'))"
        "  .find(h => h.textContent.startsWith('HFM')).closest('section');"
        "return {heads: h, trend_img: img ? [img.complete && img.naturalWidth > 0, img.alt]"
        "  : null, trend_caps: sec ? Array.from(sec.querySelectorAll('table caption'))"
        "  .length : 0, hfm: hfm.textContent};")
    # the change column is there, dated by the previous night
    assert "since 2026-11-29" in got["heads"], got["heads"]
    assert got["trend_img"] and got["trend_img"][0] and "run dates" in got["trend_img"][1]
    assert got["trend_caps"] >= 1
    # HFM: the lead says what df means; witness values are hidden by default
    assert "df = D_f / D − 1 compares them" in got["hfm"]
    assert "Feature values of the witness rows are hidden" in got["hfm"]
    for width, height in ((1400, 900), (390, 844)):
        _open(driver, report_path, width, height)
        driver.execute_script(
            "Array.from(document.querySelectorAll('h2'))"
            ".find(h => h.textContent.startsWith('Trends')).scrollIntoView();")
        wide = driver.execute_script("return document.documentElement.scrollWidth")
        assert wide <= width, (width, wide)
        # one image per panel in a grid: side by side on a laptop, stacked on a phone,
        # each wide enough to read
        cols, narrowest = driver.execute_script(
            "const r = Array.from(document.querySelectorAll('.trend-panels img'))"
            "  .map(i => i.getBoundingClientRect());"
            "return [new Set(r.map(b => Math.round(b.left))).size,"
            "  Math.min(...r.map(b => b.width))];")
        assert (cols == 1) if width < 500 else (cols >= 3), (width, cols)
        assert narrowest >= 280, (width, narrowest)
        _keep(driver, tmp_path, f"report-{width}x{height}-trends.png")


@needs_chromium
def test_first_screen_states_the_window_change_and_honest_changes(driver, report_path):
    """The --where change on the first screen; no "better" / "worse"
    inside the uncertainty; the limits table names the worst group of race."""
    import math
    import re

    _open(driver, report_path, 1400, 900)
    got = driver.execute_script(
        "const d = document.getElementById('differs');"
        "const b = document.getElementById('audited-brief');"
        "const rows = Array.from(document.querySelectorAll('table.decision tbody tr'))"
        "  .map(tr => Array.from(tr.cells).map(c => c.textContent.trim()));"
        "const lim = Array.from(document.querySelectorAll('h2'))"
        "  .find(h => h.textContent.startsWith('Limits'));"
        "return {differs: d ? [d.textContent, d.getBoundingClientRect().bottom] : null,"
        "  brief: b ? [b.textContent, b.getBoundingClientRect().bottom] : null, rows: rows,"
        "  limits: lim ? lim.closest('section').textContent : ''};")
    assert got["differs"] is not None, "the data-window change is not stated"
    text, bottom = got["differs"]
    assert "the data window changed: all rows then, where x > -1 now" in " ".join(
        text.split())
    assert bottom <= 900, "the data-window change is below the first screen"
    brief, brief_bottom = got["brief"]
    assert "Rows" in brief and "Groups" in brief and brief_bottom <= 900
    # every "better" / "worse" in the change column is beyond the difference's interval:
    # recompute from the two runs' rows
    base = report_path.parent.parent
    now = pd.read_parquet(base / "run_date=2026-11-30" / "metrics.parquet")
    before = pd.read_parquet(base / "run_date=2026-11-29" / "metrics.parquet")

    def spd(m, attr, group):
        r = m[(m.audit == "limits") & (m.attribute == attr) & (m.group == group)
              & (m.metric == "statistical_parity_difference")]
        return r.iloc[0] if len(r) else None

    checked, moved = 0, {}
    for cells in got["rows"]:
        change = cells[4] if len(cells) > 5 else ""
        if "statistical parity" not in cells[2]:
            continue
        checked += 1
        if not re.search(r"better|worse", change):
            continue
        moved[cells[1]] = change
        worst = re.search(r"worst group (\S+)[ :]", cells[3])
        group = worst.group(1) if worst else "unprivileged"
        a, b = spd(before, cells[1], group), spd(now, cells[1], group)
        h = math.hypot((a.upper - a.lower) / 2, (b.upper - b.lower) / 2)
        assert abs(b.value - a.value) > h, (cells, a.value, b.value, h)
    # guard: the branch above ran: sex F lost half its favourable decisions
    assert moved.get("sex") == "worse", (moved, got["rows"])
    # race (w privileged; b and a unprivileged) is judged per group and the worst named
    lim = " ".join(got["limits"].split())
    assert checked >= 2  # sex and race
    assert re.search(r"race: \|statistical_parity_difference\| <= 0\.1 checked on each of "
                     r"2 group", lim)
    assert "worst " in lim and "all unprivileged pooled (extra view)" in lim


@pytest.fixture(scope="module")
def baseline_report(spark, tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """A champion-against-challenger run: the challenger (``p``) is the baseline
    (``p_prod``) with 30% of sex F's favourable decisions taken away, so it is clearly
    less fair on sex and decides alike on race; a ``no_worse_than_baseline`` limit."""
    rng = np.random.default_rng(43)
    n = 3000
    sex = rng.choice(["M", "F"], n)
    prod = (rng.random(n) < 0.5).astype(int)
    pdf = pd.DataFrame({
        "id": np.arange(n).astype(str), "x": rng.normal(size=n), "sex": sex,
        "race": rng.choice(["w", "b", "a"], n, p=[0.6, 0.3, 0.1]),
        "y": rng.integers(0, 2, n), "p_prod": prod,
        "p": np.where((sex == "F") & (prod == 1) & (rng.random(n) < 0.3), 0, prod),
    })
    base = tmp_path_factory.mktemp("browser_baseline")
    cfg = {
        "dataset": "champion_check", "input": {"path": write_parquet(pdf, base / "in")},
        "columns": {"features": ["x"],
                    "sensitive": [{"column": "sex", "privileged": "M"},
                                  {"column": "race", "privileged": "w"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"},
                    "baseline": {"column": "p_prod", "positive": 1}, "row_key": "id"},
        "limits": {"rules": [{"no_worse_than_baseline": {
            "metric": "statistical_parity_difference", "margin": 0.02}}]},
        "audits": {"group": {}},
        "output": {"path": str(base / "out")},
    }
    (base / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(base / "c.yaml"), "--run-date", "2026-12-01",
                     "-q", "--no-fail-on-violation"], under_submit=True)
    assert code == 0
    return base / "out" / "run_date=2026-12-01" / "report.html", pdf


@needs_chromium
@pytest.mark.parametrize(("width", "height"), [(1400, 900), (390, 844)])
def test_first_screen_says_whether_the_challenger_is_at_least_as_fair(
        driver, baseline_report, tmp_path, width, height):
    """Before any scroll, on a laptop and on a phone, the decision box answers "is the
    challenger at least as fair as the baseline?": the verdict, the metric, both values
    and the size with its interval; the page never scrolls sideways."""

    path, pdf = baseline_report
    _open(driver, path, width, height)
    got = driver.execute_script(
        "const h = document.querySelector('#decision #headlines');"
        "if (!h) return null;"
        "const li = Array.from(h.querySelectorAll('li'));"
        "return {bottom: h.getBoundingClientRect().bottom, inner: window.innerHeight,"
        "  items: li.map(e => e.textContent.replace(/\\s+/g, ' ').trim()),"
        "  wide: [document.documentElement.scrollWidth, document.body.scrollWidth]};")
    assert got is not None, "no answer to the challenger-against-baseline question"
    assert got["bottom"] <= got["inner"] == height, got
    assert max(got["wide"]) <= width, got["wide"]
    _keep(driver, tmp_path, f"report-baseline-{width}x{height}-first-screen.png")
    # the worst first: sex, less fair on the selection-rate gap; the word, the signed
    # size and its interval against the rows (tests/headline_check.py)
    assert got["items"][0].startswith(
        "Challenger against baseline (p_prod = 1) on sex: less fair"), got["items"]
    rows = pd.read_parquet(path.parent / "metrics.parquet")
    seen = check_headline(got["items"], rows, "sex", "less fair", baseline="p_prod = 1")
    assert seen["metric"] == "statistical_parity_difference"
    # by hand: the two decisions' selection-rate gaps F minus M, on the same rows
    gap = {c: pdf[pdf.sex == "F"][c].mean() - pdf[pdf.sex == "M"][c].mean()
           for c in ("p", "p_prod")}
    assert seen["size"] == pytest.approx(abs(gap["p"]) - abs(gap["p_prod"]), abs=1e-3)
    assert 0 < seen["lo"] < seen["size"] < seen["hi"]
    # the headline without a browser says the same (the page's HTML)
    assert [t for t in first_screen_headlines(path.read_text()) if "on sex" in t] == [
        t for t in got["items"] if "on sex" in t]
    assert any(t.startswith("Challenger against baseline (p_prod = 1) on race: ")
               for t in got["items"][1:]), got["items"]


@needs_chromium
def test_the_no_worse_than_baseline_line_shows_the_interval_its_verdict_uses(
        driver, baseline_report):
    """The limit's line prints the Holm-adjusted interval of the limits row (the one
    its verdict uses, wholly above the margin when violated), not the paired row's own."""
    import json

    path, _ = baseline_report
    _open(driver, path, 1400, 900)
    cells = driver.execute_script(
        "return Array.from(document.querySelectorAll('table.decision tbody tr'))"
        "  .map(tr => Array.from(tr.cells).map(c => c.textContent.replace(/\\s+/g, ' ')"
        "  .trim())).find(c => c[1] === 'sex' && c[2].includes('no worse than baseline'));")
    assert cells, "no line for the no_worse_than_baseline limit on sex"
    rows = pd.read_parquet(path.parent / "metrics.parquet")
    lim = rows[(rows.audit == "limits") & (rows.attribute == "sex")].iloc[0]
    assert lim.status == "violated" and lim.lower > 0.02
    assert json.loads(lim.params)["interval"] == "Holm-adjusted"
    ends = ", ".join(f"{x:+.3g}".replace("-", "−") for x in (lim.lower, lim.upper))
    shown = f"Holm-adjusted interval [{ends}] (wholly above the margin)"
    assert shown in cells[3], cells


#: the rectangle of the first occurrence of a text inside an element (a DOM Range over
#: its text nodes), or null: what the reader sees, wherever the text sits in the markup
_RECT_OF = """
function rectOf(root, needle) {
  if (!root) return null;
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = []; let text = '';
  while (walk.nextNode()) { nodes.push([walk.currentNode, text.length]);
                            text += walk.currentNode.data; }
  const flat = text.replace(/\\s/g, ' '), i = flat.indexOf(needle);
  if (i < 0) return null;
  const j = i + needle.length, range = document.createRange();
  for (const [n, off] of nodes) {
    if (off <= i && i < off + n.data.length) range.setStart(n, i - off);
    if (off < j && j <= off + n.data.length) { range.setEnd(n, j - off); break; }
  }
  const r = range.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
}
"""


def _first_screen(driver, path: Path, width: int, height: int, needles: dict[str, list]
                  ) -> dict:
    """Each needle's rectangle (``needles``: name -> [element id, text]) and the
    viewport, before any scroll."""
    _open(driver, path, width, height)
    return driver.execute_script(
        _RECT_OF + "const out = {inner: window.innerHeight, wide: window.innerWidth};"
        "for (const [k, [id, t]] of Object.entries(arguments[0]))"
        "  out[k] = rectOf(document.getElementById(id), t);"
        "out.worst = (document.getElementById('worst') || {}).textContent;"
        "out.headlines = Array.from(document.querySelectorAll('#headlines li'))"
        "  .map(e => e.textContent.replace(/\\s+/g, ' ').trim());"
        "return out;", needles)


def _visible(got: dict, names: list[str]) -> None:
    for k in names:
        r = got[k]
        assert r is not None, (k, got)
        assert 0 <= r["top"] and r["bottom"] <= got["inner"], (k, r, got["inner"])
        assert 0 <= r["left"] and r["right"] <= got["wide"], (k, r, got["wide"])


def _fmt_like(printed: str) -> float:
    return float(printed.replace("−", "-").replace("+", ""))


def _worst_check(path: Path, worst_text: str) -> tuple[str, str, str, str]:
    """(group, number, lower, upper) as printed on the worst line, checked against the
    limits rows of ``metrics.parquet``: the named group's gating row is violated, its
    value and interval are the printed ones (3 significant digits), and no other
    violated gating row of that limit and attribute is further beyond the limit."""
    import json
    import re

    rows = pd.read_parquet(path.parent / "metrics.parquet")
    text = re.sub(r"\s+", " ", worst_text)
    num = r"[−+]?[\d.]+"
    m = (re.search(rf"(?:worst )?group (?P<group>[^ (:]+)[^:]*: \S+ (?P<v>{num}) "
                   rf"\[(?P<lo>{num}), (?P<hi>{num})\]", text)
         # a no_worse_than_baseline check: the change and the interval its verdict uses
         or re.search(rf"(?:worst )?group (?P<group>[^ (:]+)[^:]*: .*?\(challenger − "
                      rf"baseline\) (?P<v>{num}), .*? interval \[(?P<lo>{num}), "
                      rf"(?P<hi>{num})\]", text))
    assert m, text
    attr = re.search(r"worst: (\S+)", text)[1]
    lim = rows[(rows.audit == "limits") & (rows.attribute == attr)]
    lim = lim[[json.loads(p).get("role", "gate") == "gate" for p in lim.params]]
    if m["group"] not in set(lim.group):  # a binary attribute: its one unprivileged value
        summary = json.loads((path.parent / "summary.json").read_text())
        info = summary["rows"]["attributes"][attr]
        assert [v for v in info["values"] if v not in info["privileged"]] == [m["group"]]
        lim = lim[lim.group == "unprivileged"]
    else:
        lim = lim[lim.group == m["group"]]
    assert len(lim) >= 1, (m["group"], text)
    row = lim.iloc[0]
    assert row.status == "violated", text
    for key, col in (("v", "value"), ("lo", "lower"), ("hi", "upper")):
        assert _fmt_like(m[key]) == pytest.approx(row[col], rel=5e-3, abs=5e-4), (key, text)
    peers = rows[(rows.audit == "limits") & (rows.attribute == row.attribute)
                 & (rows.metric_b == row.metric_b) & (rows.status == "violated")]
    peers = peers[[json.loads(p).get("role", "gate") == "gate"
                   and json.loads(p).get("rankable", True) for p in peers.params]]
    # further beyond the limit: |value| under abs_max, "worse" under no_worse_than_baseline
    far = (lambda v: v) if "no worse" in row.metric_b else abs
    assert far(row.value) >= max(far(x) for x in peers.value) - 1e-12, (text, peers)
    return m["group"], m["v"], m["lo"], m["hi"]


@needs_chromium
@pytest.mark.parametrize(("width", "height"), [(1400, 900), (390, 844)])
def test_first_screen_shows_the_gate_and_the_worst_group_with_its_number(
        driver, report_path, tmp_path, width, height):
    """Before any scroll, on a laptop and on a phone: the gate sentence, the worst
    group's name, its number and its interval (each a text rectangle inside the
    viewport), the group and numbers checked against metrics.parquet."""
    got = _first_screen(driver, report_path, width, height, {"gate": ["gate", "This run"]})
    assert got["worst"], "no worst line on the first screen"
    group, v, lo, hi = _worst_check(report_path, got["worst"])
    got = _first_screen(driver, report_path, width, height, {
        "gate": ["gate", "This run"], "group": ["worst", f"group {group}"],
        "number": ["worst", f" {v}"], "interval": ["worst", f"[{lo}, {hi}]"]})
    _keep(driver, tmp_path, f"report-{width}x{height}-first-screen-worst.png")
    _visible(got, ["gate", "group", "number", "interval"])


@needs_chromium
@pytest.mark.parametrize(("width", "height"), [(1400, 900), (390, 844)])
def test_first_screen_shows_the_worst_group_and_the_comparison_with_a_baseline(
        driver, baseline_report, tmp_path, width, height):
    """With a baseline, before any scroll on a laptop and a phone: the gate, the worst
    group with its number and interval, and the comparison's word and signed size (the
    headline checked against metrics.parquet by tests/headline_check.py)."""
    path, _ = baseline_report
    got = _first_screen(driver, path, width, height, {"gate": ["gate", "This run"]})
    assert got["worst"], "no worst line on the first screen"
    group, v, lo, hi = _worst_check(path, got["worst"])
    rows = pd.read_parquet(path.parent / "metrics.parquet")
    seen = check_headline(got["headlines"], rows, "sex", "less fair", baseline="p_prod = 1")
    size = f"{seen['size']:+.3g}".replace("-", "−")
    assert f"(challenger − baseline) {size}," in got["headlines"][0], (size, got["headlines"])
    got = _first_screen(driver, path, width, height, {
        "gate": ["gate", "This run"], "group": ["worst", f"group {group}"],
        "number": ["worst", f" {v}"], "interval": ["worst", f"[{lo}, {hi}]"],
        "word": ["headlines", "on sex: less fair"],
        "size": ["headlines", f"(challenger − baseline) {size}"]})
    _keep(driver, tmp_path, f"report-baseline-{width}x{height}-first-screen-worst.png")
    _visible(got, ["gate", "group", "number", "interval", "word", "size"])
