"""The model registry decides the release (issue 60), with a real MLflow registry.

Two real scikit-learn models trained on Adult's training part (a logistic regression,
the champion, and a gradient-boosted classifier, the challenger) are registered in a
temporary sqlite tracking store with a local artifact root. fairspark audits
``models:/adult@challenger`` against ``models:/adult@champion``, scoring the table
itself on the executors; every row must equal the same audit of a table the test
scored with the two models' ``predict`` in pandas, and the MLflow run it logs must
hold each metric equal to its row of ``metrics.parquet``, the three outputs byte for
byte, and the model version's tags.

The tests marked ``both_kinds`` run again on a Spark Connect session
(``FAIRSPARK_TEST_SESSION=connect``, pyspark's local server): there the models are
loaded by the server's Python workers, which run in the session's artifact folder,
not in this process's; the rows must equal the classic run's (``same_on_both_kinds``).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ADULT_COLS, write_parquet

mlflow = pytest.importorskip("mlflow", reason="fairspark[mlflow] not installed")

from fairspark import cli  # noqa: E402
from fairspark.tracking import metric_name, metric_values  # noqa: E402

NUMERIC = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
CATEGORICAL = ["workclass", "marital_status", "occupation", "relationship", "race", "sex"]
ROWS = 3000


def _adult(part: str) -> pd.DataFrame:
    from importlib import resources

    name = {"train": "adult.data.gz", "test": "adult.test.gz"}[part]
    path = resources.files("fairspark").joinpath(f"data/{name}")
    df = pd.read_csv(path, header=None, names=ADULT_COLS, skipinitialspace=True,
                     na_values="?", comment="|").dropna()
    df["income"] = df["income"].str.rstrip(".")
    return df.reset_index(drop=True)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A sqlite tracking store with ``adult`` v1 (LR, @champion), v2 (GB, @challenger)
    and ``adult_proba`` (an output that is neither a label nor a score); yields the
    store's URI, the artifact root, the test table and the two fitted models."""
    from mlflow.models import infer_signature
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root}/mlflow.db"
    artifacts = root / "artifacts"
    train = _adult("train")
    test = _adult("test").head(ROWS).copy()
    test["row_id"] = np.arange(len(test)).astype(str)
    feats = NUMERIC + CATEGORICAL
    y = (train.income == ">50K").astype(int)

    def fit(clf):
        onehot = OneHotEncoder(handle_unknown="ignore", sparse_output=False)
        pre = ColumnTransformer([("num", StandardScaler(), NUMERIC), ("cat", onehot, CATEGORICAL)])
        return make_pipeline(pre, clf).fit(train[feats], y)

    lr = fit(LogisticRegression(max_iter=500))
    gb = fit(HistGradientBoostingClassifier(max_iter=60, random_state=0))
    from fairspark.scoring import tracking_uri

    with tracking_uri(uri):
        client = mlflow.MlflowClient()
        exp = client.create_experiment("models", artifact_location=(artifacts / "models").as_uri())
        client.create_experiment("adult fairness",
                                 artifact_location=(artifacts / "audits").as_uri())
        x = test[feats]
        # the trees' node arrays are trusted: this test made them (skops asks)
        common = {"name": "model", "pip_requirements": ["scikit-learn"],
                  "skops_trusted_types": [
                      "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor"]}
        for clf in (lr, gb):
            with mlflow.start_run(experiment_id=exp):
                mlflow.sklearn.log_model(clf, registered_model_name="adult",
                                         signature=infer_signature(x, clf.predict(x)), **common)
        with mlflow.start_run(experiment_id=exp) as proba_run:
            mlflow.sklearn.log_model(lr, registered_model_name="adult_proba",
                                     pyfunc_predict_fn="predict_proba",
                                     signature=infer_signature(x, lr.predict_proba(x)), **common)
        client.set_registered_model_alias("adult", "champion", "1")
        client.set_registered_model_alias("adult", "challenger", "2")
    return {"uri": uri, "root": root, "test": test, "lr": lr, "gb": gb,
            "proba_run": proba_run.info.run_id}


