"""Column names with dots, spaces, unicode and a backtick work in every audit.

One table is written twice as real Parquet: once with plain column names, once with
awkward ones (``income.bracket``, ``hours per week``, ``ci`ty``, ``Geschlecht_ä``,
``family.marital status``, ``label.y``, ``pred.ß``, ``w.eight``, ``row id``), each used
in one role: feature, sensitive attribute, label, prediction, weight, row key, and in
``input.where``. Both run through the real CLI (``fairspark.cli.main``) with all four
audits; the numbers must agree to 1e-12.

The sensitive attributes of the plain run are *named* like the awkward columns
(``name: Geschlecht_ä``) because the audits derive their seeds from attribute names;
so both runs draw the same samples and only the column names differ. Feature names
appear in the outputs (one-hot names, rules, witnesses); the plain run's are mapped to
the awkward ones before comparing, and the awkward run's outputs must show the user's
original names.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_parquet

from fairspark import cli

RUN_DATE = "2026-11-29"
#: plain name -> awkward name; the plain names are distinctive so details can be mapped
NAMES = {
    "row_ident": "row id",
    "feat_num_a": "income.bracket",
    "feat_num_b": "hours per week",
    "feat_cat": "ci`ty",
    "sens_a": "Geschlecht_ä",
    "sens_b": "family.marital status",
    "label_y": "label.y",
    "pred_p": "pred.ß",
    "weight_w": "w.eight",
}
#: the attribute names of both runs (the awkward columns' names)
ATTRS = [NAMES["sens_a"], NAMES["sens_b"]]
KEYS = ["audit", "attribute", "group", "metric", "metric_b", "model"]
#: cheaper settings, none of which changes which code path quotes a name
AUDITS = {
    "group": {},
    "hfm": {},
    "mdfa": {"splits": 2, "sample_rows": 400, "epochs": 2},
    "correlation": {"models": ["logistic_regression"], "n_samples": 40, "rounds": 2, "k": 60},
}

def _q(name: str) -> str:
    """A SQL identifier as the user writes it in ``input.where`` (independent of fairspark)."""
    return "`" + name.replace("`", "``") + "`"


def _table(n: int = 400, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=n), rng.random(n)
    sens_a = rng.choice(["M", "F"], n, p=[0.6, 0.4])
    logit = 1.5 * a + b + 0.5 * (sens_a == "M")
    return pd.DataFrame({
        "row_ident": [f"r{i}" for i in range(n)],
        "feat_num_a": a,
        "feat_num_b": b,
        "feat_cat": rng.choice(["a", "b", "c"], n),
        "sens_a": sens_a,
        "sens_b": rng.choice(["single", "married"], n),
        "label_y": (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int),
        "pred_p": (logit > 0.5).astype(int),
        "weight_w": rng.uniform(0.5, 2.0, n),
    })


def _config(names: dict[str, str], inp: str, out: str) -> dict:
    sens = [{"column": names["sens_a"], "name": ATTRS[0], "privileged": "M"},
            {"column": names["sens_b"], "name": ATTRS[1], "privileged": "married"}]
    return {
        "dataset": "column_names",
        "run_date": RUN_DATE,
        "seed": 5,
        "input": {"path": inp,
                  "where": f"{_q(names['feat_num_b'])} >= 0.02 AND "
                           f"{_q(names['feat_num_a'])} > -2.5"},
        "columns": {
            "features": [names[c] for c in ("feat_num_a", "feat_num_b", "feat_cat")],
            "sensitive": sens,
            "intersections": [ATTRS],
            "label": {"column": names["label_y"], "positive": 1},
            "prediction": {"column": names["pred_p"], "positive": 1},
            "weight": names["weight_w"],
            "row_key": names["row_ident"],
        },
        "audits": AUDITS,
        "limits": {"fail_on_violation": False},
        "output": {"path": out, "report": True},
    }


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory) -> dict[str, dict]:
    """Both runs through the CLI: exit code and output folder per kind."""
    base = tmp_path_factory.mktemp("colnames")
    pdf = _table()
    out = {}
    for kind, names in (("plain", {k: k for k in NAMES}), ("awkward", NAMES)):
        inp = write_parquet(pdf.rename(columns=names), base / kind / "in")
        cfg_path = base / kind / "c.yaml"
        cfg_path.write_text(yaml.safe_dump(
            _config(names, inp, str(base / kind / "out")), allow_unicode=True),
            encoding="utf-8")
        code = cli.main(["audit", "--config", str(cfg_path), "-q"], under_submit=True)
        out[kind] = {"code": code, "dir": base / kind / "out" / f"run_date={RUN_DATE}"}
    return out


def _to_awkward(text: object) -> object:
    """A plain run's output text with the plain feature names replaced by the awkward ones."""
    if not isinstance(text, str):
        return text
    for plain, odd in NAMES.items():
        text = text.replace(plain, odd)
    return text


