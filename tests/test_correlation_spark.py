"""The correlation audit on Spark: sample, tasks, partition independence, audit rows."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import synthetic_scored

from fairspark.correlation import (
    BudgetExhaustedError,
    CorrelationParams,
    OracleJob,
    OracleModel,
    correlation_audit,
    draw_stratified_sample,
    estimate_correlations,
    run_oracle_tasks,
    split_round,
)
from fairspark.correlation._batched import task_attempt
from fairspark.correlation.audit import outcome_from_result
from fairspark.correlation.report import render


def _prepared_like(n: int = 1200, seed: int = 7) -> pd.DataFrame:
    """A table with the prepared-table columns, including unlabelled rows."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3))
    sex_priv = rng.random(n) < 0.5
    race_priv = rng.random(n) < 0.7
    logit = 4 * (x[:, 0] - 0.5) + 1.5 * (x[:, 1] - 0.5) + 0.8 * sex_priv
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    label = np.where(rng.random(n) < 0.05, np.nan, y)
    return pd.DataFrame(
        {
            "_fs_key": [f"k{i}" for i in range(n)],
            "_fs_label": label,
            "_fs_x": [list(r) for r in x],
            "_fs_w": 1.0,
            "_fs_s_0": np.where(sex_priv, "M", "F"),
            "_fs_p_0": sex_priv,
            "_fs_s_1": np.where(race_priv, "W", "B"),
            "_fs_p_1": race_priv,
        }
    )


@pytest.fixture(scope="module")
def table_pdf():
    return _prepared_like()


def _df(spark, pdf, parts):
    return spark.createDataFrame(pdf).repartition(parts)


def _largest_remainder(counts: dict, cap: int) -> dict:
    """Proportional quotas summing to ``cap``: floors, then the largest remainders."""
    total = sum(counts.values())
    if total <= cap:
        return dict(counts)
    exact = {k: cap * n / total for k, n in counts.items()}
    quota = {k: int(np.floor(v)) for k, v in exact.items()}
    by_remainder = sorted(exact, key=lambda k: (quota[k] - exact[k], k))
    for k in by_remainder[: cap - sum(quota.values())]:
        quota[k] += 1
    return quota


def _reference_sample(spark, lab: pd.DataFrame, *, cap: int, seed: int) -> pd.DataFrame:
    """The expected sample by brute force: every labelled row ranked, no pre-filter.

    Strata label x flags; rank pmod(xxhash64(key, seed), 2^30) (Spark's xxhash64 is the
    only thing taken from Spark); each stratum's quota of lowest (rank, key).
    """
    from pyspark.sql import functions as F

    h = (
        spark.createDataFrame(lab[["_fs_key"]])
        .select("_fs_key", F.xxhash64(F.col("_fs_key"), F.lit(seed)).alias("h"))
        .toPandas()
    )
    ref = lab.merge(h, on="_fs_key", how="left", validate="one_to_one")
    ref["rank"] = ref["h"].to_numpy() % (1 << 30)  # Python's % is Spark's pmod here
    strata = ["_fs_label", "_fs_p_0", "_fs_p_1"]
    quota = _largest_remainder(ref.groupby(strata).size().to_dict(), cap)
    ref = ref.sort_values([*strata, "rank", "_fs_key"], kind="mergesort")
    ref["pos"] = ref.groupby(strata).cumcount()
    keys = ref[strata].itertuples(index=False, name=None)
    keep = [pos < quota[k] for k, pos in zip(keys, ref["pos"], strict=True)]
    return ref[keep]


def test_stratified_sample_is_proportional_and_partition_independent(spark, table_pdf):
    out = []
    for parts in (1, 4):
        s = draw_stratified_sample(
            _df(spark, table_pdf, parts),
            priv_cols=["_fs_p_0", "_fs_p_1"],
            attributes=["sex", "race"],
            max_rows=500,
            seed=9,
        )
        out.append(s)
    a, b = out
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.priv, b.priv)
    np.testing.assert_array_equal(a.y, b.y)
    lab = table_pdf.dropna(subset=["_fs_label"])
    assert a.population_rows == len(lab)
    # exactly the cap, allocated by largest remainder (not at least one row per stratum)
    assert len(a.y) == 500
    ref = _reference_sample(spark, lab, cap=500, seed=9)
    np.testing.assert_array_equal(a.x, np.vstack(ref["_fs_x"].to_numpy()))
    np.testing.assert_array_equal(a.y, ref["_fs_label"].to_numpy())
    np.testing.assert_array_equal(a.priv, ref[["_fs_p_0", "_fs_p_1"]].to_numpy(bool))
    # the population cells of 'sex' are counted from the whole labelled table
    cells = 2 * lab["_fs_p_0"].astype(int) + lab["_fs_label"].astype(int)
    np.testing.assert_array_equal(a.population_cells["sex"], np.bincount(cells, minlength=4))