def _config(inp: str, out: str, prediction: dict, baseline: dict, **output) -> dict:
    return {
        "dataset": "adult_registry", "run_date": "2026-12-05", "input": {"path": inp},
        "columns": {
            "features": ["age", "education_num", "hours_per_week"],
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": "White"}],
            "label": {"column": "income", "positive": ">50K"},
            "prediction": prediction, "baseline": baseline, "row_key": "row_id",
        },
        "audits": {"group": {"min_group_size": 30}},
        "limits": {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.3}]},
        "output": {"path": out, **output},
    }


def _cli(tmp_path: Path, cfg: dict, name: str) -> int:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return cli.main(["audit", "--config", str(path), "-q"], under_submit=True)


def _rows(folder: str) -> pd.DataFrame:
    df = pd.read_parquet(f"{folder}/metrics.parquet")
    key = ["audit", "attribute", "group", "metric", "metric_b", "model"]
    return df.sort_values(key, na_position="first").reset_index(drop=True)


#: the columns of a row that do not depend on the run (its params name the models'
#: run ids, which each test process's registry makes anew)
_KIND_COLUMNS = ["audit", "attribute", "group", "metric", "metric_b", "model", "status",
                 "value", "lower", "upper"]


def _kind_rows(folder: str) -> pd.DataFrame:
    """The rows of ``folder`` that a classic and a Connect run must share."""
    rows = _rows(folder)[_KIND_COLUMNS]
    return rows.astype({c: float for c in ("value", "lower", "upper")})


def _jobs_so_far(spark) -> int:
    """How many Spark jobs the driver has run: the classic session's, or on Connect the
    driver of pyspark's local server, which runs in this test process (observed here;
    fairspark itself never reaches past the Connect client)."""
    from pyspark import SparkContext

    from fairspark.session import is_connect

    sc = SparkContext._active_spark_context if is_connect(spark) else spark.sparkContext
    assert sc is not None, "no local Connect server's context in this process"
    return int(sc._jsc.sc().dagScheduler().numTotalJobs())


def _close(a, b) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return b is not None and abs(float(a) - float(b)) <= 1e-12


def _same_rows(folder: str, reference: str) -> None:
    """The rows of the run scored by the registry equal the reference's (1e-12), and
    each names the two registered models."""
    got, want = _rows(folder), _rows(reference)
    assert len(got) == len(want) > 20
    assert (got["model"] == "baseline").any()
    for (_, g), (_, w) in zip(got.iterrows(), want.iterrows(), strict=True):
        for c in ("audit", "attribute", "group", "metric", "metric_b", "model", "status"):
            assert g[c] == w[c] or (pd.isna(g[c]) and pd.isna(w[c])), (c, g.to_dict())
        for c in ("value", "lower", "upper"):
            assert _close(g[c], w[c]), (c, g.to_dict(), w.to_dict())
        params = json.loads(g["params"])["registered_models"]
        assert params["prediction"]["name"] == "adult"
        assert params["prediction"]["version"] == "2"
        assert params["prediction"]["alias"] == "challenger"
        assert params["baseline"]["version"] == "1"
        assert params["prediction"]["run_id"]


def _reference(tmp_path: Path, registry) -> str:
    """The same audit of the table the test scored with both models' ``predict``."""
    test, feats = registry["test"], NUMERIC + CATEGORICAL
    scored = test.copy()
    scored["pred_gb"] = registry["gb"].predict(test[feats]).astype(int)
    scored["pred_lr"] = registry["lr"].predict(test[feats]).astype(int)
    ref_in = write_parquet(scored, str(tmp_path / "in_scored"))
    by_column = _config(ref_in, str(tmp_path / "out_cols"), {"column": "pred_gb", "positive": 1},
                        {"column": "pred_lr", "positive": 1})
    by_column["output"]["report"] = False
    assert _cli(tmp_path, by_column, "columns") == 0
    return str(tmp_path / "out_cols" / "run_date=2026-12-05")


