"""The nightly benchmark script's own pieces (no Spark; fast): the config it runs, the
table it writes, the stage lines it reads from a log cut short, its fit and its tables."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_nightly")


@pytest.fixture(scope="module")
def harness():
    return load_script("_harness")


def test_config_is_valid_with_every_audit_at_its_defaults(bench, tmp_path):
    from fairspark.config import load_config

    cfg_path = tmp_path / "c.json"
    import json

    cfg_path.write_text(json.dumps(bench.nightly_config(tmp_path / "in", tmp_path / "out",
                                                       7, "local[2]")))
    cfg = load_config(cfg_path)
    enabled = cfg.audits.enabled()
    assert sorted(enabled) == ["correlation", "group", "hfm", "mdfa"]
    # an empty section is the audit's defaults: compare with a fresh params object
    for name, params in enabled.items():
        assert params.model_dump() == type(params)().model_dump(), name
    assert cfg.columns.attribute_names() == list(bench.VIEWS)
    assert len(cfg.columns.features) == 7


def test_table_rows_columns_and_unique_keys(harness, tmp_path):
    harness.write_table(tmp_path, rows=1234, dim=4, chunk=500)
    parts = sorted(tmp_path.glob("part-*.parquet"))
    assert len(parts) == 3  # 500 + 500 + 234
    t = pq.read_table(tmp_path).to_pandas()
    assert len(t) == 1234
    assert set(t.columns) == {"f0", "f1", "f2", "f3", "sex", "race", "label", "prediction",
                              "row_id"}
    assert t["row_id"].is_unique
    assert set(t["sex"]) == {"Male", "Female"}
    assert set(t["race"]) <= {"White", "Black", "Asian", "Other"}
    assert set(t["label"]) == {0, 1} and set(t["prediction"]) == {0, 1}
    # the prediction depends on the group (lower for women): both rates differ
    rate = t.groupby("sex")["prediction"].mean()
    assert rate["Female"] < rate["Male"]


def test_stage_lines_of_a_log_cut_short(bench):
    log = "\n".join([
        "2026-11-30 15:00:01 INFO fairspark.runner: stage read                      0.21 s",
        "2026-11-30 15:00:05 INFO fairspark.runner: stage   prepare: scan            3.50 s",
        "2026-11-30 15:00:09 INFO fairspark.runner: stage audit group              12.04 s",
        "26/11/30 15:00:09 INFO DAGScheduler: Stage 3 (collect) finished in 0.5 s",
        "2026-11-30 15:10:09 INFO fairspark.mdfa: something else",
    ])
    assert bench.stages_from_log(log) == {"read": 0.21, "prepare: scan": 3.5,
                                          "audit group": 12.04}


def test_fit_against_hand_values(harness):
    # y = 5 + 2e-6 x exactly
    a, b = harness.fit_line([1e5, 3e5, 1e6], [5.2, 5.6, 7.0])
    assert a == pytest.approx(5.0) and b == pytest.approx(2e-6)
    # least squares by hand for (0, 0), (1, 1), (2, 1): b = 1/2, a = 1/6
    a, b = harness.fit_line([0, 1, 2], [0, 1, 1])
    assert a == pytest.approx(1 / 6) and b == pytest.approx(0.5)
    # a missing stage (NaN) is left out; one point gives no fit
    a, b = harness.fit_line([0, 1, 2], [0, float("nan"), 2])
    assert (a, b) == (pytest.approx(0), pytest.approx(1))
    assert all(np.isnan(harness.fit_line([1, 2], [1, float("nan")])))


def test_markdown_table(harness):
    res = [{"rows": n, "rc": 0, "wall": 10 + n / 1e5, "stages": {"read": 1 + n / 1e6,
                                                                  "audit mdfa": 100.0},
            "statuses": {"mdfa": "ok"}, "peak_sum": 3e9, "peak_max": 1e9,
            "load_before": "0.1 0.1 0.1", "load": "1.0 0.5 0.2"} for n in (100_000, 300_000)]
    res[1]["stages"]["audit hfm"] = 7.0  # a stage one size lacks
    text = harness.stage_markdown(res, "python benchmarks/bench_nightly.py --rows 100000 300000", 2)
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.startswith("| rows"))
    assert "read (s)" in header and "audit mdfa (s)" in header and "audit hfm (s)" in header
    row = next(ln for ln in lines if ln.startswith("| 100,000"))
    assert "| nan |" in row and "| 3.00 | 1.00 |" in row
    # fit of read: a = 1, b = 1 s per 1M rows; at 100M rows 101 s
    assert "| read | 1.0 | 1.0 | 2.0 | 101 |" in lines
    assert "| audit mdfa | 100.0 | 0.0 | 100.0 | 100 |" in lines


def test_tree_rss_counts_this_process(bench):
    total, biggest = bench._tree_rss(os.getpid())
    assert total >= biggest > 10_000_000  # a Python with numpy loaded


def test_overrides_are_parsed_and_applied(bench, tmp_path):
    from fairspark.config import parse_config

    sets = bench.parse_sets(["mdfa.splits=4", "correlation.rounds=2", "hfm.method=approx"])
    assert sets == {"mdfa": {"splits": 4}, "correlation": {"rounds": 2},
                    "hfm": {"method": "approx"}}
    cfg = parse_config(bench.nightly_config(tmp_path, tmp_path, 3, "local[2]", sets))
    on = cfg.audits.enabled()
    assert on["mdfa"].splits == 4 and on["correlation"].rounds == 2
    assert on["group"].model_dump() == type(on["group"])().model_dump()
    with pytest.raises(SystemExit):
        bench.parse_sets(["splits=4"])


def test_kill_tree_ends_the_child_and_its_children(bench):
    import subprocess
    import time

    proc = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60 & wait"])
    deadline = time.time() + 10
    while time.time() < deadline and len(bench._children().get(proc.pid, [])) < 2:
        time.sleep(0.05)
    kids = bench._children().get(proc.pid, [])
    assert len(kids) == 2
    bench.kill_tree(proc.pid)
    proc.wait(timeout=10)  # ended (killed, or exited once its children were)
    time.sleep(0.2)
    for k in kids:  # gone (or a zombie reaped by init)
        stat = Path(f"/proc/{k}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_negative_slope_is_not_extrapolated(harness):
    res = [{"rows": n, "rc": 0, "wall": w, "stages": {"read": w}, "statuses": {},
            "peak_sum": 0, "peak_max": 0, "load_before": "", "load": ""}
           for n, w in ((3000, 655.2), (6000, 382.6))]
    text = harness.stage_markdown(res, "x", 2)
    row = next(ln for ln in text.splitlines() if ln.startswith("| read |"))
    assert "no extrapolation" in row and "| | |" in row
