"""The group audit on Spark, end to end through the runner, against pandas/fairlearn."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import write_parquet
from fairlearn.metrics import MetricFrame, selection_rate, true_positive_rate

from fairspark.config import parse_config
from fairspark.runner import run_audit_job


def _adult_config(inp: str, out: str, **extra) -> dict:
    cfg = {
        "dataset": "adult_test",
        "run_date": "2026-11-29",
        "input": {"path": inp},
        "columns": {
            "features": ["age", "education_num", "hours_per_week", "workclass", "occupation"],
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": "White"}],
            "intersections": [["sex", "race"]],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": {"column": "prediction", "positive": 1},
            "row_key": "row_id",
        },
        "audits": {"group": {"min_group_size": 30}},
        "output": {"path": out, "report": False},
    }
    for k, v in extra.items():
        cfg[k] = v
    return cfg


def _rows(result) -> pd.DataFrame:
    return pd.DataFrame(result.rows)


def _value(df, attribute, group, metric):
    sel = df[(df.attribute == attribute) & (df.group == group) & (df.metric == metric)]
    assert len(sel) == 1, (attribute, group, metric, len(sel))
    return sel.iloc[0]


@pytest.fixture(scope="module")
def adult_run(spark, adult_pdf, tmp_path_factory):
    base = tmp_path_factory.mktemp("adult")
    inp = write_parquet(adult_pdf, base / "in8", n_files=8)
    res = run_audit_job(spark, parse_config(_adult_config(inp, str(base / "out"))))
    return res, base


def test_adult_catalogue_equals_fairlearn(adult_run, adult_pdf):
    res, _ = adult_run
    assert res.exit_code == 0
    df = _rows(res)
    y = (adult_pdf.income == ">50K").astype(int)
    p = adult_pdf.prediction
    for attr, priv in (("sex", "Male"), ("race", "White")):
        g = np.where(adult_pdf[attr] == priv, "p", "u")
        mf = MetricFrame(metrics={"sr": selection_rate, "tpr": true_positive_rate},
                         y_true=y, y_pred=p, sensitive_features=g).by_group
        sp = _value(df, attr, "unprivileged", "statistical_parity_difference")
        assert sp.value == pytest.approx(mf.loc["u", "sr"] - mf.loc["p", "sr"], abs=1e-12)
        di = _value(df, attr, "unprivileged", "disparate_impact")
        assert di.value == pytest.approx(mf.loc["u", "sr"] / mf.loc["p", "sr"], rel=1e-12)
        eo = _value(df, attr, "unprivileged", "tpr_difference")
        assert eo.value == pytest.approx(mf.loc["u", "tpr"] - mf.loc["p", "tpr"], abs=1e-12)
        assert sp.lower <= sp.value <= sp.upper
    # per value of a multi-valued attribute vs the privileged group, with plain pandas
    black = adult_pdf[adult_pdf.race == "Black"]
    white = adult_pdf[adult_pdf.race == "White"]
    ppv = lambda d: ((d.prediction == 1) & (d.income == ">50K")).sum() / (d.prediction == 1).sum()
    row = _value(df, "race", "Black", "ppv_ratio")
    assert row.value == pytest.approx(ppv(black) / ppv(white), rel=1e-12)
    # intersection: privileged = Male|White, a specific cell compared with it
    fb = adult_pdf[(adult_pdf.sex == "Female") & (adult_pdf.race == "Black")]
    mw = adult_pdf[(adult_pdf.sex == "Male") & (adult_pdf.race == "White")]
    row = _value(df, "sex*race", "Female|Black", "statistical_parity_difference")
    assert row.value == pytest.approx(fb.prediction.mean() - mw.prediction.mean(), abs=1e-12)


def test_small_groups_are_inconclusive_with_count(adult_run, adult_pdf):
    df = _rows(adult_run[0])
    n_other = int((adult_pdf.race == "Other").sum())
    n_other_pos = int(((adult_pdf.race == "Other") & (adult_pdf.income == ">50K")).sum())
    assert n_other_pos < 30 <= n_other
    row = _value(df, "race", "Other", "tpr_difference")
    assert row.status == "inconclusive"
    assert f"only {n_other_pos} rows with favourable label in the unprivileged group" in row.detail
    assert _value(df, "race", "Other", "statistical_parity_difference").status == "ok"


def test_outputs_layout_and_summary(adult_run):
    res, base = adult_run
    folder = base / "out" / "run_date=2026-11-29"
    assert (folder / "_SUCCESS").exists()
    pq = pd.read_parquet(folder / "metrics.parquet")
    for c in ("run_date", "dataset", "audit", "attribute", "group", "metric", "metric_b", "model",
              "value", "lower", "upper", "status", "detail", "params", "config_hash",
              "fairspark_version", "schema_version"):
        assert c in pq.columns
    assert len(pq) == len(res.rows)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["rows"]["read"] == summary["rows"]["audited"] > 10000
    assert summary["audits"]["group"]["status"] == "ok"
    assert set(summary["stage_timings"]) >= {"read", "prepare", "audit group", "write: metrics"}
    assert "write: report" not in summary["stage_timings"]  # this run writes no report
    assert summary["versions"]["spark"].startswith("4.")
    assert not [p for p in (base / "out").iterdir() if p.name.startswith("_tmp")]


def test_overall_performance_equals_pandas(adult_run, adult_pdf):
    """The model card's numbers: accuracy, base rate and positive rate over the labelled
    rows, against a direct pandas computation on the same table."""
    from fairspark.report.decision import audited_facts

    res, _ = adult_run
    perf = res.summary["audits"]["group"]["performance"]
    y = (adult_pdf["income"] == ">50K").to_numpy()
    d = (adult_pdf["prediction"] == 1).to_numpy()
    assert perf["labelled_rows"] == len(adult_pdf)
    assert perf["accuracy"] == pytest.approx((y == d).mean(), abs=1e-12)
    assert perf["base_rate"] == pytest.approx(y.mean(), abs=1e-12)
    assert perf["positive_rate"] == pytest.approx(d.mean(), abs=1e-12)
    facts = dict(audited_facts(res.summary))
    assert facts["Performance"] == (
        f"accuracy {(y == d).mean():.3f}, base rate {y.mean():.3f} (favourable labels), "
        f"positive rate {d.mean():.3f} (favourable decisions), over {len(adult_pdf):,} "
        "labelled rows")


def test_results_do_not_depend_on_partitions(spark, adult_pdf, adult_run, tmp_path):
    inp1 = write_parquet(adult_pdf, tmp_path / "in1", n_files=1)
    old = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        one = _rows(run_audit_job(spark, parse_config(_adult_config(inp1, str(tmp_path / "o")))))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", old)
    eight = _rows(adult_run[0])
    key = ["attribute", "group", "metric"]
    m = one.merge(eight, on=key, suffixes=("_1", "_8"))
    assert len(m) == len(one) == len(eight)
    for c in ("value", "lower", "upper"):
        a, b = m[f"{c}_1"].to_numpy(float), m[f"{c}_8"].to_numpy(float)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0, equal_nan=True)


def test_weights_and_unlabelled_rows(spark, compas_pdf, tmp_path):
    pdf = compas_pdf.copy()
    rng = np.random.default_rng(11)
    pdf["w"] = rng.uniform(0.5, 2.0, len(pdf))
    pdf["label"] = pdf.two_year_recid.astype("float")
    late = rng.random(len(pdf)) < 0.2
    pdf.loc[late, "label"] = np.nan  # labels that have not arrived yet
    inp = write_parquet(pdf, tmp_path / "in", n_files=3)
    cfg = {
        "dataset": "compas", "run_date": "2026-11-29", "input": {"path": inp},
        "columns": {
            "features": ["age", "priors_count", "c_charge_degree"],
            "sensitive": [{"column": "race", "privileged": "Caucasian"}],
            "label": {"column": "label", "positive": 1},
            "favourable": "negative",
            "score": {"column": "decile_score", "threshold": 5},
            "weight": "w", "row_key": "id",
        },
        "model": {"name": "compas-risk", "version": "2"},
        "output": {"path": str(tmp_path / "out"), "report": False},
    }
    res = run_audit_job(spark, parse_config(cfg))
    df = _rows(res)
    _assert_model_card(res.summary)
    # favourable = not re-offending, not flagged (score < 5)
    fav_pred = (pdf.decile_score < 5).astype(float)
    u = pdf.race != "Caucasian"
    sr = lambda m: np.average(fav_pred[m], weights=pdf.w[m])
    assert _value(df, "race", "unprivileged", "statistical_parity_difference").value == \
        pytest.approx(sr(u) - sr(~u), abs=1e-12)
    lab = ~late
    fav_y = (pdf.label == 0).astype(float)
    def tpr(m):
        sel = m & lab & (fav_y == 1)
        return np.average(fav_pred[sel], weights=pdf.w[sel])
    assert _value(df, "race", "unprivileged", "tpr_difference").value == \
        pytest.approx(tpr(u) - tpr(~u), abs=1e-12)
    assert res.summary["rows"]["unlabelled"] == int(late.sum())
    assert res.summary["rows"]["weighted"] is True


def _assert_model_card(summary):
    """The model card line of a scored run: name, version and the audited threshold,
    then the performance and the data window beside it."""
    from fairspark.report.decision import audited_brief, audited_facts

    assert summary["input"]["score"] == "decile_score"
    assert summary["input"]["threshold"] == 5.0
    facts = dict(audited_facts(summary))
    assert facts["Model"] == ("compas-risk version 2; score column decile_score, decision "
                              "threshold 5 (decision = decile_score >= 5)")
    keys = [k for k, _ in audited_brief(summary)]
    assert keys[1:4] == ["Model", "Performance", "Data window"]


# ---------------------------------------------------------------- one scan


def _dirty_table(n: int = 3000, seed: int = 17) -> pd.DataFrame:
    """Weighted rows with dropped rows (null features/sensitive), NaN and null labels."""
    rng = np.random.default_rng(seed)
    pdf = pd.DataFrame({
        "id": np.arange(n).astype(str),
        "x1": rng.normal(size=n),
        "x2": rng.integers(0, 7, n),
        "city": rng.choice(["a", "b", "c", "d"], n),
        "sex": rng.choice(["M", "F"], n, p=[0.6, 0.4]),
        "race": rng.choice(["w", "b", "a"], n, p=[0.6, 0.3, 0.1]),
        "age": rng.integers(18, 80, n),
        "y": rng.integers(0, 2, n).astype(float),
        "p": rng.integers(0, 2, n),
        "w": rng.integers(1, 5, n).astype(float) * 0.25,  # exact binary fractions
    })
    pdf["city"] = pdf["city"].astype(object)
    pdf.loc[rng.random(n) < 0.02, "city"] = None  # dropped rows
    pdf["race"] = pdf["race"].astype(object)
    pdf.loc[rng.random(n) < 0.01, "race"] = None  # dropped rows
    pdf.loc[rng.random(n) < 0.1, "y"] = np.nan  # unlabelled (NaN in a double label)
    return pdf


def _dirty_config(inp: str, out: str) -> dict:
    return {
        "dataset": "dirty", "run_date": "2026-11-29", "input": {"path": inp},
        "columns": {
            "features": ["x1", "x2", "city"],
            "sensitive": [{"column": "sex", "privileged": "M"},
                          {"column": "race", "privileged": "w"},
                          {"column": "age", "privileged_expr": "age >= 40", "name": "old"}],
            "intersections": [["sex", "race"]],
            "label": {"column": "y", "positive": 1},
            "prediction": {"column": "p", "positive": 1},
            "weight": "w", "row_key": "id",
        },
        "output": {"path": out, "report": False},
    }


@pytest.fixture(scope="module")
def dirty(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("dirty")
    pdf = _dirty_table()
    return pdf, write_parquet(pdf, base / "in", n_files=3), base


def test_one_pass_gives_the_staged_flows_results(spark, dirty, monkeypatch):
    """Default one-scan preparation vs the statistics pass + persisted rows + group pass."""
    from fairspark import prepare as prep
    from fairspark.runner import compute_run

    pdf, inp, base = dirty
    cfg = parse_config(_dirty_config(inp, str(base / "o1")))
    one = compute_run(spark, cfg)
    monkeypatch.setattr(prep, "ONE_PASS_MAX_GROUPS", 0)  # forces the staged flow
    staged = compute_run(spark, cfg)
    assert "prepare: scan" in one.summary["stage_timings"]
    assert one.exit_code == staged.exit_code == 0
    assert one.summary["rows"] == staged.summary["rows"]
    assert one.summary.get("warnings") == staged.summary.get("warnings")
    a, b = pd.DataFrame(one.long_rows), pd.DataFrame(staged.long_rows)
    key = ["audit", "attribute", "group", "metric"]
    assert a[key].equals(b[key])
    assert a["status"].equals(b["status"]) and a["detail"].equals(b["detail"])
    for c in ("value", "lower", "upper"):  # the weights are exact binary fractions
        np.testing.assert_array_equal(a[c].to_numpy(float), b[c].to_numpy(float))
    # the audited rows, by hand
    kept = pdf.dropna(subset=["city", "race"])
    assert one.summary["rows"]["audited"] == len(kept)
    assert one.summary["rows"]["unlabelled"] == int(kept.y.isna().sum())
    assert one.summary["rows"]["attributes"]["sex*race"]["values"] == {
        f"{s}|{r}": int(k) for (s, r), k in kept.groupby(["sex", "race"]).size().items()}
    assert one.summary["rows"]["attributes"]["old"]["values"] == {
        "privileged": int((kept.age >= 40).sum()), "unprivileged": int((kept.age < 40).sum())}


def test_one_pass_cells_equal_pandas(spark, dirty):
    """The cells of every combination against a pandas groupby of the raw rows."""
    from fairspark.io import read_input
    from fairspark.metrics import CELL_STATS
    from fairspark.prepare import prepare

    pdf, inp, base = dirty
    cfg = parse_config(_dirty_config(inp, str(base / "o2")))
    prepared = prepare(read_input(spark, input_config=cfg.input), config=cfg)
    cells = prepared.cells
    assert prepared.base_df is None and prepared._features is None  # nothing persisted
    kept = pdf.dropna(subset=["city", "race"]).copy()
    y, p = kept.y, kept.p
    kept["cell"] = np.select(
        [(y == 1) & (p == 1), (y == 0) & (p == 1), (y == 0) & (p == 0), (y == 1) & (p == 0),
         y.isna() & (p == 1)], ["tp", "fp", "tn", "fn", "up"], "un")
    kept["old"] = np.where(kept.age >= 40, "privileged", "unprivileged")
    kept["w2"] = kept.w ** 2
    want = kept.groupby(["sex", "race", "old", "cell"])[["w", "w2"]].agg(["sum", "size"])
    view = {a.name: a for a in prepared.attributes}
    got = cells.set_index([view["sex"].value_col, view["race"].value_col,
                           view["old"].value_col])
    assert len(got) == len(kept.groupby(["sex", "race", "old"]))
    for (s, r, o, c), row in want.iterrows():
        g = got.loc[(s, r, o)]
        assert g[c] == row[("w", "sum")] and g[f"{c}_w2"] == row[("w2", "sum")]
        assert g[f"{c}_n"] == row[("w", "size")]
    assert cells[list(CELL_STATS)].to_numpy().sum() == pytest.approx(
        kept.w.sum() + kept.w2.sum() + len(kept))
    inter = view["sex*race"]
    pairs = zip(kept.sex, kept.race, strict=True)
    assert set(cells[inter.value_col]) == {f"{s}|{r}" for s, r in pairs}
    assert (cells[inter.priv_col] == (cells[inter.value_col] == "M|w")).all()
    assert inter.privileged_values == ["M|w"]


def test_one_pass_statistics_equal_the_statistics_pass(spark, tmp_path):
    """Every input check's counter from the grouped pass equals the old global pass."""
    from fairspark import prepare as prep
    from fairspark.io import read_input

    pdf = _dirty_table(n=800, seed=3)
    rng = np.random.default_rng(4)
    pdf["x3"] = rng.normal(size=len(pdf))
    pdf.loc[rng.random(len(pdf)) < 0.02, "x3"] = np.inf
    pdf.loc[rng.random(len(pdf)) < 0.02, "x1"] = np.nan  # a null score (pyarrow: NaN -> null)
    pdf.loc[rng.random(len(pdf)) < 0.02, "w"] = -1.0
    pdf["id"] = pdf["id"].astype(object)
    pdf.loc[rng.random(len(pdf)) < 0.02, "id"] = None
    pdf["sex"] = pdf["sex"].astype(object)
    pdf.loc[rng.random(len(pdf)) < 0.02, "sex"] = None
    pdf["sex2"] = pdf["sex"]
    raw = _dirty_config(write_parquet(pdf, tmp_path / "in", n_files=2), str(tmp_path / "o"))
    raw["columns"].pop("prediction")
    raw["columns"]["score"] = {"column": "x1", "threshold": 0.0}
    raw["columns"]["features"] = ["x3", "x2", "city", "sex2"]
    raw["audits"] = {"group": {}, "hfm": {}}  # every check on: hfm reads features, joins by key
    cfg = parse_config(raw)
    df = read_input(spark, input_config=cfg.input)
    plan = prep._plan_columns(df, cfg)
    views = prep._sensitive_views(df, cfg, plan.types)
    new = prep._stats_from_groups(lambda c: prep._distinct_counts(df, plan, cfg, c),
                                  prep._one_pass_groups(df, plan, cfg, views), plan, cfg)
    old = prep._collect_stats(df, plan, cfg)
    assert new.nulls and new.non_finite and new.negative_weights and new.null_row_keys
    assert new.categories == {"city": pdf["city"].nunique(), "sex2": pdf["sex2"].nunique()}
    for f in old.__dataclass_fields__:
        a, b = getattr(new, f), getattr(old, f)
        if isinstance(a, float):
            assert a == pytest.approx(b, nan_ok=True), f
        else:
            assert a == b, f
    # a group-only run neither counts categories nor reads the row key
    raw["audits"] = {"group": {}}
    cfg = parse_config(raw)
    plan = prep._plan_columns(df, cfg)
    only = prep._stats_from_groups(lambda c: prep._distinct_counts(df, plan, cfg, c),
                                   prep._one_pass_groups(df, plan, cfg, views), plan, cfg)
    assert only.categories == {} and only.null_row_keys == 0
    assert (only.rows, only.dropped, only.nulls) == (old.rows, old.dropped, old.nulls)