@pytest.mark.both_kinds
def test_registry_release_audit_and_mlflow_run(spark, tmp_path, registry, monkeypatch,
                                               same_on_both_kinds):
    """Scored by the registry's models on the executors == scored by predict in pandas
    (and, on Connect, == the classic run's rows); the MLflow run holds every metric, the
    three outputs byte for byte, and the challenger's model version carries the verdict.

    The tracking URI is relative (``sqlite:///mlflow.db`` from the store's folder), as a
    user who runs fairspark beside the store writes it: a Connect server's Python
    workers, in a folder of their own, must still load the models."""
    from mlflow import MlflowClient

    test = registry["test"]
    raw = write_parquet(test, str(tmp_path / "in"))
    monkeypatch.chdir(registry["root"])
    by_model = _config(raw, str(tmp_path / "out_models"),
                       {"model_uri": "models:/adult@challenger"},
                       {"model_uri": "models:/adult@champion"},
                       mlflow={"tracking_uri": "sqlite:///mlflow.db",
                               "experiment": "adult fairness"})
    assert _cli(tmp_path, by_model, "models") == 0

    _reference(tmp_path, registry)
    folder = str(tmp_path / "out_models" / "run_date=2026-12-05")
    _same_rows(folder, str(tmp_path / "out_cols" / "run_date=2026-12-05"))
    same_on_both_kinds("mlflow_registry_release", _kind_rows(folder))

    summary = json.loads(Path(folder, "summary.json").read_text())
    assert summary["registered_models"]["prediction"]["model_uri"] == "models:/adult@challenger"
    assert summary["model"]["name"] == "adult" and summary["model"]["version"].startswith("2")
    report = Path(folder, "report.html").read_text()
    assert "adult" in report

    status = json.loads(Path(tmp_path, "out_models", "_status",
                             "run_date=2026-12-05.json").read_text())
    assert status["mlflow"]["logged"] is True
    client = MlflowClient(registry["uri"])
    run = client.get_run(status["mlflow"]["run_id"])
    # every logged metric equals its row in metrics.parquet
    expected = metric_values(pd.read_parquet(f"{folder}/metrics.parquet")
                             .to_dict("records"))
    logged = {k: v for k, v in run.data.metrics.items() if k != "fairness.gate"}
    assert logged.keys() == expected.keys()
    for k, v in expected.items():
        assert logged[k] == v, k
    gate = "violated" if summary["limits"]["would_gate"] else "passed"
    assert run.data.tags["fairness.gate"] == gate
    assert run.data.metrics["fairness.gate"] == (1.0 if gate == "violated" else 0.0)
    assert run.data.params["prediction_model_uri"] == "models:/adult@challenger"
    assert run.data.params["baseline_model_uri"] == "models:/adult@champion"
    assert run.data.params["config_hash"] == summary["config_hash"]
    # the run date is the step (days since 1970-01-01)
    hist = client.get_metric_history(run.info.run_id, "fairness.gate")
    import datetime as dt

    assert [h.step for h in hist] == [(dt.date(2026, 12, 5) - dt.date(1970, 1, 1)).days]
    # the three artifacts, byte for byte
    local = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "dl")))
    for name in ("report.html", "summary.json"):
        assert (local / name).read_bytes() == Path(folder, name).read_bytes()
    published = sorted(p.relative_to(folder) for p in Path(folder, "metrics.parquet").rglob("*")
                       if p.is_file())
    assert published
    for rel in published:
        assert (local / rel).read_bytes() == Path(folder, rel).read_bytes()
    mv = client.get_model_version("adult", "2")
    assert mv.tags["fairness.gate"] == gate
    assert mv.tags["fairness.mlflow_run_id"] == run.info.run_id
    assert mv.tags["fairness.run_date"] == "2026-12-05"


