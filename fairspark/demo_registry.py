"""Register two Adult models for ``conf/registry_release.yaml`` (needs ``fairspark[mlflow]``).

``python -m fairspark.demo_registry --tracking-uri sqlite:///out/mlflow/mlflow.db``
trains a logistic regression (``adult`` version 1, alias ``champion``) and a
gradient-boosted classifier (version 2, alias ``challenger``) with scikit-learn on
Adult's training part, logs each with a named-column signature that matches the demo's
scored table (``fairspark demo``'s ``out/demo/_input``), and registers them: the
release question ``may adult@challenger replace adult@champion?`` is then one
``fairspark audit --config conf/registry_release.yaml``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["register_adult_models"]

#: the trees' node arrays of a gradient-boosted model this module trained itself (skops
#: asks for the types it loads to be named)
TRUSTED = ["sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor"]


def _train_frame() -> Any:
    from importlib import resources

    import pandas as pd

    from fairspark.demo import ADULT_COLUMNS, CATEGORICAL, NUMERIC

    path = resources.files("fairspark").joinpath("data/adult.data.gz")
    df = pd.read_csv(path, header=None, names=[c for c, _ in ADULT_COLUMNS],
                     skipinitialspace=True, na_values="?", comment="|")
    df = df[df["income"].notna()].reset_index(drop=True)
    df[CATEGORICAL] = df[CATEGORICAL].fillna("unknown")  # as the demo's table has them
    df[NUMERIC] = df[NUMERIC].astype("int32")  # Spark's int, as the demo reads Adult
    return df


def register_adult_models(*, tracking_uri: str, artifact_location: str | None = None,
                          name: str = "adult") -> dict[str, str]:
    """Train, log and register the two models; return alias -> version.

    Parameters
    ----------
    tracking_uri:
        The tracking store (a ``sqlite:///`` file works without a server).
    artifact_location:
        Where the models' files go (default: MLflow's, ``./mlruns``-like, for a new
        experiment named ``fairspark demo models``).
    name:
        The registered model's name.
    """
    import mlflow
    from mlflow.models import infer_signature
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from fairspark.demo import CATEGORICAL, NUMERIC
    from fairspark.scoring import tracking_uri as using

    train = _train_frame()
    x, y = train[NUMERIC + CATEGORICAL], (train["income"].str.rstrip(".") == ">50K").astype(int)

    def fit(clf: Any) -> Any:
        pre = ColumnTransformer([
            ("num", StandardScaler(), NUMERIC),
            ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), CATEGORICAL)])
        return make_pipeline(pre, clf).fit(x, y)

    models = {"champion": fit(LogisticRegression(max_iter=500)),
              "challenger": fit(HistGradientBoostingClassifier(max_iter=100, random_state=0))}
    with using(tracking_uri):
        client = mlflow.MlflowClient()
        exp = client.get_experiment_by_name("fairspark demo models")
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(
            "fairspark demo models", artifact_location=artifact_location)
        out = {}
        for alias, model in models.items():
            with mlflow.start_run(experiment_id=exp_id, run_name=f"adult {alias}"):
                info = mlflow.sklearn.log_model(
                    model, name="model", registered_model_name=name,
                    signature=infer_signature(x.head(100), model.predict(x.head(100))),
                    pip_requirements=["scikit-learn"], skops_trusted_types=TRUSTED)
            version = str(info.registered_model_version)
            client.set_registered_model_alias(name, alias, version)
            out[alias] = version
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m fairspark.demo_registry``: register the two models, print aliases."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracking-uri", default="sqlite:///out/mlflow/mlflow.db")
    ap.add_argument("--artifact-location", default=None,
                    help="the models' files (default: out/mlflow/artifacts)")
    args = ap.parse_args(argv)
    if args.tracking_uri.startswith("sqlite:///"):
        Path(args.tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    where = args.artifact_location or Path("out/mlflow/artifacts").resolve().as_uri()
    for alias, version in register_adult_models(tracking_uri=args.tracking_uri,
                                                artifact_location=where).items():
        print(f"models:/adult@{alias} -> version {version}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