@pytest.mark.both_kinds
def test_category_values_are_exact_sorted_and_bounded(spark, dirty):
    """The categorical values the preparation hands the encoding: the kept rows'
    distinct strings in code-point order, the same for any partitioning; a column past
    the cap brings back cap + 1 of them, however many it has."""
    from fairspark import prepare as prep
    from fairspark.io import read_input

    pdf, inp, base = dirty
    raw = _dirty_config(inp, str(base / "o"))
    raw["columns"]["features"] = ["x1", "x2", "city", "id"]
    raw["columns"]["categorical"] = ["x2", "city", "id"]
    raw["columns"].pop("row_key")  # the key is not a feature
    cfg = parse_config(raw)
    df = read_input(spark, input_config=cfg.input)
    plan = prep._plan_columns(df, cfg)
    kept = pdf.dropna(subset=["city", "race"])
    want = {c: sorted(kept[c].astype(str).unique()) for c in ("x2", "city")}
    assert want["x2"] == [str(v) for v in range(7)] and len(want["city"]) == 4
    ids = sorted(kept["id"].astype(str).unique())
    for frame in (df, df.repartition(7), df.coalesce(1)):
        got, clash = prep._category_values(frame, plan, ["x2", "city", "id"], cap=20)
        assert {c: got[c] for c in ("x2", "city")} == want and clash is False
        # 2,900-odd distinct ids, cut at cap + 1: the first 21 in code-point order
        assert len(ids) > 2000 and got["id"] == ids[:21]