def test_metric_names_are_mlflow_names():
    """Sanitised deterministically to MLflow's alphabet; collisions numbered."""
    import re

    assert metric_name(["group", None, "sex*race", "Male|White", "tpr"]) == \
        "group/sex_race/Male_White/tpr"
    rows = [{"audit": "g", "attribute": "a+b", "metric": "m", "value": 1.0, "lower": 0.5,
             "upper": float("nan")},
            {"audit": "g", "attribute": "a-b", "metric": "m", "value": 2.0},
            {"audit": "g", "attribute": "a=b", "metric": "m", "value": 3.0},
            {"audit": "g", "attribute": "x", "metric": "m", "value": None}]
    got = metric_values(rows)
    assert got == {"g/a_b/m": 1.0, "g/a_b/m.lower": 0.5, "g/a-b/m": 2.0, "g/a_b/m_2": 3.0}
    long = metric_name(["a" * 300])
    assert len(long) == 250 and re.fullmatch(r"[A-Za-z0-9_\-. /]+", long)


@pytest.mark.both_kinds
@pytest.mark.parametrize("case", ["no_model", "no_alias", "no_run", "proba", "threshold"])
def test_bad_model_input_exits_2_naming_key_and_uri(spark, tmp_path, registry, capsys,
                                                    monkeypatch, case):
    """Each bad model input is exit 2 naming the key and the URI, before any Spark job,
    and nothing is published."""
    raw = write_parquet(registry["test"].head(200), str(tmp_path / "in"))
    good = {"model_uri": "models:/adult@champion"}
    pred, why = {
        "no_model": ({"model_uri": "models:/nosuch@champion"},
                     "registered model 'nosuch' does not exist"),
        "no_alias": ({"model_uri": "models:/adult@nosuch"},
                     "alias 'nosuch' of registered model 'adult' does not exist"),
        "no_run": ({"model_uri": "runs:/0123456789abcdef0123456789abcdef/model"},
                   "no such run"),
        "proba": ({"model_uri": "models:/adult_proba/1"},
                  "tensor of shape (-1, 2): neither a label nor a score"),
        "threshold": ({"model_uri": "models:/adult@challenger", "threshold": 0.5},
                      "'columns.prediction.threshold' is set but the model returns a label"),
    }[case]
    # the registry named the way a user without output.mlflow names it
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registry["uri"])
    jobs = _jobs_so_far(spark)
    code = _cli(tmp_path, _config(raw, str(tmp_path / "out"), pred, good), case)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"config key 'columns.prediction.model_uri' ({pred['model_uri']!r})" in err, err
    assert why in err, err
    assert not (tmp_path / "out" / "run_date=2026-12-05").exists()
    assert _jobs_so_far(spark) == jobs  # no Spark job ran


@pytest.mark.both_kinds
def test_unreachable_tracking_server_is_a_note(spark, tmp_path, registry, caplog):
    """A tracking server that cannot be reached: one warning, the exit code unchanged,
    the outputs published, the status file says so."""
    raw = write_parquet(registry["test"].head(1000), str(tmp_path / "in"))
    cfg = _config(raw, str(tmp_path / "out"), {"column": "income_hat", "positive": 1},
                  None, mlflow={"tracking_uri": "http://127.0.0.1:9", "experiment": "x"})
    del cfg["columns"]["baseline"]
    cfg["limits"] = {}
    pdf = registry["test"].head(1000).copy()
    pdf["income_hat"] = (pdf["education_num"] >= 13).astype(int)
    cfg["input"]["path"] = write_parquet(pdf, str(tmp_path / "in2"))
    assert _cli(tmp_path, cfg, "unreachable") == 0
    status = json.loads(Path(tmp_path, "out", "_status", "run_date=2026-12-05.json").read_text())
    assert status["mlflow"]["logged"] is False
    assert "could not be logged to MLflow" in status["mlflow"]["error"]
    assert Path(tmp_path, "out", "run_date=2026-12-05", "summary.json").exists()


