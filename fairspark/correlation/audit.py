"""The ``correlation`` audit: representative fairness metrics (METHODS §3, seed 002).

Output rows (``audit="correlation"``, one set per attribute and model family):

=========================== ============ ==================================================
metric                      metric_b     value / lower / upper, detail
=========================== ============ ==================================================
catalogue metric i          metric j     r*_ij, r* - e, r* + e; rounds and pair counts
``cluster``                 member       cluster number (1-based); its representative
``representative``          pivot        cluster size; the members it represents
``tau``                     --           tau used (given, or searched for k)
``acceptance_rate``         --           accepted / attempts; rejection reasons
``model_accuracy``          --           mean, 2.5 % and 97.5 % quantiles (kept models)
=========================== ============ ==================================================
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow, derive_seed
from fairspark.correlation._cluster import Clustering, cluster_metrics, search_tau
from fairspark.correlation._estimate import CorrelationEstimate, estimate_correlations
from fairspark.correlation._oracle import CELLS, DEFAULT_METRICS, make_model
from fairspark.correlation._spark import (
    RoundSelection,
    draw_stratified_sample,
    run_oracle_tasks,
    select_rounds,
)
from fairspark.correlation.params import CorrelationParams
from fairspark.errors import AuditError

__all__ = ["CorrelationResult", "ModelResult", "correlation_audit", "outcome_from_result", "run"]

AUDIT = "correlation"


@dataclass
class ModelResult:
    """Everything computed for one (attribute, model family)."""

    attribute: str
    model: str
    status: str
    detail: str | None = None
    selection: RoundSelection | None = None
    estimate: CorrelationEstimate | None = None
    clustering: Clustering | None = None
    clustered_metrics: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    tau_detail: str | None = None


@dataclass
class CorrelationResult:
    """Result of :func:`correlation_audit`: per-attribute failures and per-model results."""

    params: CorrelationParams
    metrics: list[str]
    failed_attributes: dict[str, str]
    models: list[ModelResult]
    sample_rows: int
    population_rows: int
    sample_cells: dict[str, list[int]]
    waves: int
    shipped_as: str


def _cluster(
    est: CorrelationEstimate, params: CorrelationParams, seed: int, res: ModelResult
) -> None:
    names = est.metrics
    off = est.r.copy()
    np.fill_diagonal(off, np.nan)
    keep = [i for i in range(len(names)) if np.isfinite(off[i]).any()]
    for i in range(len(names)):
        if i not in keep:
            rs = [est.reason[i, j] for j in range(len(names)) if j != i and est.reason[i, j]]
            res.excluded[names[i]] = (
                "not clustered: no defined correlation with another metric "
                f"({rs[0] if rs else 'undefined'})"
            )
    if len(keep) == 0:
        res.status, res.detail = "failed", "no metric has a defined correlation with another one"
        return
    sub = est.r[np.ix_(keep, keep)]
    res.clustered_metrics = [names[i] for i in keep]
    if params.n_representatives is not None:
        found = search_tau(sub, k=params.n_representatives, repeats=params.repeats, seed=seed)
        res.tau_detail = found.message
        if found.clustering is None:
            res.status, res.detail = "failed", found.message
            return
        res.clustering = found.clustering
    else:
        res.clustering = cluster_metrics(
            sub, tau=float(params.tau), repeats=params.repeats, seed=seed
        )
        res.tau_detail = (
            f"tau={params.tau} given; fewest clusters over {params.repeats} pivot orders"
        )


def correlation_audit(
    spark,
    df,
    *,
    attributes: Sequence[tuple[str, str]],
    params: CorrelationParams,
    seed: int,
    label_col: str = "_fs_label",
    features_col: str = "_fs_x",
    weight_col: str | None = "_fs_w",
    key_col: str | None = "_fs_key",
) -> CorrelationResult:
    """Sample models, estimate metric correlations and cluster them, for each attribute.

    Parameters
    ----------
    spark : the session.
    df : Spark DataFrame with the prepared-table columns (only labelled rows are used).
    attributes : ``(name, privileged_flag_column)`` of each attribute (binary view).
    params : the audit parameters.
    seed : the run's base seed; every random draw derives from it.
    label_col, features_col, weight_col, key_col : prepared-table column names.

    Returns
    -------
    CorrelationResult
    """
    metrics = list(params.metrics or DEFAULT_METRICS)
    for model in params.models:  # bad hyperparameters fail here, not inside every task
        try:
            make_model(model, params.model_params.get(model), random_state=0)
        except (ValueError, TypeError) as exc:
            raise AuditError(f"correlation: {exc}") from exc
    names = [a for a, _ in attributes]
    sample = draw_stratified_sample(
        df,
        priv_cols=[c for _, c in attributes],
        attributes=names,
        label_col=label_col,
        features_col=features_col,
        weight_col=weight_col,
        key_col=key_col,
        max_rows=params.sample_rows,
        seed=derive_seed(seed, AUDIT, "sample"),
    )
    if sample.population_rows == 0:
        raise AuditError("correlation: the table has no labelled row; models cannot be trained")
    failed: dict[str, str] = {}
    cells: dict[str, list[int]] = {}
    ok_attrs = []
    for i, name in enumerate(names):
        counts = sample.for_attribute(i).cell_counts()
        cells[name] = counts.tolist()
        empty = [CELLS[c] for c in range(4) if counts[c] == 0]
        if empty:
            failed[name] = (
                f"attribute {name!r}: cell(s) {', '.join(repr(e) for e in empty)} have no labelled "
                f"rows (cell counts {dict(zip(CELLS, counts.tolist(), strict=True))}); "
                "the sampling "
                "oracle (Algorithm 2) bootstraps from every group x label cell"
            )
        else:
            ok_attrs.append(i)
    seeds = [derive_seed(seed, AUDIT, n) for n in names]
    results: list[ModelResult] = []
    waves, shipped_as = 0, "none"
    if ok_attrs:
        table = run_oracle_tasks(
            spark,
            sample,
            attributes=ok_attrs,
            models=params.models,
            seeds=seeds,
            n_samples=params.n_samples,
            rounds=params.rounds,
            k=params.k,
            min_accuracy=params.min_accuracy,
            attempt_cap=params.attempt_cap,
            test_fraction=params.test_fraction,
            metrics=metrics,
            model_params=params.model_params,
            partitions=params.partitions,
            shipping=params.shipping,
        )
        waves, shipped_as = table.waves, table.shipped_as
        att = table.attempts
        for i in ok_attrs:
            for model in params.models:
                sub = att[(att["attr"] == i) & (att["model"] == model)]
                sel = select_rounds(
                    sub, metrics=metrics, n_samples=params.n_samples, rounds=params.rounds
                )
                res = ModelResult(attribute=names[i], model=model, status="ok", selection=sel)
                results.append(res)
                if not sel.values:
                    reasons = "; ".join(
                        f"{k}: {v}" for k, v in sorted(sel.rejected_reasons.items())
                    )
                    if sel.accepted == 0:
                        res.detail = (
                            f"every model rejected: 0 of {sel.attempts} attempts accepted "
                            f"(min_accuracy={params.min_accuracy}; {reasons})"
                        )
                    else:
                        res.detail = (
                            f"no round reached n_samples={params.n_samples} accepted models within "
                            f"{params.attempt_cap} attempts ({sel.accepted} of {sel.attempts} "
                            f"accepted; {reasons})"
                        )
                    res.status = "failed"
                    continue
                res.estimate = estimate_correlations(
                    sel.values, metrics=metrics, ci_level=params.ci_level
                )
                _cluster(
                    res.estimate, params, derive_seed(seed, AUDIT, "pivot", names[i], model), res
                )
    return CorrelationResult(
        params=params,
        metrics=metrics,
        failed_attributes=failed,
        models=results,
        sample_rows=len(sample.y),
        population_rows=sample.population_rows,
        sample_cells=cells,
        waves=waves,
        shipped_as=shipped_as,
    )


def _f(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if np.isfinite(v) else None


def outcome_rows(result: CorrelationResult) -> list[MetricRow]:
    """The long-format rows of a :class:`CorrelationResult` (see the module table)."""
    p = result.params
    rows: list[MetricRow] = []
    for name, why in result.failed_attributes.items():
        rows.append(MetricRow(audit=AUDIT, attribute=name, metric="*", status="failed", detail=why))
    for res in result.models:
        pj = json.dumps(
            {
                "model": res.model,
                "model_params": p.model_params.get(res.model, {}),
                "n_samples": p.n_samples,
                "rounds": p.rounds,
                "k": p.k,
                "min_accuracy": p.min_accuracy,
                "ci_level": p.ci_level,
                "tau": p.tau,
                "n_representatives": p.n_representatives,
                "repeats": p.repeats,
                "sample_rows": result.sample_rows,
            },
            sort_keys=True,
        )

        def row(metric: str, _res: ModelResult = res, _pj: str = pj, **kw: Any) -> MetricRow:
            return MetricRow(
                audit=AUDIT,
                attribute=_res.attribute,
                metric=metric,
                model=_res.model,
                params=_pj,
                **kw,
            )

        sel = res.selection
        if sel is not None:
            reasons = (
                ", ".join(f"{k}: {v}" for k, v in sorted(sel.rejected_reasons.items())) or "none"
            )
            dropped = "; ".join(sel.dropped.values())
            rows.append(
                row(
                    "acceptance_rate",
                    value=sel.accepted / sel.attempts if sel.attempts else None,
                    detail=(
                        f"accepted {sel.accepted} of {sel.attempts} attempts; rejected: {reasons}; "
                        f"rounds used {len(sel.values)} of {p.rounds}"
                        + (f"; dropped: {dropped}" if dropped else "")
                    ),
                )
            )
            if sel.accuracies.size:
                q = np.quantile(sel.accuracies, [0.025, 0.975])
                rows.append(
                    row(
                        "model_accuracy",
                        value=float(sel.accuracies.mean()),
                        lower=float(q[0]),
                        upper=float(q[1]),
                        detail=(
                            f"test-set accuracy of the {sel.accuracies.size} kept models: "
                            "mean, 2.5% and 97.5% quantiles"
                        ),
                    )
                )
        if res.status == "failed" and res.estimate is None:
            rows.append(row("*", status="failed", detail=res.detail))
            continue
        est = res.estimate
        assert est is not None
        for i, a in enumerate(est.metrics):
            for j, b in enumerate(est.metrics):
                r = est.r[i, j]
                ok = bool(np.isfinite(r))
                detail = (
                    f"rounds={int(est.rounds[i, j])}; samples with both defined per round: "
                    f"{int(est.n_min[i, j])}..{int(est.n_max[i, j])}"
                )
                if est.reason[i, j]:
                    detail += f"; {est.reason[i, j]}"
                rows.append(
                    row(
                        a,
                        metric_b=b,
                        value=_f(r),
                        lower=_f(est.lower[i, j]),
                        upper=_f(est.upper[i, j]),
                        status="ok" if ok else "not_computed",
                        detail=detail,
                    )
                )
        for m, why in res.excluded.items():
            rows.append(row("cluster", metric_b=m, status="not_computed", detail=why))
        if res.clustering is None:
            rows.append(row("tau", status="failed", detail=res.detail or res.tau_detail))
            continue
        cl = res.clustering
        names = res.clustered_metrics
        idx = {m: est.metrics.index(m) for m in names}
        rows.append(row("tau", value=cl.tau, detail=res.tau_detail))
        for c, (piv, members) in enumerate(cl.clusters, start=1):
            pname = names[piv]
            rows.append(
                row(
                    "representative",
                    metric_b=pname,
                    value=float(len(members)),
                    detail=f"cluster {c}; represents: {', '.join(names[j] for j in members)}",
                )
            )
            for j in members:
                rows.append(
                    row(
                        "cluster",
                        metric_b=names[j],
                        value=float(c),
                        detail=(
                            f"representative: {pname}; r*={est.r[idx[pname], idx[names[j]]]:.4f}"
                        ),
                    )
                )
    return rows


def outcome_summary(result: CorrelationResult) -> dict[str, Any]:
    """The nested summary of ``summary.json``."""
    out: dict[str, Any] = {
        "sample_rows": result.sample_rows,
        "population_labelled_rows": result.population_rows,
        "sample_cells": {
            a: dict(zip(CELLS, c, strict=True)) for a, c in result.sample_cells.items()
        },
        "waves": result.waves,
        "shipped_as": result.shipped_as,
        "attributes": {},
    }
    for name, why in result.failed_attributes.items():
        out["attributes"][name] = {"status": "failed", "detail": why}
    for res in result.models:
        d: dict[str, Any] = {"status": res.status}
        if res.detail:
            d["detail"] = res.detail
        if res.selection is not None:
            s = res.selection
            d.update(
                attempts=s.attempts,
                accepted=s.accepted,
                rounds_used=len(s.values),
                acceptance_rate=(s.accepted / s.attempts) if s.attempts else None,
            )
        if res.clustering is not None:
            n = res.clustered_metrics
            d["tau"] = res.clustering.tau
            d["representatives"] = [n[p] for p in res.clustering.representatives]
            d["clusters"] = {n[p]: [n[j] for j in mem] for p, mem in res.clustering.clusters}
        if res.excluded:
            d["excluded"] = res.excluded
        out["attributes"].setdefault(res.attribute, {})[res.model] = d
    bad = bool(result.failed_attributes) or any(r.status == "failed" for r in result.models)
    out["status"] = "failed" if bad else "ok"
    return out


def outcome_from_result(result: CorrelationResult) -> AuditOutcome:
    """Rows, summary and report section of a :class:`CorrelationResult`."""
    from fairspark.correlation._report import correlation_section

    return AuditOutcome(
        rows=outcome_rows(result),
        summary=outcome_summary(result),
        sections=[correlation_section(result)],
    )


def run(ctx: AuditContext, params: CorrelationParams) -> AuditOutcome:
    """Entry point of the ``correlation`` audit (``fairspark.audits.registry``)."""
    prepared = ctx.prepared
    have = [a.name for a in prepared.attributes]
    wanted = params.attributes if params.attributes is not None else have
    unknown = [a for a in wanted if a not in have]
    attrs = [a for a in prepared.attributes if a.name in wanted]
    if not attrs:
        raise AuditError(f"correlation: none of the attributes {wanted} is configured; have {have}")
    df = prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for(AUDIT, "cap"))
    result = correlation_audit(
        ctx.spark,
        df,
        attributes=[(a.name, a.priv_col) for a in attrs],
        params=params,
        seed=ctx.config.seed,
        weight_col="_fs_w",
        key_col="_fs_key",
    )
    outcome = outcome_from_result(result)
    for a in unknown:
        outcome.rows.insert(
            0,
            MetricRow(
                audit=AUDIT,
                attribute=a,
                metric="*",
                status="failed",
                detail=f"attribute {a!r} is not a configured sensitive attribute; have {have}",
            ),
        )
        outcome.summary["status"] = "failed"
    return outcome
