"""The window, baseline and limits paths and the README's notebook example, on a classic
and on a Spark Connect session: the same rows on both.

Every test here is marked ``both_kinds``: the classic run records its rows
(``same_on_both_kinds``), the Connect run (``FAIRSPARK_TEST_SESSION=connect``) asserts
its rows equal them (values and intervals to 1e-12). Each test also checks numbers
against a reference computed here with pandas, so a run of either kind can fail alone.
The inputs are written with pyarrow (no Spark), so both kinds read the same files.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import write_parquet

import fairspark
from fairspark.config import parse_config
from fairspark.runner import compute_run

pytestmark = pytest.mark.both_kinds

ROOT = Path(__file__).resolve().parents[1]
#: the columns of the long rows that are numbers of the data (timings live elsewhere)
_NUMBERS = ["value", "lower", "upper"]


def _rows(rows: pd.DataFrame | list[dict], audit: str) -> pd.DataFrame:
    """``audit``'s rows: its string columns and its numbers (as floats)."""
    rows = pd.DataFrame(rows)
    rows = rows[rows["audit"] == audit].reset_index(drop=True)
    keep = [c for c in rows.columns if c in _NUMBERS or rows[c].dtype == object]
    return rows[keep].astype({c: float for c in _NUMBERS if c in keep})


def _one(rows: pd.DataFrame, **where) -> pd.Series:
    sel = rows
    for k, v in where.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, (where, sel)
    return sel.iloc[0]


# ------------------------------------------------------------------ baseline, limits
@pytest.fixture(scope="module")
def two_decisions() -> pd.DataFrame:
    """A baseline decision and a challenger that approves 12% more privileged (M) rows the
    baseline turned down (a wider selection-rate gap on the same rows); a three-valued
    attribute whose group c loses 30% of its approvals."""
    rng = np.random.default_rng(7)
    n = 3000
    sex = rng.choice(["M", "F"], n, p=[0.55, 0.45])
    x = rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-x))).astype(int)
    old = (x + 0.3 * (sex == "M") > 0.2).astype(int)
    new = old.copy()
    new[(sex == "M") & (old == 0) & (rng.random(n) < 0.12)] = 1
    grp = rng.choice(["a", "b", "c"], n)
    new[(grp == "c") & (new == 1) & (rng.random(n) < 0.3)] = 0
    return pd.DataFrame({"id": np.arange(n).astype(str), "x": x, "sex": sex, "grp": grp,
                         "y": y, "p_old": old, "p_new": new})


@pytest.fixture(scope="module")
def two_decisions_df(spark, two_decisions, tmp_path_factory):
    path = write_parquet(two_decisions, tmp_path_factory.mktemp("two-decisions") / "in",
                         n_files=3)
    return spark.read.parquet(path)


def test_baseline_comparison_same_on_both_kinds(two_decisions_df, two_decisions,
                                                same_on_both_kinds):
    """The champion/challenger path (``baseline=``): each decision's rows and the paired
    differences with their intervals."""
    pdf = two_decisions
    res = fairspark.audit(two_decisions_df, sensitive={"sex": "M"}, label="y",
                          prediction="p_new", baseline="p_old", features=["x"],
                          row_key="id", audits=["group"], seed=3)
    assert res.summary["audits"]["group"]["status"] == "ok"
    comp = res.comparison
    sp = _one(comp, attribute="sex", group="unprivileged",
              metric="statistical_parity_difference")
    gap = {c: pdf[pdf.sex == "F"][c].mean() - pdf[pdf.sex == "M"][c].mean()
           for c in ("p_new", "p_old")}
    assert sp.challenger == pytest.approx(gap["p_new"], abs=1e-12)
    assert sp.baseline == pytest.approx(gap["p_old"], abs=1e-12)
    assert sp.difference == pytest.approx(gap["p_new"] - gap["p_old"], abs=1e-12)
    assert sp.lower < sp.difference < sp.upper
    rows = _rows(res.rows, "group")
    assert (rows.model == "challenger_minus_baseline").sum() == len(comp) > 0
    same_on_both_kinds("path_baseline", rows)


def test_limits_same_on_both_kinds(two_decisions_df, two_decisions, same_on_both_kinds):
    """The limits path: a plain rule checked per group of a three-valued attribute (each
    against the privileged group, Holm-adjusted), a rule against the baseline, the gate
    and the exit code."""
    pdf = two_decisions
    limits = {"rules": [
        {"metric": "disparate_impact", "min": 0.8},
        {"no_worse_than_baseline": {"metric": "statistical_parity_difference",
                                    "margin": 0.01}}]}
    res = fairspark.audit(two_decisions_df, sensitive={"sex": "M", "grp": "a"}, label="y",
                          prediction="p_new", baseline="p_old", features=["x"],
                          row_key="id", audits=["group"], limits=limits, seed=3)
    lim = _rows(res.rows, "limits")
    role = lim["params"].map(lambda p: json.loads(p)["role"])
    # disparate impact of b and c against a, by pandas
    rate = pdf.groupby("grp")["p_new"].mean()
    gate = lim[(lim.attribute == "grp") & (role == "gate")
               & (lim.metric == "disparate_impact")]
    got = dict(zip(gate.group, gate.value, strict=True))
    assert got == pytest.approx({g: rate[g] / rate["a"] for g in ("b", "c")}, rel=1e-12)
    assert _one(gate, group="c").status == "violated"  # c lost 30% of its approvals
    worse = _one(lim, model="distance_challenger_minus_baseline", attribute="sex")
    assert worse.status == "violated" and worse.lower > 0.01
    assert res.exit_code == 3 and res.summary["limits"]["gates"]
    same_on_both_kinds("path_limits", lim)