@pytest.mark.parametrize("where", ["model", "output"])
def test_without_mlflow_exit_2_names_key_and_install(spark, tmp_path, capsys, monkeypatch,
                                                     where):
    """Configured without MLflow installed: exit 2 before any work, naming the key and
    the install command (``import mlflow`` fails as it does when it is absent)."""
    import sys

    pdf = pd.DataFrame({"sex": ["Male", "Female"] * 50, "race": ["White", "Black"] * 50,
                        "age": np.arange(100), "education_num": np.arange(100) % 16,
                        "hours_per_week": np.arange(100) % 60, "income": [">50K", "<=50K"] * 50,
                        "row_id": [str(i) for i in range(100)], "p": [1, 0, 0, 1] * 25})
    raw = write_parquet(pdf, str(tmp_path / "in"))
    if where == "model":
        cfg = _config(raw, str(tmp_path / "out"), {"model_uri": "models:/adult@challenger"},
                      {"column": "p"})
        key = "columns.prediction.model_uri"
    else:
        cfg = _config(raw, str(tmp_path / "out"), {"column": "p"}, None,
                      mlflow={"experiment": "x"})
        del cfg["columns"]["baseline"]
        key = "output.mlflow"
    monkeypatch.setitem(sys.modules, "mlflow", None)
    code = _cli(tmp_path, cfg, where)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"config key '{key}'" in err and "pip install 'fairspark[mlflow]'" in err, err
    assert not (tmp_path / "out" / "run_date=2026-12-05").exists()
    status = json.loads((tmp_path / "out" / "_status" / "run_date=2026-12-05.json").read_text())
    assert status["exit_code"] == 2 and status["key"] == key, status


@pytest.mark.both_kinds
def test_notebook_audit_with_models_logs_to_mlflow(spark, tmp_path, registry):
    """``fairspark.audit(df, prediction={"model_uri": ...}, mlflow=...)``: the models
    score the DataFrame, the result is logged as one run (each metric equal to its row),
    and ``result.log_to_mlflow()`` logs it again under another experiment."""
    from mlflow import MlflowClient

    import fairspark

    df = spark.createDataFrame(registry["test"].head(1500))
    settings = {"tracking_uri": registry["uri"], "experiment": "notebook",
                "artifact_location": str(tmp_path / "nb")}
    result = fairspark.audit(
        df, sensitive={"sex": "Male"}, label={"column": "income", "positive": ">50K"},
        prediction={"model_uri": "models:/adult@challenger"},
        baseline={"model_uri": "models:/adult@champion"}, row_key="row_id",
        features=["age", "education_num", "hours_per_week"], mlflow=settings)
    note = result.summary["mlflow"]
    assert note["logged"] is True, note
    client = MlflowClient(registry["uri"])
    run = client.get_run(note["run_id"])
    expected = metric_values(result.rows.to_dict("records"))
    assert {k: v for k, v in run.data.metrics.items() if k != "fairness.gate"} == expected
    assert result.summary["registered_models"]["baseline"]["version"] == "1"
    again = result.log_to_mlflow(experiment="notebook again")
    assert again["logged"] is True and again["run_id"] != note["run_id"]
    assert client.get_experiment(again["experiment_id"]).name == "notebook again"


@pytest.mark.both_kinds
def test_runs_uri_with_relative_tracking_uri(spark, tmp_path, registry, monkeypatch,
                                             same_on_both_kinds):
    """A ``runs:/`` URI under a relative ``MLFLOW_TRACKING_URI`` (the workers of a
    Connect server load such a model through the tracking store, from a folder of their
    own): the rows equal those of the table scored by the model's ``predict`` here."""
    test, feats = registry["test"].head(1000).copy(), NUMERIC + CATEGORICAL
    run_id = mlflow.MlflowClient(registry["uri"]).get_model_version("adult", "2").run_id
    test["pred_gb"] = registry["gb"].predict(test[feats]).astype(int)
    raw = write_parquet(test, str(tmp_path / "in"))
    monkeypatch.chdir(registry["root"])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    outs = {}
    for name, pred in {"runs": {"model_uri": f"runs:/{run_id}/model"},
                       "column": {"column": "pred_gb", "positive": 1}}.items():
        cfg = _config(raw, str(tmp_path / name), pred, None)
        del cfg["columns"]["baseline"]
        cfg["output"]["report"] = False
        assert _cli(tmp_path, cfg, name) == 0
        outs[name] = _kind_rows(str(tmp_path / name / "run_date=2026-12-05"))
    assert len(outs["runs"]) > 20
    pd.testing.assert_frame_equal(outs["runs"], outs["column"], rtol=1e-12, atol=1e-12)
    same_on_both_kinds("mlflow_registry_runs_uri", outs["runs"])


