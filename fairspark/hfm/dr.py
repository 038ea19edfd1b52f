"""Discriminative risk (DR) beside HFM (Bian and Luo, 2024, §IV-A).

``DR = mean 1[f(x, a) != f(x, ã)]`` where ``ã`` flips each sensitive attribute with
probability ``ratio``: an unprivileged value becomes a privileged one, a privileged
value becomes a random unprivileged one. The flips come from hashes of the row key and
a derived seed, so they do not depend on partitioning; the model runs on the executors.

Three kinds of model (``audits.hfm.dr_model``): a registered MLflow model (a
``models:/`` or ``runs:/`` URI, or, without a ``dr_model``, the model that scores
``columns.prediction``), called with ``mlflow.pyfunc.spark_udf`` on the rows and on the
flipped rows and decided by the audited decisions' rule (:mod:`fairspark.scoring`);
a Spark ML ``PipelineModel``, applied with
``transform`` to the rows and then to the same rows with the flipped sensitive columns
(Spark column expressions, no join, no Python worker), and a scikit-learn model saved
with joblib, called in ``mapInPandas``. Both flip exactly as :func:`flip_values` does.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark.ml import PipelineModel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fairspark.audits.base import AuditContext, MetricRow
from fairspark.columns import KEY, input_col
from fairspark.errors import AuditError, FairsparkInputError
from fairspark.hfm.params import dr_model_kind
from fairspark.sampling import hash_bucket
from fairspark.stats import normal_quantile
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.prepared import AttributeInfo
    from fairspark.hfm.params import HFMParams
    from fairspark.scoring import ScoringModel

__all__ = [
    "DRModelError", "discriminative_risk", "dr_disagreements", "dr_disagreements_spark",
    "flip_column", "flip_values", "load_pipeline_model", "model_input_columns",
    "prediction_col", "source_columns", "with_flip_uniforms", "wilson",
]

log = logging.getLogger("fairspark")

P0 = "_fs_p0"
_SCALE = float(1 << 30)
_MODEL_KEY = "audits.hfm.dr_model"


class DRModelError(AuditError):
    """The DR model cannot be loaded or applied to the prepared rows (a failed DR row)."""


def wilson(k: float, n: float, level: float) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n``."""
    if n <= 0:
        return math.nan, math.nan
    z = normal_quantile(0.5 + level / 2)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def _uniform(seed: int, salt: int) -> Column:
    """A uniform in [0, 1) from a hash of the row key, the seed and a salt."""
    return hash_bucket(KEY, seed, salt).cast("double") / F.lit(_SCALE)


def with_flip_uniforms(df: DataFrame, *, seeds: list[int]) -> DataFrame:
    """Add ``_u_flip_<i>`` and ``_u_pick_<i>`` in [0, 1) from hashes of the key and seed."""
    out = df
    for i, s in enumerate(seeds):
        for kind, salt in (("flip", 0), ("pick", 1)):
            out = out.withColumn(f"_u_{kind}_{i}", _uniform(s, salt))
    return out


def flip_values(
    values: np.ndarray,
    *,
    u_flip: np.ndarray,
    u_pick: np.ndarray,
    privileged: list[str],
    unprivileged: list[str],
    ratio: float,
) -> np.ndarray:
    """Flip sensitive values with probability ``ratio`` (Bian and Luo, 2024).

    Privileged -> ``unprivileged[floor(u_pick * len)]``; unprivileged ->
    ``privileged[floor(u_pick * len)]``.
    """
    values = np.asarray(values, dtype=object).copy()
    flip = np.asarray(u_flip) < ratio
    is_priv = np.isin(values.astype(str), np.array(privileged, dtype=str))
    pick = np.asarray(u_pick)
    if unprivileged:
        to_u = flip & is_priv
        values[to_u] = np.array(unprivileged, dtype=object)[
            np.minimum((pick[to_u] * len(unprivileged)).astype(int), len(unprivileged) - 1)]
    if privileged:  # no observed privileged value: unprivileged values stay
        to_p = flip & ~is_priv
        values[to_p] = np.array(privileged, dtype=object)[
            np.minimum((pick[to_p] * len(privileged)).astype(int), len(privileged) - 1)]
    return values