@pytest.mark.both_kinds
def test_the_values_pass_sees_a_repeated_row_key(spark, dirty):
    """The values pass's key part: no clash on unique keys (over every row with a key,
    kept or not), a clash when one key is on two rows; the run then names the key."""
    from fairspark import prepare as prep
    from fairspark.errors import InvalidValueError
    from fairspark.io import read_input

    pdf, inp, base = dirty
    cfg = parse_config(_dirty_config(inp, str(base / "o")))
    df = read_input(spark, input_config=cfg.input)
    plan = prep._plan_columns(df, cfg)
    key = cfg.columns.row_key
    assert pdf[key].dropna().is_unique
    assert prep._category_values(df, plan, [], cap=5, row_key=key) == ({}, False)
    dup = df.unionByName(df.where(df[key] == str(pdf[key].dropna().iloc[3])))
    assert prep._category_values(dup.repartition(5), plan, [], cap=5, row_key=key)[1] is True
    with pytest.raises(InvalidValueError, match=rf"row key column '{key}'.*repeats"):
        prep._check_unique_keys(dup, cfg)


@pytest.mark.both_kinds
def test_the_driver_key_check_agrees_with_the_shuffle(spark, dirty, monkeypatch):
    """A table of at most ``KEY_HASHES_ON_DRIVER_MAX_ROWS`` rows has its keys' hashes
    compared on the driver: the same answer as the values pass's shuffle on unique keys,
    on a repeated key and with null keys (not keys: never a repeat); ``prepare``
    refuses the repeated key by name on both paths."""
    from pyspark.sql import functions as F

    from fairspark import prepare as prep
    from fairspark.errors import InvalidValueError
    from fairspark.io import read_input
    from fairspark.prepare._checks import _key_hashes_clash

    pdf, inp, base = dirty
    cfg = parse_config(_dirty_config(inp, str(base / "o")))
    df = read_input(spark, input_config=cfg.input)
    plan = prep._plan_columns(df, cfg)
    key = cfg.columns.row_key
    nulls = df.unionByName(df.limit(5).withColumn(key, F.lit(None).cast("string")))
    dup = df.unionByName(df.where(df[key] == str(pdf[key].dropna().iloc[3])))
    for frame, repeated in ((df, False), (nulls, False), (dup, True)):
        frame = frame.repartition(5)
        want = prep._category_values(frame, plan, [], cap=5, row_key=key)[1]
        assert want is repeated
        assert _key_hashes_clash(frame, key) is repeated
    assert _key_hashes_clash(df.where(df[key].isNull()), key) is False  # no key at all
    raw = _dirty_config(inp, str(base / "o"))
    # HFM joins by key; with no categorical feature no values pass runs
    raw["columns"]["features"] = ["x1", "x2"]
    with_hfm = parse_config({**raw, "audits": {"group": {}, "hfm": {}}})
    for cap in (prep.KEY_HASHES_ON_DRIVER_MAX_ROWS, 0):  # the driver, then the shuffle
        monkeypatch.setattr(prep, "KEY_HASHES_ON_DRIVER_MAX_ROWS", cap)
        prep.prepare(df, config=with_hfm)
        with pytest.raises(InvalidValueError, match=rf"row key column '{key}'.*repeats"):
            prep.prepare(dup, config=with_hfm)


