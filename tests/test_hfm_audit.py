"""The hfm audit through the runner on real data, against brute force and scipy."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import TEST_DATA, write_parquet
from scipy.spatial.distance import cdist, directed_hausdorff

from fairspark.config import parse_config
from fairspark.runner import run_audit_job

COMPAS_NUM = ["age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count"]


def scaled(pdf: pd.DataFrame, numeric: list[str], categorical: list[str]) -> np.ndarray:
    """As the prepared table: min-max numeric (constant -> 0), one-hot categorical."""
    cols = []
    for c in numeric:
        v = pdf[c].astype(float).to_numpy()
        rng = v.max() - v.min()
        cols.append((v - v.min()) / rng if rng > 0 else np.zeros_like(v))
    for c in categorical:
        for val in sorted(pdf[c].astype(str).unique()):
            cols.append((pdf[c].astype(str) == val).to_numpy(float))
    return np.column_stack(cols)


def brute_nn(V: np.ndarray, groups: np.ndarray) -> np.ndarray:
    out = np.empty(len(V))
    for s in range(0, len(V), 1000):
        d = cdist(V[s:s + 1000], V)
        d[groups[s:s + 1000, None] == groups[None, :]] = np.inf
        out[s:s + 1000] = d.min(axis=1)
    return out


def hausdorff(V, groups):
    a, b = V[groups], V[~groups]
    return max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0])


@pytest.fixture(scope="module")
def compas_pdf():
    p = TEST_DATA / "propublica-recidivism_original.csv.gz"
    df = pd.read_csv(p)
    df["row_id"] = np.arange(len(df)).astype(str)
    df["pred"] = (df["priors_count"] > 3).astype(int)  # a transparent rule as "model"
    df["site"] = "A"  # a single-valued attribute
    return df


def _config(inp, out, *, features, categorical, sensitive, label, pred, hfm):
    return parse_config({
        "dataset": "hfm_test",
        "run_date": "2026-11-29",
        "input": {"path": inp},
        "columns": {
            "features": features, "categorical": categorical, "sensitive": sensitive,
            "label": label, "prediction": pred, "row_key": "row_id",
        },
        "audits": {"group": {"enabled": False}, "hfm": hfm},
        "output": {"path": out, "report": True},
    })


def _compas_config(inp, out, *, hfm, sites=False):
    """COMPAS audited on sex and race (and the single-valued ``site``)."""
    sensitive = [{"column": "sex", "privileged": "Female"},
                 {"column": "race", "privileged": "Caucasian"}]
    if sites:
        sensitive.append({"column": "site", "privileged": "A"})
    return _config(
        inp, out, features=[*COMPAS_NUM, "c_charge_degree"], categorical=["c_charge_degree"],
        sensitive=sensitive, label={"column": "two_year_recid", "positive": [0]},
        pred={"column": "pred", "positive": [0]}, hfm=hfm,
    )


DR_FEATURES = [*COMPAS_NUM, "c_charge_degree"]


@pytest.fixture(scope="module")
def compas_model(compas_pdf, tmp_path_factory):
    """A scikit-learn pipeline that uses sex and race, saved with joblib."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    cat = ["c_charge_degree", "sex", "race"]
    model = make_pipeline(
        ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), cat)],
                          remainder="passthrough"),
        LogisticRegression(max_iter=500),
    )
    X = compas_pdf[[*DR_FEATURES, "sex", "race"]]
    model.fit(X, compas_pdf["two_year_recid"])
    path = tmp_path_factory.mktemp("model") / "model.joblib"
    joblib.dump(model, path)
    return model, str(path)


@pytest.fixture(scope="module")
def compas_run(spark, compas_pdf, compas_model, tmp_path_factory):
    base = tmp_path_factory.mktemp("compas")
    inp = write_parquet(compas_pdf, base / "in", n_files=3)
    cfg = _compas_config(
        inp, str(base / "out"), sites=True,
        hfm={"method": "certified", "m1": 6, "paper_value": True,
             "redact_columns": ["priors_count"], "show_witness_values": True,
             "dr_model": compas_model[1], "dr_ratio": 0.5},
    )
    # the run-wide setting applies to HFM witnesses as well as the audit's own
    cfg = cfg.model_copy(update={"redact_columns": ["juv_misd_count"]})
    return run_audit_job(spark, cfg), base, cfg


