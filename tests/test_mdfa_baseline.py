"""mdfa against a baseline decision (``columns.baseline``, issue 43): the baseline is
audited over the same sample and the same splits, and challenger minus baseline gets a
paired interval from the per-split (and per-null-draw) differences.

The table's baseline is the challenger's decision with one sub-population's decisions
turned down (group b with x2 > 6), a known change. Every expectation is computed here:
the baseline's gamma by an mdfa run of its own with the baseline column as the decision
(the same collected rows, its own net and null model, the same split seeds), the
paired interval by a brute-force computation from the two split tables.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from conftest import write_parquet
from scipy import stats

from fairspark.audits.base import AuditContext
from fairspark.config import parse_config
from fairspark.io import read_input
from fairspark.mdfa import MDFASample, prepare_view, run, run_splits_local
from fairspark.prepare import prepare

#: small and quick: 3 splits, 3 null draws (the fewest the corrected interval takes)
MDFA = {"epochs": 2, "l2_grid": [0.001], "splits": 3, "auditor": "logistic_regression",
        "min_rows": 50, "sample_rows": 400, "null_draws": 3, "view_nets": 1,
        "attributes": ["grp"]}
GAMMAS = {"gamma": "gamma_pos", "gamma_unfavourable": "gamma_neg", "gamma_max": "gamma_max"}


def _table(n: int = 900, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.uniform(0, 10, n)
    grp = np.where(rng.random(n) < 0.4, "b", "a")
    pred = ((x1 + 0.2 * (grp == "b") + rng.normal(0, 0.5, n)) > 0).astype(int)
    flipped = (grp == "b") & (x2 > 6)  # the known change: turned down in the baseline
    return pd.DataFrame({"id": np.arange(n).astype(str), "x1": x1, "x2": x2, "grp": grp,
                         "label": rng.integers(0, 2, n), "pred": pred,
                         "pred_old": np.where(flipped, 0, pred)})


def _context(spark, inp: str, out: str, *, baseline: bool, mdfa: dict | None = None):
    columns = {"features": ["x1", "x2"], "sensitive": [{"column": "grp", "privileged": "a"}],
               "label": {"column": "label", "positive": 1},
               "prediction": {"column": "pred", "positive": 1}, "row_key": "id"}
    if baseline:
        columns["baseline"] = {"column": "pred_old", "positive": 1}
    cfg = parse_config({"dataset": "mdfa_baseline", "run_date": "2026-12-05", "seed": 11,
                        "input": {"path": inp}, "columns": columns,
                        "audits": {"mdfa": {**MDFA, **(mdfa or {})}},
                        "output": {"path": out, "report": False}})
    prepared = prepare(read_input(spark, input_config=cfg.input), config=cfg)
    ctx = AuditContext(spark=spark, prepared=prepared, config=cfg,
                       run_date=cfg.effective_run_date())
    return ctx, cfg.audits.mdfa


@pytest.fixture(scope="module")
def table_path(tmp_path_factory):
    base = tmp_path_factory.mktemp("mdfa_baseline")
    return write_parquet(_table(), base / "in", n_files=2), base


@pytest.fixture(scope="module")
def runs(spark, table_path):
    """The audit with the baseline, and the same audit without it."""
    inp, base = table_path
    ctx, params = _context(spark, inp, str(base / "out"), baseline=True)
    paired = run(ctx, params)
    ctx0, params0 = _context(spark, inp, str(base / "out0"), baseline=False)
    plain = run(ctx0, params0)
    return {"ctx": ctx, "params": params, "paired": paired, "plain": plain}


def _rows(outcome) -> pd.DataFrame:
    return pd.DataFrame([dataclasses.asdict(r) for r in outcome.rows])


def _only(df: pd.DataFrame, metric: str, model: str | None) -> pd.Series:
    sel = df[(df.metric == metric) & (df.model.isna() if model is None else df.model == model)]
    assert len(sel) == 1, (metric, model, len(sel))
    return sel.iloc[0]


def _baseline_sample(runs):
    """The baseline's mdfa sample as the audit built it, rebuilt here: the rows the audit
    collected with the baseline's decisions read from the table by row key, its own
    balancing nets and null model; with the split seeds and the audit's results."""
    ctx, params, out = runs["ctx"], runs["params"], runs["paired"]
    (res_c,), (res_b,) = out.result.attributes, out.result.baselines
    n = len(res_c.splits)
    assert n == 3 and list(res_b.splits["split"]) == list(res_c.splits["split"])
    # the rows the audit collected (same draw as the audit: one gather, keyed by row)
    from fairspark.mdfa.audit import _plan_features, gather_views

    plan = _plan_features(ctx.prepared, params, ctx.redacted())
    view = gather_views(ctx, params, ctx.attributes(params), plan)["grp"]
    table = _table().set_index("id")
    y_old = np.where(table.loc[view.rows["_k"], "pred_old"].to_numpy() == 1, 1, -1)
    y_new = np.where(table.loc[view.rows["_k"], "pred"].to_numpy() == 1, 1, -1)
    assert (view.rows["_y"].to_numpy() == y_new).all()
    assert (y_old != y_new).sum() > 10  # the flipped sub-population is in the sample
    x = np.asarray(view.rows["_x"].tolist(), dtype=float)[:, plan.x_idx]
    desc = np.column_stack([view.rows[f"_d{j}"].to_numpy(float)
                            for j in range(len(plan.desc_numeric))])
    sample = MDFASample(x=x, s=view.rows["_s"].to_numpy(int), y=y_old, desc=desc,
                        feature_names=plan.names, desc_names=plan.desc_names)
    seeds = [ctx.seed_for("mdfa", "grp", "split", i) for i in range(params.planned_splits())]
    sample, prm = prepare_view(sample, seeds=seeds, params=params)
    sample = sample.with_null_model(seed=ctx.seed_for("mdfa", "grp", "null"),
                                    library=params.null_model)
    return sample, prm, seeds, n, res_c, res_b


