"""report.html in a real browser: headless Chromium through chromedriver (Selenium).

Checks that the page logs no console errors, that every image has loaded, and that
the run summary and verdicts fit in the first 768 px of a laptop screen. A
screenshot is kept under ``artifacts/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, write_parquet

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
        "output": {"path": str(base / "out")},
    }
    (base / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(base / "c.yaml"), "--run-date", "2026-11-29",
                     "-q", "--no-fail-on-violation"], under_submit=True)
    assert code == 0
    return base / "out" / "run_date=2026-11-29" / "report.html"


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                    reason="Debian chromium + chromium-driver missing (.ci/run installs them)")
def test_report_renders_in_headless_chromium(report_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1366,768",
                 "--disable-dev-shm-usage"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    try:
        driver.set_window_size(1366, 768)
        driver.get(report_path.as_uri())
        assert driver.execute_script("return document.readyState") == "complete"
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, errors
        images = driver.execute_script(
            "return Array.from(document.images).map(i => "
            "[i.complete && i.naturalWidth > 0, i.alt, i.src.slice(0, 22)])")
        assert images, "the report has no plots"
        assert all(ok for ok, _, _ in images), images
        assert all(src.startswith("data:image/") for _, _, src in images)
        # the run summary and verdicts in words come first and fit on a laptop screen
        bottom = driver.execute_script(
            "const h = Array.from(document.querySelectorAll('h2'));"
            "const first = h.find(e => /summary|verdict|outcome/i.test(e.textContent));"
            "if (!first) return null;"
            "let el = first.nextElementSibling, b = first.getBoundingClientRect().bottom;"
            "while (el && el.tagName !== 'H2') {"
            "  b = Math.max(b, el.getBoundingClientRect().bottom); el = el.nextElementSibling; }"
            "return b;")
        assert bottom is not None, "no summary heading found"
        assert bottom <= 768, f"summary and verdicts end at {bottom}px, below the first 768px"
        shots = ROOT / "artifacts"
        shots.mkdir(exist_ok=True)
        assert driver.save_screenshot(str(shots / "report-first-screen.png"))
    finally:
        driver.quit()