def flip_column(
    value: Column,
    *,
    u_flip: Column,
    u_pick: Column,
    privileged: list[str],
    unprivileged: list[str],
    ratio: float,
) -> Column:
    """The flips of :func:`flip_values` as a Spark column expression (string values).

    ``value`` holds the values as strings (the prepared ``_fs_s_<i>`` column); the
    result is a string column. The pick index ``min(floor(u_pick * len), len - 1)`` is
    computed in double precision like numpy's, so both give the same value per row.
    """

    def pick(options: list[str]) -> Column:
        idx = F.least(F.floor(u_pick * F.lit(float(len(options)))).cast("int"),
                      F.lit(len(options) - 1))
        return F.element_at(F.array(*[F.lit(v) for v in options]), idx + F.lit(1))

    flip = u_flip < F.lit(float(ratio))
    is_priv = value.isin(list(privileged)) if privileged else F.lit(False)
    out = F.when(~flip, value)
    if unprivileged:
        out = out.when(is_priv, pick(unprivileged))
    if privileged:
        out = out.when(~is_priv, pick(privileged))
    return out.otherwise(value)


def _typed(values: list[str]) -> Any:
    try:
        nums = [float(v) for v in values]
    except ValueError:
        return None
    return nums


def _cast_like(col: np.ndarray, numeric: bool) -> np.ndarray:
    if not numeric:
        return col
    out = np.array([float(v) for v in col])
    if np.all(out == np.round(out)):
        return out.astype(np.int64)
    return out


def _dr_row(status: Status, why: str) -> tuple[list[MetricRow], dict[str, Any]]:
    """The one DR row (and summary entry) of a DR that is not computed or failed."""
    return ([MetricRow(audit="hfm", attribute="*", metric="DR", status=status, detail=why)],
            {"status": status, "detail": why})


def discriminative_risk(
    ctx: AuditContext, params: HFMParams, attrs: list[AttributeInfo]
) -> tuple[list[MetricRow], dict[str, Any]]:
    """DR rows (metric ``DR``) and a summary entry.

    ``attribute="*"``: every usable attribute flipped; with several attributes, also
    one row per attribute flipped alone (same seeds, so the same flips of it).

    Without ``params.dr_model`` the row is ``not_computed`` with the reason; a model
    that cannot be found, loaded or applied gives a ``failed`` row with the reason
    (the HFM rows beside it are kept).
    """
    registered = params.registered_model
    if params.dr_model is None and registered is None:
        return _dr_row(Status.NOT_COMPUTED,
                       "no model configured (hfm.dr_model): DR needs a model it can call")
    usable = [a for a in attrs if a.kind == "values" and len(a.source_columns) == 1]
    if not usable:
        return _dr_row(Status.NOT_COMPUTED,
                       "no sensitive attribute with a single source column to flip")
    # the joint DR (every attribute flipped), then, with several attributes, each one
    # flipped alone (the others get probability 0 but still reach the model) with the
    # same seed, so its flips are the joint run's flips of it
    subsets = [list(range(len(usable)))]
    if len(usable) > 1:
        subsets += [[i] for i in range(len(usable))]
    settings = [[params.dr_ratio if i in sub else 0.0 for i in range(len(usable))]
                for sub in subsets]
    try:
        if registered is not None:
            kind, counts, dropped = "mlflow", _registered_counts(
                ctx, params, registered, usable, settings), 0
        else:
            kind, counts, dropped = _dr_counts(ctx, params, usable, settings)
    except (FairsparkInputError, DRModelError) as err:  # a bad path, an unusable model
        log.warning("hfm: DR not computed: %s", err)
        return _dr_row(Status.FAILED, str(err))
    rows, summary = _dr_outcome(params, usable, subsets, counts, kind=kind, dropped=dropped)
    if registered is not None:
        facts = registered.describe()
        facts.pop("column", None)
        summary["model"] = facts
        pjson = json.dumps({"dr_model": facts}, sort_keys=True, default=str)
        rows = [replace(r, params=pjson) for r in rows]
    return rows, summary


