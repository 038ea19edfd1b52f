"""Discriminative risk with a Spark ML PipelineModel (Bian and Luo, 2024), against direct scoring.

The expectations are computed here: the flips by hand from the same hashed uniforms,
the predictions by calling the fitted pipeline on pandas frames of the original and
the flipped rows.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_parquet

from fairspark import cli
from fairspark.audits.base import derive_seed
from fairspark.audits.prepared import AttributeInfo
from fairspark.config import parse_config
from fairspark.errors import ConfigError
from fairspark.hfm.params import dr_model_kind
from fairspark.runner import run_audit_job

FEATURES = ["age", "priors_count", "juv_fel_count", "juv_misd_count", "c_charge_degree"]
RACE_PRIV = ["Caucasian"]
RATIO = 0.5


@pytest.fixture(scope="module")
def compas_small(compas_pdf):
    """2000 COMPAS rows; ``male`` is an integer sensitive column (the model reads it as a
    number, so it must reach the model in its input type)."""
    pdf = compas_pdf.iloc[:2000].copy().reset_index(drop=True)
    pdf["row_id"] = pdf["id"].astype(str)
    pdf["male"] = (pdf["sex"] == "Male").astype("int32")
    pdf["pred"] = (pdf["decile_score"] >= 5).astype("int64")  # the audited decision
    return pdf


@pytest.fixture(scope="module")
def spark_model(spark, compas_small, tmp_path_factory):
    """A Spark ML pipeline that uses race (indexed) and male (a number), saved."""
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.feature import OneHotEncoder, StringIndexer, VectorAssembler

    train = spark.createDataFrame(compas_small[[*FEATURES, "race", "male", "two_year_recid"]])
    pipeline = Pipeline(stages=[
        StringIndexer(inputCols=["race", "c_charge_degree"], outputCols=["race_i", "deg_i"],
                      stringOrderType="alphabetAsc"),
        OneHotEncoder(inputCols=["race_i", "deg_i"], outputCols=["race_o", "deg_o"]),
        VectorAssembler(inputCols=["age", "priors_count", "juv_fel_count", "male", "race_o",
                                   "deg_o"], outputCol="features"),
        LogisticRegression(labelCol="two_year_recid", maxIter=50, regParam=0.01),
    ])
    model = pipeline.fit(train)
    path = str(tmp_path_factory.mktemp("spark_model") / "compas_lr")
    model.save(path)
    return model, path


def _config(inp: str, out: str, *, hfm: dict, features=FEATURES) -> dict:
    return {
        "dataset": "dr_test",
        "run_date": "2026-11-29",
        "seed": 11,
        "input": {"path": inp},
        "columns": {
            "features": features, "categorical": ["c_charge_degree"],
            "sensitive": [{"column": "race", "privileged": RACE_PRIV},
                          {"column": "male", "privileged": 0}],
            "label": {"column": "two_year_recid", "positive": [0]},
            "prediction": {"column": "pred", "positive": [0]},
            "row_key": "row_id",
        },
        "audits": {"group": {"enabled": False}, "hfm": hfm},
        "output": {"path": out, "report": False},
    }


@pytest.fixture(scope="module")
def compas_input(compas_small, tmp_path_factory):
    base = tmp_path_factory.mktemp("dr_in")
    return write_parquet(compas_small, base / "in", n_files=3), base


def _dr_row(rows: list[dict]) -> pd.Series:
    df = pd.DataFrame(rows)
    sel = df[(df.audit == "hfm") & (df.metric == "DR") & (df.attribute == "*")]
    assert len(sel) == 1, sel
    return sel.iloc[0]


def _hand_flip(values, u_flip, u_pick, privileged, ratio):
    """The flip (Bian and Luo, 2024): unprivileged -> privileged, privileged -> unprivileged."""
    observed = sorted({str(v) for v in values})
    priv = [v for v in observed if v in privileged]
    unpriv = [v for v in observed if v not in privileged]
    out = []
    for v, uf, up in zip(values, u_flip, u_pick, strict=True):
        v = str(v)
        if uf >= ratio:
            out.append(v)
        elif v in priv:
            out.append(unpriv[int(up * len(unpriv))] if unpriv else v)
        else:
            out.append(priv[int(up * len(priv))] if priv else v)
    return out


def _predict(spark, model, pdf: pd.DataFrame) -> np.ndarray:
    cols = ["row_id", *FEATURES, "race", "male"]
    out = model.transform(spark.createDataFrame(pdf[cols])).select("row_id", "prediction")
    return out.toPandas().set_index("row_id").loc[pdf["row_id"], "prediction"].to_numpy()


def _uniforms(spark, keys: pd.Series, seeds: list[int]) -> pd.DataFrame:
    from fairspark.hfm.dr import with_flip_uniforms

    kdf = spark.createDataFrame(pd.DataFrame({"_fs_key": keys.to_numpy()}))
    u = with_flip_uniforms(kdf, seeds=seeds).toPandas().set_index("_fs_key")
    return u.loc[keys].reset_index(drop=True)


def test_dr_with_spark_pipeline_equals_direct_scoring(spark, compas_small, compas_input,
                                                      spark_model):
    inp, base = compas_input
    model, path = spark_model
    cfg = parse_config(_config(inp, str(base / "out"), hfm={
        "method": "approx", "m1": 2, "dr_model": path, "dr_ratio": RATIO}))
    res = run_audit_job(spark, cfg)
    dr = _dr_row(res.rows)
    assert dr.status == "ok", dr.detail
    assert "Spark ML PipelineModel" in dr.detail
    assert res.summary["audits"]["hfm"]["dr"]["model_kind"] == "spark"

    pdf = compas_small
    seeds = [derive_seed(cfg.seed, "hfm", "dr", a) for a in ("race", "male")]
    u = _uniforms(spark, pdf["row_id"], seeds)
    flipped = pdf.copy()
    flipped["race"] = _hand_flip(pdf["race"], u["_u_flip_0"], u["_u_pick_0"], RACE_PRIV, RATIO)
    flipped["male"] = np.array(
        _hand_flip(pdf["male"], u["_u_flip_1"], u["_u_pick_1"], ["0"], RATIO)).astype("int32")
    assert (flipped["race"] != pdf["race"]).any() and (flipped["male"] != pdf["male"]).any()
    changed = int((_predict(spark, model, pdf) != _predict(spark, model, flipped)).sum())
    assert changed > 0  # the model reads race and male, so some predictions move
    assert dr.value == changed / len(pdf)
    assert f"{changed} of {len(pdf)} predictions change" in dr.detail
    assert dr.lower < dr.value < dr.upper
    # each attribute flipped alone, with the same flips of it
    rows = pd.DataFrame(res.rows)
    base_pred = _predict(spark, model, pdf)
    for a in ("race", "male"):
        alone = pdf.copy()
        alone[a] = flipped[a]
        expect = int((base_pred != _predict(spark, model, alone)).sum())
        r = rows[(rows.audit == "hfm") & (rows.metric == "DR") & (rows.attribute == a)].iloc[0]
        assert r.status == "ok" and r.value == expect / len(pdf), a
        assert f"{expect} of {len(pdf)} predictions change" in r.detail


def _attrs(pdf: pd.DataFrame) -> list[AttributeInfo]:
    race = pdf["race"].value_counts().to_dict()
    male = pdf["male"].astype(str).value_counts().to_dict()
    return [
        AttributeInfo("race", "_fs_s_0", "_fs_p_0", race, RACE_PRIV, "values", ["race"]),
        AttributeInfo("male", "_fs_s_1", "_fs_p_1", male, ["0"], "values", ["male"]),
    ]


def _prepared_like(spark, pdf: pd.DataFrame):
    """The prepared layout: key, raw features, sensitive values as strings."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(pdf[["row_id", *FEATURES, "race", "male"]])
    return df.select(F.col("row_id").alias("_fs_key"), *FEATURES,
                     F.col("race").alias("_fs_s_0"), F.col("male").cast("string").alias("_fs_s_1"))


