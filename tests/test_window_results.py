"""A window's results beyond its group rows, each against a from-scratch audit.

- limits and trends: two nights of a window against two nights of a plain audit of a
  folder that holds exactly the window's partitions (one config, so the trends and the
  limits' persistence compare the runs);
- mdfa, correlation and HFM (``window.hfm: sample``) on the window's merged sample
  against the same audits, same seed, on a plain table of the sample's rows (the
  test's own hash-rank draw of the window, written to Parquet with pandas).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from test_window import (
    _NUMERIC_GRADIENT,
    DAYS,
    _bottom_k,
    _raw,
    _rescan,
    _write_days,
    _write_part,
)

from fairspark.config import parse_config
from fairspark.errors import ConfigError
from fairspark.nightly.window import window_sample_rows
from fairspark.runner import compute_run, run_audit_job

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


@pytest.mark.parametrize("sample_rows", [None, 1000])
def test_window_hfm_sample_equals_hfm_on_the_sample_rows(spark, window_days, tmp_path,
                                                         sample_rows):
    """``window.hfm: sample``: the merged sample has ``max_rows`` rows, as a rescan's cap
    audits (or ``window.sample_rows``, more, which HFM caps as it caps any table), and
    HFM's results on it equal HFM's on a plain table of those rows."""
    pdf, base, out = window_days
    audits = {"group": {}, "hfm": {"max_rows": 700, "attributes": ["sex"]}}
    raw = _raw(str(base), str(out), days=len(WEEK), audits=audits)
    raw["window"]["hfm"] = "sample"
    if sample_rows:
        raw["window"]["sample_rows"] = sample_rows
    k = sample_rows or 700
    config = parse_config(raw)
    run = compute_run(spark, config)
    assert run.exit_code == 0, run.summary["audits"]["hfm"].get("detail")
    win = run.summary["window"]
    assert win["audits_on_sample"] == ["hfm"] and win["audits_on_newest"] == []
    assert win["sample"]["rows"] == k
    _sample_table(spark, pdf, base, k, config.seed, tmp_path / "sample")
    plain = compute_run(spark, parse_config(_plain(raw, str(tmp_path / "sample"),
                                                   str(tmp_path / "o2"))))
    assert plain.summary["rows"]["audited"] == k
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


# sex: SPD about -0.06, DI about 0.75 (violated on both nights); race per group
_LIMITS = {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.02,
                      "persistence": 2},
                     {"metric": "disparate_impact", "min": 0.9, "persistence": 3},
                     {"metric": "tpr_difference", "abs_max": 0.05}],
           "correction": "bh"}


def _tol(row_key, column: str) -> float:
    """1e-12; the inequality indices' numeric-gradient intervals 1e-8 absolute
    (``test_window``, derived in docs/operations.md)."""
    return 1e-8 if column != "value" and row_key[3] in _NUMERIC_GRADIENT else 1e-12


def _assert_same_limit_rows(got, want):
    a = {_key(r): r for r in got if r["audit"] == "limits"}
    b = {_key(r): r for r in want if r["audit"] == "limits"}
    assert set(a) == set(b) and a
    for k in a:
        assert a[k]["status"] == b[k]["status"], k
        for c in ("value", "lower", "upper"):
            assert _close(a[k][c], b[k][c], 1e-12), (k, c, a[k][c], b[k][c])
        pa, pb = json.loads(a[k]["params"]), json.loads(b[k]["params"])
        assert set(pa) == set(pb), k
        for p in pa:  # verdict levels, persistence, n, the source row's own interval
            x, y = pa[p], pb[p]
            if isinstance(y, float) or (isinstance(y, list) and y and isinstance(y[0], float)):
                xs, ys = (x, y) if isinstance(y, list) else ([x], [y])
                assert all(_close(u, v, 1e-12) for u, v in zip(xs, ys, strict=True)), (k, p)
            else:
                assert x == y, (k, p, x, y)


def _trend_table(folder: str) -> list[str]:
    """The rows of the published report's trends table, as text."""
    html = (Path(folder) / "report.html").read_text()
    part = html[html.index("<caption>Every headline series"):]
    body = part[part.index("<tbody>"):part.index("</tbody>")]
    return re.findall(r"<tr class='[a-z]*'>.*?</tr>", body)