def _row(rows, attribute, metric):
    sel = rows[(rows.attribute == attribute) & (rows.metric == metric)]
    assert len(sel) == 1, (attribute, metric, sel)
    return sel.iloc[0]


def test_compas_certified_equals_brute_force_and_scipy(compas_run, compas_pdf):
    res, _base, _ = compas_run
    rows = pd.DataFrame(res.rows)
    rows = rows[rows.audit == "hfm"]
    X = scaled(compas_pdf, COMPAS_NUM, ["c_charge_degree"])
    y = (compas_pdf["two_year_recid"] == 0).to_numpy(float)
    yp = (compas_pdf["pred"] == 0).to_numpy(float)
    expected = {}
    for attr, priv in (("sex", "Female"), ("race", "Caucasian")):
        g = (compas_pdf[attr] == priv).to_numpy()
        for metric, t in (("D", y), ("D_f", yp)):
            V = np.column_stack([t, X])
            nn = brute_nn(V, g)
            r = _row(rows, attr, metric)
            assert r.status == "ok"
            assert r.value == pytest.approx(nn.max(), abs=1e-9)
            assert r.value == pytest.approx(hausdorff(V, g), abs=1e-9)
            assert r.lower == r.upper == r.value
            assert _row(rows, attr, f"{metric}_exact_searches").value >= 1
            assert _row(rows, attr, f"{metric}_approx").value >= nn.max() - 1e-12
            assert _row(rows, attr, f"{metric}_pointwise").value >= nn.max() - 1e-12
            assert json.loads(r.params)["method"] == "certified"
            expected[(attr, metric)] = nn.max()
        d, d_f = expected[(attr, "D")], expected[(attr, "D_f")]
        assert _row(rows, attr, "df").value == pytest.approx(d_f / d - 1, abs=1e-9)
    agg = _row(rows, "*", "D")
    assert agg.value == pytest.approx(max(expected[("sex", "D")], expected[("race", "D")]))


def test_single_valued_attribute_fails_by_name(compas_run):
    res, _, _ = compas_run
    rows = pd.DataFrame(res.rows)
    r = _row(rows[rows.audit == "hfm"], "site", "D")
    assert r.status == "failed"
    assert "'site'" in r.detail and "one group" in r.detail


def test_report_section_and_redaction(compas_run):
    _res, base, _ = compas_run
    html = next((base / "out").rglob("report.html")).read_text()
    assert "HFM: harmonic fairness via manifolds" in html
    assert "certified exact" in html and "Witnesses" in html
    assert "data:image/png;base64," in html
    section = html[html.index("HFM: harmonic"):]
    assert "<th>priors_count</th>" not in section  # redacted from witness values
    assert "<th>juv_misd_count</th>" not in section  # run-wide redact_columns
    assert "<th>age</th>" in section and "<th>juv_fel_count</th>" in section


def test_method_exact_is_read_as_certified_with_a_warning(caplog):
    from fairspark.hfm.params import HFMParams

    with caplog.at_level("WARNING", logger="fairspark.hfm.params"):
        assert HFMParams(method="exact").method == "certified"
    assert "audits.hfm.method" in caplog.text and "'exact'" in caplog.text
    with pytest.raises(ValueError, match="method"):
        HFMParams(method="nested_loop")


def test_adult_exact_equals_brute_force_and_scipy(spark, adult_pdf, tmp_path_factory):
    """``method: exact`` (read as ``certified``) gives scipy's D and D_f."""
    pdf = adult_pdf.iloc[:2500].reset_index(drop=True)
    base = tmp_path_factory.mktemp("adult_hfm")
    inp = write_parquet(pdf, base / "in", n_files=2)
    num = ["age", "education_num", "hours_per_week"]
    cat = ["workclass", "occupation"]
    cfg = _config(
        inp, str(base / "out"), features=num + cat, categorical=cat,
        sensitive=[{"column": "sex", "privileged": "Male"},
                   {"column": "race", "privileged": "White"}],
        label={"column": "income", "positive": ">50K"},
        pred={"column": "prediction", "positive": [1]},
        hfm={"method": "exact"},
    )
    res = run_audit_job(spark, cfg)
    rows = pd.DataFrame(res.rows)
    rows = rows[rows.audit == "hfm"]
    X = scaled(pdf, num, cat)
    for attr, priv in (("sex", "Male"), ("race", "White")):
        g = (pdf[attr] == priv).to_numpy()
        for metric, t in (("D", (pdf["income"] == ">50K").to_numpy(float)),
                          ("D_f", (pdf["prediction"] == 1).to_numpy(float))):
            V = np.column_stack([t, X])
            nn = brute_nn(V, g)
            assert _row(rows, attr, metric).value == pytest.approx(nn.max(), abs=1e-9)
            assert _row(rows, attr, metric).value == pytest.approx(hausdorff(V, g), abs=1e-9)
            # the mean of the rows' sample bounds (each at least its nn)
            assert _row(rows, attr, f"{metric}_avg").value >= nn.mean() - 1e-9