# ------------------------------------------------------------------ window
WINDOW_DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(4)]


def test_window_same_on_both_kinds(adult_pdf, tmp_path, spark, same_on_both_kinds):
    """The incremental nightly window: one state per day partition written, merged, read
    back on the rerun (nothing aggregated again), and the group rows of the merged
    states."""
    pdf = adult_pdf.iloc[:6000].copy()
    base = tmp_path / "in"
    for i, d in enumerate(WINDOW_DAYS):  # rows dealt round-robin to the days
        folder = base / f"day={d.isoformat()}"
        folder.mkdir(parents=True)
        pdf.iloc[i::len(WINDOW_DAYS)].to_parquet(folder / "part-00000.parquet", index=False)
    raw = {
        "dataset": "window_kinds", "seed": 11, "run_date": WINDOW_DAYS[-1].isoformat(),
        "input": {"path": str(base), "partition_column": "day"},
        "columns": {"sensitive": [{"column": "sex", "privileged": "Male"},
                                  {"column": "race", "privileged": ["White"]}],
                    "label": {"column": "income", "positive": ">50K"},
                    "prediction": {"column": "prediction", "positive": 1},
                    "row_key": "row_id"},
        "audits": {"group": {}},
        "output": {"path": str(tmp_path / "out"), "report": False},
        "window": {"days": len(WINDOW_DAYS)},
    }
    first = compute_run(spark, parse_config(raw))
    days = [d.isoformat() for d in WINDOW_DAYS]
    assert set(first.summary["window"]["aggregated"]) == set(days)
    assert first.summary["rows"]["audited"] == len(pdf)
    rows = _rows(first.long_rows, "group")
    rate = pdf.groupby("sex")["prediction"].mean()
    di = _one(rows, attribute="sex", group="unprivileged", metric="disparate_impact")
    assert di.value == pytest.approx(rate["Female"] / rate["Male"], rel=1e-12)
    # the rerun reads every day's state back and gives the same numbers, bit for bit
    again = compute_run(spark, parse_config(raw))
    assert again.summary["window"]["aggregated"] == {}
    assert again.summary["window"]["reused"] == days
    pd.testing.assert_frame_equal(_rows(again.long_rows, "group"), rows, rtol=0, atol=0)
    same_on_both_kinds("path_window", rows)


# ------------------------------------------------------------------ README
def _readme_notebook_block() -> str:
    """The README's one python block (the notebook example), as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (code,) = [m.group(2) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text,
                                               flags=re.DOTALL | re.MULTILINE)
               if m.group(1) == "python"]
    assert "fairspark.audit(" in code and "scored_df" in code
    return code


def test_readme_notebook_example_same_on_both_kinds(spark, adult_pdf, tmp_path, monkeypatch,
                                                    same_on_both_kinds):
    """The README's notebook example, run as written on both kinds. ``scored_df`` has the
    demo table's columns (a score and a 0/1 ``prediction`` as doubles), here the bundled
    Adult test part with a rule-based decision written with pyarrow, so both kinds read
    the same file (the demo trains its model with Spark ML; tests/test_readme.py runs
    the example on the demo's own table)."""
    pdf = adult_pdf.iloc[:3000].copy()
    pdf["prediction"] = pdf["prediction"].astype(float)
    pdf["score"] = 1 / (1 + np.exp(-(pdf["education_num"] - 12) / 2))  # beside it
    path = write_parquet(pdf, tmp_path / "scored", n_files=2)
    monkeypatch.chdir(tmp_path)
    ns = {"scored_df": spark.read.parquet(path)}
    exec(compile(_readme_notebook_block(), "README.md (python block)", "exec"), ns)
    result = ns["result"]
    assert result.summary["audits"]["group"]["status"] == "ok"
    assert result.summary["audits"]["hfm"]["status"] == "ok"
    feats = result.summary["rows"]["features"]
    assert "score" not in feats["numeric"] and "score" not in feats["categorical"]
    group = _rows(result.rows, "group")
    rate = pdf.groupby("race")["prediction"].mean()
    di = _one(group, attribute="race", group="unprivileged", metric="disparate_impact")
    white = pdf.race == "White"
    assert di.value == pytest.approx(pdf.prediction[~white].mean() / rate["White"],
                                     rel=1e-12)
    lim = _rows(result.rows, "limits")
    assert len(lim) and result.exit_code == (3 if result.summary["limits"]["gates"] else 0)
    same_on_both_kinds("readme_notebook_group", group)
    same_on_both_kinds("readme_notebook_limits", lim)
    same_on_both_kinds("readme_notebook_hfm", _rows(result.rows, "hfm"))
