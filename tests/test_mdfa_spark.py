"""mdfa on Spark: grouped stats, stratified capped sample, parallel splits, bad input,
time budget."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from conftest import printed_number, unmark, write_parquet
from pyspark.sql import functions as F

from fairspark.audits.base import AuditContext
from fairspark.config import parse_config
from fairspark.errors import TimeBudgetExhaustedError
from fairspark.io import read_input
from fairspark.mdfa import (
    MDFAParams,
    MDFAResult,
    MDFASample,
    SplitResult,
    collect_sample,
    grouped_stats,
    make_synthetic,
    render,
    run,
    run_splits,
    run_splits_local,
)
from fairspark.mdfa._spark import view_samples, view_stats
from fairspark.prepare import prepare
from fairspark.runner import run_audit_job
from fairspark.sampling import BUCKETS, hash_bucket, stratum_quotas
from fairspark.status import Status

FAST = {"epochs": 3, "l2_grid": [0.001], "splits": 2, "auditor": "logistic_regression",
        "min_rows": 50}


def _cells_pdf(seed: int = 0, n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = np.where(rng.random(n) < 0.35, 1, -1)
    y = np.where(rng.random(n) < np.where(s > 0, 0.3, 0.6), 1, -1)
    return pd.DataFrame({
        "_mdfa_s": s.astype("int32"), "_mdfa_y": y.astype("int32"),
        "k": [f"r{i}" for i in range(n)], "a": rng.normal(2.0, 3.0, n),
    })


def test_grouped_stats_equal_pandas(spark):
    pdf = _cells_pdf()
    df = spark.createDataFrame(pdf).repartition(3)
    st = grouped_stats(df, desc_cols=[F.col("a")], desc_names=["a"])
    for s in (1, -1):
        sub = pdf[pdf._mdfa_s == s]
        d = st.group_description(s)
        assert d["n"] == len(sub)
        assert d["mean"][0] == pytest.approx(sub.a.mean(), rel=1e-9)
        assert d["sd"][0] == pytest.approx(sub.a.std(ddof=0), rel=1e-7)
        for y in (1, -1):
            assert st.count(s=s, y=y) == ((pdf._mdfa_s == s) & (pdf._mdfa_y == y)).sum()
        assert st.rate(s=s, y=1) == pytest.approx((sub._mdfa_y == 1).mean())


def test_stratified_sample_is_proportional_capped_and_partition_free(spark):
    pdf = _cells_pdf()
    counts = pdf.groupby(["_mdfa_s", "_mdfa_y"]).size().to_dict()
    counts = {(int(k[0]), int(k[1])): int(v) for k, v in counts.items()}
    cap = 500
    picks = []
    for parts in (1, 4):
        df = spark.createDataFrame(pdf).repartition(parts)
        smp = collect_sample(df, columns=[F.col("a")], key_col="k", counts=counts,
                             cap=cap, seed=42)
        picks.append(smp)
    assert len(picks[0]) == cap
    assert list(picks[0]["_k"]) == list(picks[1]["_k"])
    got = picks[0].groupby(["_s", "_y"]).size().to_dict()
    total = sum(counts.values())
    for cell, n in counts.items():
        assert abs(got[cell] - cap * n / total) <= 1.0  # proportional allocation
    # a different seed gives a different sample; below the cap every row comes back
    other = collect_sample(spark.createDataFrame(pdf), columns=[F.col("a")], key_col="k",
                           counts=counts, cap=cap, seed=43)
    assert set(other["_k"]) != set(picks[0]["_k"])
    full = collect_sample(spark.createDataFrame(pdf), columns=[F.col("a")], key_col="k",
                          counts=counts, cap=10_000, seed=1)
    assert sorted(full["_k"]) == sorted(pdf.k)


def _views_pdf(seed: int = 5, n: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "k": [f"r{i}" for i in range(n)], "a": rng.normal(1.0, 2.0, n),
        "p1": rng.random(n) < 0.6, "p2": rng.random(n) < 0.3,
        "_mdfa_y": np.where(rng.random(n) < 0.4, 1, -1).astype("int32"),
    })


def _brute_sample(spark, pdf, *, s: np.ndarray, seed: int, cap: int) -> list[str]:
    """The stratified sample by its definition: the ranks from Spark's hash, every row
    ranked in pandas, each (s, y) cell's quota of lowest (rank, key)."""
    ranks = (spark.createDataFrame(pdf[["k"]])
             .select("k", (hash_bucket("k", seed) / F.lit(float(BUCKETS))).alias("h"))
             .toPandas().set_index("k")["h"])
    full = pdf.assign(_s=s, _h=ranks.loc[pdf.k].to_numpy())
    counts = full.groupby(["_s", "_mdfa_y"]).size().to_dict()
    quotas = stratum_quotas({(int(a), int(b)): int(v) for (a, b), v in counts.items()}, cap)
    keys = []
    for (cs, cy), q in sorted(quotas.items()):
        cell = full[(full._s == cs) & (full._mdfa_y == cy)].sort_values(["_h", "k"])
        keys += list(cell.k[:q])
    return keys


