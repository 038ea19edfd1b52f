"""The ``mdfa`` audit entry point: ``run(ctx, params) -> AuditOutcome`` (METHODS §2)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairspark.audits.base import AuditOutcome, MetricRow
from fairspark.errors import AuditError
from fairspark.mdfa.certify import MDFASample
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.spark import (
    GroupedStats,
    grouped_stats,
    run_splits,
    stratified_sample,
    with_mdfa_columns,
)

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.base import AuditContext
    from fairspark.prepare import AttributeInfo, PreparedData

__all__ = ["AttributeResult", "audit_attribute", "run", "summarise_splits"]

AUDIT = "mdfa"


class AttributeFailureError(Exception):
    """This attribute cannot be audited by mdfa (recorded as a failed row)."""


@dataclass
class FeaturePlan:
    """Which encoded dimensions are audit features and which columns describe."""

    names: list[str]
    x_idx: list[int]
    dropped_constant: list[str]
    desc_names: list[str]
    desc_numeric: list[str]
    desc_onehot_idx: list[int]


@dataclass
class AttributeResult:
    """Everything mdfa found for one attribute."""

    attribute: str
    target_label: str
    splits: pd.DataFrame
    stats: GroupedStats
    sample_rows: int
    features: list[str]
    dropped_constant: list[str]
    aggregates: dict[str, Any] = field(default_factory=dict)


def _plan_features(prepared: PreparedData, params: MDFAParams, redact: list[str]) -> FeaturePlan:
    """Map the configured audit features to ``_fs_x`` dimensions; pick description columns."""
    available = prepared.raw_feature_cols
    wanted = list(params.features) if params.features is not None else list(available)
    unknown = [f for f in wanted if f not in available]
    if unknown:
        raise AuditError(
            f"mdfa: audit features {unknown} are not features of the prepared table "
            f"(available: {available})"
        )
    names, idx, constant = [], [], []
    for f in wanted:
        if f in prepared.numeric_features:
            j = prepared.feature_names.index(f)
            if prepared.feature_max.get(f) == prepared.feature_min.get(f):
                constant.append(f)
                continue
            names.append(f)
            idx.append(j)
        else:
            js = [i for i, n in enumerate(prepared.feature_names) if n.startswith(f"{f}=")]
            if len(js) < 2:
                constant.append(f)
                continue
            names += [prepared.feature_names[i] for i in js]
            idx += js
    desc_numeric = [f for f in wanted if f in prepared.numeric_features and f not in redact]
    desc_onehot = [
        i for i, n in zip(idx, names, strict=True)
        if "=" in n and n.split("=", 1)[0] not in redact and n.split("=", 1)[0] in wanted
    ]
    desc_names = desc_numeric + [prepared.feature_names[i] for i in desc_onehot]
    return FeaturePlan(names, idx, constant, desc_names, desc_numeric, desc_onehot)


def _target_label(attr: AttributeInfo, target_group: str) -> str:
    if attr.kind == "predicate":
        truth = "false" if target_group == "unprivileged" else "true"
        return f"{target_group} (privileged predicate {truth})"
    priv = [v for v in attr.values if v in attr.privileged_values]
    unpriv = [v for v in attr.values if v not in attr.privileged_values]
    side = unpriv if target_group == "unprivileged" else priv
    shown = ", ".join(side[:6]) + (" ..." if len(side) > 6 else "")
    return f"{target_group} ({shown})"


def _pct(v: np.ndarray, q: float) -> float | None:
    v = v[np.isfinite(v)]
    return float(np.percentile(v, q)) if len(v) else None


def _mean(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return float(np.mean(v)) if len(v) else None


def _sd(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return float(np.std(v, ddof=1)) if len(v) > 1 else None


def summarise_splits(splits: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Mean, sd, 2.5/97.5 percentiles and finite counts of each per-split number."""
    out: dict[str, dict[str, Any]] = {}
    for col in ("gamma_pos", "gamma_neg", "gamma_max", "delta", "delta_unweighted", "dt_g", "mass"):
        v = pd.to_numeric(splits[col], errors="coerce").to_numpy(dtype=float)
        out[col] = {
            "mean": _mean(v),
            "sd": _sd(v),
            "p2_5": _pct(v, 2.5),
            "p97_5": _pct(v, 97.5),
            "n": int(np.isfinite(v).sum()),
            "n_inf": int(np.isinf(v).sum()),
        }
    return out


