"""Data is text in report.html: hostile names and values never run as code.

One real run (the notebook API, all four audits at cheap settings, a baseline, limits,
an intersection and a described model) on a table whose column names, group values,
dataset name and model names each carry a payload: an attribute break (``" '``), event
handlers (``onfocus``, ``onerror``), ``autofocus``, a ``<script>`` and an ``<img>``, and
the `` src=`` token that the old page scrubber cut out of attribute values. The page
and the notebook's inline report are loaded in headless Chromium, which must find no
element with an event attribute, no ``<script>``, no payload run (each payload writes
``data-pwned`` on ``<body>``), and every value shown verbatim as text.
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

import fairspark
from fairspark.report.render import external_references


def payload(tag: str) -> str:
    """A hostile value tagged ``tag``: each part would set ``data-pwned`` if it ran."""
    run = f"document.body.setAttribute('data-pwned','{tag}')"
    return (f"{tag} x\" ' tabindex=0 autofocus onfocus={run} src=y "
            f"<script>{run}</script><img src=q onerror={run}>")


def short(tag: str) -> str:
    """The issue's case: a name that ends in `` src=<token>`` (cut by the old scrubber)."""
    return f"{tag} src=tok"


COL_SEX = short("COLSEX")
COL_RACE = payload("COLRACE")
COL_FEAT = payload("COLFEAT")
G_F = payload("GF")
G_B = "GB x tabindex=0 autofocus onfocus=document.body.setAttribute('data-pwned',1) y"
DATASET = payload("DATASET")
MODEL = payload("MODEL")
VALUES = [COL_SEX, COL_RACE, G_F, G_B, DATASET, MODEL]


def _table(n: int = 1200, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["M", G_F], n, p=[0.55, 0.45])
    race = rng.choice(["W", G_B], n, p=[0.6, 0.4])
    x = rng.normal(size=n)
    logit = x + 0.6 * (sex == "M")
    return pd.DataFrame({
        "id": [f"r{i}" for i in range(n)], COL_FEAT: x, "u": rng.random(n),
        COL_SEX: sex, COL_RACE: race,
        "y": (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int),
        "p": (logit > 0.3).astype(int), "b": (logit > 0.0).astype(int),
    })


@pytest.fixture(scope="module")
def hostile_run(spark, tmp_path_factory):
    df = spark.createDataFrame(_table())
    config = {
        "seed": 7,
        "columns": {"sensitive": [{"column": COL_SEX, "privileged": "M"},
                                  {"column": COL_RACE, "privileged": "W"}],
                    "intersections": [[COL_SEX, COL_RACE]],
                    "label": {"column": "y"}, "prediction": {"column": "p"},
                    "baseline": {"column": "b"}, "row_key": "id"},
        "audits": {"group": {}, "hfm": {},
                   "mdfa": {"splits": 2, "sample_rows": 400, "epochs": 2},
                   "correlation": {"models": ["logistic_regression"], "n_samples": 40,
                                   "rounds": 2, "k": 60}},
        "limits": {"fail_on_violation": False,
                   "rules": [{"metric": "statistical_parity_difference", "abs_max": 0.05},
                             {"no_worse_than_baseline": {"metric": "disparate_impact",
                                                         "margin": 0.0}}]},
    }
    result = fairspark.audit(df, config=config, dataset=DATASET,
                             model={"name": MODEL, "version": payload("VERSION"),
                                    "description": payload("DESCRIPTION")})
    base = tmp_path_factory.mktemp("hostile")
    page = base / "report.html"
    page.write_text(result.report_html(), encoding="utf-8")
    notebook = base / "notebook.html"
    notebook.write_text("<!DOCTYPE html><html><body><p>notebook</p>"
                        + result._repr_html_() + "</body></html>", encoding="utf-8")
    return result, page, notebook


def test_every_section_ran_and_the_page_escapes_every_value(hostile_run):
    result, page, _ = hostile_run
    statuses = {n: a.get("status") for n, a in result.summary["audits"].items()}
    assert statuses == dict.fromkeys(("group", "hfm", "mdfa", "correlation"), "ok"), statuses
    text = page.read_text("utf-8")
    assert external_references(text) == []
    # no payload markup survives as markup: every '<' of a value is escaped
    assert "<script>" not in text and "<img src=q" not in text
    shown = _text(text)
    for v in VALUES:
        assert " ".join(v.split()) in shown, v[:20]
    assert "removed" not in text


class _Text(HTMLParser):
    """The text of a page as a browser shows it (character references decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("style", "script", "title")

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "script", "title") and self._skip > 0

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def _text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return " ".join(" ".join(parser.parts).split())


def test_notebook_iframe_is_sandboxed(hostile_run):
    result, _, _ = hostile_run
    tag = re.match(r"<iframe [^>]*>", result._repr_html_()).group(0)
    assert ' sandbox="" ' in tag and "srcdoc=" in tag


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Debian chromium + chromium-driver missing (scripts/test.sh installs them)")


@pytest.fixture(scope="module")
def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-dev-shm-usage",
                 "--window-size=1400,900"):
        opts.add_argument(flag)
    drv = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    try:
        yield drv
    finally:
        drv.quit()


#: every element's attributes whose name starts with "on", and every script element
_FIND_CODE = """
const out = [];
for (const el of document.querySelectorAll('*')) {
  for (const a of el.attributes) {
    if (a.name.toLowerCase().startsWith('on')) out.push(el.tagName + ' ' + a.name);
  }
}
return {handlers: out, scripts: document.querySelectorAll('script').length,
        pwned: document.body.getAttribute('data-pwned'),
        text: document.body.textContent};
"""


def _load(driver, path):
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.as_uri())
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.readyState") == "complete")
    # an autofocus/onfocus payload runs on load without a click; give it the time to
    driver.execute_script("return new Promise(r => setTimeout(r, 300))")
    return driver.execute_script(_FIND_CODE)


@needs_chromium
def test_chromium_finds_no_handler_and_runs_no_payload(driver, hostile_run):
    _, page, _ = hostile_run
    found = _load(driver, page)
    assert found["handlers"] == [] and found["scripts"] == 0
    assert found["pwned"] is None
    # every value is shown verbatim, as text (whitespace as the browser collapses it)
    text = " ".join(found["text"].split())
    for v in VALUES:
        assert " ".join(v.split()) in text, v[:20]


@needs_chromium
def test_the_notebook_iframe_runs_nothing(driver, hostile_run):
    _, _, notebook = hostile_run
    outer = _load(driver, notebook)
    assert outer["pwned"] is None and outer["scripts"] == 0
    frame = driver.find_element("tag name", "iframe")
    assert frame.get_attribute("sandbox") == ""
    driver.switch_to.frame(frame)
    try:
        inner = driver.execute_script(_FIND_CODE)
    finally:
        driver.switch_to.default_content()
    assert inner["handlers"] == [] and inner["pwned"] is None
    assert " ".join(DATASET.split()) in " ".join(inner["text"].split())