@pytest.mark.parametrize("cap", [700, 10_000])
def test_one_pass_view_samples_and_stats_equal_one_view_at_a_time(spark, cap):
    pdf = _views_pdf()
    s1 = np.where(~pdf.p1, 1, -1)
    s2 = np.where(pdf.p2, 1, -1)
    views = {"v1": (~F.col("p1"), s1, 11), "v2": (F.col("p2"), s2, 12)}
    got = []
    for parts in (1, 4):
        df = spark.createDataFrame(pdf).repartition(parts)
        s_cols = {n: F.when(c, F.lit(1)).otherwise(F.lit(-1)) for n, (c, _, _) in views.items()}
        stats = view_stats(df, views=s_cols, desc_cols=[F.col("a")], desc_names=["a"])
        wanted = {n: (s_cols[n], seed, stats[n].cell_counts())
                  for n, (_, _, seed) in views.items()}
        got.append(view_samples(df, views=wanted, columns=[F.col("a")], key_col="k", cap=cap))
        for n, (_, s, seed) in views.items():
            # the statistics: counts and moments per (s, y) by pandas
            for cs in (1, -1):
                sub = pdf[s == cs]
                d = stats[n].group_description(cs)
                assert d["n"] == len(sub)
                assert d["mean"][0] == pytest.approx(sub.a.mean(), rel=1e-9)
                assert d["sd"][0] == pytest.approx(sub.a.std(ddof=0), rel=1e-7)
                for cy in (1, -1):
                    assert stats[n].count(s=cs, y=cy) == ((s == cs) & (pdf._mdfa_y == cy)).sum()
            # the sample: the rows of the definition, in collect_sample's order and columns
            smp = got[-1][n]
            assert sorted(smp["_k"]) == sorted(_brute_sample(spark, pdf, s=s, seed=seed, cap=cap))
            one = collect_sample(df.withColumn("_mdfa_s", s_cols[n]), columns=[F.col("a")],
                                 key_col="k", counts=stats[n].cell_counts(), cap=cap, seed=seed)
            assert list(smp.columns) == list(one.columns)
            pd.testing.assert_frame_equal(smp, one, check_dtype=False)
    for n in views:
        pd.testing.assert_frame_equal(got[0][n], got[1][n])


def test_one_pass_view_samples_fall_back_when_the_prefilter_is_short(spark, monkeypatch):
    """A pre-filter that keeps too few rows of a cell must not shorten the sample."""
    pdf = _views_pdf(n=1500)
    df = spark.createDataFrame(pdf)
    s_col = F.when(F.col("p1"), F.lit(1)).otherwise(F.lit(-1))
    counts = view_stats(df, views={"v": s_col}, desc_cols=[], desc_names=[])["v"].cell_counts()
    monkeypatch.setattr("fairspark.mdfa._spark.prefilter_fractions",
                        lambda c, q, factor=1.2: {k: 0.01 for k in q})
    got = view_samples(df, views={"v": (s_col, 3, counts)}, columns=[F.col("a")],
                       key_col="k", cap=300)["v"]
    assert sorted(got["_k"]) == sorted(
        _brute_sample(spark, pdf, s=np.where(pdf.p1, 1, -1), seed=3, cap=300))