def _trend_frame(spark, out: str, result, config) -> pd.DataFrame:
    """History plus tonight's rows, as the trends section builds them (no config hash:
    the window's and the rescan's configs differ in ``window``)."""
    from fairspark import __version__
    from fairspark.nightly.history import load_history
    from fairspark.outputs import OutputLocation
    from fairspark.report.trends import trend_frame

    specs = config.audits.audit_specs()
    day = config.effective_run_date()
    hist = load_history(OutputLocation(spark, out), before=day, max_runs=5, specs=specs)
    frame = trend_frame(hist, result.rows, run_date=day.isoformat(), config_hash="-",
                        version=__version__, specs=specs)
    return frame.drop(columns=["config_hash"]).sort_values(["series", "run_date"]) \
        .reset_index(drop=True)


def test_window_limits_and_trends_equal_a_rescan_over_two_nights(spark, window_days,
                                                                  tmp_path):
    """Two nights of a window (the second adds a partition and drops the first) against
    two nights of the same audit from scratch: the same limit rows (verdicts, adjusted
    intervals, persistence), exit codes, limits summary and trends."""
    pdf, base, out = window_days
    raw = _raw(str(base), str(out), days=len(WEEK), limits=_LIMITS)
    raw["output"]["report"] = True
    nxt = WEEK[-1] + dt.timedelta(days=1)
    raw_next = {**raw, "run_date": nxt.isoformat()}
    # a new partition whose decisions move: a different model on other rows
    extra = pdf.sample(n=1500, random_state=5).assign(row_id=lambda d: "n" + d["row_id"])
    extra["prediction"] = (extra["age"] >= 40).astype(int)
    scan = str(tmp_path / "rescan")
    res, configs = {}, {}
    for night, (cfg, first) in enumerate([(raw, WEEK[0]), (raw_next, WEEK[1])]):
        if night:
            _write_part(extra, base, nxt)
        last = dt.date.fromisoformat(cfg["run_date"])
        resc = _rescan(cfg, first, last)
        resc["output"]["path"] = scan
        configs[night] = (parse_config(cfg), parse_config(resc))
        res[night] = tuple(run_audit_job(spark, c) for c in configs[night])
    for night, (win, full) in res.items():
        assert win.exit_code == full.exit_code, night
        assert win.summary["limits"] == full.summary["limits"], night
        _assert_same_limit_rows(win.rows, full.rows)
    win, full = res[1]
    assert win.summary["window"]["partitions"] == [d.isoformat() for d in (*WEEK[1:], nxt)]
    # the persistence rule read the first night's limit rows: sex's checks count two
    sex = {r["metric"]: json.loads(r["params"]) for r in win.rows
           if r["audit"] == "limits" and r["attribute"] == "sex" and r["status"] == "violated"}
    assert sex["statistical_parity_difference"]["consecutive"] == 2
    assert sex["statistical_parity_difference"]["would_gate"]
    assert sex["disparate_impact"]["consecutive"] == 2
    assert not sex["disparate_impact"]["would_gate"]
    assert win.exit_code == 3
    # trends: the published report's table, and its numbers before they are formatted
    rows = _trend_table(win.output_dir)
    assert rows == _trend_table(full.output_dir) and len(rows) > 3
    fa = _trend_frame(spark, str(out), win, configs[1][0])
    fb = _trend_frame(spark, scan, full, configs[1][1])
    assert list(fa["series"]) == list(fb["series"]) and fa["run_date"].nunique() == 2
    for (_, x), (_, y) in zip(fa.iterrows(), fb.iterrows(), strict=True):
        assert x["status"] == y["status"], x["series"]
        for c in ("value", "lower", "upper"):
            assert _close(x[c], y[c], _tol((x["audit"], x["attribute"], x["group"],
                                            x["metric"]), c)), (x["series"], c)
