"""One word per gate state, persistence from history, limits per group.

Expectations are computed here: persistence by walking the run dates by hand,
per-group disparate impact with fairlearn's MetricFrame on Adult, the one-sided
p-values from the printed intervals and Holm by hand.
"""

from __future__ import annotations

import json
import re
from html import unescape

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import holm_adjusted as _holm
from conftest import write_parquet
from scipy.stats import norm

from fairspark import cli
from fairspark.config import LimitsConfig
from fairspark.nightly.gating import evaluate_limits, limits_summary
from fairspark.registry import specs as _registered

SPECS = _registered()


def _row(value, lower, upper, *, metric="statistical_parity_difference", attribute="sex",
         group="unprivileged"):
    return {"audit": "group", "metric": metric, "attribute": attribute, "group": group,
            "metric_b": None, "model": None, "value": value, "lower": lower, "upper": upper,
            "status": "ok", "params": json.dumps({"ci_level": 0.95})}


def _hist(statuses: dict[str, str | None], *, group="unprivileged"):
    """Earlier runs' limit rows: run date -> status (None: the run has no such check)."""
    rows = []
    for d, st in statuses.items():
        # every run has some headline row, so its date is in the history
        rows.append({"run_date": d, "audit": "group", "attribute": "sex", "group": group,
                     "metric": "disparate_impact", "metric_b": None, "model": None,
                     "status": "ok"})
        if st is not None:
            rows.append({"run_date": d, "audit": "limits", "attribute": "sex", "group": group,
                         "metric": "statistical_parity_difference",
                         "metric_b": "|statistical_parity_difference| <= 0.1", "model": None,
                         "status": st})
    return pd.DataFrame(rows)


_LIMITS = LimitsConfig.model_validate(
    {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1}]})


@pytest.mark.parametrize(("history", "expected"), [
    ({}, 1),
    ({"2026-11-01": "violated", "2026-11-02": "violated"}, 3),
    # the chain stops at the newest run that was not violated
    ({"2026-11-01": "violated", "2026-11-02": "passed", "2026-11-03": "violated"}, 2),
    # ... and at a run without this check (the rule was not configured then)
    ({"2026-11-01": "violated", "2026-11-02": None, "2026-11-03": "violated"}, 2),
])
def test_persistence_is_counted_from_history_for_a_rule_of_persistence_1(history, expected):
    checks, rows, _ = evaluate_limits([_row(-0.3, -0.35, -0.25)], limits=_LIMITS,
                                      history=_hist(history) if history else None, specs=SPECS)
    assert checks[0].consecutive == expected
    assert f"violated {expected} run(s) in a row, gates at 1" in rows[0].detail
    from fairspark.report.limits import how_in_words

    words = how_in_words(checks[0], correction="holm", n_statistical=1)
    assert f"violated {expected} run{'s' if expected > 1 else ''} in a row" in words


def test_summary_gate_fields_agree_with_failing_on_or_off():
    checks, _, unmatched = evaluate_limits([_row(-0.3, -0.35, -0.25)], limits=_LIMITS, specs=SPECS)
    off = limits_summary(checks, unmatched, limits=_LIMITS, fail_on_violation=False)
    on = limits_summary(checks, unmatched, limits=_LIMITS, fail_on_violation=True)
    assert off["would_gate"] is True and off["gates"] is False
    assert on["would_gate"] is True and on["gates"] is True
    assert off["fail_on_violation"] is False and off["violated"] == 1


# ------------------------------------------------------------- through the job


@pytest.fixture(scope="module")
def biased(tmp_path_factory):
    rng = np.random.default_rng(28)
    n = 2000
    sex = rng.choice(["M", "F"], n)
    pdf = pd.DataFrame({
        "id": np.arange(n).astype(str), "x": rng.normal(size=n), "sex": sex,
        "y": rng.integers(0, 2, n),
        "p": (rng.random(n) < np.where(sex == "M", 0.6, 0.3)).astype(int),
    })
    return write_parquet(pdf, tmp_path_factory.mktemp("biased28") / "in")


def _cfg(tmp_path, inp, **extra):
    cfg = {"dataset": "biased", "input": {"path": inp},
           "columns": {"features": ["x"], "sensitive": [{"column": "sex", "privileged": "M"}],
                       "label": {"column": "y"}, "prediction": {"column": "p"},
                       "row_key": "id"},
           "audits": {"group": {}},
           "output": {"path": str(tmp_path / "out")}}
    cfg.update(extra)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return str(p)