def test_a_small_stratum_can_get_no_row_and_the_audit_says_so(spark, table_pdf):
    """Largest remainder gives a 1-row stratum no quota at a small cap; the row names it."""
    pdf = table_pdf.dropna(subset=["_fs_label"]).copy()
    # race: privileged rows are all unfavourable ...
    pdf["_fs_p_1"] = (pdf["_fs_label"] == 0.0) & (np.arange(len(pdf)) % 2 == 0)
    pdf.loc[pdf.index[1], ["_fs_label", "_fs_p_1"]] = (1.0, True)  # ... but for one row
    params = CorrelationParams(n_samples=10, rounds=2, k=100, sample_rows=100)
    res = correlation_audit(
        spark, _df(spark, pdf, 2), attributes=[("race", "_fs_p_1")], params=params, seed=1
    )
    assert res.sample_cells["race"][3] == 0 and not res.models
    why = res.failed_attributes["race"]
    assert "'privileged, favourable label'" in why
    assert "the labelled table has" in why and "'privileged, favourable label': 1" in why


def test_tasks_identical_for_1_and_4_partitions_and_equal_to_kernel(spark, table_pdf):
    s = draw_stratified_sample(
        _df(spark, table_pdf, 2),
        priv_cols=["_fs_p_0", "_fs_p_1"],
        attributes=["sex", "race"],
        max_rows=600,
        seed=9,
    )
    kw = {
        "attributes": [0, 1],
        "models": ["logistic_regression", "linear_svm"],
        "seeds": [11, 12],
        "n_samples": 12,
        "rounds": 2,
        "k": 150,
        "min_accuracy": 0.55,
        "attempt_cap": 60,
    }
    t1 = run_oracle_tasks(spark, s, OracleJob(partitions=1, **kw))
    t4 = run_oracle_tasks(spark, s, OracleJob(partitions=4, **kw))
    pd.testing.assert_frame_equal(t1.attempts, t4.attempts)
    assert t1.shipped_as == "broadcast"
    # without a broadcast (as under Spark Connect) the sample travels in the closure
    tc = run_oracle_tasks(spark, s, OracleJob(partitions=3, shipping="closure", **kw))
    assert tc.shipped_as == "closure"
    pd.testing.assert_frame_equal(t1.attempts, tc.attempts)
    att = t1.attempts
    assert set(att["status"]) <= {"accepted", "rejected", "failed"}
    # every round reached 12 accepted models
    acc = att[att.status == "accepted"].groupby(["attr", "model", "round"]).size()
    assert len(acc) == 2 * 2 * 2 and (acc >= 12).all()
    # a task row is exactly the plain kernel call with the same ids
    for _, row in att.sample(5, random_state=0).iterrows():
        data = s.for_attribute(int(row["attr"]))
        seed = [11, 12][int(row["attr"])]
        split = split_round(data, seed=seed, round_id=int(row["round"]), test_fraction=0.3)
        ref = task_attempt(
            data, split, OracleModel(model=row["model"], k=150, min_accuracy=0.55),
            seed=seed, round_id=int(row["round"]), attempt=int(row["attempt"]),
        )
        assert ref.status == row["status"]
        np.testing.assert_array_equal(ref.metrics, row[t1.metrics].to_numpy(float))


def _rows(outcome, **match):
    return [r for r in outcome.rows if all(getattr(r, k) == v for k, v in match.items())]


