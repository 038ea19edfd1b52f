"""The ``hfm`` audit: D, D_f, df per sensitive attribute (METHODS §1)."""

from __future__ import annotations

import copy
import json
import logging
import math
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import functions as F

from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow
from fairspark.errors import AuditError
from fairspark.hfm._kernels import default_m2, hfm_df
from fairspark.hfm.compute import DistanceResult, hfm_distances, make_projections, points_from_table

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

    from fairspark.hfm.params import HFMParams
    from fairspark.prepare import AttributeInfo

__all__ = ["run", "attribute_codes"]

log = logging.getLogger("fairspark")

KEY, LABEL, PRED, X = "_fs_key", "_fs_label", "_fs_pred", "_fs_x"
_NAMES = {0: "D", 1: "D_f"}


def attribute_codes(attr: AttributeInfo, view: str) -> tuple[Column, dict[int, str]]:
    """Integer group code of an attribute in a view, and code -> group name.

    ``binary``: 1 = privileged, 0 = the rest; ``any_other_value``: one code per value
    (values in sorted order).
    """
    if view == "binary":
        return F.col(attr.priv_col).cast("int"), {1: "privileged", 0: "unprivileged"}
    values = sorted(attr.values)
    arr = F.array(*[F.lit(v) for v in values])
    return (F.array_position(arr, F.col(attr.value_col)) - 1).cast("int"), dict(enumerate(values))


def _f(x: float | None) -> float | None:
    if x is None:
        return None
    return None if math.isnan(x) else float(x)


def _df_interval(d: DistanceResult, d_f: DistanceResult) -> tuple[float | None, float | None]:
    if d.lower is None or d_f.lower is None:
        return None, None
    lo = hfm_df(d.upper, d_f.lower) if d.upper is not None else None
    hi = hfm_df(d.lower, d_f.upper) if d_f.upper is not None else None
    return lo, hi


def _rows_for(
    name: str, group: str, d: DistanceResult, d_f: DistanceResult, method: str, pjson: str
) -> list[MetricRow]:
    rows: list[MetricRow] = []

    def status(r: DistanceResult) -> str:
        if method in ("exact", "certified"):
            return "ok" if r.certified else "not_certified"
        return "ok"

    for tgt, r in ((0, d), (1, d_f)):
        m = _NAMES[tgt]
        detail = f"method={method}"
        if r.key is not None:
            detail += f"; witness pair: {r.key} <-> {r.nb_key}"
        if "n_searched" in r.extra:
            detail += f"; exact searches: {r.extra['n_searched']}"
            if r.extra.get("n_candidates") is not None:
                detail += f" ({r.extra['n_candidates']} rows had an upper bound above D)"
            elif not r.certified:
                detail += " so far; certification still running"
        if method in ("approx", "pointwise"):
            detail += "; an upper bound of the exact distance"
        rows.append(MetricRow(audit="hfm", attribute=name, group=group, metric=m,
                              value=_f(r.value), lower=_f(r.lower), upper=_f(r.upper),
                              status=status(r), detail=detail, params=pjson))
        rows.append(MetricRow(
            audit="hfm", attribute=name, group=group, metric=f"{m}_avg", value=_f(r.avg),
            upper=None if r.avg_exact else _f(r.avg),
            lower=_f(r.avg) if r.avg_exact else None, status="ok",
            detail="exact mean of nn(p)" if r.avg_exact else
            "upper bound of mean nn(p) (" + (
                "min over projections of the mean" if method == "approx"
                else "mean of per-row pointwise bounds") + ")",
            params=pjson))
        for extra, label in (("approx", "approx"), ("pointwise", "pointwise")):
            if extra in r.extra and method not in (extra,):
                rows.append(MetricRow(
                    audit="hfm", attribute=name, group=group, metric=f"{m}_{label}",
                    value=_f(r.extra[extra]), status="ok",
                    detail=("the paper's ApproxDist (Alg. 1-2)" if extra == "approx"
                            else "max over rows of the min over projections"),
                    params=pjson))
        if "n_searched" in r.extra:
            rows.append(MetricRow(
                audit="hfm", attribute=name, group=group, metric=f"{m}_exact_searches",
                value=float(r.extra["n_searched"]), status="ok",
                detail="rows searched exactly (certification works in batches)",
                params=pjson))
            if r.extra.get("n_candidates") is not None:
                rows.append(MetricRow(
                    audit="hfm", attribute=name, group=group, metric=f"{m}_candidates",
                    value=float(r.extra["n_candidates"]), status="ok",
                    detail="rows whose pointwise upper bound exceeds the final lower bound",
                    params=pjson))
    dfv = hfm_df(d.value, d_f.value)
    lo, hi = _df_interval(d, d_f)
    st = "ok" if (d.certified and d_f.certified) or method in ("approx", "pointwise") else \
        "not_certified"
    detail = f"df = D_f / D - 1 (method={method})"
    if d.value == 0.0:
        detail += "; D = 0: " + ("0/0 -> 0" if d_f.value == 0.0 else "D_f > 0 -> +inf")
    if method in ("approx", "pointwise"):
        detail += "; ratio of two upper bounds: not a bound of the exact df"
    rows.append(MetricRow(audit="hfm", attribute=name, group=group, metric="df", value=dfv,
                          lower=_f(lo), upper=_f(hi), status=st, detail=detail, params=pjson))
    rows.append(MetricRow(audit="hfm", attribute=name, group=group, metric="df_avg",
                          value=hfm_df(d.avg, d_f.avg), status="ok",
                          detail="D_f_avg / D_avg - 1", params=pjson))
    if "approx" in d.extra and "approx" in d_f.extra and method != "approx":
        rows.append(MetricRow(audit="hfm", attribute=name, group=group, metric="df_approx",
                              value=hfm_df(d.extra["approx"], d_f.extra["approx"]),
                              status="ok", detail="df from the paper's ApproxDist values",
                              params=pjson))
    return rows