def test_the_key_check_of_the_staged_flow_and_a_window_compares_on_the_driver(
        spark, dirty, monkeypatch):
    """``_check_unique_keys`` without a pass's answer (the staged flow, a window's
    partition) compares the hashes on the driver when it is told the rows, in an
    aggregation when not: the same verdicts; the staged flow refuses a repeated key."""
    from fairspark import prepare as prep
    from fairspark.errors import InvalidValueError
    from fairspark.io import read_input

    pdf, inp, base = dirty
    raw = _dirty_config(inp, str(base / "o"))
    raw["columns"]["features"] = ["x1", "x2"]
    cfg = parse_config({**raw, "audits": {"group": {}, "hfm": {}}})
    key = cfg.columns.row_key
    df = read_input(spark, input_config=cfg.input)
    dup = df.unionByName(df.where(df[key] == str(pdf[key].iloc[3]))).repartition(3)
    for rows in (None, len(pdf) + 1):  # the aggregation, then the driver
        prep._check_unique_keys(df, cfg, rows=rows)
        with pytest.raises(InvalidValueError, match=rf"row key column '{key}'.*repeats"):
            prep._check_unique_keys(dup, cfg, rows=rows)
    monkeypatch.setattr(prep, "ONE_PASS_MAX_GROUPS", 1)  # the staged flow
    prep.prepare(df, config=cfg)
    with pytest.raises(InvalidValueError, match=rf"row key column '{key}'.*repeats"):
        prep.prepare(dup, config=cfg)


