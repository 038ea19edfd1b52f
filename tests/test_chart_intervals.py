"""The group audit's charts draw the interval the verdict beside them uses (issue 58,
item 6): a row a gating limit check judges is drawn with that check's interval (its
``audit = limits`` row: Holm-adjusted over the run's checks), not the audit's own 95%
interval, and the legend, the x label and the caption say so.

A real run (Spark, the runner, the limits judged, then the sections drawn) on a small
table with a binary and a 4-valued attribute and two limits. Every entry the charts
draw (read by wrapping ``_interval_chart``, which still draws) is matched to its row by
its label; where ``metrics.parquet`` holds a gating limit row for that (attribute,
group, metric), the entry's interval is that row's, and it is not the audit's own (the
old charts drew the own interval, so this fails on them). The limit rows are
checked to be one Holm family (one per-check level, the interval named Holm-adjusted).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import write_parquet

from fairspark.group.report import metric_label
from fairspark.metrics._core import CATALOGUE


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    rng = np.random.default_rng(5)
    n = 1600
    sex = rng.choice(["M", "F"], n, p=[0.6, 0.4])
    race = rng.choice(["w", "b", "a", "o"], n, p=[0.55, 0.25, 0.12, 0.08])
    rate = np.where(sex == "M", 0.55, 0.4) - np.select(
        [race == "b", race == "a"], [0.15, 0.05], 0.0)
    pdf = pd.DataFrame({"id": np.arange(n).astype(str), "x": rng.normal(size=n),
                        "sex": sex, "race": race, "y": rng.integers(0, 2, n),
                        "p": (rng.random(n) < rate).astype(int)})
    base = tmp_path_factory.mktemp("chart-intervals")
    return pdf, write_parquet(pdf, base / "in"), base / "out"


def _label_key(title: str, label: str) -> tuple[str, str, str]:
    """(attribute, group, metric) of a chart entry, from the chart's title and label."""
    if title.startswith("Disparate impact"):
        attr, _, rest = label.partition(": ")
        group = "unprivileged" if not rest or rest.startswith("pooled") else rest
        return attr, group, "disparate_impact"
    attr = title.split(":")[0]
    if "each value" in title:
        group, _, short = label.partition(" · ")
        return attr, group, ("statistical_parity_difference" if short == "selection rate"
                             else "tpr_difference")
    name = label.split(" (pooled")[0]
    metric = next(m for m in CATALOGUE if metric_label(m) == name)
    return attr, "unprivileged", metric


def _family_ok(lim: pd.DataFrame) -> None:
    """The gating rows are one Holm family: each names its interval Holm-adjusted, all
    share one per-check level ``alpha*`` per test (at most alpha 0.05: the correction
    only narrows it), and each interval holds its value."""
    p = lim.params.map(json.loads)
    assert set(p.map(lambda q: q["interval"])) == {"Holm-adjusted"}
    for key in ("alpha_violated", "alpha_passed"):
        levels = p.map(lambda q, k=key: q[k]).to_numpy()
        assert np.allclose(levels, levels[0]) and levels[0] <= 0.05 + 1e-12, levels
    assert ((lim.lower <= lim.value) & (lim.value <= lim.upper)).all()


def test_charts_draw_the_interval_the_verdict_uses(spark, run, monkeypatch):
    from fairspark.config import parse_config
    from fairspark.group import report as group_report
    from fairspark.runner import run_audit_job

    _, src, out = run
    calls = []
    real = group_report._interval_chart

    def spy(entries, **kw):
        calls.append((kw["title"], [dict(e) for e in entries]))
        return real(entries, **kw)

    monkeypatch.setattr(group_report, "_interval_chart", spy)
    config = parse_config({
        "dataset": "charts", "run_date": "2026-12-01", "input": {"path": src},
        "columns": {"features": ["x"],
                    "sensitive": [{"column": "sex", "privileged": "M"},
                                  {"column": "race", "privileged": "w"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"},
                    "row_key": "id"},
        "audits": {"group": {"min_group_size": 30}},
        "limits": {"rules": [{"metric": "disparate_impact", "min": 0.8},
                             {"metric": "statistical_parity_difference", "abs_max": 0.1}]},
        "output": {"path": str(out)},
    })
    run_audit_job(spark, config)
    day = out / "run_date=2026-12-01"
    rows = pd.read_parquet(day / "metrics.parquet")
    lim = rows[(rows.audit == "limits") & rows.model.isna()]
    gate = lim[lim.params.map(lambda p: json.loads(p).get("role") == "gate")]
    assert len(gate) >= 6  # sex pooled, race b/a/o, for two rules
    _family_ok(gate)
    own = rows[(rows.audit == "group") & rows.model.isna()].set_index(
        ["attribute", "group", "metric"])
    judged = {(r.attribute, r.group, r.metric): r for r in gate.itertuples()}
    drawn = differs = 0
    assert calls, "no chart drawn"
    for title, entries in calls:
        for e in entries:
            key = _label_key(title, e["label"])
            if key in judged:
                r = judged[key]
                # the check's interval, by name, at the limits' level
                assert (e["lower"], e["upper"]) == pytest.approx((r.lower, r.upper),
                                                                 abs=1e-12), (title, e)
                assert e["interval"] == "95% Holm-adjusted", e
                o = own.loc[key]
                differs += (e["lower"], e["upper"]) != pytest.approx((o.lower, o.upper))
                drawn += 1
            else:  # no gating check: the audit's own interval
                o = own.loc[key]
                assert (e["lower"], e["upper"]) == pytest.approx((o.lower, o.upper)), e
                assert e["interval"] is None, e
    assert drawn >= 6 and differs >= 6, (drawn, differs)
    html = (day / "report.html").read_text("utf-8")
    assert "(on a row a limit judges: the 95% Holm-adjusted interval its verdict uses)" in html
