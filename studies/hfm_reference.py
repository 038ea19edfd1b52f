"""HFM at defaults on the reference datasets (Adult, COMPAS, German): the report's scale.

Each dataset is the ``original`` file of Friedler et al.'s fairness-comparison copies in
``../shared/data``. A logistic regression (scikit-learn, one-hot features, sensitive
columns included as features, seed 0) is fitted on a random 2/3 of the rows and scores
every row; the HFM audit then runs at its defaults (certified exact D, binary view) on
all rows through ``fairspark.audit``, with the fitted pipeline as the DR model. Prints
one line per dataset and attribute: D, D_f, df and discriminative risk (DR, every
sensitive attribute flipped with probability 0.5).

Usage::

    nice -n 5 python studies/hfm_reference.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import joblib
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

DATASETS = {
    "adult": ("adult/fairness-comparison/preprocessed/adult_original.csv.gz",
              "income-per-year", ">50K", {"sex": "Male", "race": "White"}, ["race-sex"]),
    # c_charge_desc (416 values) is over preparation.max_categories: left out
    "compas": ("compas/fairness-comparison/preprocessed/propublica-recidivism_original.csv.gz",
               "two_year_recid", 0, {"sex": "Female", "race": "Caucasian"},
               ["sex-race", "c_charge_desc"]),
    "german": ("german/fairness-comparison/preprocessed/german_original.csv.gz",
               "credit", 1, {"sex": "male", "age": "adult"}, ["sex-age"]),
}


def scored(path: str, label: str, positive, drop: list[str],
           model_path: str) -> pd.DataFrame:
    """The file with ``y`` (1 = positive label) and ``prediction`` of a fitted model.

    The fitted pipeline is saved with joblib at ``model_path`` so that the audit can
    call it for discriminative risk.
    """
    df = pd.read_csv(path).drop(columns=drop).dropna().reset_index(drop=True)
    y = (df[label] == positive).astype(int)
    x = df.drop(columns=[label])
    cat = [c for c in x.columns if x[c].dtype == object]
    num = [c for c in x.columns if c not in cat]
    enc = ColumnTransformer([("c", OneHotEncoder(handle_unknown="ignore"), cat),
                             ("n", StandardScaler(), num)])
    rng = np.random.default_rng(0)
    train = rng.random(len(df)) < 2 / 3
    model = Pipeline([("enc", enc), ("lr", LogisticRegression(max_iter=2000))])
    model.fit(x[train], y[train])
    joblib.dump(model, model_path)
    out = x.copy()
    out["y"] = y
    out["prediction"] = model.predict(x).astype(int)
    out["row_id"] = np.arange(len(out))
    return out


def main() -> None:
    """Run HFM on every reference dataset and print D, D_f, df per attribute."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    from fairspark import audit

    spark = (SparkSession.builder.master("local[2]")
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.ui.enabled", "false").getOrCreate())
    for name, (path, label, pos, sens, drop) in DATASETS.items():
        model_path = f"{tempfile.mkdtemp(prefix='hfm_ref_')}/{name}.joblib"
        pdf = scored(f"{args.data}/{path}", label, pos, drop, model_path)
        sdf = spark.createDataFrame(pdf)
        t0 = time.perf_counter()
        res = audit(sdf, sensitive=sens, label="y", prediction="prediction",
                    audits={"hfm": {"dr_model": model_path}},
                    config={"columns": {"row_key": "row_id", "features": "all_others"}},
                    dataset=name)
        dt = time.perf_counter() - t0
        r = res.rows
        for attr in sens:
            vals = {m: r[(r.attribute == attr) & (r.metric == m) & (r.status == "ok")]["value"]
                    for m in ("D", "D_f", "df", "DR")}
            bad = r[(r.attribute.isin([attr, "*"])) & (r.status != "ok")]
            for _, b in bad.iterrows():
                print(f"  {attr} {b.metric}: {b.status}: {b.detail}", flush=True)
            v = {m: (float(s.iloc[0]) if len(s) else float("nan")) for m, s in vals.items()}
            print(f"{name:7s} n={len(pdf):6d} {attr:5s} D={v['D']:.4f} D_f={v['D_f']:.4f} "
                  f"df={v['df']:+.4f} DR={v['DR']:.4f} ({dt:.0f} s for the dataset)",
                  flush=True)
        joint = r[(r.attribute == "*") & (r.metric == "DR") & (r.status == "ok")]["value"]
        print(f"{name:7s} DR with every attribute flipped: "
              f"{float(joint.iloc[0]) if len(joint) else float('nan'):.4f}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
