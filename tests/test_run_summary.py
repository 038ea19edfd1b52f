"""``summary.json`` as a typed :class:`~fairspark.run_summary.RunSummary` (issue 59 item 3).

The file is written and read in one place; a summary written before the typed form
(no ``interval_level`` / ``performance`` keys, keys this version does not know) reads
back with every key it had, and the run's interval level and model line are fields of
the run: chosen once, not by whichever audit a reader meets first.
"""

from __future__ import annotations

import copy
import json
import math

from fairspark.numbers import fmt_count, fmt_detail, fmt_level, fmt_setting, format_number
from fairspark.registry import specs as _registered
from fairspark.report.decision import audited_facts
from fairspark.report.render import render_report_html
from fairspark.run_summary import AuditEntry, RunSummary, run_level

#: a summary.json as an earlier night wrote it (before the typed summary): hfm runs
#: first and states no level, correlation states 0.9, group (second) has the model line
OLD = {
    "run_date": "2026-11-29",
    "dataset": "adult",
    "config_hash": "abc123",
    "started_utc": "2026-11-29T01:00:00Z",
    "versions": {"fairspark": "0.9", "schema": "3"},
    "input": {"path": "/data/in.parquet", "table": None, "format": "parquet",
              "where": None, "label": "y", "decision": "p", "favourable": "positive",
              "label_positive": [1], "decision_positive": [1]},
    "rows": {"read": 1000, "audited": 990, "unlabelled": 0, "dropped": {"null_y": 10},
             "weighted": False, "features": {"numeric": ["x"], "categorical": []},
             "attributes": {"sex": {"values": {"M": 600, "F": 390},
                                    "privileged": ["M"], "kind": "values"}}},
    "seeds": {"seed": 7},
    "audits": {
        "hfm": {"method": "exact", "status": "ok", "seconds": 1.5, "params": {"k": 3}},
        "correlation": {"status": "ok", "params": {"ci_level": 0.9}},
        "group": {"performance": {"accuracy": 0.8125, "base_rate": 0.25,
                                  "positive_rate": 0.3, "labelled_rows": 990},
                  "status": "ok", "seconds": 2.0, "params": {"ci_level": 0.95}},
    },
    "limits": {"status": "passed", "gates": False, "would_gate": False,
               "fail_on_violation": True, "checks": 2, "violated": 0,
               "inconclusive": 0, "passed": 2, "pooled": 0, "alpha": 0.05},
    "exit_code": 0,
    "stage_timings": {"read": 0.5},
    "spark": {"session": "classic", "master": "local[2]"},
    "command": "fairspark audit",
    "input_schema": {"features": [], "hash": "h"},
    "previous": {"run_date": "2026-11-28", "config_hash": "abc123", "items": {},
                 "input": {"path": "/data/in.parquet", "table": None, "where": None},
                 "rows_audited": 980},
    # a key a later version may add: kept as it was
    "something_new": {"a": [1, 2]},
}


def test_an_earlier_nights_summary_reads_back_with_every_key_it_had():
    old = copy.deepcopy(OLD)
    run = RunSummary.from_json(old)
    out = run.to_json()
    assert old == OLD  # reading does not change the mapping it reads
    # every key and value of the old file is written back as it was
    assert {k: out[k] for k in OLD} == OLD
    # and the two fields of the run are added
    assert set(out) - set(OLD) == {"interval_level", "performance"}
    # typed access
    assert run.rows.audited == 990 and run.rows.attributes["sex"].privileged == ["M"]
    assert run.input.decision_positive == [1] and run.input.threshold is None
    assert run.audits["hfm"].results == {"method": "exact"}
    assert run.limits is not None and run.limits.passed == 2 and not run.limits.gating()
    assert run.previous is not None and run.previous.rows_audited == 980
    assert run.unprivileged_values == {"sex": "F"}


def test_the_interval_level_and_model_line_are_the_runs_not_the_first_audits():
    run = RunSummary.from_json(OLD)
    # the first audit that states a level is correlation (hfm states none)
    assert run.interval_level == 0.9
    # the model line is the audit's that measured it, though it is not the first audit
    assert run.performance is not None
    assert (run.performance.accuracy, run.performance.labelled_rows) == (0.8125, 990)
    # written once, the file's fields win over the audits' (no second derivation)
    stored = {**OLD, "interval_level": 0.99, "performance": None}
    again = RunSummary.from_json(stored)
    assert again.interval_level == 0.99 and again.performance is None
    # no audit states one: the default level, no model line
    none = RunSummary.from_json({"audits": {"hfm": {"status": "ok"}}})
    assert none.interval_level == 0.95 and none.performance is None
    level, perf = run_level({"a": AuditEntry(params={"ci_level": 1.5}),
                             "b": AuditEntry(params={"ci_level": 0.8})})
    assert (level, perf) == (0.8, None)  # an impossible level is not a level


def test_text_round_trip_and_non_finite_numbers():
    run = RunSummary.from_json({**OLD, "stage_timings": {"read": float("nan")}})
    text = run.to_text()
    assert "NaN" not in text  # JSON has no NaN: null
    back = RunSummary.from_text(text)
    assert back.stage_timings == {"read": None}
    assert back.to_json() == {**run.to_json(), "stage_timings": {"read": None}}
    # a summary without any key reads (every default)
    empty = RunSummary.from_text("{}")
    assert empty.audits == {} and empty.limits is None and empty.previous is None


def test_the_first_screen_reads_the_runs_level_and_model_line():
    run = RunSummary.from_json(OLD)
    html = render_report_html(summary=run, rows=[], sections=[], specs=_registered())
    assert "<b>90% confidence interval</b>" in html  # the run's level, not group's 0.95
    facts = dict(audited_facts(run))
    assert facts["Performance"].startswith("accuracy 0.812, base rate 0.250")
    # the same page from the parsed file
    assert render_report_html(summary=json.loads(run.to_text()), rows=[], sections=[],
                              specs=_registered()) == html


def test_the_number_rule():
    # significant digits, a real minus, missing and infinities
    assert format_number(-0.012345) == "\u22120.0123"
    assert format_number(0.5, decimals=3, signed=True) == "+0.500"
    assert format_number(None) == format_number(float("nan")) == "\u2013"
    assert format_number(-math.inf) == "\u2212\u221e"
    assert fmt_count(1234567) == "1,234,567" and fmt_count(None) == "n/a"
    # a setting is written as the user wrote it; a level as a percentage
    assert fmt_setting(0.1) == "0.1" and fmt_setting(1e-6) == "1e-06"
    assert fmt_level(0.95) == "95%" and fmt_level(0.975) == "97.5%"
    # a number in stored detail text is Python's own text, whatever the display rule
    for x in (0.1234567, -2.5e-7, math.inf, -math.inf, math.nan, 3):
        assert fmt_detail(x) == format(x, ".3g") and fmt_detail(x, 4) == format(x, ".4g")
