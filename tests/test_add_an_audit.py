"""Adding an audit touches nothing outside its package.

A toy fifth audit (``tests/toy_audit``) is registered by this test alone, through the
``fairspark.audits`` entry-point group of a distribution the test writes into a
temporary folder. Two nights of the CLI in a fresh process (the registry and the
config sections are built when fairspark is imported) show it in the run, in
``metrics.parquet``, in the decision box, in the trends, in the previous-run change
column and in gating, with a limit on its metric that persists for two runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
NIGHTS = ("2026-11-20", "2026-11-21")


def _plugin(folder: Path) -> Path:
    """A distribution's metadata that registers ``toy_audit.spec:SPEC`` (nothing else)."""
    info = folder / "toy_audit_plugin-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-audit-plugin\n"
                                   "Version: 0.0\n")
    (info / "entry_points.txt").write_text("[fairspark.audits]\ntoy = toy_audit.spec:SPEC\n")
    return folder


def _run_nights(tmp: Path, dates, *, check_registered: bool = False) -> list[int]:
    """The CLI on ``tmp/c.yaml`` for each date, in one fresh process with the plugin on
    its path; the exit codes."""
    check = ("from fairspark.registry import specs; assert 'toy' in specs(), list(specs()); "
             if check_registered else "")
    code = ("import json, sys; from fairspark import cli; " + check
            + f"codes = [cli.main(['audit', '--config', sys.argv[1], '--run-date', d, '-q'], "
            f"stop_session=False) for d in {list(dates)!r}]; print(json.dumps(codes))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(TESTS), str(_plugin(tmp / "plugin"))])}
    done = subprocess.run([sys.executable, "-c", code, str(tmp / "c.yaml")], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("add-an-audit")
    rng = np.random.default_rng(11)
    n = 500
    sex = rng.choice(["M", "F"], n, p=[0.55, 0.45])
    # favourable decisions far more often for M: a clear gap the toy limit sees
    p = (rng.random(n) < np.where(sex == "M", 0.7, 0.3)).astype(int)
    y = (rng.random(n) < 0.5).astype(int)
    pdf = pd.DataFrame({"id": np.arange(n).astype(str), "x1": rng.normal(size=n),
                        "sex": sex, "y": y, "p": p})
    inp = tmp / "in.parquet"
    pdf.to_parquet(inp)
    cfg = {
        "dataset": "toy", "seed": 3, "input": {"path": str(inp)},
        "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}, "row_key": "id"},
        "audits": {"group": {}, "toy": {}},
        "limits": {"rules": [{"audit": "toy", "metric": "toy_gap", "abs_max": 0.05,
                              "persistence": 2}]},
        "output": {"path": str(tmp / "out")},
        "spark": {"master": "local[1]", "conf": {"spark.sql.shuffle.partitions": 2}},
    }
    (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
    codes = _run_nights(tmp, NIGHTS, check_registered=True)
    return pdf, codes, [tmp / "out" / f"run_date={d}" for d in NIGHTS]


def test_the_toy_audit_is_registered_by_this_test_alone():
    from fairspark.registry import specs

    assert "toy" not in specs()  # this process has no such distribution on its path
    assert not any("toy_audit" in p.read_text() for p in (ROOT / "fairspark").rglob("*.py"))


def test_it_runs_and_its_rows_are_in_metrics_parquet(nights):
    pdf, _, outs = nights
    summary = json.loads((outs[0] / "summary.json").read_text())
    assert summary["audits"]["toy"]["status"] == "ok"
    m = pd.read_parquet(outs[0] / "metrics.parquet")
    (gap,) = m[(m.audit == "toy") & (m.metric == "toy_gap")].itertuples()
    # the same difference of favourable-decision rates, from the input table itself
    rate = pdf.groupby("sex")["p"].mean()
    assert gap.attribute == "sex"
    assert gap.value == pytest.approx(rate["F"] - rate["M"], abs=1e-12)
    assert gap.lower < gap.value < gap.upper


def test_it_has_a_decision_line_and_a_section(nights):
    _, _, outs = nights
    html = (outs[0] / "report.html").read_text()
    assert "toy gap in favourable decisions" in html  # its own decision line
    assert "Toy gap" in html  # its section, titled by its spec
    assert "the toy section&#39;s gap" in html or "the toy section's gap" in html  # limit hint


def test_its_limit_gates_after_two_runs_in_a_row(nights):
    _, codes, outs = nights
    assert codes == [0, 3]  # violated both nights; persistence 2 gates on the second
    for i, out in enumerate(outs):
        m = pd.read_parquet(out / "metrics.parquet")
        lim = m[m.audit == "limits"]
        assert list(lim.metric) == ["toy_gap"] and set(lim.status) == {"violated"}
        params = json.loads(lim.iloc[0]["params"])
        assert params["source_audit"] == "toy" and params["kind"] == "statistical"
        assert params["consecutive"] == i + 1
        s = json.loads((out / "summary.json").read_text())
        assert s["limits"]["gates"] is (i == 1)


def test_its_trend_and_its_change_since_the_previous_run(nights):
    _, _, outs = nights
    html = (outs[1] / "report.html").read_text()
    assert "toy · sex · toy_gap" in html  # a trend series over the two nights
    s = json.loads((outs[1] / "summary.json").read_text())
    assert s["previous"]["run_date"] == NIGHTS[0]
    assert s["previous"]["items"]["toy|sex|toy_gap"]["status"] == "evidence"


#: the window test's daily partitions; each night's window holds two of them
DAYS = ("2026-11-19", "2026-11-20", "2026-11-21")


@pytest.fixture(scope="module")
def window_nights(nights, tmp_path_factory):
    """Two nights of the toy audit under a two-day window (its spec's default read:
    the window's rows, group cells merged from the states), in a fresh process."""
    pdf = nights[0]
    tmp = tmp_path_factory.mktemp("add-an-audit-window")
    for i, d in enumerate(DAYS):
        folder = tmp / "in" / f"day={d}"
        folder.mkdir(parents=True)
        pdf.iloc[i::len(DAYS)].to_parquet(folder / "part-00000.parquet", index=False)
    cfg = {
        "dataset": "toy", "seed": 3, "input": {"path": str(tmp / "in"),
                                               "partition_column": "day"},
        "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}, "row_key": "id"},
        "audits": {"group": {}, "toy": {}},
        "window": {"days": 2},
        "output": {"path": str(tmp / "out"), "report": False},
        "spark": {"master": "local[1]", "conf": {"spark.sql.shuffle.partitions": 2}},
    }
    (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
    codes = _run_nights(tmp, DAYS[1:])
    parts = {d: pdf.iloc[i::len(DAYS)] for i, d in enumerate(DAYS)}
    return parts, codes, [tmp / "out" / f"run_date={d}" for d in DAYS[1:]]


def test_it_runs_under_a_window_on_each_nights_rows(window_nights):
    parts, codes, outs = window_nights
    assert codes == [0, 0]
    for night, out in enumerate(outs):
        rows = pd.concat([parts[DAYS[night]], parts[DAYS[night + 1]]])  # the window's days
        rate = rows.groupby("sex")["p"].mean()
        m = pd.read_parquet(out / "metrics.parquet")
        (gap,) = m[(m.audit == "toy") & (m.metric == "toy_gap")].itertuples()
        assert gap.value == pytest.approx(rate["F"] - rate["M"], abs=1e-12)
        s = json.loads((out / "summary.json").read_text())
        assert s["audits"]["toy"]["status"] == "ok"
        win = s["window"]
        assert win["partitions"] == list(DAYS[night:night + 2])
        assert win["audits_on_sample"] == [] and win["audits_on_newest"] == []
    # the second night aggregated its new day only: the shared day's state was reused
    assert json.loads((outs[1] / "summary.json").read_text())["window"]["reused"] == [DAYS[1]]


def test_a_window_read_the_spec_does_not_offer_is_a_config_error(tmp_path):
    sys.path.insert(0, str(TESTS))
    try:
        from toy_audit.spec import SPEC as TOY
    finally:
        sys.path.remove(str(TESTS))
    from fairspark.config import parse_config
    from fairspark.errors import ConfigError
    from fairspark.registry import specs

    raw = {"dataset": "toy", "input": {"path": str(tmp_path / "in"),
                                       "partition_column": "day"},
           "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                       "label": {"column": "y", "positive": 1},
                       "prediction": {"column": "p", "positive": 1}, "row_key": "id"},
           "audits": {"group": {}, "toy": {}, "hfm": {"max_rows": 500}},
           "output": {"path": str(tmp_path / "out")}, "run_date": "2026-11-21"}
    known = {**specs(), "toy": TOY}
    ok = parse_config({**raw, "window": {"days": 2, "hfm": "sample"}}, specs=known)
    assert ok.window_read("hfm") == "sample" and ok.window_read("toy") == "cells"
    assert parse_config({**raw, "window": {"days": 2}}, specs=known).window_read("hfm") == \
        "newest"
    with pytest.raises(ConfigError, match=r"unknown config key 'window\.toy': expected "
                                          r"'days', 'sample_rows', 'restate' or .*'hfm'"):
        parse_config({**raw, "window": {"days": 2, "toy": "sample"}}, specs=known)
    with pytest.raises(ConfigError, match=r"config key 'window\.hfm': 'cells' is not what "
                                          r"audit 'hfm' can read .*'newest', 'sample'"):
        parse_config({**raw, "window": {"days": 2, "hfm": "cells"}}, specs=known)