def _metrics(folder: Path, audit: str, *, map_names: bool) -> pd.DataFrame:
    m = pd.read_parquet(folder / "metrics.parquet")
    m = m[m.audit == audit].copy()
    for c in [*KEYS, "detail"]:
        m[c] = m[c].fillna("")
        if map_names:
            m[c] = m[c].map(_to_awkward)
    return m.set_index(KEYS).sort_index()


def _assert_same_numbers(runs: dict, audit: str) -> None:
    assert runs["plain"]["code"] == 0, runs["plain"]
    # 4 (another audit failed) is left to test_awkward_names_run_exits_0
    assert runs["awkward"]["code"] in (0, 4), runs["awkward"]
    summary = json.loads((runs["awkward"]["dir"] / "summary.json").read_text("utf-8"))
    assert summary["audits"][audit]["status"] == "ok", summary["audits"][audit]
    a = _metrics(runs["plain"]["dir"], audit, map_names=True)
    b = _metrics(runs["awkward"]["dir"], audit, map_names=False)
    assert len(a) > 0
    assert list(a.index) == list(b.index), (set(a.index) ^ set(b.index))
    assert not (a.status != "ok").all(), a.status.value_counts()
    for k in range(len(a)):
        ra, rb = a.iloc[k], b.iloc[k]
        for c in ("value", "lower", "upper"):
            va, vb = ra[c], rb[c]
            if pd.isna(va) or pd.isna(vb):
                assert pd.isna(va) and pd.isna(vb), (a.index[k], c, va, vb)
            elif math.isinf(va) or math.isinf(vb):
                assert va == vb, (a.index[k], c, va, vb)
            else:
                assert abs(va - vb) <= 1e-12, (a.index[k], c, va, vb)
        assert ra.status == rb.status, (a.index[k], ra.status, rb.status)
        assert ra.detail == rb.detail, (a.index[k], ra.detail, rb.detail)


def test_group_audit_same_numbers(runs):
    _assert_same_numbers(runs, "group")


def test_correlation_audit_same_numbers(runs):
    _assert_same_numbers(runs, "correlation")


def test_awkward_names_run_exits_0(runs):
    assert runs["plain"]["code"] == 0, runs["plain"]
    assert runs["awkward"]["code"] == 0, runs["awkward"]


def test_hfm_audit_same_numbers(runs):
    _assert_same_numbers(runs, "hfm")


def test_mdfa_audit_same_numbers(runs):
    _assert_same_numbers(runs, "mdfa")


def test_outputs_show_the_original_names(runs):
    folder = runs["awkward"]["dir"]
    assert runs["awkward"]["code"] == 0
    assert (folder / "_SUCCESS").exists()
    rows = json.loads((folder / "summary.json").read_text("utf-8"))["rows"]
    assert rows["features"]["numeric"] == ["income.bracket", "hours per week"]
    assert rows["features"]["categorical"] == ["ci`ty"]
    assert list(rows["attributes"]) == [*ATTRS, "*".join(ATTRS)]
    m = pd.read_parquet(folder / "metrics.parquet")
    assert set(ATTRS) | {"*".join(ATTRS)} <= set(m.attribute.dropna())
    assert "Geschlecht_ä" in (folder / "report.html").read_text("utf-8")
    # the where filter on two awkward columns kept the rows pandas keeps
    t = _table()
    kept = int(((t.feat_num_b >= 0.02) & (t.feat_num_a > -2.5)).sum())
    assert rows["read"] == rows["audited"] == kept < len(t)
    plain = json.loads((runs["plain"]["dir"] / "summary.json").read_text("utf-8"))["rows"]
    assert plain["audited"] == kept