@pytest.mark.both_kinds
def test_values_and_keys_beside_each_other(spark, dirty):
    """With a categorical feature the keys' job runs beside the values' pass: the
    one-hot entries are the kept rows' values (pandas) whether rows were dropped (the
    pass tells them by every required column) or none were (it reads the categorical
    column alone), and a repeated key is still refused by name."""
    from fairspark import prepare as prep
    from fairspark.errors import InvalidValueError
    from fairspark.io import read_input

    pdf, inp, base = dirty
    raw = _dirty_config(inp, str(base / "o"))
    cfg = parse_config({**raw, "audits": {"group": {}, "hfm": {}}})
    key = cfg.columns.row_key
    df = read_input(spark, input_config=cfg.input)
    clean = df.where(df["city"].isNotNull() & df["race"].isNotNull()).repartition(4)
    kept = pdf.dropna(subset=["city", "race"])
    assert len(kept) < len(pdf)  # df has dropped rows, clean has none
    want = [f"city={v}" for v in sorted(kept["city"].unique())]
    for frame in (df, clean):
        names = prep.prepare(frame, config=cfg).feature_names
        assert [n for n in names if n.startswith("city=")] == want
        dup = frame.unionByName(frame.where(frame[key] == str(kept[key].iloc[5])))
        with pytest.raises(InvalidValueError, match=rf"row key column '{key}'.*repeats"):
            prep.prepare(dup, config=cfg)


