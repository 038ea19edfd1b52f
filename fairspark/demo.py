"""The bundled demo: train a model on UCI Adult, score the test part, audit it.

Everything runs on Spark (Spark ML pipeline); the scored table is written as Parquet
and then audited like any other input. The fitted pipeline is saved next to it, so the
HFM audit can call it for discriminative risk (``audits.hfm.dr_model``).
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

from fairspark.config import Config, parse_config

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ADULT_COLUMNS", "demo_config", "demo_model_path", "load_adult", "prepare_demo_input"]

MODEL_DIR = "adult_model"

log = logging.getLogger("fairspark")

ADULT_COLUMNS = [
    ("age", "int"), ("workclass", "string"), ("fnlwgt", "int"), ("education", "string"),
    ("education_num", "int"), ("marital_status", "string"), ("occupation", "string"),
    ("relationship", "string"), ("race", "string"), ("sex", "string"),
    ("capital_gain", "int"), ("capital_loss", "int"), ("hours_per_week", "int"),
    ("native_country", "string"), ("income", "string"),
]
NUMERIC = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
CATEGORICAL = ["workclass", "marital_status", "occupation", "relationship", "race", "sex"]


def demo_config(*, overrides: dict[str, Any] | None = None) -> Config:
    """The demo's config (``fairspark/conf/demo.yaml``) with CLI overrides applied.

    With ``output.path`` overridden, the demo's working data (the scored table and
    the fitted pipeline ``adult_model`` beside it, used for DR) moves to
    ``<output>/_input/``, outside the dated folders the job publishes.
    """
    text = resources.files("fairspark").joinpath("conf/demo.yaml").read_text(encoding="utf-8")
    ov = dict(overrides or {})
    out = ov.get("output.path")
    if out and not ov.get("input.path"):
        ov["input.path"] = f"{out.rstrip('/')}/_input/adult_scored.parquet"
    inp = ov.get("input.path")
    if inp and not ov.get("audits.hfm.dr_model"):
        ov["audits.hfm.dr_model"] = demo_model_path(inp)
    return parse_config(yaml.safe_load(text), overrides=ov)


def demo_model_path(input_path: str) -> str:
    """Where the demo saves its fitted pipeline: ``adult_model`` beside the scored table."""
    parent = input_path.rstrip("/").rpartition("/")[0]
    return f"{parent}/{MODEL_DIR}" if parent else MODEL_DIR


def load_adult(spark: SparkSession, *, part: str) -> DataFrame:
    """Read the bundled Adult ``train`` or ``test`` part (``?`` -> null, labels cleaned)."""
    from pyspark.sql import functions as F

    name = {"train": "adult.data.gz", "test": "adult.test.gz"}[part]
    path = str(resources.files("fairspark").joinpath(f"data/{name}"))
    schema = ", ".join(f"{c} {t}" for c, t in ADULT_COLUMNS)
    df = (
        spark.read.options(header="false", ignoreLeadingWhiteSpace="true",
                           ignoreTrailingWhiteSpace="true", nullValue="?", comment="|")
        .schema(schema)
        .csv(path)
        .where(F.col("income").isNotNull())
    )
    return df.withColumn("income", F.regexp_replace("income", r"\.$", ""))


def prepare_demo_input(spark: SparkSession, *, config: Config) -> str:
    """Train a logistic regression on Adult's training part and write the scored test part.

    Rows with a missing category are kept (their category becomes ``unknown``). The
    model sees every column but ``fnlwgt`` (a sampling weight), sensitive ones
    included, as many production models do. The fitted ``PipelineModel`` is saved at
    ``audits.hfm.dr_model`` (default: :func:`demo_model_path` of the input), so DR can
    flip sex and race and call it; it needs no label column to score.
    """
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.feature import OneHotEncoder, StringIndexer, VectorAssembler
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    fill = {c: "unknown" for c in [*CATEGORICAL, "native_country"]}
    # the label is made outside the pipeline, so the saved model scores rows without it
    train = (load_adult(spark, part="train").fillna(fill)
             .withColumn("label", (F.col("income") == ">50K").cast("double")))
    test = load_adult(spark, part="test").fillna(fill)
    test = test.withColumn("row_id", F.concat(F.lit("test-"), F.monotonically_increasing_id()))
    idx = [f"{c}_idx" for c in CATEGORICAL]
    ohe = [f"{c}_ohe" for c in CATEGORICAL]
    pipeline = Pipeline(stages=[
        StringIndexer(inputCols=CATEGORICAL, outputCols=idx, handleInvalid="keep",
                      stringOrderType="alphabetAsc"),
        OneHotEncoder(inputCols=idx, outputCols=ohe),
        VectorAssembler(inputCols=NUMERIC + ohe, outputCol="features"),
        LogisticRegression(maxIter=100, regParam=0.001, standardization=True),
    ])
    model = pipeline.fit(train)
    hfm = config.audits.hfm
    model_path = (hfm.dr_model if hfm is not None and hfm.dr_model
                  else demo_model_path(config.input.path))  # type: ignore[arg-type]
    model.write().overwrite().save(model_path)
    scored = model.transform(test).select(
        *[c for c, _ in ADULT_COLUMNS], "row_id",
        vector_to_array("probability")[1].alias("score"),
        F.col("prediction").cast("double").alias("prediction"),
    )
    path = config.input.path
    scored.coalesce(1).write.mode("overwrite").parquet(path)
    log.info("demo: trained logistic regression on Adult train (saved to %s), scored test -> %s",
             model_path, path)
    return path  # type: ignore[return-value]