def test_dr_equals_direct_pandas_computation(spark, compas_run, compas_pdf, compas_model):
    from fairspark.audits.base import derive_seed
    from fairspark.hfm.dr import with_flip_uniforms

    res, _, cfg = compas_run
    rows = pd.DataFrame(res.rows)
    dr = _row(rows[rows.audit == "hfm"], "*", "DR")
    assert dr.status == "ok"
    # the same random numbers (hash of key and derived seed), flipped here by hand
    names = ["sex", "race", "site"]
    seeds = [derive_seed(cfg.seed, "hfm", "dr", a) for a in names]
    keys = spark.createDataFrame(compas_pdf[["row_id"]].rename(columns={"row_id": "_fs_key"}))
    u = with_flip_uniforms(keys, seeds=seeds).toPandas().set_index("_fs_key")
    u = u.loc[compas_pdf["row_id"]].reset_index(drop=True)
    flipped = compas_pdf.copy()
    priv = {"sex": ["Female"], "race": ["Caucasian"], "site": ["A"]}
    for i, a in enumerate(names):
        values = sorted(compas_pdf[a].astype(str).unique())
        unpriv = [v for v in values if v not in priv[a]]
        new = []
        for v, uf, up in zip(compas_pdf[a], u[f"_u_flip_{i}"], u[f"_u_pick_{i}"], strict=True):
            if uf >= 0.5:
                new.append(v)
            elif v in priv[a]:
                new.append(unpriv[int(up * len(unpriv))] if unpriv else v)
            else:
                new.append(priv[a][int(up * len(priv[a]))])
        flipped[a] = new
    model = compas_model[0]
    cols = [*DR_FEATURES, "sex", "race"]
    changed = model.predict(compas_pdf[cols]) != model.predict(flipped[cols])
    assert dr.value == pytest.approx(changed.mean(), abs=1e-12)
    assert dr.lower < dr.value < dr.upper
    # each attribute flipped alone: the same flips of it, the others left as they are
    base = model.predict(compas_pdf[cols])
    for a in names:
        alone = compas_pdf.copy()
        alone[a] = flipped[a]
        expect = (base != model.predict(alone[cols])).mean()
        r = _row(rows[rows.audit == "hfm"], a, "DR")
        assert r.status == "ok" and "only this attribute flipped" in r.detail
        assert r.value == pytest.approx(expect, abs=1e-12), a
    assert _row(rows[rows.audit == "hfm"], "site", "DR").value == 0.0  # nothing to flip to
    assert set(res.summary["audits"]["hfm"]["dr"]["per_attribute"]) == set(names)


def test_any_other_value_view_equals_brute_force(spark, compas_pdf, tmp_path_factory):
    pdf = compas_pdf.iloc[:1500].reset_index(drop=True)
    base = tmp_path_factory.mktemp("compas_aov")
    inp = write_parquet(pdf, base / "in", n_files=2)
    cfg = _config(
        inp, str(base / "out"), features=COMPAS_NUM, categorical=[],
        sensitive=[{"column": "race", "privileged": "Caucasian"}],
        label={"column": "two_year_recid", "positive": [0]},
        pred={"column": "pred", "positive": [0]},
        hfm={"method": "certified", "view": "any_other_value", "m1": 4},
    )
    res = run_audit_job(spark, cfg)
    rows = pd.DataFrame(res.rows)
    rows = rows[rows.audit == "hfm"]
    X = scaled(pdf, COMPAS_NUM, [])
    codes = pd.factorize(pdf["race"])[0]
    for metric, t in (("D", (pdf["two_year_recid"] == 0).to_numpy(float)),
                      ("D_f", (pdf["pred"] == 0).to_numpy(float))):
        V = np.column_stack([t, X])
        nn = brute_nn(V, codes)  # nearest row whose race value differs
        r = _row(rows, "race", metric)
        assert r.group == "any_other_value"
        assert r.value == pytest.approx(nn.max(), abs=1e-9)


