"""One count of limit checks wherever it is printed (issue 58, item 4): the banner, the
decision box, the Limits section, the CLI's closing lines and summary.json print the
same numbers of violated, inconclusive and passed checks, and they are the numbers
counted here in pandas from metrics.parquet's limits rows."""

from __future__ import annotations

import json
import re

import pandas as pd


def _plain(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_counts_of_limit_checks_agree_everywhere(spark, tmp_path):
    from fairspark.cli import closing_lines
    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job

    rows = []
    for i in range(600):
        sex = "F" if i % 3 == 0 else "M"
        race = ["A", "B", "C"][i % 7 % 3] if i % 50 else "D"  # D: 12 rows, inconclusive
        y = int((i * 7919) % 10 < (4 if sex == "M" else 3))
        pred = int((i * 104729) % 10 < (6 if sex == "M" else 2))
        rows.append((i, sex, race, float(i % 13), y, pred))
    src = tmp_path / "in.parquet"
    spark.createDataFrame(rows, "id long, sex string, race string, x double, y int, pred int") \
        .write.parquet(str(src))
    out = tmp_path / "out"
    config = parse_config({
        "dataset": "tiny", "run_date": "2026-01-02", "input": {"path": str(src)},
        "columns": {"sensitive": [{"column": "sex", "privileged": "M"},
                                  {"column": "race", "privileged": "A"}],
                    "label": {"column": "y"}, "prediction": {"column": "pred"},
                    "row_key": "id"},
        "audits": {"group": {"min_group_size": 5}},
        "limits": {"rules": [
            {"metric": "statistical_parity_difference", "abs_max": 0.1},
            {"metric": "tpr_difference", "abs_max": 0.5}]},
        "output": {"path": str(out)},
    })
    result = run_audit_job(spark, config)
    day = out / "run_date=2026-01-02"
    summary = json.loads((day / "summary.json").read_text("utf-8"))
    metrics = pd.read_parquet(day / "metrics.parquet")
    raw = (day / "report.html").read_text("utf-8")
    html = _plain(raw)

    # recomputed here: the gating limit rows (a pooled view is not a gating check)
    lim = metrics[metrics["audit"] == "limits"]
    role = lim["params"].map(lambda p: json.loads(p or "{}").get("role", "gate"))
    st = lim.loc[role == "gate", "status"].value_counts()
    want = {"checks": int((role == "gate").sum()), "violated": int(st.get("violated", 0)),
            "inconclusive": int(st.get("inconclusive", 0)),
            "passed": int(st.get("passed", 0))}
    # the data are made to give more than one kind of verdict (the test can fail)
    assert want["violated"] > 0 and want["passed"] + want["inconclusive"] > 0, want

    assert {k: summary["limits"][k] for k in want} == want
    # the banner
    assert (f"{want['violated']} of {want['checks']} fairness limit(s) violated") in html
    # the decision box's counts
    box = re.search(r'<p class="counts small">(.*?)</p>', raw, re.DOTALL)
    assert box, "no counts in the box"
    text = _plain(box.group(1))
    assert text.strip().startswith(f"{want['checks']} limit check(s):"), text
    chips = {k: int(v) for v, k in re.findall(r"(\d+) (violated|inconclusive|passed)\b",
                                              text)}
    assert chips == {k: v for k, v in want.items() if k != "checks" and v}, text
    # the Limits section's sentence
    assert (f"{want['checks']} limit check(s): {want['violated']} violated, "
            f"{want['passed']} passed, {want['inconclusive']} inconclusive") in html
    # the CLI's closing lines
    first = closing_lines(result)[0]
    assert (f"limits: {want['violated']} of {want['checks']} checks violated, "
            f"{want['inconclusive']} inconclusive, {want['passed']} passed") in first
