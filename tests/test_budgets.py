"""Issue 29 item 8: every audit stops within 2x its ``timeout_s`` plus 5 s.

Each audit gets a budget far below what it needs on 5,000 rows of UCI Adult (about
100 encoded features); the wall time of its stage is measured here, with
``time.monotonic`` around the runner's call of the audit, not read from fairspark's
own timings. The issue saw hfm run 31 s on a 1 s budget and mdfa 12 s on 0.5 s: the
features were encoded (and mdfa's torch imported) inside the first audit's budget,
and the runner waited up to 30 s for an audit that did not stop.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml
from conftest import write_parquet

from fairspark import cli, runner
from fairspark.status import Status

#: audit -> (settings, budget in seconds); each needs far more than its budget here
CASES = {
    "group": ({}, 0.0001),
    "hfm": ({"method": "exact"}, 1.0),
    "mdfa": ({}, 0.5),
    "correlation": ({"rounds": 30, "n_samples": 1000}, 1.0),
}


@pytest.fixture(scope="module")
def adult_table(adult_pdf, tmp_path_factory):
    sample = adult_pdf.sample(n=5000, random_state=8).reset_index(drop=True)
    sample["income"] = (sample["income"] == ">50K").astype(int)
    return write_parquet(sample, tmp_path_factory.mktemp("budgets") / "in")


@pytest.fixture
def stage_seconds(monkeypatch):
    """Wall seconds of each audit's stage, timed around ``runner._run_with_budget``."""
    seen: dict[str, float] = {}
    original = runner._run_with_budget

    def timed(spec, ctx, params):
        t0 = time.monotonic()
        try:
            return original(spec, ctx, params)
        finally:
            seen[spec.name] = time.monotonic() - t0

    monkeypatch.setattr(runner, "_run_with_budget", timed)
    return seen


@pytest.mark.parametrize("name", list(CASES))
def test_every_audit_stops_within_twice_its_budget_plus_5_s(spark, adult_table, tmp_path,
                                                            stage_seconds, capsys, name):
    settings, budget = CASES[name]
    audits = {name: {**settings, "timeout_s": budget}}
    if name != "group":
        audits["group"] = {}  # runs first and completes: the others are published
    cfg = {
        "dataset": "adult-budget", "run_date": "2026-11-29", "input": {"path": adult_table},
        "columns": {"features": "all_others",
                    "sensitive": [{"column": "sex", "privileged": "Male"}],
                    "label": {"column": "income", "positive": 1},
                    "prediction": {"column": "prediction", "positive": 1},
                    "row_key": "row_id"},
        "audits": audits,
        "output": {"path": str(tmp_path / "out"), "report": False},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(tmp_path / "c.yaml"), "-q"], under_submit=True)
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Traceback" not in err
    s = json.loads((tmp_path / "out" / "run_date=2026-11-29" / "summary.json").read_text())
    info = s["audits"][name]
    assert info["status"] == Status.TIMED_OUT, info
    assert f"ran past its time budget of {budget:g} s" in info["detail"]
    print(f"{name}: stage {stage_seconds[name]:.2f} s on a {budget:g} s budget")
    assert stage_seconds[name] <= 2 * budget + 5, (name, stage_seconds[name])
    if name != "group":
        assert s["audits"]["group"]["status"] == Status.OK
    assert s["exit_code"] == 4