def test_partial_intervals_while_certifying_contain_exact(spark, compas_pdf, tmp_path_factory,
                                                          monkeypatch):
    """Every interval handed to report_partial holds the exact D; a timeout publishes it."""
    import types

    from fairspark._isolation import _timed_out
    from fairspark.audits.base import AuditContext

    seen = []
    real = AuditContext.report_partial

    def record(self, outcome):
        seen.append(outcome)
        real(self, outcome)

    monkeypatch.setattr(AuditContext, "report_partial", record)
    base = tmp_path_factory.mktemp("compas_partial")
    inp = write_parquet(compas_pdf, base / "in", n_files=2)
    # one projection: loose pointwise bounds
    cfg = _compas_config(inp, str(base / "out"),
                         hfm={"method": "certified", "m1": 1, "m2": 1, "histogram_bins": 0})
    res = run_audit_job(spark, cfg)
    final = pd.DataFrame(res.rows)
    X = scaled(compas_pdf, COMPAS_NUM, ["c_charge_degree"])
    y = (compas_pdf["two_year_recid"] == 0).to_numpy(float)
    yp = (compas_pdf["pred"] == 0).to_numpy(float)
    exact = {}
    for attr, priv in (("sex", "Female"), ("race", "Caucasian")):
        g = (compas_pdf[attr] == priv).to_numpy()
        for metric, t in (("D", y), ("D_f", yp)):
            exact[(attr, metric)] = brute_nn(np.column_stack([t, X]), g).max()
    for metric in ("D", "D_f"):
        exact[("*", metric)] = max(exact[("sex", metric)], exact[("race", metric)])
    assert len(seen) >= 2  # pointwise bounds, then each certification step
    for key, ex in exact.items():
        lows, ups = [], []
        for outcome in seen:
            r = _row(pd.DataFrame(outcome.rows), *key)
            assert r.upper >= ex - 1e-9, (key, r.upper, ex)
            if r.lower is not None and not pd.isna(r.lower):
                assert r.lower <= ex + 1e-9, (key, r.lower, ex)
                lows.append(r.lower)
            ups.append(r.upper)
        assert ups == sorted(ups, reverse=True), (key, ups)  # intervals only shrink
        assert lows == sorted(lows), (key, lows)
        fin = _row(final, *key)
        assert fin.value == pytest.approx(ex, abs=1e-9)
        assert (ups[-1], lows[-1]) == pytest.approx((fin.upper, fin.lower), abs=1e-12)
    # the first partial has only the pointwise upper bound
    first = _row(pd.DataFrame(seen[0].rows), "sex", "D")
    assert pd.isna(first.lower) and first.status == "not_certified"
    assert first.upper == first.value >= exact[("sex", "D")]
    # what the runner publishes when the budget ends before certification finishes
    out, info = _timed_out("hfm", types.SimpleNamespace(partial=seen[0]), 5.0)
    pub = pd.DataFrame(out.rows)
    assert info["status"] == "timed_out"
    r = _row(pub, "sex", "D")
    assert r.status == "timed_out" and r.upper >= exact[("sex", "D")]
    assert "time budget of 5 s" in r.detail


def _small_table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "row_id": [f"r{i:04d}" for i in range(n)],
        "a": rng.random(n), "b": rng.random(n),
        "sex": np.where(rng.random(n) < 0.4, "F", "M"),
        "y": rng.integers(0, 2, n), "pred": rng.integers(0, 2, n),
    })


def _small_config(inp, out, **hfm):
    return _config(inp, out, features=["a", "b"], categorical=[],
                   sensitive=[{"column": "sex", "privileged": "F"}],
                   label={"column": "y", "positive": [1]},
                   pred={"column": "pred", "positive": [1]},
                   hfm={"method": "certified", "histogram_bins": 0, **hfm})