def test_the_staged_flow_encodes_the_same_categories(spark, dirty, monkeypatch):
    """Past ``ONE_PASS_MAX_GROUPS`` the encoding finds the categorical values itself (the
    same bounded pass over the prepared rows): the same names and vectors as the one
    aggregation's, each categorical entry the indicator of its value (pandas)."""
    from fairspark import prepare as prep
    from fairspark.columns import KEY, X
    from fairspark.io import read_input

    pdf, inp, base = dirty
    raw = _dirty_config(inp, str(base / "o"))
    raw["audits"] = {"group": {"enabled": False}, "hfm": {}}
    cfg = parse_config(raw)
    got = {}
    for flow in ("one pass", "staged"):
        if flow == "staged":
            monkeypatch.setattr(prep, "ONE_PASS_MAX_GROUPS", 0)
        prepared = prep.prepare(read_input(spark, input_config=cfg.input), config=cfg)
        try:
            rows = prepared.df.select(KEY, X).toPandas()
            got[flow] = (prepared.feature_names,
                         dict(zip(rows[KEY], map(list, rows[X]), strict=True)))
        finally:
            prepared.unpersist()
    assert got["one pass"] == got["staged"]
    names, vectors = got["staged"]
    kept = pdf.dropna(subset=["city", "race"]).set_index("id")
    cities = sorted(kept["city"].astype(str).unique())
    assert [n for n in names if n.startswith("city=")] == [f"city={v}" for v in cities]
    at = {v: names.index(f"city={v}") for v in cities}
    for key, vec in list(vectors.items())[:200]:
        assert [vec[at[v]] for v in cities] == [float(kept.at[key, "city"] == v)
                                                for v in cities]