def test_audit_rows_clusters_and_identities(spark, table_pdf, caplog):
    params = CorrelationParams(
        n_samples=50, rounds=5, k=200, models=["linear_svm"], sample_rows=800, tau=0.6
    )
    with caplog.at_level("DEBUG", logger="fairspark"):  # internal cost lines: DEBUG
        res = correlation_audit(
            spark, _df(spark, table_pdf, 3), attributes=[("sex", "_fs_p_0")], params=params,
            seed=42,
        )
    out = outcome_from_result(res)
    # where the rounds' time went: one log line per round, and the summary's cost entry
    lines = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith("correlation sex/linear_svm round ")]
    assert sorted(int(x.split(" round ")[1].split(":")[0]) for x in lines) == list(range(5))
    assert all("attempts, CPU s" in x and "fit " in x and "metrics " in x for x in lines)
    cost = out.summary["attributes"]["sex"]["linear_svm"]["cost"]
    assert cost["rounds_run"] == 5 and len(cost["cpu_s_by_round"]) == 5
    assert cost["attempts"] == out.summary["attributes"]["sex"]["linear_svm"]["attempts"]
    phases = ("draw", "fit", "predict", "metrics")
    assert all(cost["cpu_s"][p] >= 0 for p in phases) and cost["cpu_s"]["fit"] > 0
    assert cost["cpu_s"]["total"] == pytest.approx(sum(cost["cpu_s"][p] for p in phases),
                                                   abs=1e-3)
    assert sum(cost["cpu_s_by_round"]) == pytest.approx(cost["cpu_s"]["total"], abs=1e-2)
    assert out.summary["cost"]["cpu_s"]["fit"] == cost["cpu_s"]["fit"]
    r = _rows(out, metric="tpr_difference", metric_b="fnr_difference")[0]
    assert r.status == "ok" and abs(r.value + 1) < 1e-9
    assert r.lower == pytest.approx(-1, abs=1e-9) and r.upper == pytest.approx(-1, abs=1e-9)
    assert "rounds=5" in r.detail
    d = _rows(
        out, metric="statistical_parity_difference", metric_b="statistical_parity_difference"
    )[0]
    assert abs(d.value - 1) < 1e-9
    # 20 x 20 matrix
    assert (
        len(
            [
                x
                for x in out.rows
                if x.metric_b is not None and x.metric not in ("cluster", "representative")
            ]
        )
        == 400
    )
    reps = _rows(out, metric="representative")
    members = _rows(out, metric="cluster", status="ok")
    assert reps and sum(x.value for x in reps) == len(members)
    # every member's r* with its representative is at least tau
    for m in members:
        rep = m.detail.split("representative: ")[1].split(";")[0]
        rv = _rows(out, metric=rep, metric_b=m.metric_b)[0].value
        assert rv >= 0.6 - 1e-12
    # E-Opp and FNR-dif are perfectly anti-correlated: never in one cluster
    lab = {x.metric_b: x.value for x in members}
    assert lab["tpr_difference"] != lab["fnr_difference"]
    tau = _rows(out, metric="tau")[0]
    assert tau.value == 0.6 and json.loads(tau.params)["n_samples"] == 50
    accr = _rows(out, metric="acceptance_rate")[0]
    assert 0 < accr.value <= 1 and "rounds used 5 of 5" in accr.detail
    assert out.summary["status"] == "ok"
    # run() computes numbers only; SPEC.render draws the section from outcome.result
    assert out.sections == [] and out.result is res
    (sec,) = render(out, ctx=None, params=params)
    assert (sec.title, sec.order) == ("Representative fairness metrics (correlation)", 40)
    assert "data:image/png;base64," in sec.html and "http" not in sec.html.replace("data:", "")
    assert "Cluster graph" in sec.html and "Partial result" not in sec.html


def test_audit_failures_are_specific(spark, table_pdf):
    pdf = table_pdf.copy()
    # attribute 'race': no privileged row with the favourable label -> empty cell
    pdf.loc[pdf["_fs_p_1"] & (pdf["_fs_label"] == 1.0), "_fs_p_1"] = False
    pdf.loc[pdf.index[:3], "_fs_p_1"] = True
    pdf.loc[pdf.index[:3], "_fs_label"] = 0.0
    params = CorrelationParams(
        n_samples=10, rounds=2, k=100, min_accuracy=1.0, sample_rows=400,
        advanced={"max_attempts_per_round": 15},
    )
    res = correlation_audit(
        spark,
        _df(spark, pdf, 2),
        attributes=[("sex", "_fs_p_0"), ("race", "_fs_p_1")],
        params=params,
        seed=1,
    )
    out = outcome_from_result(res)
    race = _rows(out, attribute="race")
    assert len(race) == 1 and race[0].status == "failed"
    assert (
        "'privileged, favourable label'" in race[0].detail and "no labelled rows" in race[0].detail
    )
    sex = _rows(out, attribute="sex", metric="*")
    assert sex[0].status == "failed"
    assert sex[0].detail.startswith(
        "every model rejected: 0 of 30 attempts accepted (min_accuracy=1.0;"
    )
    assert out.summary["status"] == "failed"