def _registered_counts(
    ctx: AuditContext, params: HFMParams, model: ScoringModel, usable: list[AttributeInfo],
    settings: list[list[float]],
) -> list[tuple[float, float]]:
    """``(changed, rows)`` per flip setting, for a registered MLflow model.

    The model's inputs are the prepared rows' columns (features and the columns the
    preparation carries for it), with each sensitive source column rebuilt from its
    prepared value (cast to the table's type) and, for the flipped rows, flipped by
    :func:`flip_column`; the model scores the rows and each setting's flipped rows with
    ``mlflow.pyfunc.spark_udf`` on the executors, its output decided by the audited
    decisions' rule (:meth:`~fairspark.scoring.ScoringModel.decision`), and one
    aggregation counts the changed decisions.
    """
    from fairspark.scoring import tracking_uri

    df = ctx.prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for("hfm", "cap"),
                                features=False)
    seeds = [ctx.seed_for("hfm", "dr", a.name) for a in usable]
    have = set(df.columns)
    types = {a.source_columns[0]: df.schema[a.source_columns[0]].dataType for a in usable
             if a.source_columns[0] in have}
    sources = {a.source_columns[0] for a in usable}
    missing = [c for c in model.inputs if c not in have and c not in sources]
    if missing:
        raise DRModelError(f"config key '{_MODEL_KEY}' ({model.uri!r}): the model reads "
                           f"column(s) {missing}, which the prepared table does not have")
    plain = {c: input_col(c) for c in model.inputs if c in have}
    with tracking_uri(model.tracking_uri):
        score = model.predict_column(ctx.spark, plain)
    originals = source_columns(usable, source_types=types)
    decided = [model.decision(score(originals)).alias(P0)]
    for j, ratio in enumerate(settings, start=1):
        flips = source_columns(usable, source_types=types, seeds=seeds, ratio=ratio)
        decided.append(model.decision(score(flips)).alias(f"_fs_p{j}"))
    cols = [f"_fs_p{j}" for j in range(1, len(settings) + 1)]
    aggs = [F.sum(F.when(~F.col(P0).eqNullSafe(F.col(c)), 1).otherwise(0)).alias(c)
            for c in cols]
    try:
        r = df.select(*decided).agg(F.count(F.lit(1)).alias("_n"), *aggs).collect()[0]
    except Exception as err:  # noqa: BLE001 - a failing model on the executors ends DR only
        raise DRModelError(f"config key '{_MODEL_KEY}' ({model.uri!r}): the model failed "
                           f"while scoring: {_short(err)}") from None
    n = float(r["_n"] or 0)
    return [(float(r[c] or 0), n) for c in cols]


def _dr_counts(
    ctx: AuditContext, params: HFMParams, usable: list[AttributeInfo],
    settings: list[list[float]],
) -> tuple[str, list[tuple[float, float]], int]:
    """Model kind, ``(changed, rows)`` per flip setting, rows the model dropped."""
    prepared = ctx.prepared
    seeds = [ctx.seed_for("hfm", "dr", a.name) for a in usable]
    path = params.dr_model
    # every column the model may have been fitted on: the features and the source
    # columns of privileged_expr attributes (kept as they are: a predicate is not flipped)
    flipped = {a.source_columns[0] for a in usable}
    feature_cols = [*prepared.raw_feature_cols,
                    *[c for c in getattr(prepared, "context_columns", []) if c not in flipped]]
    kind = dr_model_kind(path, kind=params.dr_model_kind)
    if kind == "spark":
        model = load_pipeline_model(path)
        df = prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for("hfm", "cap"),
                                features=False)
        counts = _spark_counts(
            df, model=model, attrs=usable, seeds=seeds, settings=settings,
            feature_cols=feature_cols,
            source_types=_source_types(ctx, usable), model_path=path,
        )
        # rows a stage with handleInvalid="skip" drops
        return kind, counts, df.count() - int(counts[0][1])
    df = prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for("hfm", "cap"))
    counts = _sklearn_counts(df, model_path=path, attrs=usable, seeds=seeds,
                             settings=settings, feature_cols=feature_cols)
    return kind, counts, 0