def test_worker_locations_are_absolute(tmp_path, monkeypatch):
    """What a Connect server's workers get: relative local locations made absolute
    against this process's folder; MLflow's names and remote URIs unchanged."""
    from fairspark.scoring import _absolute_local

    monkeypatch.chdir(tmp_path)
    assert _absolute_local("sqlite:///mlflow.db") == f"sqlite:///{tmp_path}/mlflow.db"
    assert _absolute_local("mlruns") == str(tmp_path / "mlruns")
    assert _absolute_local("file:mlruns") == (tmp_path / "mlruns").as_uri()
    for same in ("sqlite:////srv/mlflow.db", "/srv/mlruns", "file:///srv/mlruns",
                 "http://127.0.0.1:5000", "databricks", "databricks-uc", "s3://bucket/key",
                 "postgresql://user@host/db"):
        assert _absolute_local(same) == same


@pytest.mark.skipif(
    not os.environ.get("FAIRSPARK_LOCAL_CLUSTER"),
    reason="starts a local-cluster (2 executor JVMs, ~90 s); set FAIRSPARK_LOCAL_CLUSTER=1",
)
def test_registry_release_under_local_cluster(spark, tmp_path, registry):
    """The same audit on a ``local-cluster`` master (the models loaded in the executors'
    own Python processes), from the CLI in a process of its own: rows equal the
    reference's."""
    import subprocess
    import sys

    raw = write_parquet(registry["test"], str(tmp_path / "in"))
    cfg = _config(raw, str(tmp_path / "out_lc"), {"model_uri": "models:/adult@challenger"},
                  {"model_uri": "models:/adult@champion"})
    cfg["output"]["report"] = False
    cfg["spark"] = {"master": "local-cluster[2,1,1024]"}
    path = tmp_path / "lc.yaml"
    path.write_text(yaml.safe_dump(cfg))
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "MLFLOW_TRACKING_URI": registry["uri"]}
    proc = subprocess.run([sys.executable, "-m", "fairspark.cli", "audit", "--config",
                           str(path), "-q"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _same_rows(str(tmp_path / "out_lc" / "run_date=2026-12-05"), _reference(tmp_path, registry))


@pytest.fixture(scope="module")
def score_model(registry):
    """``adult_score`` v1 (@challenger): a ridge regression of the label on the same
    features, a model whose output is a float score (decided by a threshold)."""
    from mlflow.models import infer_signature
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from fairspark.scoring import tracking_uri

    train, feats = _adult("train"), NUMERIC + CATEGORICAL
    pre = ColumnTransformer([("num", StandardScaler(), NUMERIC),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), CATEGORICAL)])
    reg = make_pipeline(pre, Ridge()).fit(train[feats], (train.income == ">50K").astype(float))
    x = registry["test"][feats]
    with tracking_uri(registry["uri"]):
        client = mlflow.MlflowClient()
        exp = client.get_experiment_by_name("models").experiment_id
        with mlflow.start_run(experiment_id=exp):
            mlflow.sklearn.log_model(reg, name="model", registered_model_name="adult_score",
                                     pip_requirements=["scikit-learn"],
                                     signature=infer_signature(x, reg.predict(x)))
        client.set_registered_model_alias("adult_score", "challenger", "1")
    return reg


def _dr_config(inp: str, out: str, prediction: dict, hfm: dict) -> dict:
    """The registry audit with only ``sex`` (binary: with ``dr_ratio: 1`` every row's
    sex is swapped, Male <-> Female, whatever the hashes) and HFM."""
    cfg = _config(inp, out, prediction, {"model_uri": "models:/adult@champion"})
    cfg["columns"]["sensitive"] = [{"column": "sex", "privileged": "Male"}]
    cfg["audits"]["hfm"] = {"dr_ratio": 1.0, **hfm}
    cfg["limits"] = {}
    cfg["output"]["report"] = False
    return cfg