def test_tau_search_rows(spark, table_pdf):
    params = CorrelationParams(
        n_samples=30,
        rounds=3,
        k=200,
        models=["logistic_regression"],
        sample_rows=600,
        n_representatives=4,
    )
    out = outcome_from_result(
        correlation_audit(
            spark, _df(spark, table_pdf, 2), attributes=[("sex", "_fs_p_0")], params=params, seed=3
        )
    )
    tau = _rows(out, metric="tau")[0]
    assert tau.status == "ok" and "the largest r* threshold giving 4 clusters" in tau.detail
    reps = _rows(out, metric="representative")
    assert len(reps) == 4
    # tau is one of the estimated off-diagonal r* values, and every member clears it
    offdiag = {
        round(x.value, 12)
        for x in out.rows
        if x.metric_b
        and x.metric not in ("cluster", "representative")
        and x.metric != x.metric_b
        and x.value is not None
    }
    assert round(tau.value, 12) in offdiag
    for m in _rows(out, metric="cluster", status="ok"):
        rep = m.detail.split("representative: ")[1].split(";")[0]
        assert _rows(out, metric=rep, metric_b=m.metric_b)[0].value >= tau.value


class _Clock:
    """A time budget that runs out when the first partial result is handed over."""

    def __init__(self):
        self.left = 60.0
        self.partials = []

    def time_left(self) -> float:
        return self.left

    def report_partial(self, outcome) -> None:
        self.partials.append(outcome)
        self.left = 0.0


def test_time_budget_hands_over_complete_rounds_and_stops(spark, table_pdf):
    from types import SimpleNamespace

    from fairspark.audits.base import AuditContext
    from fairspark.correlation.audit import run

    params = CorrelationParams(
        n_samples=10,
        rounds=4,
        k=100,
        models=["linear_svm"],
        min_accuracy=0.62,
        sample_rows=600,
        tau=0.6,
        repeats=5,
    )
    df = _df(spark, table_pdf, 2)
    full = correlation_audit(spark, df, attributes=[("sex", "_fs_p_0")], params=params, seed=7)
    full_sel = full.models[0].selection
    # without a time budget every round runs in one wave (one Spark job)
    assert full.waves == 1 and not full.partial
    # under a budget, waves of one round per task: 2 tasks, so rounds 0-1 then 2-3
    params = params.model_copy(
        update={"advanced": params.advanced.model_copy(update={"partitions": 2})})

    clock = _Clock()
    ctx = AuditContext(
        spark=spark,
        prepared=SimpleNamespace(
            attributes=[SimpleNamespace(name="sex", priv_col="_fs_p_0")],
            capped_df=lambda *, max_rows, seed: df,
        ),
        config=SimpleNamespace(seed=7),
        run_date=None,
    )
    ctx.time_left = clock.time_left
    ctx.report_partial = clock.report_partial
    with pytest.raises(BudgetExhaustedError, match=r"after 1 wave\(s\)"):
        run(ctx, params)
    (outcome,) = clock.partials
    part = outcome.result
    assert part.partial and part.waves == 1
    sel = part.models[0].selection
    # the rounds complete after wave 1 are rounds of the full run with the same models;
    # the others are still running, none is dropped
    assert sel.round_ids and sel.pending, "wave 1 should complete some rounds, not all"
    assert sorted(sel.round_ids + sel.pending) == list(range(4)) and not sel.dropped
    for r, v in zip(sel.round_ids, sel.values, strict=True):
        np.testing.assert_array_equal(v, full_sel.values[full_sel.round_ids.index(r)])
    ref = estimate_correlations(sel.values, metrics=full.metrics, ci_level=0.95)
    np.testing.assert_array_equal(part.models[0].estimate.r, ref.r)
    acc = _rows(outcome, metric="acceptance_rate")[0]
    assert f"rounds used {len(sel.round_ids)} of 4" in acc.detail
    assert f"{len(sel.pending)} rounds still running" in acc.detail
    assert outcome.summary["attributes"]["sex"]["linear_svm"]["rounds_pending"] == len(sel.pending)
    # the runner renders the partial outcome like a final one, marked as partial
    (sec,) = render(outcome, ctx=ctx, params=params)
    assert "Partial result" in sec.html and "Correlation heatmap" in sec.html