def test_the_baseline_is_an_mdfa_run_of_its_own_on_the_same_rows_and_splits(runs):
    """The baseline's per-split gammas and null gammas are those of an independent mdfa
    run with the baseline column as the decision: its sample rows are the challenger's
    (the baseline read from the table by row key), its own balancing net and null model,
    the same split seeds."""
    sample, prm, seeds, n, res_c, res_b = _baseline_sample(runs)
    ref = run_splits_local(sample, seeds=seeds[:n], params=prm)
    for col in ("gamma_pos", "gamma_neg", "gamma_max", "gamma_null_pos", "gamma_null_max",
                "n_train", "n_test", "null_draw"):
        np.testing.assert_allclose(pd.to_numeric(res_b.splits[col]).to_numpy(float),
                                   pd.to_numeric(ref[col]).to_numpy(float), rtol=0, atol=1e-12,
                                   err_msg=col)
    for col in ("null_more", "rules", "trace"):
        assert list(res_b.splits[col]) == list(ref[col]), col
    # the same cuts and weights as the challenger's splits, other decisions
    for col in ("n_train", "n_test", "balance_auc", "max_abs_smd_after", "null_draw"):
        np.testing.assert_array_equal(pd.to_numeric(res_b.splits[col]).to_numpy(float),
                                      pd.to_numeric(res_c.splits[col]).to_numpy(float))
    assert not np.allclose(res_b.splits["gamma_max"], res_c.splits["gamma_max"])
    # the baseline's cells: its decisions over every audited row, from the one aggregation
    b = res_b.stats
    t = _table()
    for s, g in ((1, "b"), (-1, "a")):
        assert b.count(s=s, y=1) == ((t.grp == g) & (t.pred_old == 1)).sum()
        assert res_c.stats.count(s=s, y=1) == ((t.grp == g) & (t.pred == 1)).sum()


