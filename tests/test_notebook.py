"""fairspark.audit: a Spark DataFrame in, rows + summary + inline report out, no files."""

from __future__ import annotations

import html as _html
import os
import re
from pathlib import Path

import pytest

import fairspark
from fairspark.report.render import external_references


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def demo_df(spark, tmp_path_factory):
    """The demo's scored Adult test part (the model is trained on the training part)."""
    from fairspark.demo import demo_config, prepare_demo_input

    base = tmp_path_factory.mktemp("nb_demo")
    config = demo_config(overrides={"output.path": str(base / "out")})
    path = prepare_demo_input(spark, config=config)
    return spark.read.parquet(path)


def test_audit_a_dataframe_in_memory(demo_df, spark, tmp_path, monkeypatch):
    from pyspark.sql import functions as F

    monkeypatch.chdir(tmp_path)  # anything written to a relative path would land here
    before = _files(tmp_path)
    result = fairspark.audit(
        demo_df,
        sensitive={"sex": "Male", "race": "White"},
        label={"column": "income", "positive": [">50K"]},
        prediction={"column": "prediction", "positive": [1.0]},
        audits=["group"],
        limits={"rules": [{"metric": "disparate_impact", "min": 0.8}]},
        model={"name": "adult-logreg", "version": "1"},
        dataset="adult_nb",
        # the keyword arguments merge into a config dict: row key, no score feature
        config={"columns": {"row_key": "row_id", "exclude": ["score"]}},
    )
    assert _files(tmp_path) == before, "the notebook API wrote files"
    assert not os.path.exists(fairspark.notebook.IN_MEMORY)

    # the long rows, checked against selection rates counted here with Spark
    rows = result.rows
    assert {"audit", "attribute", "group", "metric", "value", "lower", "upper",
            "status"} <= set(rows.columns)
    counts = {r["sex"]: (r["n"], r["pos"]) for r in demo_df.groupBy("sex").agg(
        F.count("*").alias("n"), F.sum((F.col("prediction") == 1.0).cast("int")).alias("pos"),
    ).collect()}
    sr_m = counts["Male"][1] / counts["Male"][0]
    sr_f = counts["Female"][1] / counts["Female"][0]

    def value(attr, group, metric):
        (v,) = rows[(rows.audit == "group") & (rows.attribute == attr)
                    & (rows.group == group) & (rows.metric == metric)]["value"]
        return v

    assert value("sex", "privileged", "selection_rate") == pytest.approx(sr_m)
    assert value("sex", "unprivileged", "selection_rate") == pytest.approx(sr_f)
    assert value("sex", "unprivileged", "statistical_parity_difference") == pytest.approx(
        sr_f - sr_m)
    assert value("sex", "unprivileged", "disparate_impact") == pytest.approx(sr_f / sr_m)
    assert set(rows.audit) == {"group", "limits"}

    # the summary: rows, groups, limits and the exit code the CLI would give
    s = result.summary
    assert s["dataset"] == "adult_nb"
    assert s["rows"]["audited"] == demo_df.count()
    assert s["rows"]["attributes"]["sex"]["values"] == {
        k: n for k, (n, _) in counts.items()}
    assert s["model"] == {"name": "adult-logreg", "version": "1"}
    # sex's DI is far below 0.8 on this model: violated, and limits gate by default
    assert sr_f / sr_m < 0.8
    assert s["limits"]["violated"] >= 1 and result.exit_code == 3 == s["exit_code"]

    # the inline report: one self-contained page inside an iframe
    shown = result._repr_html_()
    assert shown.startswith("<iframe") and 'srcdoc="' in shown
    page = _html.unescape(re.search(r'srcdoc="(.*?)"', shown, re.DOTALL).group(1))
    assert page.startswith("<!DOCTYPE html>")
    assert external_references(page) == []
    assert "This run gates: exit code 3" in page
    assert "adult-logreg version 1" in page
    assert "Spark DataFrame (notebook)" in page
    assert "Group fairness metrics" in page
    assert "fairspark.audit()" in page


def test_config_object_and_where(demo_df):
    from fairspark.demo import demo_config

    config = demo_config(overrides={"input.where": "age >= 30", "limits.rules": []})
    result = fairspark.audit(demo_df, config=config, audits=["group"])
    assert result.summary["dataset"] == "adult_demo"
    assert result.summary["rows"]["audited"] == demo_df.where("age >= 30").count()
    assert result.summary["input"]["where"] == "age >= 30"
    assert set(result.rows.attribute) >= {"sex", "race", "sex*race"}
    assert result.exit_code == 0 and "limits" not in result.summary


def test_a_missing_column_names_it(spark):
    df = spark.createDataFrame([(1, "a", 1, 1), (2, "b", 0, 1)], "id int, s string, y int, p int")
    with pytest.raises(fairspark.MissingColumnError, match="sex"):
        fairspark.audit(df, sensitive={"sex": "a"}, label="y", prediction="p",
                        audits=["group"])


def test_a_pandas_frame_is_refused_with_how_to_convert_it():
    import pandas as pd

    from fairspark.errors import FairsparkInputError, NotASparkDataFrameError

    pdf = pd.DataFrame({"s": ["a", "b"], "y": [1, 0], "p": [1, 1]})
    with pytest.raises(NotASparkDataFrameError) as err:
        fairspark.audit(pdf, sensitive={"s": "a"}, label="y", prediction="p", audits=["group"])
    msg = str(err.value)
    # one line: what it got and how to convert it
    assert "\n" not in msg
    assert "pandas.core.frame.DataFrame" in msg and "spark.createDataFrame(pdf)" in msg
    assert isinstance(err.value, FairsparkInputError)  # exit 2 in the CLI's terms


def test_an_unknown_keyword_names_it_and_the_known_ones(spark):
    df = spark.createDataFrame([(1, "a", 1, 1), (2, "b", 0, 1)], "id int, s string, y int, p int")
    with pytest.raises(fairspark.ConfigError, match=r"unknown keyword.*'sensitve'") as err:
        fairspark.audit(df, sensitve={"s": "a"}, label="y", prediction="p", audits=["group"])
    # the known ones are listed, and the valid keywords beside the typo are not blamed
    msg = str(err.value)
    assert "known: ['sensitive', 'label', 'prediction'" in msg
    assert "'label'" not in msg.split("known:")[0]


def test_every_option_is_documented():
    """help(fairspark.audit) lists every keyword option (they are not in the signature)."""
    import inspect

    from fairspark.notebook import AuditOptions

    doc = inspect.getdoc(fairspark.audit)
    for name in AuditOptions.__annotations__:
        assert re.search(rf"^(\w+, )*{name}(, \w+)*:$", doc, re.MULTILINE), name