def test_partial_with_no_complete_round_is_not_computed_not_failed():
    from fairspark.correlation._spark import OracleSample
    from fairspark.correlation.audit import _AuditRun, _model_rows
    from fairspark.correlation.results import CorrelationResult

    params = CorrelationParams(n_samples=3, rounds=2, k=20, min_accuracy=0.5)
    attempts = pd.DataFrame(
        {
            "attr": 0,
            "model": "logistic_regression",
            "round": [0, 0, 1],
            "attempt": [0, 1, 0],
            "status": ["accepted", "rejected", "accepted"],
            "reason": [None, "accuracy 0.4000 < min_accuracy 0.5", None],
            "accuracy": 0.6,
            **{m: 0.1 for m in ["spd", "di"]},
        }
    )
    state = _AuditRun(
        params=params,
        metrics=["spd", "di"],
        seed=1,
        names=["sex"],
        sample=OracleSample(
            x=np.zeros((0, 0)),
            y=np.zeros(0),
            w=np.zeros(0),
            priv=np.zeros((0, 1), bool),
            attributes=["sex"],
            population_rows=9,
        ),
        failed={},
        cells={"sex": [1, 1, 1, 1]},
    )
    res = state.model_result(attempts, 0, "logistic_regression")
    assert res.status == "not_computed" and res.selection.pending == [0, 1]
    assert res.detail.startswith("no round complete yet: 2 of 2 rounds still running")
    assert "every model rejected" not in res.detail
    result = CorrelationResult(
        params=params,
        metrics=["spd", "di"],
        failed_attributes={},
        models=[res],
        sample_rows=0,
        population_rows=9,
        sample_cells={},
        waves=1,
        shipped_as="broadcast",
        partial=True,
    )
    (star,) = [r for r in _model_rows(res, result) if r.metric == "*"]
    assert star.status == "not_computed"
    assert not result.failed


def test_end_to_end_through_the_runner(spark, tmp_path):
    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job

    pdf = synthetic_scored(n=900, seed=11)
    inp = tmp_path / "in"
    inp.mkdir()
    pdf.to_parquet(inp / "part-0.parquet", index=False)
    cfg = parse_config(
        {
            "dataset": "toy",
            "run_date": "2026-11-29",
            "seed": 5,
            "input": {"path": str(inp)},
            "columns": {
                "features": ["x1", "x2", "city"],
                "sensitive": [{"column": "sex", "privileged": "M"}],
                "label": {"column": "y", "positive": 1},
                "prediction": {"column": "p", "positive": 1},
                "row_key": "id",
            },
            "audits": {
                "group": None,
                "correlation": {
                    "n_samples": 20,
                    "rounds": 3,
                    "k": 150,
                    "models": ["linear_svm"],
                    "n_representatives": 3,
                },
            },
            "output": {"path": str(tmp_path / "out"), "report": True},
        }
    )
    result = run_audit_job(spark, cfg)
    info = result.summary["audits"]["correlation"]
    assert result.exit_code == 0, info
    rows = [r for r in result.rows if r["audit"] == "correlation"]
    pair = next(
        r for r in rows if r["metric"] == "fnr_difference" and r["metric_b"] == "tpr_difference"
    )
    assert (
        abs(pair["value"] + 1) < 1e-9
        and pair["model"] == "linear_svm"
        and pair["attribute"] == "sex"
    )
    assert len(info["attributes"]["sex"]["linear_svm"]["representatives"]) == 3
    assert sum(r["metric"] == "representative" for r in rows) == 3
    html = next((tmp_path / "out").rglob("report.html")).read_text()
    assert "Representative fairness metrics (correlation)" in html
    assert "Cluster graph" in html and "Correlation heatmap" in html


_LOCAL_CLUSTER_SCRIPT = """
import sys
sys.path[:0] = [{tests!r}, {root!r}]
from fairspark.session import build_session
spark = build_session(master="local-cluster[2,1,1024]", app_name="test-correlation-lc", conf={{
    "spark.ui.enabled": "false", "spark.executor.memory": "512m",
    "spark.sql.shuffle.partitions": "4", "spark.executorEnv.PYTHONPATH": {root!r}}})
from test_correlation_spark import _prepared_like, _lc_run
_lc_run(spark, 3).to_pickle({out!r})
spark.stop()
"""


def _lc_run(spark, parts):
    s = draw_stratified_sample(
        spark.createDataFrame(_prepared_like()).repartition(parts),
        priv_cols=["_fs_p_0"],
        attributes=["sex"],
        max_rows=500,
        seed=9,
    )
    return run_oracle_tasks(
        spark,
        s,
        OracleJob(attributes=[0], models=["linear_svm"], seeds=[11], n_samples=10, rounds=2,
                  k=100, min_accuracy=0.5, attempt_cap=40),
    ).attempts


@pytest.mark.skipif(
    not __import__("os").environ.get("FAIRSPARK_LOCAL_CLUSTER"),
    reason="starts a local-cluster (2 executor JVMs, ~90 s); set FAIRSPARK_LOCAL_CLUSTER=1",
)
def test_identical_under_local_cluster(spark, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "lc.pkl"
    script = _LOCAL_CLUSTER_SCRIPT.format(tests=str(root / "tests"), root=str(root), out=str(out))
    subprocess.run([sys.executable, "-c", script], check=True, timeout=600, capture_output=True)
    pd.testing.assert_frame_equal(pd.read_pickle(out), _lc_run(spark, 1))