def _main(cfg, date, *extra):
    return cli.main(["audit", "--config", cfg, "--run-date", date, "-q", *extra],
                    under_submit=True)


def _decision(html: str) -> str:
    i = html.index('id="decision"')
    return unescape(re.sub(r"<[^>]+>", " ", html[i:html.index("</section>", i)]))


def test_a_run_that_does_not_gate_says_would_gate_and_counts_three_in_a_row(
        spark, biased, tmp_path):
    limits = {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1}]}
    cfg = _cfg(tmp_path, biased, limits=limits)
    for d in ("2026-12-01", "2026-12-02", "2026-12-03"):
        assert _main(cfg, d, "--no-fail-on-violation") == 0
    run = tmp_path / "out" / "run_date=2026-12-03"
    summary = json.loads((run / "summary.json").read_text())
    lim = summary["limits"]
    # the fields agree with the exit code: nothing says "gates" beside exit code 0
    assert summary["exit_code"] == 0
    assert lim["gates"] is False and lim["would_gate"] is True
    assert lim["fail_on_violation"] is False
    status = json.loads((tmp_path / "out" / "_status" / "run_date=2026-12-03.json").read_text())
    assert status["exit_code"] == 0 and status["limits"]["gates"] is False
    html = (run / "report.html").read_text()
    box = _decision(html)
    assert "violated (would gate)" in " ".join(box.split())
    assert "(gates)" not in box
    m = pd.read_parquet(run / "metrics.parquet")
    row = m[m.audit == "limits"].iloc[0]
    assert row.status == "violated"
    assert "violated 3 run(s) in a row" in row.detail
    assert json.loads(row.params)["would_gate"] is True
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    assert "violated 3 runs in a row" in text
    # the same data with failing on: exit 3 and the word is "gates"
    assert _main(cfg, "2026-12-04") == 3
    run4 = tmp_path / "out" / "run_date=2026-12-04"
    s4 = json.loads((run4 / "summary.json").read_text())
    assert s4["exit_code"] == 3 and s4["limits"]["gates"] is True
    box4 = " ".join(_decision((run4 / "report.html").read_text()).split())
    assert "violated (gates)" in box4 and "would gate" not in box4


# --------------------------------------------- limits per group against the reference


@pytest.fixture(scope="module")
def adult_run(spark, adult_pdf, tmp_path_factory):
    base = tmp_path_factory.mktemp("adult28")
    cols = ["row_id", "age", "sex", "race", "income", "prediction"]
    inp = write_parquet(adult_pdf[cols], base / "in")
    cfg = {"dataset": "adult_rule", "input": {"path": inp},
           "columns": {"features": ["age"],
                       "sensitive": [{"column": "sex", "privileged": "Male"},
                                     {"column": "race", "privileged": "White"}],
                       "intersections": [["sex", "race"]],
                       "label": {"column": "income", "positive": ">50K"},
                       "prediction": {"column": "prediction", "positive": 1},
                       "row_key": "row_id"},
           "audits": {"group": {}},
           "limits": {"rules": [{"metric": "disparate_impact", "min": 0.8}],
                      "correction": "holm"},
           "output": {"path": str(base / "out")}}
    p = base / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    code = _main(str(p), "2026-12-01")
    run = base / "out" / "run_date=2026-12-01"
    m = pd.read_parquet(run / "metrics.parquet")
    return code, m, json.loads((run / "summary.json").read_text()), (
        run / "report.html").read_text()


def _expected_di(pdf, column, reference):
    """Disparate impact of every group against the reference, with fairlearn."""
    from fairlearn.metrics import MetricFrame, selection_rate

    mf = MetricFrame(metrics=selection_rate, y_true=(pdf["income"] == ">50K").astype(int),
                     y_pred=pdf["prediction"], sensitive_features=pdf[column])
    sr = mf.by_group
    return {str(g): float(sr[g] / sr[reference]) for g in sr.index if g != reference}