def _dr_outcome(
    params: HFMParams, usable: list[AttributeInfo], subsets: list[list[int]],
    counts: list[tuple[float, float]], *, kind: str, dropped: int,
) -> tuple[list[MetricRow], dict[str, Any]]:
    """DR rows with Wilson intervals and the summary entry, from the counts."""
    model_name = {"spark": "Spark ML PipelineModel", "mlflow": "MLflow model"}.get(
        kind, "scikit-learn model")
    rows: list[MetricRow] = []
    per_attribute: dict[str, dict[str, float]] = {}
    for sub, (k, n) in zip(subsets, counts, strict=True):
        lo, hi = wilson(k, n, params.dr_level)
        value = k / n if n else math.nan
        names = ", ".join(usable[i].name for i in sub)
        joint = len(sub) > 1 or len(subsets) == 1
        detail = (f"{'flipped' if joint else 'only this attribute flipped'}: {names}; "
                  f"ratio={params.dr_ratio}; {int(k)} of {int(n)} predictions change; "
                  f"{model_name}")
        if dropped:
            detail += f"; {dropped} rows dropped by the model (not counted)"
        attribute = "*" if sub is subsets[0] else usable[sub[0]].name
        rows.append(MetricRow(audit="hfm", attribute=attribute, metric="DR", value=value,
                              lower=lo, upper=hi, status=Status.OK, detail=detail))
        if attribute != "*":
            per_attribute[attribute] = {"value": value, "lower": lo, "upper": hi}
    joint_row = rows[0]
    summary: dict[str, Any] = {
        "status": Status.OK, "value": joint_row.value, "lower": joint_row.lower,
        "upper": joint_row.upper, "n": counts[0][1], "model_kind": kind,
        **({"rows_dropped_by_model": dropped} if dropped else {}),
        **({"per_attribute": per_attribute} if per_attribute else {}),
    }
    return rows, summary


def _flip_specs(attrs: list[AttributeInfo]) -> list[tuple[str, str, list[str], list[str], bool]]:
    """Per attribute: value column, source column, sorted privileged and unprivileged values."""
    specs = []
    for a in attrs:
        values = sorted(a.values)
        priv = [v for v in values if v in a.privileged_values]
        unpriv = [v for v in values if v not in a.privileged_values]
        specs.append((a.value_col, a.source_columns[0], priv, unpriv, _typed(values) is not None))
    return specs


def _short(err: BaseException) -> str:
    """The line of an exception's message that says what went wrong."""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    if not lines:
        return type(err).__name__
    # a Python worker's traceback ends with the exception; a JVM error starts with it
    tb = [ln for ln in lines if ln.startswith("Traceback")]
    line = lines[-1] if tb else lines[0]
    return line if len(line) <= 500 else line[:497] + "..."


def load_pipeline_model(path: str) -> PipelineModel:
    """Load a saved Spark ML ``PipelineModel`` (on the driver, with the active session).

    Raises
    ------
    DRModelError
        Naming ``audits.hfm.dr_model`` and the path, when it cannot be loaded.
    """
    try:
        return PipelineModel.load(path)
    except Exception as err:  # noqa: BLE001 - whatever the reader raises, the model is unusable
        why = f"{_short(err)}; save the fitted pipeline with PipelineModel.save(path)"
    saved = _saved_class(path)
    if saved is not None and saved != "org.apache.spark.ml.PipelineModel":
        why = f"it holds a {saved}; save PipelineModel(stages=[model]) instead"
    raise DRModelError(
        f"config key '{_MODEL_KEY}': cannot load a Spark ML PipelineModel from {path!r}: {why}")


def _saved_class(path: str) -> str | None:
    """The class named in a saved Spark ML object's metadata (the JSON line of
    ``<path>/metadata``, read with the active session, classic or Connect), if it can
    be read."""
    import json

    from pyspark.sql import SparkSession

    try:
        line = SparkSession.active().read.text(f"{path.rstrip('/')}/metadata").first()
        return str(json.loads(line[0])["class"])
    except Exception:  # noqa: BLE001 - only used to explain a failed load
        return None


def _source_types(ctx: AuditContext, attrs: list[AttributeInfo]) -> dict[str, Any]:
    """The input table's Spark type of each sensitive source column (schema only, no scan).

    The prepared table keeps sensitive values as strings; the model was fitted on the
    input's types, so the flipped columns are cast back to them.
    """
    from fairspark.io import read_input

    schema = read_input(ctx.spark, input_config=ctx.config.input).schema
    return {a.source_columns[0]: schema[a.source_columns[0]].dataType for a in attrs
            if a.source_columns[0] in schema.fieldNames()}