def _gamma_by_hand(c: np.ndarray, s: np.ndarray, y: np.ndarray, w: np.ndarray,
                   y_value: int) -> float:
    """gamma(y) (Gitiaux and Rangwala, 2019, Lemma 3.1) from a certificate's held-out
    predictions ``c``, by enumeration: the weight of each (c, s, y) cell in pandas, then
    ``(Pr_w[c = r s y] + Pr_w[s = r y] - 1) / 4`` with r = sign(y)."""
    cells = pd.DataFrame({"c": c, "s": s, "y": y, "w": w}).groupby(["c", "s", "y"]).w.sum()
    total = cells.sum()
    r = 1 if y_value > 0 else -1
    agree = sum(v for (cc, ss, yy), v in cells.items() if cc == r * ss * yy) / total
    rho = sum(v for (_, ss, yy), v in cells.items() if ss == r * yy) / total
    return (agree + rho - 1.0) / 4.0


def test_the_baselines_gamma_is_gamma_of_its_certificate_by_hand(runs):
    """Each split's baseline gamma(+1), gamma(-1) and gamma_max against gamma(y) computed
    here from the certificate's predictions on that split's held-out rows (the
    certificate refitted on the split's training rows with the audit's seed); the
    baseline's ``gamma`` / ``gamma_unfavourable`` / ``gamma_max`` rows are their means
    over the splits less the null reference, and gamma_max is the larger of the two in
    every split."""
    from fairspark.mdfa.auditors import fit_certificate
    from fairspark.mdfa.certify import balance_split
    from fairspark.sampling import derive_seed

    sample, prm, seeds, n, _, res_b = _baseline_sample(runs)
    assert prm.certificate_tilt == 0  # the y = -1 certificate is then -c (not refitted)
    got = {"gamma_pos": [], "gamma_neg": [], "gamma_max": []}
    for i in range(n):
        st = balance_split(sample, seed=seeds[i], params=prm, split=i)
        tr, te = st.train, st.test
        cert = fit_certificate(prm.auditor, tr.z, tr.s * tr.y, tr.w,
                               seed=derive_seed(seeds[i], "cert", 1), forest=prm.forest)
        c = cert(te.z)
        pos = _gamma_by_hand(c, te.s, te.y, te.w, 1)
        neg = _gamma_by_hand(-c, te.s, te.y, te.w, -1)
        got["gamma_pos"].append(pos)
        got["gamma_neg"].append(neg)
        got["gamma_max"].append(max(pos, neg))
    for key, vals in got.items():
        np.testing.assert_allclose(res_b.splits[key].to_numpy(float), vals, rtol=0, atol=1e-12,
                                   err_msg=key)
    # not a check of a constant: the gammas differ between the splits or the outcomes
    assert np.ptp(got["gamma_pos"] + got["gamma_neg"]) > 1e-6, got
    # the baseline's rows: the mean over splits of these gammas less the features-only
    # null reference (the mean over null draws of each draw's mean over the splits that
    # evaluated it, read from the split table by hand)
    df = _rows(runs["paired"])
    want = {}
    for metric, key in GAMMAS.items():
        if key == "gamma_max":
            continue
        per_draw: dict[int, list[float]] = {}
        for (_, k), v in _null_long(res_b.splits, key).items():
            per_draw.setdefault(k, []).append(v)
        reference = np.mean([np.mean(v) for v in per_draw.values()])
        want[metric] = np.mean(got[key]) - reference
        row = _only(df, metric, "baseline")
        assert row.value == pytest.approx(want[metric], abs=1e-12), metric
    # gamma_max is the larger of the two printed gamma(y), the maximum it is named for
    row = _only(df, "gamma_max", "baseline")
    assert row.value == pytest.approx(max(want.values()), abs=1e-12)