def test_spark_flips_equal_flip_values_row_by_row(spark, compas_small):
    from pyspark.sql import functions as F

    from fairspark.hfm.dr import flip_values, source_columns, with_flip_uniforms

    pdf = compas_small
    attrs = _attrs(pdf)
    # a second view of race with several privileged values and one with no
    # unprivileged value left (nothing to flip to)
    attrs.append(AttributeInfo("race2", "_fs_s_0", "_fs_p_0", dict(attrs[0].values),
                               ["African-American", "Hispanic", "Other"], "values", ["race"]))
    attrs.append(AttributeInfo("all", "_fs_s_0", "_fs_p_0", dict(attrs[0].values),
                               sorted(attrs[0].values), "values", ["race"]))
    types = {"race": "string", "male": "int"}
    for ratio in (0.3, 1.0):
        for j in range(2, 4):  # source_columns keeps one column per source: test each view
            use = [attrs[j], attrs[1]]
            seeds = [derive_seed(7, "t", a.name) for a in use]
            flips = source_columns(use, source_types=types, seeds=seeds, ratio=ratio)
            got = (with_flip_uniforms(_prepared_like(spark, pdf), seeds=seeds)
                   .select("_fs_key", "_fs_s_0", "_fs_s_1", *flips.values(),
                           *[F.col(f"_u_{k}_{i}") for i in range(2) for k in ("flip", "pick")])
                   .toPandas())
            assert str(got["male"].dtype) == "int32"  # cast back to the input type
            for i, (a, src) in enumerate(((use[0], "race"), (use[1], "male"))):
                values = sorted(a.values)
                priv = [v for v in values if v in a.privileged_values]
                unpriv = [v for v in values if v not in a.privileged_values]
                want = flip_values(got[a.value_col].to_numpy(), u_flip=got[f"_u_flip_{i}"],
                                   u_pick=got[f"_u_pick_{i}"], privileged=priv,
                                   unprivileged=unpriv, ratio=ratio)
                assert list(got[src].astype(str)) == [str(v) for v in want], (a.name, ratio)
            if ratio == 1.0 and j == 3:  # every value privileged: nothing changes
                assert (got["race"] == got["_fs_s_0"]).all()
            elif ratio == 1.0:
                assert (got["race"] != got["_fs_s_0"]).all()