def _param_cols(stage: Any, name: str) -> list[str]:
    if not stage.hasParam(name):
        return []
    param = stage.getParam(name)
    if not stage.isDefined(param):
        return []
    v = stage.getOrDefault(param)
    return [v] if isinstance(v, str) else list(v or [])


def model_input_columns(model: PipelineModel) -> list[str]:
    """Columns a pipeline reads that none of its stages produces (from stage params).

    Stages without column params (e.g. ``SQLTransformer``) are not seen, so this is
    used to explain a failed ``transform``, not to reject a model up front.
    """
    needed: list[str] = []
    produced: set[str] = set()

    def walk(stages: list[Any]) -> None:
        for st in stages:
            if isinstance(st, PipelineModel):
                walk(st.stages)
                continue
            for c in [*_param_cols(st, "inputCol"), *_param_cols(st, "inputCols"),
                      *_param_cols(st, "featuresCol")]:
                if c not in produced and c not in needed:
                    needed.append(c)
            for name in ("outputCol", "outputCols", "predictionCol", "probabilityCol",
                         "rawPredictionCol"):
                produced.update(_param_cols(st, name))

    walk(list(model.stages))
    return needed


def prediction_col(model: PipelineModel) -> str:
    """The prediction column of a pipeline: its last stage's ``predictionCol``."""
    if not model.stages:
        raise DRModelError(f"config key '{_MODEL_KEY}': the PipelineModel has no stages")
    last = model.stages[-1]
    if isinstance(last, PipelineModel):
        return prediction_col(last)
    return last.getPredictionCol() if hasattr(last, "getPredictionCol") else "prediction"


def _transform(model: PipelineModel, df: DataFrame, *, model_path: str, inputs: list[str],
               feature_cols: list[str], source_cols: list[str]) -> DataFrame:
    """``model.transform(df)``, analysed now; a failure names the missing input columns."""
    try:
        out = model.transform(df)
        out.schema  # noqa: B018  (analyse now, so a missing column fails here)
        return out
    except Exception as err:  # noqa: BLE001 - any analysis error means the model cannot run
        missing = [c for c in model_input_columns(model) if c not in inputs]
        if missing:
            why = (f"the model needs the column(s) {missing}, which the prepared table does not "
                   f"have; DR gives the model the feature columns {feature_cols} and the "
                   f"sensitive columns {source_cols} (make a missing column a feature with "
                   "'columns.features', or fit the model without it)")
        else:
            why = f"the model cannot transform the prepared rows: {_short(err)}"
        raise DRModelError(f"config key '{_MODEL_KEY}' ({model_path!r}): {why}") from None


def _ratios(ratio: float | Sequence[float], n: int) -> list[float]:
    """One flip probability per attribute (a single value applies to all)."""
    if isinstance(ratio, int | float):
        return [float(ratio)] * n
    out = [float(r) for r in ratio]
    if len(out) != n:
        raise ValueError(f"{len(out)} flip probabilities for {n} attributes")
    return out


def source_columns(
    attrs: list[AttributeInfo],
    *,
    source_types: dict[str, Any],
    seeds: list[int] | None = None,
    ratio: float | Sequence[float] = 0.0,
) -> dict[str, Column]:
    """Sensitive source column -> its values for the model, flipped when ``seeds`` is given.

    Built from each attribute's prepared value column (strings) and cast to
    ``source_types[col]`` (string when absent); with ``seeds`` the values are first
    flipped by :func:`flip_column` with the uniforms of :func:`with_flip_uniforms`
    (attribute ``i`` uses ``seeds[i]`` and ``ratio`` or ``ratio[i]``). Two attributes on
    one source column: the later one wins, as in the scikit-learn path.
    """
    out: dict[str, Column] = {}
    ratios = _ratios(ratio, len(attrs))
    for i, (vcol, src, priv, unpriv, _numeric) in enumerate(_flip_specs(attrs)):
        value = F.col(vcol)
        if seeds is not None:
            value = flip_column(value, u_flip=_uniform(seeds[i], 0), u_pick=_uniform(seeds[i], 1),
                                privileged=priv, unprivileged=unpriv, ratio=ratios[i])
        out[src] = value.cast(source_types.get(src, "string")).alias(src)
    return out