def test_repeated_row_key_is_refused_not_merged(spark, tmp_path_factory):
    """The row realising D shares its key with another row: refused, never a smaller D."""
    from fairspark.errors import FairsparkInputError

    pdf = _small_table(400, 21)
    X = scaled(pdf, ["a", "b"], [])
    g = (pdf["sex"] == "F").to_numpy()
    V = np.column_stack([(pdf["y"] == 1).to_numpy(float), X])
    nn = brute_nn(V, g)
    far = int(np.argmax(nn))
    base = tmp_path_factory.mktemp("hfm_keys")
    # unique keys: D equals scipy's
    inp = write_parquet(pdf, base / "in", n_files=2)
    rows = pd.DataFrame(run_audit_job(spark, _small_config(inp, str(base / "out"))).rows)
    assert _row(rows, "sex", "D").value == pytest.approx(hausdorff(V, g), abs=1e-9)
    # the row realising D gets the key of another row of the other group
    other = int(np.flatnonzero(g != g[far])[0])
    dup = pdf.copy()
    dup.loc[far, "row_id"] = dup.loc[other, "row_id"]
    inp2 = write_parquet(dup, base / "in2", n_files=2)
    try:
        res = run_audit_job(spark, _small_config(inp2, str(base / "out2")))
    except FairsparkInputError as err:  # refused for every audit when the table is prepared
        assert "row_key" in str(err) and dup.loc[far, "row_id"] in str(err)
        return
    info = res.summary["audits"]["hfm"]
    assert info["status"] == "failed"
    assert "'row_id'" in info["detail"] and repr(dup.loc[far, "row_id"]) in info["detail"]
    hfm = pd.DataFrame(res.rows)
    hfm = hfm[hfm.audit == "hfm"]
    assert not ((hfm.metric == "D") & hfm.value.notna()).any()  # no merged, smaller D


def test_too_few_rows_are_inconclusive(spark, tmp_path_factory):
    pdf = _small_table(3, 5)
    pdf["sex"] = ["F", "M", "M"]
    base = tmp_path_factory.mktemp("hfm_three")
    inp = write_parquet(pdf, base / "in", n_files=1)
    rows = pd.DataFrame(run_audit_job(spark, _small_config(inp, str(base / "out"))).rows)
    r = _row(rows[rows.audit == "hfm"], "sex", "D")
    assert r.status == "inconclusive"
    assert "min_rows=30" in r.detail and "'privileged': 1" in r.detail
    assert _row(rows[rows.audit == "hfm"], "sex", "df").status == "inconclusive"


def test_aggregate_df_is_the_largest_per_attribute_df(compas_run):
    res, _, _ = compas_run
    rows = pd.DataFrame(res.rows)
    rows = rows[rows.audit == "hfm"]
    per = {a: _row(rows, a, "df").value for a in ("sex", "race")}
    top = max(per, key=per.get)
    agg = _row(rows, "*", "df")
    assert agg.value == per[top]
    assert f"attribute {top!r}" in agg.detail


def test_driver_path_and_spark_passes_give_the_same_audit(spark, tmp_path_factory):
    """The default (a small table searched on the driver) and the Spark passes
    (``advanced.local_max_bytes: 0``) give the same rows, and D equals scipy's."""
    pdf = _small_table(500, 8)
    X = scaled(pdf, ["a", "b"], [])
    g = (pdf["sex"] == "F").to_numpy()
    base = tmp_path_factory.mktemp("hfm_paths")
    inp = write_parquet(pdf, base / "in", n_files=3)
    got = {}
    for name, extra in (("driver", {}), ("spark", {"advanced": {"local_max_bytes": 0}})):
        res = run_audit_job(spark, _small_config(inp, str(base / name), histogram_bins=9,
                                                 **extra))
        cost = res.summary["audits"]["hfm"]["cost"]  # the stage's cost model, in summary.json
        assert cost["engine"] == name and cost["jobs"] == sum(p["jobs"] for p in cost["passes"])
        assert (cost["jobs"] == 1) == (name == "driver")
        if name == "spark":  # the audit's group count handed over: no count job of its own
            assert next(p for p in cost["passes"] if p["pass"] == "code counts")["jobs"] == 0
        rows = pd.DataFrame(res.rows)
        got[name] = rows[rows.audit == "hfm"].sort_values(["attribute", "metric"])
    for metric, t in (("D", pdf["y"]), ("D_f", pdf["pred"])):
        V = np.column_stack([(t == 1).to_numpy(float), X])
        assert _row(got["driver"], "sex", metric).value == pytest.approx(hausdorff(V, g),
                                                                         abs=1e-9)
    a, b = got["driver"], got["spark"]
    assert list(a.metric) == list(b.metric) and list(a.status) == list(b.status)
    for c in ("value", "lower", "upper"):
        np.testing.assert_allclose(a[c].to_numpy(float), b[c].to_numpy(float), rtol=1e-12,
                                   atol=0, equal_nan=True, err_msg=c)