def _aggregate(results: list[tuple[DistanceResult, DistanceResult]]) -> tuple[
        DistanceResult, DistanceResult]:
    out = []
    for tgt in (0, 1):
        rs = [pair[tgt] for pair in results]
        best = max(rs, key=lambda r: r.value)
        lowers = [r.lower for r in rs]
        uppers = [r.upper for r in rs]
        lo = None if any(v is None for v in lowers) else max(lowers)
        hi = None if any(v is None for v in uppers) else max(uppers)
        out.append(DistanceResult(
            value=max(r.value for r in rs),
            lower=lo,
            upper=hi,
            # the max is certified when its interval has collapsed, even if an
            # attribute below it is not certified
            certified=all(r.certified for r in rs) or (lo is not None and lo == hi),
            avg=sum(r.avg for r in rs) / len(rs),
            avg_exact=all(r.avg_exact for r in rs),
            key=best.key, nb_key=best.nb_key,
            extra={k: max(r.extra[k] for r in rs) for k in ("approx", "pointwise")
                   if all(k in r.extra for r in rs)},
        ))
    return out[0], out[1]


def _witness_values(ctx: AuditContext, params: HFMParams, keys: set[str]) -> dict[str, dict]:
    if not keys or not params.show_witness_values:
        return {}
    prepared = ctx.prepared
    redact = set(params.redact_columns)
    cols = [c for c in prepared.raw_feature_cols if c not in redact]
    attr_cols = [a.value_col for a in prepared.attributes]
    df = prepared.df
    fetched = (
        df.where(F.col(KEY).isin(sorted(keys)))
        .dropDuplicates([KEY])
        .select(KEY, LABEL, PRED, *attr_cols, *cols)
        .limit(len(keys))
        .collect()
    )
    names = {a.value_col: a.name for a in prepared.attributes}
    out = {}
    for r in fetched:
        d = r.asDict()
        key = d.pop(KEY)
        out[key] = {names.get(k, k): v for k, v in d.items()}
        out[key]["label"] = out[key].pop(LABEL)
        out[key]["prediction"] = out[key].pop(PRED)
    return out