@pytest.mark.both_kinds
def test_dr_does_not_depend_on_partitions(spark, compas_small, spark_model, same_on_both_kinds):
    from fairspark.hfm.dr import dr_disagreements_spark

    model, _ = spark_model
    attrs = _attrs(compas_small)
    seeds = [derive_seed(3, "hfm", "dr", a.name) for a in attrs]
    df = _prepared_like(spark, compas_small)
    results = {
        parts: dr_disagreements_spark(
            df.repartition(parts), model=model, attrs=attrs, seeds=seeds, ratio=RATIO,
            feature_cols=FEATURES, source_types={"male": "int"})
        for parts in (1, 2, 7)
    }
    assert len(set(results.values())) == 1, results
    k, n = results[1]
    assert n == len(compas_small) and k > 0
    same_on_both_kinds("hfm_dr_spark_pipeline", pd.DataFrame({"k": [k], "n": [n]}))


@pytest.mark.both_kinds
def test_dr_with_a_joblib_model_equals_direct_scoring(spark, compas_small, tmp_path,
                                                      same_on_both_kinds):
    """A scikit-learn model saved with joblib, called on the executors: the changed
    predictions are those of the model called here on the rows and on their flips by
    hand, on either session kind."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    from fairspark.hfm.dr import dr_disagreements

    pdf = compas_small
    cols = [*FEATURES, "race", "male"]
    model = make_pipeline(
        ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"),
                            ["c_charge_degree", "race"])], remainder="passthrough"),
        LogisticRegression(max_iter=500))
    model.fit(pdf[cols], pdf["two_year_recid"])
    path = str(tmp_path / "model.joblib")
    joblib.dump(model, path)
    attrs = _attrs(pdf)
    seeds = [derive_seed(3, "hfm", "dr", a.name) for a in attrs]
    k, n = dr_disagreements(_prepared_like(spark, pdf), model_path=path, attrs=attrs,
                            seeds=seeds, ratio=RATIO, feature_cols=FEATURES)
    u = _uniforms(spark, pdf["row_id"], seeds)
    flipped = pdf.copy()
    flipped["race"] = _hand_flip(pdf["race"], u["_u_flip_0"], u["_u_pick_0"], RACE_PRIV, RATIO)
    flipped["male"] = np.array(
        _hand_flip(pdf["male"], u["_u_flip_1"], u["_u_pick_1"], ["0"], RATIO)).astype("int32")
    changed = int((model.predict(pdf[cols]) != model.predict(flipped[cols])).sum())
    assert changed > 0
    assert (k, n) == (changed, len(pdf))
    same_on_both_kinds("hfm_dr_joblib", pd.DataFrame({"k": [k], "n": [n]}))


def test_model_that_needs_a_missing_column_fails_the_dr_row_only(
        spark, compas_small, compas_input, tmp_path):
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.feature import VectorAssembler

    # fitted on decile_score, which the audit does not take as a feature
    train = spark.createDataFrame(compas_small[["age", "decile_score", "male",
                                                "two_year_recid"]])
    model = Pipeline(stages=[
        VectorAssembler(inputCols=["age", "decile_score", "male"], outputCol="features"),
        LogisticRegression(labelCol="two_year_recid", maxIter=10),
    ]).fit(train)
    path = str(tmp_path / "needs_decile")
    model.save(path)
    inp, _ = compas_input
    cfg = parse_config(_config(inp, str(tmp_path / "out"), hfm={
        "method": "approx", "m1": 2, "dr_model": path}))
    res = run_audit_job(spark, cfg)
    dr = _dr_row(res.rows)
    assert dr.status == "failed"
    assert "audits.hfm.dr_model" in dr.detail and path in dr.detail
    assert "needs the column(s) ['decile_score']" in dr.detail
    rows = pd.DataFrame(res.rows)
    d = rows[(rows.audit == "hfm") & (rows.attribute == "race") & (rows.metric == "D")]
    assert d.status.tolist() == ["ok"]  # the distances are kept
    # an optional quantity fails alone: the HFM audit and the run stand
    assert res.summary["audits"]["hfm"]["status"] == "ok"
    assert res.exit_code == 0


def test_unloadable_models_name_the_key_and_the_path(spark, compas_small, spark_model,
                                                      tmp_path):
    from fairspark.hfm.dr import DRModelError, dr_disagreements, load_pipeline_model

    bad = tmp_path / "broken_model"
    (bad / "metadata").mkdir(parents=True)
    (bad / "metadata" / "part-00000").write_text("not json\n")
    with pytest.raises(DRModelError) as err:
        load_pipeline_model(str(bad))
    assert str(err.value).startswith(
        f"config key 'audits.hfm.dr_model': cannot load a Spark ML PipelineModel from "
        f"{str(bad)!r}: ")
    # a fitted stage saved on its own, not as a PipelineModel
    lr = str(tmp_path / "bare_lr")
    spark_model[0].stages[-1].save(lr)
    with pytest.raises(DRModelError, match="it holds a org.apache.spark.ml.classification."
                                           "LogisticRegressionModel; save PipelineModel"):
        load_pipeline_model(lr)
    # a file that is no joblib model: the executors fail, DR says which model
    junk = tmp_path / "model.joblib"
    junk.write_bytes(b"not a pickle")
    attrs = _attrs(compas_small)
    with pytest.raises(DRModelError) as err:
        dr_disagreements(_prepared_like(spark, compas_small.iloc[:50]), model_path=str(junk),
                         attrs=attrs, seeds=[1, 2], ratio=RATIO, feature_cols=FEATURES)
    msg = str(err.value)
    assert msg.startswith(f"config key 'audits.hfm.dr_model' ({str(junk)!r}): the scikit-learn "
                          "model failed on the executors: ")
    assert "Traceback" not in msg and len(msg) < 800, msg


def test_model_kind_rule(tmp_path):
    f = tmp_path / "m.joblib"
    f.write_bytes(b"x")
    d = tmp_path / "pipe"
    (d / "metadata").mkdir(parents=True)
    assert dr_model_kind(str(f)) == "sklearn"
    assert dr_model_kind(str(d)) == "spark"
    assert dr_model_kind(f"file://{d}") == "spark"
    # a remote URI is a Spark ML model, decided without looking at the store
    assert dr_model_kind("hdfs://nn:8020/models/adult") == "spark"
    assert dr_model_kind("s3a://bucket/models/adult", kind="spark") == "spark"
    with pytest.raises(ConfigError, match="remote URI, but a scikit-learn model"):
        dr_model_kind("s3a://bucket/m.joblib", kind="sklearn")
    with pytest.raises(ConfigError, match="is a file, but a Spark ML PipelineModel"):
        dr_model_kind(str(f), kind="spark")
    with pytest.raises(ConfigError, match="is a directory, but"):
        dr_model_kind(str(d), kind="sklearn")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="without a 'metadata/' folder"):
        dr_model_kind(str(tmp_path / "empty"))


@pytest.mark.parametrize("case", ["missing", "no_metadata", "kind_mismatch"])
def test_bad_dr_model_path_is_a_config_error(spark, compas_input, tmp_path, capsys, case):
    inp, _ = compas_input
    hfm = {"method": "approx", "m1": 2}
    if case == "missing":
        path = str(tmp_path / "no" / "such_model")
        fragment = "does not exist"
    elif case == "no_metadata":
        path = str(tmp_path / "plain_dir")
        os.makedirs(path)
        fragment = "without a 'metadata/' folder"
    else:
        path = str(tmp_path / "model.joblib")
        open(path, "wb").close()
        hfm["dr_model_kind"] = "spark"
        fragment = "is a file, but a Spark ML PipelineModel"
    hfm["dr_model"] = path
    cfg = _config(inp, str(tmp_path / "out"), hfm=hfm)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(tmp_path / "c.yaml"), "-q"], under_submit=True)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"config key 'audits.hfm.dr_model': {path!r}" in err and fragment in err
    assert "Traceback" not in err
    # nothing of the run is written; the status file records the refusal
    out = tmp_path / "out"
    assert not list(out.glob("run_date=*"))
    statuses = [json.loads(f.read_text()) for f in out.glob("_status/*.json")]
    assert statuses and all(st["exit_code"] == 2 for st in statuses)


def test_run_built_in_code_checks_the_model_path_before_any_output(spark, compas_input,
                                                                   tmp_path):
    inp, _ = compas_input
    path = str(tmp_path / "no" / "such_model")
    cfg = parse_config(_config(inp, str(tmp_path / "out"), hfm={"dr_model": path}))
    with pytest.raises(ConfigError, match="audits.hfm.dr_model.*does not exist"):
        run_audit_job(spark, cfg)
    assert not (tmp_path / "out").exists()


def test_unknown_model_kind_is_rejected(compas_input, tmp_path):
    inp, _ = compas_input
    with pytest.raises(ConfigError, match="audits.hfm.dr_model_kind"):
        parse_config(_config(inp, str(tmp_path), hfm={"dr_model_kind": "onnx"}))


def test_demo_saves_its_model_beside_its_input():
    from fairspark.demo import demo_config

    cfg = demo_config(overrides={"output.path": "/data/fs/out/demo"})
    assert cfg.input.path == "/data/fs/out/demo/_input/adult_scored.parquet"
    assert cfg.audits.hfm.dr_model == "/data/fs/out/demo/_input/adult_model"
    cfg = demo_config(overrides={"input.path": "hdfs://nn/demo/scored.parquet"})
    assert cfg.audits.hfm.dr_model == "hdfs://nn/demo/adult_model"
    assert demo_config().audits.hfm.dr_model == "out/demo/_input/adult_model"