def test_local_max_bytes_is_validated():
    from fairspark.errors import ConfigError

    cfg = _small_config("in", "out", advanced={"local_max_bytes": 0})
    assert cfg.audits.hfm.advanced.local_max_bytes == 0
    with pytest.raises(ConfigError, match=r"audits\.hfm\.advanced\.local_max_bytes"):
        _small_config("in", "out", advanced={"local_max_bytes": -1})


def _hfm_bits(res) -> pd.DataFrame:
    rows = pd.DataFrame(res.rows)
    rows = rows[rows.audit == "hfm"].sort_values(["attribute", "metric", "group"])
    return rows[["attribute", "metric", "group", "status", "value", "lower", "upper",
                 "detail"]].reset_index(drop=True)


def _same_bits(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    """Equal rows, floats compared as their bit patterns (NaN equals NaN)."""
    assert list(a.metric) == list(b.metric), what
    for c in ("attribute", "group", "status", "detail"):
        assert list(a[c].astype(str)) == list(b[c].astype(str)), (what, c)
    for c in ("value", "lower", "upper"):
        x, y = a[c].to_numpy(float), b[c].to_numpy(float)
        assert x.tobytes() == y.tobytes(), (what, c, x[x.view(np.int64) != y.view(np.int64)])


@pytest.mark.parametrize("table", ["adult", "ties"])
def test_driver_and_spark_paths_give_the_same_bits(spark, adult_pdf, tmp_path_factory,
                                                   table):
    """D, D_f, their averages, the histogram, the witness pairs (in the
    detail) and the certified interval are bit-identical whichever path runs (the driver
    path, or the Spark passes forced by ``local_max_bytes: 0``), and whatever the number
    of input files (partitions); D is also scipy's, an independent reference."""
    if table == "adult":
        pdf = adult_pdf.iloc[:3000].reset_index(drop=True)
        num, cat = ["age", "education_num", "hours_per_week"], ["workclass", "occupation"]
        sensitive = [{"column": "sex", "privileged": "Male"},
                     {"column": "race", "privileged": "White"}]
        label, pred = {"column": "income", "positive": [">50K"]}, "prediction"
    else:  # a coarse integer grid: many duplicate points and equal distances
        rng = np.random.default_rng(5)
        n = 1200
        pdf = pd.DataFrame({"row_id": [f"t{i:05d}" for i in range(n)],
                            "a": rng.integers(0, 4, n), "b": rng.integers(0, 3, n),
                            "sex": np.where(rng.random(n) < 0.3, "F", "M"),
                            "y": rng.integers(0, 2, n), "prediction": rng.integers(0, 2, n)})
        num, cat = ["a", "b"], []
        sensitive = [{"column": "sex", "privileged": "F"}]
        label, pred = {"column": "y", "positive": [1]}, "prediction"
    base = tmp_path_factory.mktemp(f"hfm_bits_{table}")
    got = {}
    spark_path = {"advanced": {"local_max_bytes": 0}}
    for name, files, extra in (("driver", 1, {}), ("spark", 2, spark_path),
                               ("spark_7", 7, spark_path)):
        inp = write_parquet(pdf, base / f"in{files}", n_files=files)
        cfg = _config(inp, str(base / name), features=num + cat, categorical=cat,
                      sensitive=sensitive, label=label,
                      pred={"column": pred, "positive": [1]},
                      hfm={"method": "certified", "histogram_bins": 7, **extra})
        res = run_audit_job(spark, cfg)
        assert res.summary["audits"]["hfm"]["cost"]["engine"] == name.split("_")[0]
        got[name] = _hfm_bits(res)
    assert (got["driver"].metric == "D").any() and (got["driver"].metric == "D_f").any()
    _same_bits(got["driver"], got["spark"], "driver vs spark")
    _same_bits(got["spark"], got["spark_7"], "2 vs 7 partitions")
    X = scaled(pdf, num, cat)
    attr, priv = sensitive[0]["column"], sensitive[0]["privileged"]
    g = (pdf[attr] == priv).to_numpy()
    t = (pdf[label["column"]].isin(label["positive"])).to_numpy(float)
    d = got["driver"]
    sel = d[(d.attribute == attr) & (d.metric == "D")]
    assert sel.value.iloc[0] == pytest.approx(hausdorff(np.column_stack([t, X]), g), abs=1e-9)
    assert sel.status.iloc[0] == "ok" or sel.lower.iloc[0] == sel.upper.iloc[0]


def test_group_counts_handed_to_the_engine_are_its_own(spark):
    """The audit's one aggregation hands the engine the rows per code of every attribute
    whose groups' codes are all its non-null codes (equal to the engine's own count);
    an attribute with a code outside its groups (-1: a value the groups do not name)
    is left out, for the engine to count itself."""
    from fairspark.audits.prepared import AttributeInfo
    from fairspark.hfm._spark import code_counts_and_rows
    from fairspark.hfm.audit import _one_sided

    rng = np.random.default_rng(3)
    n = 400
    c0 = rng.integers(0, 3, n)
    c1 = rng.integers(-1, 2, n)  # -1: outside the groups 0 and 1
    c0_null = np.where(rng.random(n) < 0.1, None, c0)
    pts = spark.createDataFrame(
        [(int(a) if a is not None else None, int(b)) for a, b in zip(c0_null, c1, strict=True)],
        "c0 int, c1 int")
    from pyspark.sql import functions as F

    attrs = [AttributeInfo(name=nm, value_col=nm, priv_col=nm, values={}, privileged_values=[],
                           kind="values", source_columns=[nm]) for nm in ("u", "v")]
    codes = [(F.col("c0"), {0: "a", 1: "b", 2: "c"}), (F.col("c1"), {0: "x", 1: "y"})]
    n_rows, valid, failed, _small, counts = _one_sided(attrs, codes, pts, view="any_other_value",
                                                      pjson=None, min_rows=1)
    engine, total = code_counts_and_rows(pts, 2)
    assert n_rows == total == n and valid == [0, 1] and not failed
    assert counts == {"u": engine[0]}
    assert engine[1][-1] == int((c1 == -1).sum())  # why "v" was left out
    v, k = np.unique(c0[[x is not None for x in c0_null]], return_counts=True)
    assert counts["u"] == {int(a): int(b) for a, b in zip(v, k, strict=True)}


@pytest.mark.both_kinds
@pytest.mark.parametrize("method,extra", [("certified", {}),
                                          ("certified", {"advanced": {"local_max_bytes": 0}}),
                                          ("approx", {})],
                         ids=["certified_driver", "certified_spark", "approx"])
def test_notebook_hfm_audit_on_both_session_kinds(spark, adult_pdf, method, extra,
                                                   same_on_both_kinds):
    """The HFM audit through the notebook API (nothing written) on this run's session,
    classic or Spark Connect: every method and engine, D and D_f equal scipy's where
    exact, and every HFM row equals the classic run's."""
    import fairspark

    pdf = adult_pdf.iloc[:1500].reset_index(drop=True)
    num, cat = ["age", "education_num", "hours_per_week"], ["workclass"]
    sdf = spark.createDataFrame(pdf[["row_id", *num, *cat, "sex", "income", "prediction"]])
    res = fairspark.audit(sdf.repartition(3), sensitive={"sex": "Male"},
                          label={"column": "income", "positive": [">50K"]},
                          prediction="prediction", row_key="row_id", features=num + cat,
                          audits={"hfm": {"method": method, **extra}})
    rows = pd.DataFrame(res.rows)
    rows = rows[(rows.audit == "hfm") & (rows.metric != "DR")]  # no DR model here
    assert (rows.status == "ok").all(), rows[["metric", "status", "detail"]]
    if method != "approx":
        X = scaled(pdf, num, cat)
        g = (pdf["sex"] == "Male").to_numpy()
        for metric, t in (("D", (pdf["income"] == ">50K").to_numpy(float)),
                          ("D_f", (pdf["prediction"] == 1).to_numpy(float))):
            got = _row(rows, "sex", metric).value
            assert got == pytest.approx(hausdorff(np.column_stack([t, X]), g), abs=1e-9)
    rows = rows.sort_values(["attribute", "metric", "group"])
    keep = rows[["attribute", "metric", "group", "status", "value", "lower", "upper"]]
    same_on_both_kinds(f"hfm_notebook_{method}_{'spark' if extra else 'default'}",
                       keep.astype({"attribute": str, "metric": str, "group": str,
                                    "status": str}))