def run(ctx: AuditContext, params: HFMParams) -> AuditOutcome:
    """Run the HFM audit on the prepared table.

    Parameters
    ----------
    ctx : AuditContext
        Spark session, prepared table, config, seeds.
    params : HFMParams
        Method and its settings.

    Returns
    -------
    AuditOutcome
        Rows per attribute (``D``, ``D_f``, ``df``, averaged variants, the paper's
        ApproxDist values and the certification counts beside them), the aggregate over
        attributes (``attribute="*"``), a summary with witnesses, and a report section.
    """
    from fairspark.hfm.dr import discriminative_risk

    # the run-wide redact_columns apply here too, beside the audit's own
    redact_all = sorted(set(params.redact_columns) | set(ctx.config.redact_columns or []))
    params = params.model_copy(update={"redact_columns": redact_all})
    prepared = ctx.prepared
    pjson = json.dumps({"method": params.method, "view": params.view, "m1": params.m1,
                        "m2": params.m2, "sampler": params.sampler,
                        "max_candidates": params.max_candidates}, sort_keys=True)
    attrs = list(prepared.attributes)
    rows: list[MetricRow] = []
    if params.attributes is not None:
        known = {a.name for a in attrs}
        for name in params.attributes:
            if name not in known:
                rows.append(MetricRow(audit="hfm", attribute=name, metric="D", status="failed",
                                      detail=f"attribute {name!r} is not configured "
                                             f"(configured: {sorted(known)})", params=pjson))
        attrs = [a for a in attrs if a.name in set(params.attributes)]
    if not attrs:
        raise AuditError("hfm: no sensitive attribute to audit")
    df = prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for("hfm", "cap"))
    codes = [attribute_codes(a, params.view) for a in attrs]
    pts_all = points_from_table(df, key_col=KEY, label_col=LABEL, pred_col=PRED, x_col=X,
                                code_exprs=[c for c, _ in codes])
    agg = pts_all.agg(
        F.count(F.lit(1)).alias("n"),
        *[F.collect_set(f"c{i}").alias(f"s{i}") for i in range(len(attrs))],
    ).collect()[0]
    n = int(agg["n"])
    if n == 0:
        raise AuditError("hfm: no labelled row to audit (D needs the label)")
    valid: list[int] = []
    for i, a in enumerate(attrs):
        present = sorted(agg[f"s{i}"])
        if len(present) < 2:
            names = [codes[i][1].get(c, str(c)) for c in present]
            rows.append(MetricRow(
                audit="hfm", attribute=a.name, group=params.view, metric="D", status="failed",
                detail=(f"attribute {a.name!r}: all {n} labelled rows are in one group "
                        f"({', '.join(names) or 'none'}); HFM needs rows on both sides"),
                params=pjson))
        else:
            valid.append(i)
    summary: dict[str, Any] = {"method": params.method, "view": params.view, "rows": n,
                               "rows_unlabelled_skipped": prepared.rows_unlabelled,
                               "attributes": {}}
    results: dict[str, tuple[DistanceResult, DistanceResult]] = {}
    m2 = params.m2 or default_m2(n)
    summary.update({"m1": params.m1, "m2": m2, "sampler": params.sampler})
    pjson = json.dumps({**json.loads(pjson), "m2": m2}, sort_keys=True)
    if valid:
        pts = points_from_table(
            df, key_col=KEY, label_col=LABEL, pred_col=PRED, x_col=X,
            code_exprs=[codes[i][0] for i in valid],
        ).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            dim_x = len(prepared.feature_names)
            projections = None
            if params.method != "exact":
                projections = make_projections(dim=1 + dim_x, m1=params.m1,
                                               sampler=params.sampler, seed=ctx.config.seed)
            def progress(part: dict[tuple[int, int], DistanceResult]) -> None:
                # keep the interval so far: a time budget that ends during
                # certification publishes it (status timed_out) instead of nothing
                so_far = {attrs[i].name: (part[(0, j)], part[(1, j)])
                          for j, i in enumerate(valid)}
                for pair in so_far.values():  # no plots: this runs after every step
                    for r in pair:
                        r.extra.pop("hist", None)
                ctx.report_partial(_outcome(params, so_far, rows=rows, summary=summary,
                                            pjson=pjson, witnesses={}))

            res = hfm_distances(
                pts, n_attr=len(valid), dim_x=dim_x, n_rows=n, method=params.method, m2=m2,
                projections=projections, num_partitions=params.num_partitions,
                rows_per_partition=params.rows_per_partition,
                max_candidates=params.max_candidates,
                exact_block_rows=params.exact_block_rows,
                histogram_bins=params.histogram_bins,
                on_progress=progress if params.method == "certified" else None,
            )
        finally:
            pts.unpersist()
        for j, i in enumerate(valid):
            results[attrs[i].name] = (res[(0, j)], res[(1, j)])
    witness_keys = {k for d, d_f in results.values() for r in (d, d_f)
                    for k in (r.key, r.nb_key) if k is not None}
    witnesses = _witness_values(ctx, params, witness_keys)
    dr_rows, dr_summary = discriminative_risk(ctx, params, attrs)
    return _outcome(params, results, rows=rows, summary=summary, pjson=pjson,
                    witnesses=witnesses, dr_rows=dr_rows, dr_summary=dr_summary)


def _outcome(
    params: HFMParams,
    results: dict[str, tuple[DistanceResult, DistanceResult]],
    *,
    rows: list[MetricRow],
    summary: dict[str, Any],
    pjson: str,
    witnesses: dict[str, dict],
    dr_rows: list[MetricRow] | None = None,
    dr_summary: dict[str, Any] | None = None,
) -> AuditOutcome:
    """Rows (per attribute, the aggregate, DR), summary and report section of a set of
    distance results.

    Used for the final result and for the partial results kept while certification runs
    (those have no DR).
    """
    from fairspark.hfm.report import render_section

    rows = list(rows)
    summary = copy.deepcopy(summary)
    for name, (d, d_f) in results.items():
        rows += _rows_for(name, params.view, d, d_f, params.method, pjson)
    if len(results) > 1:
        agg_d, agg_f = _aggregate(list(results.values()))
        rows += [
            MetricRow(**{**r.__dict__, "detail": (r.detail or "") +
                         "; aggregate: max of D over attributes, mean of D_avg"})
            for r in _rows_for("*", params.view, agg_d, agg_f, params.method, pjson)
            if r.metric in ("D", "D_f", "df", "D_avg", "D_f_avg", "df_avg")
        ]
    for name, (d, d_f) in results.items():
        summary["attributes"][name] = {
            _NAMES[t]: {
                "value": r.value, "lower": r.lower, "upper": r.upper,
                "certified": r.certified, "avg": r.avg,
                "witness": [r.key, r.nb_key],
                **{k: v for k, v in r.extra.items() if k != "hist"},
            }
            for t, r in ((0, d), (1, d_f))
        }
        summary["attributes"][name]["df"] = hfm_df(d.value, d_f.value)
    if dr_summary is not None:
        rows += dr_rows or []
        summary["dr"] = dr_summary
    section = render_section(params=params, summary=summary, results=results, rows=rows,
                             witnesses=witnesses)
    return AuditOutcome(rows=rows, summary=summary, sections=[section])