def audit_attribute(
    ctx: AuditContext, params: MDFAParams, attr: AttributeInfo, plan: FeaturePlan
) -> AttributeResult:
    """Grouped stats, stratified sample and the parallel splits for one attribute.

    Raises
    ------
    AttributeFailureError
        When the attribute cannot be audited (message names the attribute).
    """
    from pyspark.sql import functions as F

    from fairspark.prepare import KEY, PRED, WEIGHT, X

    name = attr.name
    if not plan.x_idx:
        raise AttributeFailureError(
            f"mdfa cannot audit attribute {name!r}: every audit feature is constant "
            f"({plan.dropped_constant})"
        )
    prepared = ctx.prepared
    base = prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for(AUDIT, "max_rows"))
    df = with_mdfa_columns(
        base, priv_col=attr.priv_col, prediction_col=PRED, target_group=params.target_group
    )
    desc_cols = [F.col(c) for c in plan.desc_numeric] + [F.col(X)[i] for i in plan.desc_onehot_idx]
    weight_col = WEIGHT if prepared.weighted else None
    stats = grouped_stats(
        df, desc_cols=desc_cols, desc_names=plan.desc_names, weight_col=weight_col
    )
    n_pos, n_neg = stats.count(s=1), stats.count(s=-1)
    n_fav, n_all = stats.count(y=1), stats.count()
    target = _target_label(attr, params.target_group)
    if n_pos == 0 or n_neg == 0:
        raise AttributeFailureError(
            f"mdfa cannot audit attribute {name!r}: only one group is present "
            f"({int(n_pos)} rows in the target group {target}, {int(n_neg)} in the other)"
        )
    if n_fav == 0:
        raise AttributeFailureError(
            f"mdfa cannot audit attribute {name!r}: no row has a favourable decision "
            f"({int(n_all)} rows)"
        )
    if n_fav == n_all:
        raise AttributeFailureError(
            f"mdfa cannot audit attribute {name!r}: every row has a favourable decision "
            f"({int(n_all)} rows); the outcome does not vary"
        )
    needed = params.min_rows
    if n_all < needed or min(n_pos, n_neg) < 10:
        raise AttributeFailureError(
            f"mdfa cannot audit attribute {name!r}: {int(n_all)} rows "
            f"({int(n_pos)} in the target group, {int(n_neg)} in the other); it needs at "
            f"least min_rows={needed} rows and 10 per group"
        )
    counts = {
        (int(r.s), int(r.y)): int(r.n) for r in stats.cells.itertuples(index=False)
    }
    pdf = stratified_sample(
        df,
        columns=[F.col(X).alias("_x")] + [F.col(c).cast("double").alias(f"_d{j}")
                                          for j, c in enumerate(plan.desc_numeric)],
        key_col=KEY,
        cell_counts=counts,
        cap=params.sample_rows,
        seed=ctx.seed_for(AUDIT, name, "sample"),
    )
    xfull = np.asarray(pdf["_x"].tolist(), dtype=float)
    x = xfull[:, plan.x_idx]
    desc = np.column_stack(
        [pdf[f"_d{j}"].to_numpy(dtype=float) for j in range(len(plan.desc_numeric))]
        + [xfull[:, i] for i in plan.desc_onehot_idx]
    ) if plan.desc_names else np.zeros((len(pdf), 0))
    if np.all(x.std(0) == 0):
        raise AttributeFailureError(
            f"mdfa cannot audit attribute {name!r}: every audit feature is constant in "
            "the sample"
        )
    sample = MDFASample(
        x=x,
        s=pdf["_s"].to_numpy(dtype=int),
        y=pdf["_y"].to_numpy(dtype=int),
        desc=desc,
        feature_names=plan.names,
        desc_names=plan.desc_names,
    )
    seeds = [ctx.seed_for(AUDIT, name, "split", i) for i in range(params.splits)]
    splits = run_splits(ctx.spark, sample, seeds=seeds, params=params)
    res = AttributeResult(
        attribute=name,
        target_label=target,
        splits=splits,
        stats=stats,
        sample_rows=len(pdf),
        features=plan.names,
        dropped_constant=plan.dropped_constant,
    )
    res.aggregates = summarise_splits(splits)
    return res


def _fmt(v: float | None, nd: int = 4) -> str:
    return "n/a" if v is None else f"{v:.{nd}f}"


def verdict(agg: dict[str, Any]) -> str:
    """Words for gamma_max: evidence when mean - 2 sd > 0."""
    m, sd = agg.get("mean"), agg.get("sd")
    if m is None:
        return "not computed"
    if sd is None:
        return "one split only: no spread to judge"
    if m - 2 * sd > 0:
        return "evidence of multi-differential unfairness (mean - 2 sd > 0)"
    return "no evidence of multi-differential unfairness (mean - 2 sd <= 0)"