def _null_long(splits: pd.DataFrame, key: str) -> dict[tuple[int, int], float]:
    """(split, draw) -> the null gamma ``key`` of that evaluation, read by hand."""
    out = {}
    for _, r in splits.iterrows():
        pos, neg = r["gamma_null_pos"], r["gamma_null_neg"]
        out[(int(r["split"]), int(r["null_draw"]))] = {
            "gamma_pos": pos, "gamma_neg": neg, "gamma_max": max(pos, neg)}[key]
        for k, p, q in json.loads(r["null_more"]):
            out[(int(r["split"]), int(k))] = {"gamma_pos": p, "gamma_neg": q,
                                              "gamma_max": max(p, q)}[key]
    return out


def _brute_paired(c: pd.DataFrame, b: pd.DataFrame, key: str,
                  key_b: str | None = None) -> tuple[float, float, float]:
    """Challenger (``key``) minus baseline (``key_b``, default ``key``) with its 95%
    interval, by its definition: mean per-split difference less the mean per-draw
    difference, scale^2 = s_d^2 (1/n + rho) + var(e_k) / K, Welch-Satterthwaite
    degrees of freedom."""
    key_b = key_b or key
    d = c[key].to_numpy(float) - b[key_b].to_numpy(float)
    n = len(d)
    rho = c["n_test"].astype(float).sum() / c["n_train"].astype(float).sum()
    lc, lb = _null_long(c, key), _null_long(b, key_b)
    per_draw: dict[int, list[float]] = {}
    for (split, k), v in lc.items():
        per_draw.setdefault(k, []).append(v - lb[(split, k)])
    e = np.array([np.mean(v) for _, v in sorted(per_draw.items())])
    kk = len(e)
    a1, a2 = np.var(d, ddof=1) * (1 / n + rho), np.var(e, ddof=1) / kk
    nu = (a1 + a2) ** 2 / (a1**2 / (n - 1) + a2**2 / (kk - 1))
    value = d.mean() - e.mean()
    half = stats.t.ppf(0.975, nu) * np.sqrt(a1 + a2)
    return value, value - half, value + half


def test_the_difference_rows_are_the_paired_per_split_computation(runs):
    out = runs["paired"]
    (res_c,), (res_b,) = out.result.attributes, out.result.baselines
    df = _rows(out)
    for metric, key in GAMMAS.items():
        row = _only(df, metric, "challenger_minus_baseline")
        if key == "gamma_max":  # each decision's larger gamma(y), paired
            c, b = _only(df, "gamma", None), _only(df, "gamma_unfavourable", None)
            cb, bb = (_only(df, "gamma", "baseline"),
                      _only(df, "gamma_unfavourable", "baseline"))
            key = "gamma_pos" if c.value >= b.value else "gamma_neg"
            key_b = "gamma_pos" if cb.value >= bb.value else "gamma_neg"
            value, lo, hi = _brute_paired(res_c.splits, res_b.splits, key, key_b)
        else:
            value, lo, hi = _brute_paired(res_c.splits, res_b.splits, key)
        assert row.status == "ok"
        assert row.value == pytest.approx(value, abs=1e-12)
        assert (row.lower, row.upper) == pytest.approx((lo, hi), abs=1e-12)
        # every split and draw is paired: the difference of the two decisions' rows
        c, b = _only(df, metric, None), _only(df, metric, "baseline")
        assert row.value == pytest.approx(c.value - b.value, abs=1e-12)
        p = json.loads(row.params)
        assert p["challenger"] == pytest.approx(c.value) and p["baseline"] == pytest.approx(
            b.value)
        # no_worse_than_baseline reads "worse": for gamma the difference itself
        assert (p["worse"], p["worse_lower"], p["worse_upper"]) == pytest.approx(
            (row.value, row.lower, row.upper))
        assert row.group == c.group and "same 3 splits" in row.detail
    # the baseline turned a sub-population of group b down: gamma_max moves, and the
    # paired interval is narrower than the two separate ones put together
    # (of one gamma(y): here the two gamma_max are of different y, whose pairing gains
    # nothing)
    for metric in ("gamma", "gamma_unfavourable"):
        c, b = _only(df, metric, None), _only(df, metric, "baseline")
        d = _only(df, metric, "challenger_minus_baseline")
        assert d.upper - d.lower < (c.upper - c.lower) + (b.upper - b.lower), metric
    c, d = _only(df, "gamma_max", None), _only(df, "gamma_max", "challenger_minus_baseline")
    assert "challenger's gamma(y=+1) less the baseline's gamma(y=-1)" in d.detail
    info = out.summary["baseline"]
    assert info["column"] == "pred_old"
    assert info["attributes"]["grp"]["difference"]["gamma_max"]["difference"] == pytest.approx(
        d.value)
    # the baseline's rows: everything but the balance rows (the weights are shared)
    models = df[df.model == "baseline"]
    assert {"gamma", "gamma_max", "gamma_null", "delta"} <= set(models.metric)
    assert not {"balance_auc", "max_abs_smd_after"} & set(models.metric)
    # the decision box's mdfa line reads the audited decision's gamma_max only
    from fairspark.audits import DecisionInput
    from fairspark.mdfa.decision import decision_lines

    lines = decision_lines(DecisionInput(audit="mdfa", rows=df.to_dict("records"),
                                         info=out.summary, anchor=None))
    assert len(lines) == 1 and lines[0].number["value"] == pytest.approx(c.value)