def test_limits_are_checked_on_each_race_group_against_white(adult_run, adult_pdf):
    code, m, summary, _ = adult_run
    lim = m[m.audit == "limits"]
    params = lim["params"].map(json.loads)
    race = lim[(lim.attribute == "race") & (params.map(lambda p: p["role"]) == "gate")]
    expected = _expected_di(adult_pdf, "race", "White")
    assert set(race["group"]) == set(expected)  # every group, each against White
    got = dict(zip(race["group"], race["value"], strict=True))
    for g, v in expected.items():
        assert got[g] == pytest.approx(v, rel=1e-9), g
    # the pooled view is kept, labelled, and never gates
    pooled = lim[(lim.attribute == "race") & (lim.group == "unprivileged")]
    assert len(pooled) == 1
    pp = json.loads(pooled.iloc[0].params)
    assert pp["role"] == "pooled" and pp["would_gate"] is False
    sr = adult_pdf.groupby(adult_pdf["race"] == "White")["prediction"].mean()
    assert pooled.iloc[0].value == pytest.approx(sr[False] / sr[True], rel=1e-9)
    # a binary attribute has one check, its unprivileged group
    sex = lim[lim.attribute == "sex"]
    assert list(sex["group"]) == ["unprivileged"]
    assert json.loads(sex.iloc[0].params)["role"] == "gate"
    # the gate and the exit code follow the per-group checks only
    assert summary["limits"]["checks"] == int((params.map(lambda p: p["role"]) == "gate").sum())
    assert summary["limits"]["pooled"] == int((params.map(lambda p: p["role"]) == "pooled").sum())
    assert code == (3 if summary["limits"]["gates"] else 0)


def test_intersections_are_checked_per_combination(adult_run, adult_pdf):
    _, m, _, _ = adult_run
    lim = m[(m.audit == "limits") & (m.attribute == "sex*race")]
    gate = lim[lim["params"].map(lambda p: json.loads(p)["role"]) == "gate"]
    combo = adult_pdf["sex"] + "|" + adult_pdf["race"]
    sr = adult_pdf.groupby(combo)["prediction"].mean()
    expected = {g: sr[g] / sr["Male|White"] for g in sr.index if g != "Male|White"}
    # every combination with a usable value (a zero-rate reference would be not computed)
    assert set(gate["group"]) == {g for g, v in expected.items() if np.isfinite(v)}
    for g, v in zip(gate["group"], gate["value"], strict=True):
        assert v == pytest.approx(expected[g], rel=1e-9), g


def test_holm_counts_every_group_comparison(adult_run):
    _, m, _, _ = adult_run
    lim = m[m.audit == "limits"]
    gate = lim[lim["params"].map(lambda p: json.loads(p)["role"]) == "gate"]
    n = len(gate)
    assert n > 3  # sex, the race groups and the sex x race combinations
    assert all(f"holm over {n} checks" in d for d in gate["detail"])
    # the p-values by hand from the audit's own intervals (the limits row prints the
    # Holm-adjusted one and keeps the own one in params): one-sided for value >= 0.8,
    # on the log scale where a ratio's own interval is symmetric
    z = norm.ppf(0.975)
    raw = []
    own = [json.loads(p)["own_interval"] for p in gate["params"]]
    for v, (lo, hi) in zip(gate["value"], own, strict=True):
        v, lo, hi = np.log(v), np.log(lo), np.log(hi)
        excess = np.log(0.8) - v
        se = ((hi - v) if excess > 0 else (v - lo)) / z
        raw.append(norm.sf(excess / se))
    adj = _holm(raw)
    printed = [float(re.search(r"p\(violated\)=([0-9.e+-]+)", d).group(1))
               for d in gate["detail"]]
    for a, b in zip(adj, printed, strict=True):
        assert b == pytest.approx(a, rel=5.1e-3, abs=1e-12)  # printed at 3 digits
    # a verdict follows the adjusted p-value at alpha 0.05
    for a, st in zip(adj, gate["status"], strict=True):
        if a <= 0.05:
            assert st == "violated"


def test_the_report_names_the_worst_group(adult_run, adult_pdf):
    _, m, _, html = adult_run
    lim = m[(m.audit == "limits") & (m.attribute == "race")]
    gate = lim[lim["params"].map(lambda p: json.loads(p)["role"]) == "gate"]
    violated = gate[gate.status == "violated"]
    assert len(violated), "Adult's rule-based decision violates DI >= 0.8 for some race group"
    # the worst: among groups of at least 30 rows and 5 favourable decisions (by hand),
    # the violated one whose printed (Holm-adjusted) interval's upper end is lowest
    size = adult_pdf.groupby("race")["prediction"].agg(["count", "sum"])
    big = [g for g in size.index if size.loc[g, "count"] >= 30 and size.loc[g, "sum"] >= 5]
    worst = violated[violated.group.isin(big)].sort_values("upper").iloc[0]["group"]
    box = " ".join(_decision(html).split())
    (line,) = [seg for seg in box.split("✖")[1:] if " race " in seg[:40]
               and "disparate impact" in seg]
    n, fav = int(size.loc[worst, "count"]), int(size.loc[worst, "sum"])
    assert f"worst group {worst} (n {n:,}, {fav:,} favourable):" in line
    assert f"{len(violated)} of {len(gate)} groups violated" in line
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    assert f"race: disparate_impact >= 0.8 checked on each of {len(gate)} group(s)" in text
    assert f"worst {worst}" in text
    assert "all unprivileged pooled (extra view)" in text
    assert "pooled view, does not gate" in text


