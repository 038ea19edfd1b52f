"""Discriminative risk (DR) beside HFM (METHODS §1, seed 000 IV-A).

``DR = mean 1[f(x, a) != f(x, ã)]`` where ``ã`` flips each sensitive attribute with
probability ``ratio``: an unprivileged value becomes a privileged one, a privileged
value becomes a random unprivileged one. The flips come from hashes of the row key and
a derived seed, so they do not depend on partitioning; the model runs on the executors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fairspark.audits.base import AuditContext, MetricRow

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.hfm.params import HFMParams
    from fairspark.prepare import AttributeInfo

__all__ = ["discriminative_risk", "flip_values", "with_flip_uniforms", "wilson"]

KEY = "_fs_key"
_SCALE = float(1 << 30)


def wilson(k: float, n: float, level: float) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n``."""
    from scipy.stats import norm

    if n <= 0:
        return math.nan, math.nan
    z = float(norm.ppf(0.5 + level / 2))
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def with_flip_uniforms(df: DataFrame, *, seeds: list[int]) -> DataFrame:
    """Add ``_u_flip_<i>`` and ``_u_pick_<i>`` in [0, 1) from hashes of the key and seed."""
    out = df
    for i, s in enumerate(seeds):
        for kind, salt in (("flip", 0), ("pick", 1)):
            h = F.pmod(F.xxhash64(F.col(KEY), F.lit(int(s)), F.lit(salt)), F.lit(1 << 30))
            out = out.withColumn(f"_u_{kind}_{i}", h.cast("double") / F.lit(_SCALE))
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
    """Flip sensitive values with probability ``ratio`` (METHODS §1).

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
    to_p = flip & ~is_priv
    values[to_p] = np.array(privileged, dtype=object)[
        np.minimum((pick[to_p] * len(privileged)).astype(int), len(privileged) - 1)]
    return values


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


def discriminative_risk(
    ctx: AuditContext, params: HFMParams, attrs: list[AttributeInfo]
) -> tuple[list[MetricRow], dict[str, Any]]:
    """DR rows (``attribute="*"``, metric ``DR``) and a summary entry.

    Without ``params.dr_model`` the row is ``not_computed`` with the reason.
    """
    if params.dr_model is None:
        why = "no model configured (hfm.dr_model): DR needs a model it can call"
        return ([MetricRow(audit="hfm", attribute="*", metric="DR", status="not_computed",
                           detail=why)], {"status": "not_computed", "detail": why})
    usable = [a for a in attrs if a.kind == "values" and len(a.source_columns) == 1]
    if not usable:
        why = "no sensitive attribute with a single source column to flip"
        return ([MetricRow(audit="hfm", attribute="*", metric="DR", status="not_computed",
                           detail=why)], {"status": "not_computed", "detail": why})
    prepared = ctx.prepared
    seeds = [ctx.seed_for("hfm", "dr", a.name) for a in usable]
    df = prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for("hfm", "cap"))
    out = dr_disagreements(
        df, model_path=params.dr_model, attrs=usable, seeds=seeds, ratio=params.dr_ratio,
        feature_cols=prepared.raw_feature_cols,
    )
    k, n = out
    lo, hi = wilson(k, n, params.dr_level)
    value = k / n if n else math.nan
    names = ", ".join(a.name for a in usable)
    row = MetricRow(audit="hfm", attribute="*", metric="DR", value=value, lower=lo, upper=hi,
                    status="ok", detail=f"flipped: {names}; ratio={params.dr_ratio}; "
                                        f"{int(k)} of {int(n)} predictions change")
    return [row], {"status": "ok", "value": value, "lower": lo, "upper": hi, "n": n}


def dr_disagreements(
    df: DataFrame,
    *,
    model_path: str,
    attrs: list[AttributeInfo],
    seeds: list[int],
    ratio: float,
    feature_cols: list[str],
) -> tuple[float, float]:
    """Count rows whose prediction changes under the flips, on the executors.

    The model is loaded with joblib on each task and called as
    ``model.predict(frame)`` where ``frame`` has the raw feature columns and one column
    per sensitive source column (values converted to numbers when all values are
    numeric); a model with ``feature_names_in_`` gets exactly those columns.

    Returns
    -------
    (changed, rows)
    """
    specs = []
    for a in attrs:
        values = sorted(a.values)
        priv = [v for v in values if v in a.privileged_values]
        unpriv = [v for v in values if v not in a.privileged_values]
        specs.append((a.value_col, a.source_columns[0], priv, unpriv, _typed(values) is not None))
    cols = [KEY, *feature_cols, *[s[0] for s in specs]]
    base = with_flip_uniforms(df.select(*cols), seeds=seeds)

    def predict_part(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import joblib

        model = joblib.load(model_path)
        changed = 0
        total = 0
        for pdf in batches:
            if len(pdf) == 0:
                continue
            orig = pdf[feature_cols].copy()
            flipped = pdf[feature_cols].copy()
            for i, (vcol, src, priv, unpriv, numeric) in enumerate(specs):
                vals = pdf[vcol].to_numpy(dtype=object)
                orig[src] = _cast_like(vals, numeric)
                flipped[src] = _cast_like(
                    flip_values(vals, u_flip=pdf[f"_u_flip_{i}"].to_numpy(),
                                u_pick=pdf[f"_u_pick_{i}"].to_numpy(), privileged=priv,
                                unprivileged=unpriv, ratio=ratio), numeric)
            known = getattr(model, "feature_names_in_", None)
            if known is not None:  # the columns the model was fitted on, in its order
                orig, flipped = orig[list(known)], flipped[list(known)]
            a = np.asarray(model.predict(orig))
            b = np.asarray(model.predict(flipped))
            changed += int(np.sum(a != b))
            total += len(pdf)
        yield pd.DataFrame({"changed": [changed], "n": [total]})

    r = (
        base.mapInPandas(predict_part, "changed long, n long")
        .agg(F.sum("changed").alias("k"), F.sum("n").alias("n"))
        .collect()[0]
    )
    return float(r["k"] or 0), float(r["n"] or 0)
