"""Gates that judged nothing say so; an identical baseline passes (issue 57, items 7, 8).

A ``no_worse_than_baseline`` limit on disparate impact against a baseline that never
decides favourably makes no check (the baseline has no disparate impact): the first
screen and ``summary.json`` say "not evaluated (0 checks: ...)" with the baseline's
reason, never "passed". A baseline identical to the challenger is exactly as far from
parity: its margin-0 no-worse check passes (an exact 0 is within the margin 0).
"""

from __future__ import annotations

import json
import re
from html import unescape

import numpy as np
import pandas as pd
from conftest import write_parquet

from fairspark.config import parse_config
from fairspark.runner import run_audit_job


def _input(tmp_path, baseline: str) -> str:
    rng = np.random.default_rng(5)
    n = 1500
    sex = rng.choice(["M", "F"], n)
    p = (rng.random(n) < np.where(sex == "M", 0.5, 0.4)).astype(int)
    old = {"never": np.zeros(n, int), "same": p.copy()}[baseline]
    pdf = pd.DataFrame({"id": np.arange(n).astype(str), "x": rng.normal(size=n), "sex": sex,
                        "y": rng.integers(0, 2, n), "p": p, "p_old": old})
    return write_parquet(pdf, tmp_path / "in")


def _run(spark, tmp_path, baseline: str, rule: dict):
    inp = _input(tmp_path, baseline)
    cfg = {"dataset": "gate0", "run_date": "2026-12-05", "input": {"path": inp},
           "columns": {"features": ["x"], "sensitive": [{"column": "sex", "privileged": "M"}],
                       "label": {"column": "y"}, "prediction": {"column": "p"},
                       "baseline": {"column": "p_old"}, "row_key": "id"},
           "audits": {"group": {}}, "output": {"path": str(tmp_path / "out")},
           "limits": {"rules": [rule]}}
    res = run_audit_job(spark, parse_config(cfg))
    out = tmp_path / "out" / "run_date=2026-12-05"
    return res, json.loads((out / "summary.json").read_text()), (out / "report.html").read_text()


def _gate(html: str) -> str:
    m = re.search(r'<p class="gate" id="gate">(.*?)</p>', html, re.S)
    assert m, "no gate sentence"
    return " ".join(unescape(re.sub(r"<[^>]+>", "", m.group(1))).split())


def test_a_gate_that_matched_nothing_is_not_evaluated(spark, tmp_path):
    res, summary, html = _run(spark, tmp_path, "never", {
        "no_worse_than_baseline": {"metric": "disparate_impact", "margin": 0.0}})
    assert res.exit_code == 0
    lim = summary["limits"]
    assert lim["status"] == "not evaluated" and lim["checks"] == 0, lim
    (ne,) = lim["not_evaluated"]
    assert ne["rule"] == "disparate_impact no worse than baseline (margin 0)"
    assert "not evaluated (0 checks: disparate_impact of the baseline on sex" in ne["text"]
    # the reason is the baseline's own row: no favourable decision in the reference group
    assert "privileged group is 0" in ne["text"] or "no row" in ne["text"], ne["text"]
    gate = _gate(html)
    assert "not evaluated (0 checks: " in gate, gate
    assert "passed" not in gate and not gate.startswith("✔"), gate


def test_an_identical_baseline_passes_a_margin_0_no_worse_check(spark, tmp_path):
    res, summary, _ = _run(spark, tmp_path, "same", {
        "no_worse_than_baseline": {"metric": "statistical_parity_difference", "margin": 0.0}})
    (row,) = [r for r in res.rows if r["audit"] == "limits"]
    assert (row["value"], row["lower"], row["upper"]) == (0.0, 0.0, 0.0)
    assert row["status"] == "passed", row["detail"]
    assert summary["limits"]["status"] == "passed" and summary["limits"]["not_evaluated"] == []
    assert res.exit_code == 0


def test_a_config_errors_status_is_one_line():
    """A config error lists each bad key on a line of its own; the status file's
    ``error`` is one line that keeps every key (issue 57.8)."""
    import pytest

    from fairspark._run_status import describe_error, status_record
    from fairspark.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        parse_config({"dataset": "d", "run_date": "2026-11-29/../../x", "input": {"path": "x"},
                      "columns": {"prediction": {"column": "p"},
                                  "sensitive": [{"column": "s", "privileged": "a"}]},
                      "output": {"path": "o"}})
    assert "\n" in str(info.value)  # the console's message: one key per line
    line = describe_error(info.value)
    assert "\n" not in line and "\r" not in line
    assert line.startswith("invalid config: config key 'run_date': ")
    assert "; config key 'columns.label': Field required" in line
    rec = status_record("2026-11-29", exit_code=2, error=line)
    assert rec["keys"] == ["run_date", "columns.label"]