# ------------------------------------- change since the last run, what was audited


def _expected_word(a, b):
    """worse / better / within noise for a difference metric, by hand."""
    h = np.hypot((a.upper - a.lower) / 2, (b.upper - b.lower) / 2)
    if abs(b.value - a.value) <= h:
        return "within noise"
    return "worse" if abs(b.value) > abs(a.value) else "better"


def test_a_where_change_is_on_the_first_screen_and_words_agree(spark, biased, tmp_path):
    limits = {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1}]}
    cfg = _cfg(tmp_path, biased, limits=limits)
    assert _main(cfg, "2026-12-01", "--no-fail-on-violation") == 0
    assert _main(cfg, "2026-12-02", "--no-fail-on-violation") == 0
    where = "x > -0.5"
    assert _main(cfg, "2026-12-03", "--no-fail-on-violation", "--where", where) == 0
    out = tmp_path / "out"
    s2 = json.loads((out / "run_date=2026-12-02" / "summary.json").read_text())
    s3 = json.loads((out / "run_date=2026-12-03" / "summary.json").read_text())
    n2, n3 = s2["rows"]["audited"], s3["rows"]["audited"]
    assert n3 < n2 * 0.9
    html2 = (out / "run_date=2026-12-02" / "report.html").read_text()
    html3 = (out / "run_date=2026-12-03" / "report.html").read_text()
    # same data both nights: nothing said about differing data
    assert 'id="differs"' not in html2
    assert "same configuration and data window" in " ".join(_decision(html2).split())
    first = " ".join(_decision(html3).split())
    assert "Tonight's data differ from the run of 2026-12-02" in first
    assert f"the data window changed: all rows then, where {where} now" in first
    assert f"rows audited went from {n2:,} to {n3:,}" in first
    # the decision box and the trends say the same word, the one computed here
    m2 = pd.read_parquet(out / "run_date=2026-12-02" / "metrics.parquet")
    m3 = pd.read_parquet(out / "run_date=2026-12-03" / "metrics.parquet")

    def spd(m):
        return m[(m.audit == "group") & (m.group == "unprivileged")
                 & (m.metric == "statistical_parity_difference")].iloc[0]

    word = _expected_word(spd(m2), spd(m3))
    box = html3[html3.index('id="decision"'):html3.index("</section>",
                                                       html3.index('id="decision"'))]
    (line,) = [tr for tr in box.split("<tr")[2:] if "statistical parity" in tr]
    cells = [unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in line.split("<td")[1:]]
    since = cells[4].split(">", 1)[-1].strip()
    assert since == (word if word != "within noise" else "still there, within noise")
    trends = html3[html3.index("Trends over previous runs"):]
    (row,) = re.findall(r"<tr class='\w*'><td>group · sex · statistical_parity_difference"
                        r"</td>.*?</tr>", trends)
    flag = re.search(r"<td>(?:<b>([^<]+)</b>|–)</td><td class='small'>", row).group(1)
    assert flag == word
    # no line anywhere calls a change better or worse inside its uncertainty
    if word == "within noise":
        assert "better" not in since and "worse" not in since


def test_what_was_audited_is_on_the_first_screen(adult_run, adult_pdf):
    _, _, summary, html = adult_run
    box = " ".join(_decision(html).split())
    assert "Dataset adult_rule (" in box
    assert "not named (set model.name and model.version)" in box
    # the favourable values as they are in the data
    assert "prediction = 1" in box and "income = >50K" in box
    assert "all rows of the input (no where filter)" in box
    assert f"{summary['rows']['audited']:,} audited of {summary['rows']['read']:,} read" in box
    n = adult_pdf["sex"].value_counts()
    assert f"sex: Male (privileged): {n['Male']:,}; Female: {n['Female']:,}" in box
    r = adult_pdf["race"].value_counts()
    assert f"race: White (privileged): {r['White']:,}; Black: {r['Black']:,}" in box