@pytest.mark.parametrize("case", [pytest.param("label", marks=pytest.mark.both_kinds),
                                  pytest.param("score", marks=pytest.mark.both_kinds),
                                  "explicit"])
def test_dr_uses_the_registered_model(spark, tmp_path, registry, score_model, monkeypatch,
                                      same_on_both_kinds, case):
    """HFM's DR calls the model of ``columns.prediction`` (same URI, same threshold)
    when ``audits.hfm.dr_model`` is not set, and the ``models:/`` URI of an explicit
    ``dr_model`` otherwise: DR equals the brute force of its definition, ``mean
    1[f(x, a) != f(x, ã)]`` with every row's sex swapped, computed here with
    ``mlflow.pyfunc.load_model`` in pandas; the DR row's params name the model."""
    prediction, hfm, dr_uri, rule = {
        "label": ({"model_uri": "models:/adult@challenger"}, {},
                  "models:/adult@challenger", lambda p: np.asarray(p) == 1),
        "score": ({"model_uri": "models:/adult_score@challenger", "threshold": 0.3}, {},
                  "models:/adult_score@challenger", lambda p: np.asarray(p) >= 0.3),
        # an explicit dr_model wins: the champion, decided by the default rule
        "explicit": ({"model_uri": "models:/adult@challenger"},
                     {"dr_model": "models:/adult@champion"}, "models:/adult@champion",
                     lambda p: np.asarray(p) == 1),
    }[case]
    test = registry["test"].head(1000)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registry["uri"])
    raw = write_parquet(test, str(tmp_path / "in"))
    cfg = _dr_config(raw, str(tmp_path / "out"), prediction, hfm)
    assert _cli(tmp_path, cfg, case) == 0

    model = mlflow.pyfunc.load_model(dr_uri)
    x = test[NUMERIC + CATEGORICAL].reset_index(drop=True)
    flipped = x.copy()
    flipped["sex"] = x["sex"].map({"Male": "Female", "Female": "Male"})
    assert flipped["sex"].notna().all()
    before = rule(model.predict(x)).reshape(-1)
    after = rule(model.predict(flipped)).reshape(-1)
    want = float(np.mean(before != after))

    rows = pd.read_parquet(str(tmp_path / "out" / "run_date=2026-12-05" / "metrics.parquet"))
    dr = rows[(rows.audit == "hfm") & (rows.metric == "DR")]
    assert len(dr) == 1 and dr.iloc[0]["status"] == "ok", dr.to_dict("records")
    assert 0 < want < 1
    assert abs(dr.iloc[0]["value"] - want) <= 1e-12, (dr.iloc[0]["value"], want)
    facts = json.loads(dr.iloc[0]["params"])["dr_model"]
    assert facts["model_uri"] == dr_uri
    if case == "score":
        assert facts["threshold"] == 0.3 and facts["kind"] == "score"
    same_on_both_kinds(f"mlflow_registry_dr_{case}", pd.DataFrame({"DR": [dr.iloc[0]["value"]]}))


@pytest.mark.both_kinds
def test_dr_model_uri_that_does_not_resolve_exits_2(spark, tmp_path, registry, capsys,
                                                    monkeypatch):
    """A ``dr_model`` URI that does not resolve: exit 2 naming ``audits.hfm.dr_model``
    and the URI, before any Spark job (nothing published)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registry["uri"])
    raw = write_parquet(registry["test"].head(200), str(tmp_path / "in"))
    uri = "models:/adult@nosuch"
    cfg = _dr_config(raw, str(tmp_path / "out"), {"model_uri": "models:/adult@challenger"},
                     {"dr_model": uri})
    jobs = _jobs_so_far(spark)
    code = _cli(tmp_path, cfg, "bad_dr")
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"config key 'audits.hfm.dr_model' ({uri!r})" in err, err
    assert "alias 'nosuch' of registered model 'adult' does not exist" in err, err
    assert not (tmp_path / "out" / "run_date=2026-12-05").exists()
    assert _jobs_so_far(spark) == jobs  # no Spark job ran