def test_parallel_splits_equal_sequential_loop_for_any_partitioning(spark):
    d = make_synthetic(n=800, nu=0.6, mu=0.2, seed=1)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    p = MDFAParams(auditor="logistic_regression", epochs=3, l2_grid=[1e-3], splits=3,
                   alpha=0.1)
    seeds = [11, 12, 13]
    ref = run_splits_local(smp, seeds=seeds, params=p)
    assert list(ref.columns) == [f.name for f in dataclasses.fields(SplitResult)]
    for parts in (1, 3):
        got = run_splits(spark, smp, seeds=seeds, params=p, partitions=parts)
        for col in ("gamma_pos", "gamma_neg", "delta", "delta_unweighted", "mass"):
            np.testing.assert_array_equal(got[col].to_numpy(float), ref[col].to_numpy(float))
        assert list(got["t"]) == list(ref["t"])
        assert list(got["trace"]) == list(ref["trace"])


# ------------------------------------------------------------ through the runner
def _table(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.uniform(0, 10, n)
    grp = np.where(rng.random(n) < 0.4, "b", "a")
    pred = ((x1 + 0.3 * (grp == "b") + rng.normal(0, 0.5, n)) > 0).astype(int)
    return pd.DataFrame({
        "id": np.arange(n).astype(str), "x1": x1, "x2": x2,
        "colour": rng.choice(["red", "green", "blue"], n), "grp": grp,
        "same": "only", "secret": rng.normal(size=n),
        "label": rng.integers(0, 2, n), "pred": pred,
    })


def _cfg(inp: str, out: str, mdfa: dict, **cols) -> dict:
    columns = {
        "features": ["x1", "x2", "colour", "secret"], "categorical": ["colour"],
        "sensitive": [{"column": "grp", "privileged": "a"},
                      {"column": "same", "privileged": "only"}],
        "label": {"column": "label", "positive": 1},
        "prediction": {"column": "pred", "positive": 1}, "row_key": "id",
    }
    columns.update(cols)
    return {
        "dataset": "mdfa_toy", "run_date": "2026-11-29", "seed": 3, "input": {"path": inp},
        "columns": columns, "audits": {"group": {}, "mdfa": mdfa},
        "output": {"path": out, "report": True}, "redact_columns": ["secret"],
    }


@pytest.fixture(scope="module")
def toy_run(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("mdfa_toy")
    inp = write_parquet(_table(), base / "in", n_files=3)
    cfg = _cfg(inp, str(base / "out"), {**FAST, "auditor": "random_forest", "splits": 3})
    return run_audit_job(spark, parse_config(cfg)), base


def test_runner_one_group_attribute_fails_others_complete(toy_run):
    res, _ = toy_run
    rows = pd.DataFrame(res.rows)
    m = rows[rows.audit == "mdfa"]
    bad = m[m.attribute == "same"]
    assert list(bad.status) == ["failed"]
    assert "'same'" in bad.detail.iloc[0] and "only one group" in bad.detail.iloc[0]
    ok = m[m.attribute == "grp"].set_index("metric")
    assert set(ok.index) >= {"gamma", "gamma_unfavourable", "gamma_max", "delta",
                             "delta_unweighted", "outcome_ratio_in_subgroup",
                             "outcome_ratio_overall", "subgroup_mass"}
    # the group audit's disparate impact is the only "DI" of the run
    assert not {"DI", "DT_G"} & set(m.metric)
    # held-out balance of the weights: rows, summary (per feature) and the verdict's words
    for metric in ("balance_auc", "balance_auc_before", "max_abs_smd_before",
                   "max_abs_smd_after"):
        r = ok.loc[metric]
        assert r.status == "ok" and r.lower <= r.value <= r.upper
    assert 0.0 <= ok.loc["balance_auc", "value"] <= 1.0
    bal = res.summary["audits"]["mdfa"]["attributes"]["grp"]["balance"]
    assert [d["feature"] for d in bal["smd"]][:2] == ["x1", "x2"]
    # the redacted audit feature is left out of the per-feature table by name
    assert "secret" not in {d["feature"] for d in bal["smd"]}
    assert (bal["auc_limit"], bal["smd_limit"]) == (0.6, 0.1)
    judged = ("cannot be read as differential treatment" in ok.loc["gamma_max", "detail"])
    assert judged == (2 * bal["poor_splits"] >= 3)
    assert (ok.loc[["gamma", "gamma_max"], "status"] == "ok").all()
    g = ok.loc["gamma_max"]
    assert g.lower <= g.value <= g.upper
    # the verdict is judged against the null reference (3 splits: 3 null draws)
    ref = res.summary["audits"]["mdfa"]["attributes"]["grp"]["null"]
    # the verdict's statistic is the raw mean over splits of the per-split max; the
    # reported gamma_max is the larger of the two printed gamma(y) (each its raw mean
    # less its null reference)
    a = res.summary["audits"]["mdfa"]["attributes"]["grp"]
    assert ref["draws"] == 3 and ref["observed"] == pytest.approx(a["gamma_max"]["mean"])
    assert ref["excess"] == pytest.approx(ref["observed"] - ref["mean"])
    per_y = ok.loc[["gamma", "gamma_unfavourable"]]
    top = per_y.loc[per_y["value"].idxmax()]
    assert (g.value, g.lower, g.upper) == pytest.approx((top.value, top.lower, top.upper))
    assert a["corrected"]["gamma_max"]["value"] == pytest.approx(g.value)
    assert ok.loc["gamma", "value"] == pytest.approx(
        a["gamma_pos"]["mean"] - a["corrected"]["gamma_pos"]["reference"])
    assert ok.loc["gamma_null", "value"] == pytest.approx(ref["mean"])
    verdict = res.summary["audits"]["mdfa"]["attributes"]["grp"]["verdict"]
    assert verdict.startswith("evidence of" if ref["evidence"] else "no evidence of")
    assert ref["evidence"] == (ref["observed"] > ref["bound"])
    gap = res.summary["audits"]["mdfa"]["attributes"]["grp"]["outcome_gap_after"]
    assert gap["n"] == 3 and -1.0 <= gap["mean"] <= 1.0
    params = json.loads(g.params)
    assert params["splits"] == 3 and "x1" in params["features_used"]
    # the group audit still ran
    assert (rows[rows.audit == "group"].status == "ok").any()
    assert res.summary["audits"]["mdfa"]["attributes"]["grp"]["status"] == "ok"
    # where the CPU went: per split by phase and once for the view, summing to the total
    cost = a["cost"]
    assert cost["splits"] == 3
    assert set(cost["cpu_s_per_split"]) == {"balancing", "certificate", "null", "algorithm_1"}
    assert all(v is not None and v >= 0 for v in cost["cpu_s_per_split"].values())
    assert set(cost["cpu_s_view"]) == {"null_model", "balancing_net"}
    assert cost["cpu_s"] == pytest.approx(sum(cost["cpu_s_splits"].values())
                                          + sum(cost["cpu_s_view"].values()))
    assert cost["cpu_s_splits"]["null"] == pytest.approx(3 * cost["cpu_s_per_split"]["null"])


def test_runner_outcome_ratio_matches_pandas_and_report_redacts(toy_run):
    res, base = toy_run
    rows = pd.DataFrame(res.rows)
    di = rows[(rows.audit == "mdfa") & (rows.attribute == "grp")
              & (rows.metric == "outcome_ratio_overall")].iloc[0]
    t = _table()
    y_val = 1 if "Y=+1" in di.detail else 0
    rate = lambda g: ((t.pred == y_val) & (t.grp == g)).sum() / (t.grp == g).sum()
    assert di.value == pytest.approx(rate("b") / rate("a"))
    html = next(base.glob("out/**/report.html")).read_text()
    assert "mdfa: multi-differential fairness" in html
    assert "data:image/png;base64," in html
    section = html[html.index("mdfa: multi-differential"):]
    # the report's overall ratio is the one of metrics.parquet (computed once), printed
    # as mdfa's rows print (four decimals) and naming its row
    assert f"<td>{printed_number(di.value, least=4)}</td></tr>" in unmark(section)
    assert 'data-metric="outcome_ratio_overall"' in section
    assert "secret" not in section.split("Redacted columns not shown")[0]
    assert "x1" in section
    # the finding in one sentence, in the summary and the report; rules as conditions
    said = res.summary["audits"]["mdfa"]["attributes"]["grp"]["finding"]
    assert said.startswith("In the worst-treated subgroup of about ")
    assert "b get the " in said and "% of the time and a " in said
    assert said in section.replace("&#39;", "'")
    assert "<li>" in section and "|---" not in section and "class: True" not in section
    assert "Balance of the weights" in section and "max |SMD|" in section
    # every symbol is explained where it appears
    text = " ".join(section.split())
    assert "<b>s = +1</b> is the unprivileged group" in text
    assert "<b>Algorithm 1</b> (the paper's worst-violation search)" in text
    assert "(the paper's DT_G)" in text
    assert "maximum mean discrepancy" in text  # what mmd_net balances
    if "median-delta split" in text:
        assert "the split whose delta is the median over splits" in text
    # a plain lead with a scale, and the null reference beside gamma
    assert "How to read gamma" in section and "null reference" in section
    assert '<p class="mdfa-lead">' in section
    assert "gap in features-only P(favourable)" in section


@pytest.mark.parametrize(
    ("mdfa", "cols", "message"),
    [
        ({"min_rows": 5000}, {}, "needs at least min_rows=5000"),
        # every decision the one unfavourable value (a positive value that is absent
        # from a two-valued column is an input error, exit 2: test_bad_input_round2)
        ({"features": ["x1"]}, {"prediction": {"column": "pred0", "positive": 1}},
         "no row has a favourable decision"),
        ({"features": ["const"]}, {"features": ["x1", "const"], "categorical": []},
         "every audit feature is constant"),
    ],
)
def test_runner_bad_input_fails_the_attribute_with_a_message(spark, tmp_path, mdfa, cols, message):
    t = _table(400)
    t["const"] = 1.5
    t["pred0"] = 0
    inp = write_parquet(t, tmp_path / "in")
    cfg = _cfg(inp, str(tmp_path / "out"), {**FAST, **mdfa, "attributes": ["grp"]}, **cols)
    cfg["output"]["report"] = False
    res = run_audit_job(spark, parse_config(cfg))
    rows = pd.DataFrame(res.rows)
    m = rows[rows.audit == "mdfa"]
    assert list(m.status) == ["failed"]
    assert message in m.detail.iloc[0] and "'grp'" in m.detail.iloc[0]
    assert res.exit_code == 4
    assert (rows[rows.audit == "group"].status != "failed").any()


# ------------------------------------------------------------------ time budget
def _context(spark, tmp_path) -> tuple[AuditContext, MDFAParams]:
    inp = write_parquet(_table(400), tmp_path / "in")
    cfg = parse_config(_cfg(inp, str(tmp_path / "out"),
                            {**FAST, "attributes": ["grp", "same", "grp"]}))
    prepared = prepare(read_input(spark, input_config=cfg.input), config=cfg)
    ctx = AuditContext(spark=spark, prepared=prepared, config=cfg,
                       run_date=cfg.effective_run_date())
    return ctx, cfg.audits.mdfa


def test_time_budget_is_checked_between_attributes_and_partials_are_reported(spark, tmp_path):
    ctx, params = _context(spark, tmp_path)
    partials = []
    ctx.report_partial = partials.append
    ctx.time_left = lambda: 0.0 if partials else float("inf")  # spent after attribute 1
    with pytest.raises(TimeBudgetExhaustedError, match="before attribute 'same'"):
        run(ctx, params)
    assert len(partials) == 1
    part = partials[0]
    assert isinstance(part.result, MDFAResult)
    assert [r.attribute for r in part.result.attributes] == ["grp"]
    assert {r.attribute for r in part.rows} == {"grp"}
    assert {r.status for r in part.rows} <= {Status.OK, Status.INCONCLUSIVE}
    assert list(part.summary["attributes"]) == ["grp"]
    assert part.result.redacted == ["secret"]
    # the partial is drawn like a final result
    (section,) = render(part, ctx=ctx, params=params)
    assert section.order == 35 and "grp" in section.html


def test_time_budget_is_checked_before_the_splits(spark, tmp_path, monkeypatch):
    ctx, params = _context(spark, tmp_path)
    checks = []
    ctx.time_left = lambda: checks.append(1) or (float("inf") if len(checks) == 1 else 0.0)
    ctx.report_partial = lambda outcome: pytest.fail("no attribute finished")

    def no_splits(*args, **kwargs):
        raise AssertionError("the splits ran past the budget")

    monkeypatch.setattr("fairspark.mdfa.audit.run_splits", no_splits)
    with pytest.raises(TimeBudgetExhaustedError, match="before attribute 'grp'"):
        run(ctx, params)
    assert len(checks) == 2  # before the attribute, then after its grouped statistics