def dr_disagreements_spark(
    df: DataFrame,
    *,
    model: PipelineModel,
    attrs: list[AttributeInfo],
    seeds: list[int],
    ratio: float | Sequence[float],
    feature_cols: list[str],
    source_types: dict[str, Any],
    model_path: str = "<model>",
) -> tuple[float, float]:
    """Count rows whose Spark ML prediction changes under the flips, in one Spark job.

    The rows get each sensitive source column back (the prepared string value cast to
    ``source_types[col]``, the input's type; string when absent), are transformed once,
    keep their input columns and the prediction as ``_fs_p0``, get their sensitive
    columns replaced by the flips (:func:`flip_column`, uniforms from the row key and
    ``seeds[i]``) and are transformed again; one aggregation counts the changes. No
    join, and only the two counts reach the driver.

    Parameters
    ----------
    df:
        Prepared rows with ``_fs_key``, ``feature_cols`` and each attribute's value column.
    model:
        The fitted pipeline; its prediction column is :func:`prediction_col`.
    attrs, seeds:
        Attributes to flip (one source column each) and their seeds.
    ratio:
        Probability of flipping each attribute (or one per attribute; 0 keeps it).
    feature_cols:
        The raw feature columns given to the model besides the sensitive ones.
    source_types:
        Spark type (a ``DataType`` or a type string) of each sensitive source column.
    model_path:
        Shown in error messages.

    Returns
    -------
    (changed, rows)
        ``rows`` counts the rows scored both ways.

    Raises
    ------
    DRModelError
        When the model cannot transform the rows (the message names missing columns).
    """
    return _spark_counts(df, model=model, attrs=attrs, seeds=seeds, settings=[ratio],
                         feature_cols=feature_cols, source_types=source_types,
                         model_path=model_path)[0]


def _spark_counts(
    df: DataFrame,
    *,
    model: PipelineModel,
    attrs: list[AttributeInfo],
    seeds: list[int],
    settings: Sequence[float | Sequence[float]],
    feature_cols: list[str],
    source_types: dict[str, Any],
    model_path: str,
) -> list[tuple[float, float]]:
    """:func:`dr_disagreements_spark` for several flip settings in one job.

    The original rows are scored once (``_fs_p0``); each setting's flipped rows are
    scored in turn in the same plan (``_fs_p1``, ...), and one aggregation counts the
    changes of every setting.
    """
    originals = source_columns(attrs, source_types=source_types)
    srcs = list(originals)
    vcols = list(dict.fromkeys(a.value_col for a in attrs))
    keep = [KEY, *feature_cols, *vcols]
    inputs = [*keep, *srcs]
    pred = prediction_col(model)
    kw = {"model_path": model_path, "feature_cols": feature_cols, "source_cols": srcs}
    scored = _transform(model, df.select(*map(input_col, keep), *originals.values()),
                        inputs=inputs, **kw)
    if pred not in scored.columns:
        raise DRModelError(f"config key '{_MODEL_KEY}' ({model_path!r}): the model's output "
                           f"has no prediction column {pred!r}")
    done = [P0]
    cur = scored.select(*map(input_col, keep), F.col(pred).alias(P0))
    for j, ratio in enumerate(settings, start=1):
        flips = source_columns(attrs, source_types=source_types, seeds=seeds, ratio=ratio)
        rescored = _transform(model, cur.select(*map(input_col, keep), *done, *flips.values()),
                              inputs=[*inputs, *done], **kw)
        cur = rescored.select(*map(input_col, keep), *done, F.col(pred).alias(f"_fs_p{j}"))
        done.append(f"_fs_p{j}")
    aggs = [F.sum(F.when(~F.col(P0).eqNullSafe(F.col(c)), 1).otherwise(0)).alias(c)
            for c in done[1:]]
    try:
        r = cur.agg(F.count(F.lit(1)).alias("_n"), *aggs).collect()[0]
    except Exception as err:  # noqa: BLE001 - a failing stage on the executors ends DR only
        raise DRModelError(f"config key '{_MODEL_KEY}' ({model_path!r}): the model failed "
                           f"while scoring: {_short(err)}") from None
    n = float(r["_n"] or 0)
    return [(float(r[c] or 0), n) for c in done[1:]]