def test_the_encoded_table_is_persisted_only_for_several_readers(spark, dirty):
    """One audit that reads features computes the encoding in its own jobs (no cache);
    two share the persisted rows, and each read encodes them; both give the same
    vectors."""
    from fairspark.columns import KEY, X
    from fairspark.io import read_input
    from fairspark.prepare import prepare

    pdf, inp, base = dirty
    got = {}
    for audits in ({"hfm": {}}, {"hfm": {}, "mdfa": {}}):
        raw = _dirty_config(inp, str(base / "o"))
        raw["audits"] = {"group": {"enabled": False}, **audits}
        cfg = parse_config(raw)
        prepared = prepare(read_input(spark, input_config=cfg.input), config=cfg)
        try:
            prepared.df  # builds the encoding (and the rows' cache for two readers)
            cached = prepared.base_df is not None and prepared.base_df.is_cached
            assert cached == (len(audits) > 1) and not prepared.df.is_cached, audits
            rows = prepared.df.select(KEY, X).toPandas()
        finally:
            prepared.unpersist()
        got[len(audits)] = dict(zip(rows[KEY], map(list, rows[X]), strict=True))
    assert len(got[1]) == len(pdf.dropna(subset=["city", "race"]))
    assert got[1] == got[2]


@pytest.mark.parametrize(("value", "lower", "upper"), [
    (1.47e-05, 1.2e-05, 1.7e-05),   # printed as "0.000 [0.000, 0.000]" before
    (0.1234, 0.1231, 0.1236),
    (-0.00042, -0.0009, 0.00005),
    (0.25, 0.2, 0.3),
])
def test_printed_value_lies_inside_its_printed_interval(value, lower, upper):
    import re as _re

    from fairspark.audits.lines import plain
    from fairspark.group.report import _ci, _value

    row = {"value": value, "lower": lower, "upper": upper}
    for signed in (False, True):
        printed = plain(_value(row, signed=signed))  # the text, without its row's mark
        v = float(printed.replace("−", "-"))
        lo, hi = (float(x.replace("−", "-"))
                  for x in _re.findall(r"[−+]?[0-9.]+", plain(_ci(row, signed=signed))))
        assert lo <= v <= hi and lo < hi, (v, lo, hi)
        # and each printed number is its true value rounded, not another number
        assert abs(v - value) <= 0.5 * 10 ** -len(printed.split(".")[1]) + 1e-15
    assert plain(_value({"value": 0.25, "lower": 0.2, "upper": 0.3})) == "0.250"  # 3 kept