def _rows_for(res: AttributeResult, params_json: str) -> list[MetricRow]:
    a = res.aggregates
    rows: list[MetricRow] = []
    note = (
        f"s=+1 is the {res.target_label}; {len(res.splits)} splits of a {res.sample_rows}-row "
        f"sample; lower/upper = 2.5/97.5 percentiles over splits"
    )
    if res.dropped_constant:
        note += f"; constant features left out: {res.dropped_constant}"
    for metric, key, what in (
        ("gamma", "gamma_pos", "gamma(y=+1, favourable)"),
        ("gamma_unfavourable", "gamma_neg", "gamma(y=-1, unfavourable)"),
        ("gamma_max", "gamma_max", "max over y of gamma(y)"),
    ):
        g = a[key]
        rows.append(MetricRow(
            audit=AUDIT, attribute=res.attribute, group=res.target_label, metric=metric,
            value=g["mean"], lower=g["p2_5"], upper=g["p97_5"],
            detail=f"{what}: mean {_fmt(g['mean'])}, sd {_fmt(g['sd'])}; "
            f"{verdict(g) if key == 'gamma_max' else ''}{'; ' if key == 'gamma_max' else ''}{note}",
            params=params_json,
        ))
    ywv = pd.to_numeric(res.splits["y_wv"], errors="coerce").dropna()
    if len(ywv):
        counts = ywv.astype(int).value_counts()
        y_major = int(counts.idxmax())
        y_note = ", ".join(f"y={k:+d} in {v}" for k, v in counts.items())
        for metric, key in (("delta", "delta"), ("delta_unweighted", "delta_unweighted"),
                            ("DT_G", "dt_g"), ("subgroup_mass", "mass")):
            g = a[key]
            status = "ok" if g["mean"] is not None else "inconclusive"
            extra = f"; {g['n_inf']} splits infinite (excluded)" if g["n_inf"] else ""
            rows.append(MetricRow(
                audit=AUDIT, attribute=res.attribute, group=res.target_label, metric=metric,
                value=g["mean"], lower=g["p2_5"], upper=g["p97_5"], status=status,
                detail=f"worst violation (Alg. 1) for {y_note} splits; mean {_fmt(g['mean'])}, "
                f"sd {_fmt(g['sd'])}, {g['n']} finite splits{extra}; {note}",
                params=params_json,
            ))
        di = res.stats.rate(s=1, y=y_major) / res.stats.rate(s=-1, y=y_major) \
            if res.stats.rate(s=-1, y=y_major) > 0 else float("nan")
        rows.append(MetricRow(
            audit=AUDIT, attribute=res.attribute, group=res.target_label, metric="DI",
            value=None if math.isnan(di) else di,
            status="ok" if not math.isnan(di) else "inconclusive",
            detail=f"Pr[Y={y_major:+d} | S=+1] / Pr[Y={y_major:+d} | S=-1] over all audited "
            f"rows (aggregate counterpart of DT_G); {note}",
            params=params_json,
        ))
    return rows


def run(ctx: AuditContext, params: MDFAParams) -> AuditOutcome:
    """Run mdfa on every selected attribute of ``ctx.prepared``.

    Parameters
    ----------
    ctx:
        The audit context (Spark session, prepared data, config, seeds).
    params:
        The ``audits.mdfa`` section of the config.

    Returns
    -------
    AuditOutcome
        Rows gamma, gamma_unfavourable, gamma_max, delta, delta_unweighted, DT_G,
        subgroup_mass and DI per attribute (failed rows for attributes mdfa cannot
        audit), a summary and the report section.
    """
    from fairspark.mdfa.report import render_section

    prepared = ctx.prepared
    redact = list(getattr(ctx.config, "redact_columns", []) or [])
    plan = _plan_features(prepared, params, redact)
    names = params.attributes or [a.name for a in prepared.attributes]
    known = {a.name for a in prepared.attributes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise AuditError(
            f"mdfa: attributes {unknown} are not sensitive attributes (configured: "
            f"{sorted(known)})"
        )
    params_json = json.dumps(
        {**params.model_dump(mode="json"), "features_used": plan.names,
         "constant_features_dropped": plan.dropped_constant},
        sort_keys=True,
    )
    rows: list[MetricRow] = []
    results: list[AttributeResult] = []
    summary: dict[str, Any] = {"attributes": {}}
    for name in names:
        attr = prepared.attribute(name)
        try:
            res = audit_attribute(ctx, params, attr, plan)
        except AttributeFailureError as err:
            rows.append(MetricRow(
                audit=AUDIT, attribute=name, metric="gamma_max", status="failed",
                detail=str(err), params=params_json,
            ))
            summary["attributes"][name] = {"status": "failed", "reason": str(err)}
            continue
        results.append(res)
        rows += _rows_for(res, params_json)
        summary["attributes"][name] = {
            "status": "ok",
            "target_group": res.target_label,
            "sample_rows": res.sample_rows,
            "splits": len(res.splits),
            "verdict": verdict(res.aggregates["gamma_max"]),
            **{k: v for k, v in res.aggregates.items()},
        }
    sections = [render_section(results=results, params=params, redact=redact)] if results else []
    failed = [n for n, v in summary["attributes"].items() if v["status"] == "failed"]
    if failed and len(failed) == len(names):
        summary["status"] = "failed"
    return AuditOutcome(rows=rows, summary=summary, sections=sections)