def dr_disagreements(
    df: DataFrame,
    *,
    model_path: str,
    attrs: list[AttributeInfo],
    seeds: list[int],
    ratio: float | Sequence[float],
    feature_cols: list[str],
) -> tuple[float, float]:
    """Count rows whose scikit-learn prediction changes under the flips, on the executors.

    The model is loaded with joblib on each task and called as
    ``model.predict(frame)`` where ``frame`` has the raw feature columns and one column
    per sensitive source column (values converted to numbers when all values are
    numeric); a model with ``feature_names_in_`` gets exactly those columns.

    Returns
    -------
    (changed, rows)
    """
    return _sklearn_counts(df, model_path=model_path, attrs=attrs, seeds=seeds,
                           settings=[ratio], feature_cols=feature_cols)[0]


def _make_predict_part(
    *, model_path: str, specs: list[tuple[str, str, list[str], list[str], bool]],
    all_ratios: list[list[float]], feature_cols: list[str], outs: list[str],
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The ``mapInPandas`` function of :func:`_sklearn_counts`: changed predictions per
    flip setting and rows, one line per task (the originals scored once per batch)."""

    def predict_part(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import joblib

        model = joblib.load(model_path)
        known = getattr(model, "feature_names_in_", None)

        def predict(frame: pd.DataFrame) -> np.ndarray:
            if known is not None:  # the columns the model was fitted on, in its order
                frame = frame[list(known)]
            return np.asarray(model.predict(frame))

        changed = [0] * len(all_ratios)
        total = 0
        for pdf in batches:
            if len(pdf) == 0:
                continue
            orig = pdf[feature_cols].copy()
            for vcol, src, _priv, _unpriv, numeric in specs:
                orig[src] = _cast_like(pdf[vcol].to_numpy(dtype=object), numeric)
            a = predict(orig)
            for j, ratios in enumerate(all_ratios):
                flipped = orig.copy()
                for i, (vcol, src, priv, unpriv, numeric) in enumerate(specs):
                    flipped[src] = _cast_like(
                        flip_values(pdf[vcol].to_numpy(dtype=object),
                                    u_flip=pdf[f"_u_flip_{i}"].to_numpy(),
                                    u_pick=pdf[f"_u_pick_{i}"].to_numpy(), privileged=priv,
                                    unprivileged=unpriv, ratio=ratios[i]), numeric)
                changed[j] += int(np.sum(a != predict(flipped)))
            total += len(pdf)
        yield pd.DataFrame({**{c: [k] for c, k in zip(outs, changed, strict=True)},
                            "n": [total]})

    return predict_part


def _sklearn_counts(
    df: DataFrame,
    *,
    model_path: str,
    attrs: list[AttributeInfo],
    seeds: list[int],
    settings: Sequence[float | Sequence[float]],
    feature_cols: list[str],
) -> list[tuple[float, float]]:
    """:func:`dr_disagreements` for several flip settings in one pass (originals scored
    once per batch)."""
    specs = _flip_specs(attrs)
    cols = [KEY, *feature_cols, *[s[0] for s in specs]]
    base = with_flip_uniforms(df.select(*map(input_col, cols)), seeds=seeds)
    outs = [f"c{j}" for j in range(len(settings))]
    predict_part = _make_predict_part(
        model_path=model_path, specs=specs, all_ratios=[_ratios(r, len(attrs)) for r in settings],
        feature_cols=feature_cols, outs=outs)
    schema = ", ".join([*(f"{c} long" for c in outs), "n long"])
    try:
        r = (
            base.mapInPandas(predict_part, schema)
            .agg(*(F.sum(c).alias(c) for c in outs), F.sum("n").alias("n"))
            .collect()[0]
        )
    except Exception as err:  # noqa: BLE001 - a failing model on the executors ends DR only
        raise DRModelError(f"config key '{_MODEL_KEY}' ({model_path!r}): the scikit-learn "
                           f"model failed on the executors: {_short(err)}") from None
    n = float(r["n"] or 0)
    return [(float(r[c] or 0), n) for c in outs]