def test_di_chart_draws_its_limits_and_the_whole_four_fifths_band(monkeypatch):
    """The legend promised a dotted limit line that was never drawn, and the
    four-fifths band was cut at 1.04."""
    from matplotlib.axes import Axes

    from fairspark.group import report as gr

    drawn = {"dotted_x": [], "xlim": None, "legend": []}
    real_plot, real_xlim, real_legend = Axes.plot, Axes.set_xlim, Axes.legend

    def plot(ax, *a, **k):
        if k.get("ls") == ":" and len(a) >= 1 and len(set(a[0])) == 1:
            drawn["dotted_x"].append(a[0][0])
        return real_plot(ax, *a, **k)

    def xlim(ax, *a, **k):
        drawn["xlim"] = a
        return real_xlim(ax, *a, **k)

    def legend(ax, *a, handles=(), **k):
        drawn["legend"] = [h.get_label() for h in handles]
        return real_legend(ax, *a, handles=handles, **k)

    monkeypatch.setattr(Axes, "plot", plot)
    monkeypatch.setattr(Axes, "set_xlim", xlim)
    monkeypatch.setattr(Axes, "legend", legend)
    row = {"attribute": "race", "group": "unprivileged", "metric": "disparate_impact",
           "value": 0.55, "lower": 0.50, "upper": 0.60, "status": "ok"}
    uri = gr._di_chart({("race", "unprivileged", "disparate_impact"): row}, ["race"],
                       {"race": {}}, "95%", [{"metric": "disparate_impact", "min": 0.8}])
    assert uri and uri.startswith("data:image/png")
    assert 0.8 in drawn["dotted_x"]  # the configured limit, on the attribute's row
    assert "configured limit" in drawn["legend"]
    lo, hi = drawn["xlim"]
    assert lo <= 0.5 and hi >= 1.25  # values and the whole band 0.8-1.25
