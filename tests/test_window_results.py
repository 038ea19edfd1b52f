"""A window's results beyond its group rows, each against a from-scratch audit.

- limits and trends: two nights of a window against two nights of a plain audit of a
  folder that holds exactly the window's partitions (one config, so the trends and the
  limits' persistence compare the runs);
- mdfa, correlation and HFM (``window.hfm: sample``) on the window's merged sample
  against the same audits, same seed, on a plain table of the sample's rows (the
  test's own hash-rank draw of the window, written to Parquet with pandas).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_window import DAYS, _bottom_k, _raw, _write_days

from fairspark.config import parse_config
from fairspark.errors import ConfigError
from fairspark.nightly.window import window_sample_rows
from fairspark.runner import compute_run

#: three daily partitions (the last three of the window tests' days): fewer states to write
WEEK = DAYS[-3:]


@pytest.fixture()
def window_days(adult_pdf, tmp_path):
    pdf = adult_pdf.copy()
    pdf["fnlwgt"] = pdf["fnlwgt"].astype(float) / 1e5
    return pdf, Path(_write_days(pdf, tmp_path / "in", days=WEEK)), tmp_path / "out"


def _key(r):
    return (r["audit"], r["attribute"], r["group"], r["metric"], r["metric_b"], r["model"])


def _close(x, y, tol: float) -> bool:
    if x is None or y is None or x != x or y != y:
        return (x is None or x != x) == (y is None or y != y)
    return abs(x - y) <= tol * max(1.0, abs(y))


def _assert_same_results(got, want, audits, *, tol: float = 0.0, fields=("status",)):
    """Every row of ``audits``: the same keys, statuses, values and intervals."""
    a = {_key(r): r for r in got if r["audit"] in audits}
    b = {_key(r): r for r in want if r["audit"] in audits}
    assert set(a) == set(b), sorted(set(a) ^ set(b), key=str)[:10]
    assert {k[0] for k in a} == set(audits)
    for k in a:
        for c in fields:
            assert a[k][c] == b[k][c], (k, c, a[k][c], b[k][c])
        for c in ("value", "lower", "upper"):
            assert _close(a[k][c], b[k][c], tol), (k, c, a[k][c], b[k][c])


def _plain(raw: dict, path: str, out: str, **audits) -> dict:
    """The same config on a plain table: no window, no partition column."""
    raw = json.loads(json.dumps(raw))
    raw.pop("window")
    raw["input"] = {"path": path}
    raw["output"]["path"] = out
    if audits:
        raw["audits"] = audits["audits"]
    return raw


def _sample_table(spark, pdf, base: Path, k: int, seed: int, where: Path) -> list[str]:
    """The window's ``k`` lowest-ranked rows (the test's own draw) as one Parquet file."""
    keys = _bottom_k(spark, str(base), WEEK, k, seed)
    assert len(keys) == k
    rows = pdf[pdf["row_id"].isin(set(keys))]
    where.mkdir(parents=True)
    rows.to_parquet(where / "part-00000.parquet", index=False)
    return keys


def test_window_mdfa_and_correlation_equal_the_same_audits_on_the_sample_rows(
        spark, window_days, tmp_path):
    pdf, base, out = window_days
    audits = {"group": {},
              "mdfa": {"splits": 2, "sample_rows": 1200, "epochs": 3, "attributes": ["sex"]},
              "correlation": {"n_samples": 40, "rounds": 2, "k": 80, "sample_rows": 900,
                              "attributes": ["sex"]}}
    raw = _raw(str(base), str(out), days=len(WEEK), audits=audits)
    config = parse_config(raw)
    run = compute_run(spark, config)
    assert run.exit_code == 0, {k: v.get("detail") for k, v in run.summary["audits"].items()}
    assert run.summary["window"]["sample"]["rows"] == 1200
    assert run.summary["window"]["audits_on_sample"] == ["correlation", "mdfa"]
    _sample_table(spark, pdf, base, 1200, config.seed, tmp_path / "sample")
    plain = compute_run(spark, parse_config(_plain(raw, str(tmp_path / "sample"),
                                                   str(tmp_path / "o2"))))
    assert plain.summary["rows"]["audited"] == 1200
    for name in ("mdfa", "correlation"):
        assert run.summary["audits"][name]["status"] in ("ok", "not_certified"), name
    # the same rows in another order (the sample's rank order, the table's file
    # order): weighted sums may differ in their last bit, nothing else
    _assert_same_results(run.long_rows, plain.long_rows, ("mdfa", "correlation"), tol=1e-12)


def test_window_hfm_sample_equals_hfm_on_the_sample_rows(spark, window_days, tmp_path):
    """``window.hfm: sample``: the merged sample has ``max_rows`` rows, as a rescan's cap
    audits, and HFM's results on it equal HFM's on a plain table of those rows."""
    pdf, base, out = window_days
    audits = {"group": {}, "hfm": {"max_rows": 700, "attributes": ["sex"]}}
    raw = _raw(str(base), str(out), days=len(WEEK), audits=audits)
    raw["window"]["hfm"] = "sample"
    config = parse_config(raw)
    run = compute_run(spark, config)
    assert run.exit_code == 0, run.summary["audits"]["hfm"].get("detail")
    win = run.summary["window"]
    assert win["hfm"] == "the window's merged sample" and win["audits_on_sample"] == ["hfm"]
    assert win["sample"]["rows"] == 700
    _sample_table(spark, pdf, base, 700, config.seed, tmp_path / "sample")
    plain = compute_run(spark, parse_config(_plain(raw, str(tmp_path / "sample"),
                                                   str(tmp_path / "o2"))))
    assert plain.summary["rows"]["audited"] == 700
    assert run.summary["audits"]["hfm"]["status"] in ("ok", "not_certified")
    _assert_same_results(run.long_rows, plain.long_rows, ("hfm",), tol=1e-12)


def test_hfm_alone_on_the_sample_needs_its_size():
    raw = _raw("/nowhere", "/tmp/x", audits={"group": {}, "hfm": {}})
    raw["window"]["hfm"] = "sample"
    with pytest.raises(ConfigError, match=r"audits\.hfm\.max_rows.*window\.sample_rows"):
        parse_config(raw).check_window()
    raw["audits"]["hfm"]["max_rows"] = 500
    assert window_sample_rows(parse_config(raw)) == 500
    raw["audits"]["mdfa"] = {"sample_rows": 300}
    assert window_sample_rows(parse_config(raw)) == 500  # the larger of the two
    raw["window"]["hfm"] = "newest"
    assert window_sample_rows(parse_config(raw)) == 300  # HFM audits the newest partition