def test_rows_without_a_baseline_are_unchanged(runs):
    with_b, plain = _rows(runs["paired"]), _rows(runs["plain"])
    assert plain.model.isna().all()
    mine = with_b[with_b.model.isna()].reset_index(drop=True)
    cols = ["audit", "attribute", "group", "metric", "value", "lower", "upper", "status",
            "detail", "params"]
    pd.testing.assert_frame_equal(mine[cols], plain[cols], check_exact=True)
    assert "baseline" not in runs["plain"].summary
    assert runs["plain"].result.baselines == []


def test_without_null_draws_the_interval_is_the_percentiles_of_the_differences(
        spark, table_path):
    inp, base = table_path
    ctx, params = _context(spark, inp, str(base / "out_nonull"),
                           baseline=True, mdfa={"null_draws": 0, "worst_violation": False})
    out = run(ctx, params)
    (res_c,), (res_b,) = out.result.attributes, out.result.baselines
    df = _rows(out)
    for metric, key in GAMMAS.items():
        key_b = key
        if key == "gamma_max":  # each decision's larger raw mean gamma(y)
            key, key_b = (max(("gamma_pos", "gamma_neg"), key=lambda k: r.splits[k].mean())
                          for r in (res_c, res_b))
            c, b = _only(df, metric, None), _only(df, metric, "baseline")
            assert c.value == pytest.approx(res_c.splits[key].mean(), abs=1e-12)
            assert b.value == pytest.approx(res_b.splits[key_b].mean(), abs=1e-12)
        d = res_c.splits[key].to_numpy(float) - res_b.splits[key_b].to_numpy(float)
        row = _only(df, metric, "challenger_minus_baseline")
        assert row.value == pytest.approx(d.mean(), abs=1e-12)
        assert (row.lower, row.upper) == pytest.approx(
            (np.percentile(d, 2.5), np.percentile(d, 97.5)), abs=1e-12)
        assert "percentiles over splits" in row.detail


def test_a_baseline_that_never_varies_fails_its_rows_only(spark, tmp_path):
    t = _table(600)
    t["pred_old"] = 0
    inp = write_parquet(t, tmp_path / "in")
    ctx, params = _context(spark, inp, str(tmp_path / "out"), baseline=True,
                           mdfa={"splits": 2, "null_draws": 0, "worst_violation": False})
    df = _rows(run(ctx, params))
    assert (df[df.model.isna()].status == "ok").any()
    failed = _only(df, "gamma_max", "baseline")
    assert failed.status == "failed" and "baseline decision" in failed.detail
    assert "no row has a favourable decision" in failed.detail
    diff = df[df.model == "challenger_minus_baseline"]
    assert len(diff) == 3 and (diff.status == "not_computed").all()
