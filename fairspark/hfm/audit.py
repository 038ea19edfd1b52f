"""The ``hfm`` audit: D, D_f, df per sensitive attribute (Bian and Luo, 2024).

:func:`run` computes the numbers and returns them with an
:class:`~fairspark.hfm.results.HFMResult`; ``fairspark.hfm.report.render`` draws the
report section from it.

References
----------
.. [1] Y. Bian and Y. Luo, "Measuring Model-Induced Discrimination via Efficient
   Fairness Approximation", arXiv:2405.09251, 2024.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from fairspark._values import nan_to_none, params_json
from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow
from fairspark.columns import BASE, KEY, LABEL, PRED, X, input_col
from fairspark.errors import AuditError, TimeBudgetExhaustedError
from fairspark.hfm._kernels import default_m2, hfm_df
from fairspark.hfm.compute import hfm_distances, make_projections, points_from_table
from fairspark.hfm.dr import discriminative_risk
from fairspark.hfm.paired import baseline_rows, difference_rows
from fairspark.hfm.results import DistanceResult, HFMResult
from fairspark.numbers import fmt_detail, fmt_fixed
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from fairspark.audits.prepared import AttributeInfo
    from fairspark.hfm.params import HFMParams

__all__ = ["attribute_codes", "run"]

log = logging.getLogger("fairspark")

_NAMES = {0: "D", 1: "D_f"}
_BOUND_METHODS = ("approx", "pointwise")  # methods whose values are upper bounds only
Pairs = dict[str, tuple[DistanceResult, DistanceResult]]


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


def _df_interval(d: DistanceResult, d_f: DistanceResult) -> tuple[float | None, float | None]:
    if d.lower is None or d_f.lower is None:
        return None, None
    lo = hfm_df(d.upper, d_f.lower) if d.upper is not None else None
    hi = hfm_df(d.lower, d_f.upper) if d_f.upper is not None else None
    return lo, hi


def _distance_detail(r: DistanceResult, method: str) -> str:
    detail = f"method={method}"
    if r.key is not None:
        detail += f"; witness pair: {r.key} <-> {r.nb_key}"
    if "n_searched" in r.extra:
        detail += f"; exact searches: {r.extra['n_searched']}"
        if r.extra.get("n_candidates") is not None:
            detail += f" ({r.extra['n_candidates']} rows had an upper bound above D)"
        elif not r.certified:
            detail += " so far; certification still running"
    if method in _BOUND_METHODS:
        detail += "; an upper bound of the exact distance"
    return detail


def _distance_rows(row: Callable[..., MetricRow], m: str, r: DistanceResult,
                   method: str) -> list[MetricRow]:
    """Rows of one distance ``m`` (D or D_f): value, average, the bounds beside it."""
    status = Status.OK
    if method == "certified" and not r.certified:
        status = Status.NOT_CERTIFIED
    rows = [
        row(metric=m, value=nan_to_none(r.value), lower=nan_to_none(r.lower),
            upper=nan_to_none(r.upper), status=status, detail=_distance_detail(r, method)),
        row(metric=f"{m}_avg", value=nan_to_none(r.avg),
            upper=None if r.avg_exact else nan_to_none(r.avg),
            lower=nan_to_none(r.avg) if r.avg_exact else None, status=Status.OK,
            detail="exact mean of nn(p)" if r.avg_exact else
            "upper bound of mean nn(p) (" + (
                "min over projections of the mean" if method == "approx"
                else "mean of per-row sample bounds" if method == "certified"
                else "mean of per-row pointwise bounds") + ")"),
    ]
    for extra, detail in (("approx", "the paper's ApproxDist (Alg. 1-2)"),
                          ("pointwise", "max over rows of the min over projections")):
        if extra in r.extra and method != extra:
            if f"{extra}_error" in r.extra:
                detail += (f"; relative error against the exact {m}: "
                           f"{fmt_detail(r.extra[f'{extra}_error'], 4, signed=True)}")
            rows.append(row(metric=f"{m}_{extra}", value=nan_to_none(r.extra[extra]),
                            status=Status.OK, detail=detail))
    if "n_searched" in r.extra:
        rows.append(row(metric=f"{m}_exact_searches", value=float(r.extra["n_searched"]),
                        status=Status.OK,
                        detail="rows whose exact nearest-neighbour distance was computed "
                               f"(rows checked against growing blocks: "
                               f"{r.extra.get('n_checked')})"))
        if r.extra.get("n_candidates") is not None:
            rows.append(row(
                metric=f"{m}_candidates", value=float(r.extra["n_candidates"]),
                status=Status.OK,
                detail="rows whose sample upper bound exceeds the final lower bound"))
    return rows


def _df_rows(row: Callable[..., MetricRow], d: DistanceResult, d_f: DistanceResult,
             method: str) -> list[MetricRow]:
    """Rows of ``df = D_f / D - 1``: value with interval, averaged and ApproxDist variants."""
    lo, hi = _df_interval(d, d_f)
    certified = (d.certified and d_f.certified) or method in _BOUND_METHODS
    detail = f"df = D_f / D - 1 (method={method})"
    if d.value == 0.0:
        detail += "; D = 0: " + ("0/0 -> 0" if d_f.value == 0.0 else "D_f > 0 -> +inf")
    if method in _BOUND_METHODS:
        detail += "; ratio of two upper bounds: not a bound of the exact df"
    rows = [
        row(metric="df", value=hfm_df(d.value, d_f.value), lower=nan_to_none(lo),
            upper=nan_to_none(hi), status=Status.OK if certified else Status.NOT_CERTIFIED,
            detail=detail),
        row(metric="df_avg", value=hfm_df(d.avg, d_f.avg), status=Status.OK,
            detail="D_f_avg / D_avg - 1"),
    ]
    if "approx" in d.extra and "approx" in d_f.extra and method != "approx":
        rows.append(row(metric="df_approx", value=hfm_df(d.extra["approx"], d_f.extra["approx"]),
                        status=Status.OK, detail="df from the paper's ApproxDist values"))
    return rows


def _rows_for(
    name: str, group: str, d: DistanceResult, d_f: DistanceResult, method: str,
    pjson: str | None,
) -> list[MetricRow]:
    """The long rows of one attribute (or of the aggregate ``*``)."""

    def row(**kw: Any) -> MetricRow:
        return MetricRow(audit="hfm", attribute=name, group=group, params=pjson, **kw)

    rows: list[MetricRow] = []
    for tgt, r in ((0, d), (1, d_f)):
        rows += _distance_rows(row, _NAMES[tgt], r, method)
    return rows + _df_rows(row, d, d_f, method)


def _aggregate(results: list[tuple[DistanceResult, DistanceResult]]) -> tuple[
        DistanceResult, DistanceResult]:
    """D and D_f over attributes: the max of the distances, the mean of the averages."""
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


def _witness_values(ctx: AuditContext, params: HFMParams, keys: set[str],
                    redacted: list[str]) -> dict[str, dict]:
    """Raw values of the witness rows (only those rows reach the driver)."""
    if not keys or not params.show_witness_values:
        return {}
    prepared = ctx.prepared
    cols = [c for c in prepared.raw_feature_cols if c not in set(redacted)]
    attr_cols = [a.value_col for a in prepared.attributes]
    fetched = (
        prepared.df.where(F.col(KEY).isin(sorted(keys)))
        .dropDuplicates([KEY])
        .select(KEY, LABEL, PRED, *attr_cols, *[input_col(c) for c in cols])
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


def _one_sided(
    attrs: list[AttributeInfo], codes: list[tuple[Column, dict[int, str]]], pts_all: DataFrame,
    *, view: str, pjson: str | None, min_rows: int,
) -> tuple[int, list[int], list[MetricRow], dict[str, str], dict[str, dict[int, int]]]:
    """Labelled rows, the attributes with rows on both sides, failed rows for the others.

    One aggregation counts the labelled rows of every group and every non-null code;
    the fourth value maps an attribute with a group below ``min_rows`` to the reason
    its rows are inconclusive. The last one holds, by attribute name, the rows per code
    as the engine counts them (:func:`code_counts_and_rows`) where the groups' codes
    are every non-null code of the attribute, so that the Spark passes count nothing
    again; an attribute with other codes is left out (the engine counts it itself).
    """
    agg = pts_all.agg(
        F.count(F.lit(1)).alias("n"),
        *[F.count(F.col(f"c{i}")).alias(f"all{i}") for i in range(len(attrs))],
        *[F.sum(F.when(F.col(f"c{i}") == F.lit(code), 1).otherwise(0)).alias(f"n{i}_{j}")
          for i in range(len(attrs)) for j, code in enumerate(sorted(codes[i][1]))],
    ).collect()[0]
    n = int(agg["n"])
    if n == 0:
        raise AuditError("hfm: no labelled row to audit (D needs the label)")
    counts: dict[str, dict[int, int]] = {}
    valid: list[int] = []
    failed: list[MetricRow] = []
    small: dict[str, str] = {}
    for i, a in enumerate(attrs):
        per_code = {code: int(agg[f"n{i}_{j}"] or 0)
                    for j, code in enumerate(sorted(codes[i][1]))}
        if sum(per_code.values()) == int(agg[f"all{i}"]):
            counts[a.name] = {c: k for c, k in per_code.items() if k > 0}
        sizes = {codes[i][1][code]: k for code, k in per_code.items()}
        present = {g: k for g, k in sizes.items() if k > 0}
        if len(present) >= 2:
            valid.append(i)
            few = [f"{g!r}: {k}" for g, k in present.items() if k < min_rows]
            if few:
                small[a.name] = (f"too few labelled rows for HFM in attribute {a.name!r} "
                                 f"({', '.join(few)}; minimum min_rows={min_rows})")
            continue
        failed.append(MetricRow(
            audit="hfm", attribute=a.name, group=view, metric="D", status=Status.FAILED,
            detail=(f"attribute {a.name!r}: all {n} labelled rows are in one group "
                    f"({', '.join(present) or 'none'}); HFM needs rows on both sides"),
            params=pjson))
    return n, valid, failed, small, counts


def _params_json(params: HFMParams, m2: int | None) -> str | None:
    return params_json(method=params.method, view=params.view, m1=params.m1, m2=m2,
                       sampler=params.sampler, max_candidates=params.max_candidates,
                       paper_value=params.paper_value,
                       sample_rows=params.advanced.sample_rows, min_rows=params.min_rows)


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
        attributes (``attribute="*"``), DR, a summary with witnesses, and an
        :class:`~fairspark.hfm.results.HFMResult` for the report section.
    """
    redacted = sorted(ctx.redacted(params.redact_columns))
    attrs = ctx.attributes(params)
    if not attrs:
        raise AuditError("hfm: no sensitive attribute to audit")
    steps: list[dict[str, Any]] = []
    df = ctx.prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for("hfm", "cap"))
    # a repeated or null columns.row_key is refused when the table is prepared
    # (prepare._check_unique_keys, for every audit), so the keys are not checked again
    codes = [attribute_codes(a, params.view) for a in attrs]
    pts_all = points_from_table(df, key_col=KEY, label_col=LABEL, pred_col=PRED, x_col=X,
                                code_exprs=[c for c, _ in codes])
    with _step(steps, "group counts"):
        n, valid, rows, small, counts = _one_sided(attrs, codes, pts_all, view=params.view,
                                           pjson=_params_json(params, params.m2),
                                           min_rows=params.min_rows)
    m2 = params.m2 or default_m2(n)
    summary: dict[str, Any] = {"method": params.method, "view": params.view, "rows": n,
                               "rows_unlabelled_skipped": ctx.prepared.rows_unlabelled,
                               "attributes": {}, "m1": params.m1, "m2": m2,
                               "sampler": params.sampler, "inconclusive": small}
    pjson = _params_json(params, m2)

    def progress(so_far: Pairs) -> None:
        # keep the interval so far: a time budget that ends during certification
        # publishes it (status timed_out) instead of nothing
        ctx.report_partial(_outcome(params, so_far, rows=rows, summary=summary, pjson=pjson,
                                    result=HFMResult(so_far, redacted=redacted, partial=True),
                                    small=small))

    results: Pairs = {}
    if valid:
        with _step(steps, "distances (engine)"):
            results = _distances(ctx, params, df, n=n, m2=m2, on_progress=progress,
                                 audited=[(attrs[i].name, codes[i][0],
                                           counts.get(attrs[i].name)) for i in valid])
    if params.method == "certified" and results and not all(
            d.certified and d_f.certified for d, d_f in results.values()):
        log.info("hfm: time budget reached before certification finished")
    base: dict[str, DistanceResult] = {}
    if results and ctx.prepared.baseline_column:  # D is shared: the baseline's D_f only
        summary["baseline"] = {"column": ctx.prepared.baseline_column}
        with _step(steps, "baseline D_f (engine)"):
            base = _baseline_distances(ctx, params, df, n=n, m2=m2, audited=[
                (attrs[i].name, codes[i][0], counts.get(attrs[i].name)) for i in valid])
    if ctx.time_left() <= 0:  # the runner publishes the interval so far; skip the extras
        raise TimeBudgetExhaustedError("hfm: time budget spent before the witnesses and DR")
    witness_keys = {k for r in [*(r for pair in results.values() for r in pair),
                                *base.values()] for k in (r.key, r.nb_key) if k is not None}
    with _step(steps, "witness values"):
        witnesses = _witness_values(ctx, params, witness_keys, redacted)
    with _step(steps, "DR"):
        dr = discriminative_risk(ctx, params, attrs)
    with _step(steps, "rows and summary"):
        out = _outcome(params, results, rows=rows, summary=summary, pjson=pjson,
                       result=HFMResult(results, witnesses=witnesses, redacted=redacted,
                                        baseline=base), dr=dr, small=small)
    out.summary["steps"] = steps
    for st in steps:
        log.info("hfm step: %-28s %7s s", st["step"], fmt_fixed(st["seconds"], 2))
    return out


@contextlib.contextmanager
def _step(steps: list[dict[str, Any]], name: str) -> Any:
    """Time one step of the audit into ``steps`` (``summary["steps"]`` and the log)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        steps.append({"step": name, "seconds": round(time.perf_counter() - t0, 4)})


def _distances(
    ctx: AuditContext, params: HFMParams, df: DataFrame, *,
    audited: list[tuple[str, Column, dict[int, int] | None]], n: int, m2: int,
    on_progress: Callable[[Pairs], None],
) -> Pairs:
    """D and D_f of the attributes with rows on both sides, by name.

    ``audited``: their names, group-code expressions and labelled rows per code (from
    :func:`_one_sided`; ``None`` where the engine counts them); ``on_progress`` gets
    the intervals so far while ``certified`` runs.
    """
    names = [a[0] for a in audited]

    def by_name(res: dict[tuple[int, int], DistanceResult]) -> Pairs:
        return {name: (res[(0, j)], res[(1, j)]) for j, name in enumerate(names)}

    res = _engine(ctx, params, df, audited=audited, n=n, m2=m2, baseline=False,
                  on_progress=(lambda part: on_progress(by_name(part)))
                  if params.method == "certified" else None)
    return by_name(res)


def _baseline_distances(
    ctx: AuditContext, params: HFMParams, df: DataFrame, *,
    audited: list[tuple[str, Column, dict[int, int] | None]], n: int, m2: int,
) -> dict[str, DistanceResult]:
    """The baseline decision's D_f per attribute (``columns.baseline``), by name.

    The same rows, groups, method, sample seed and projections as the challenger's D_f,
    with the baseline's decision in place of the audited one: one more engine run, for
    D_f only (D reads no decision: it is the challenger's).
    """
    res = _engine(ctx, params, df, audited=audited, n=n, m2=m2, baseline=True,
                  on_progress=None)
    return {a[0]: res[(1, j)] for j, a in enumerate(audited)}


def _engine(
    ctx: AuditContext, params: HFMParams, df: DataFrame, *,
    audited: list[tuple[str, Column, dict[int, int] | None]], n: int, m2: int, baseline: bool,
    on_progress: Callable[[dict[tuple[int, int], DistanceResult]], None] | None,
) -> dict[tuple[int, int], DistanceResult]:
    """:func:`~fairspark.hfm.compute.hfm_distances`: ``(target, attribute index) ->
    result``, D and D_f of the audited decision, or with ``baseline`` D_f of the
    baseline decision (``_fs_base`` in place of ``_fs_pred``) only."""
    pred_col, targets = (BASE, (1,)) if baseline else (PRED, (0, 1))
    # not persisted: a projection of the prepared table (a second copy of the feature
    # vectors in the cache cost 2 s of the driver path's collect); that table is
    # itself persisted only when another audit reads the features too, else the
    # encoding runs inside these jobs (fairspark.prepare, persist_features)
    pts = points_from_table(
        df, key_col=KEY, label_col=LABEL, pred_col=pred_col, x_col=X,
        code_exprs=[a[1] for a in audited],
    )
    dim_x = len(ctx.prepared.feature_names)
    projections = None
    if params.method in _BOUND_METHODS or (params.method == "certified"
                                           and params.paper_value):
        projections = make_projections(dim=1 + dim_x, m1=params.m1,
                                       sampler=params.sampler, seed=ctx.config.seed)
    return hfm_distances(
        pts, n_attr=len(audited), dim_x=dim_x, n_rows=n,
        options=dataclasses.replace(params.distance_options(m2), targets=targets),
        # the same labelled rows and group codes as the audit's count: its counts
        certify=dataclasses.replace(
            params.certify_options(seed=ctx.seed_for("hfm", "sample"), time_left=ctx.time_left),
            code_counts=({j: a[2] for j, a in enumerate(audited)}
                         if all(a[2] is not None for a in audited) else None)),
        projections=projections, on_progress=on_progress,
    )


def _inconclusive(rows: list[MetricRow], reason: str | None) -> list[MetricRow]:
    """Rows of an attribute with a group below ``min_rows``: ``inconclusive``, with why."""
    if reason is None:
        return rows
    return [MetricRow(**{**r.__dict__, "status": Status.INCONCLUSIVE,
                         "detail": f"{r.detail}; {reason}" if r.detail else reason})
            if r.status == Status.OK else r for r in rows]


def _aggregate_rows(params: HFMParams, results: Pairs, pjson: str | None,
                    small: dict[str, str]) -> list[MetricRow]:
    """The ``*`` rows: D, D_f the largest over attributes, df the largest per-attribute df.

    ``df`` of ``*`` is the df of one attribute (named in the detail), not the ratio of two
    maxima that may come from different attributes; ``df_avg`` likewise; ``D_avg`` is the
    mean over attributes.
    """
    agg_d, agg_f = _aggregate(list(results.values()))
    base = [r for r in _rows_for("*", params.view, agg_d, agg_f, params.method, pjson)
            if r.metric in ("D", "D_f", "D_avg", "D_f_avg")]
    out = [MetricRow(**{**r.__dict__, "detail": (r.detail or "") +
                        "; aggregate: max of D over attributes, mean of D_avg"}) for r in base]
    for metric in ("df", "df_avg"):
        per = {}
        for name, (d, d_f) in results.items():
            make = functools.partial(MetricRow, audit="hfm", attribute=name, group=params.view,
                                     params=pjson)
            per[name] = next(r for r in _df_rows(make, d, d_f, params.method)
                             if r.metric == metric)
        # the first attribute (configured order) among equal values
        name, best = max(per.items(), key=lambda kv: _sortable(kv[1].value))
        lows = [r.lower for r in per.values()]
        ups = [r.upper for r in per.values()]
        out.append(MetricRow(
            audit="hfm", attribute="*", group=params.view, metric=metric, value=best.value,
            lower=None if any(v is None for v in lows) else max(lows),
            upper=None if any(v is None for v in ups) else max(ups),
            status=best.status if all(r.status == best.status for r in per.values())
            else Status.NOT_CERTIFIED if any(r.status == Status.NOT_CERTIFIED
                                             for r in per.values()) else best.status,
            detail=f"aggregate: the largest per-attribute {metric}, attribute {name!r} "
                   f"({best.detail})",
            params=pjson))
    reason = "; ".join(small[n] for n in results if n in small) or None
    return _inconclusive(out, reason)


def _sortable(v: float | None) -> float:
    return -math.inf if v is None or math.isnan(v) else v


def _outcome(
    params: HFMParams,
    results: Pairs,
    *,
    rows: list[MetricRow],
    summary: dict[str, Any],
    pjson: str | None,
    result: HFMResult,
    dr: tuple[list[MetricRow], dict[str, Any]] | None = None,
    small: dict[str, str] | None = None,
) -> AuditOutcome:
    """Rows (per attribute, the aggregate, DR) and summary of a set of distance results.

    Used for the final result and for the partial results kept while certification runs
    (those have no DR); ``dr``: the rows and summary of :func:`discriminative_risk`.
    """
    rows = list(rows)
    summary = copy.deepcopy(summary)
    small = small or {}
    for name, (d, d_f) in results.items():
        rows += _inconclusive(_rows_for(name, params.view, d, d_f, params.method, pjson),
                              small.get(name))
    if len(results) > 1:
        rows += _aggregate_rows(params, results, pjson, small)
    for name, (d, d_f) in results.items():
        summary["attributes"][name] = {
            _NAMES[t]: {
                "value": r.value, "lower": r.lower, "upper": r.upper,
                "certified": r.certified, "avg": r.avg,
                "witness": [r.key, r.nb_key],
                **{k: v for k, v in r.extra.items() if k not in ("hist", "rounds", "cost")},
            }
            for t, r in ((0, d), (1, d_f))
        }
        summary["attributes"][name]["df"] = hfm_df(d.value, d_f.value)
        # one cost model for the stage (every attribute and target ran in the same passes)
        if "cost" in d.extra:
            summary["cost"] = d.extra["cost"]
    if result.baseline:
        rows += _baseline_part(params, results, result.baseline, rows=rows, summary=summary,
                               pjson=pjson, small=small)
    if dr is not None:
        dr_rows, summary["dr"] = dr
        rows += dr_rows or []
        # DR is an optional quantity: a failed DR row fails alone (its row and
        # summary["dr"] say why); D, D_f and the audit's status stand
        summary["optional_metrics"] = ["DR"]
    return AuditOutcome(rows=rows, summary=summary, result=result)


def _baseline_part(
    params: HFMParams, results: Pairs, base: dict[str, DistanceResult], *,
    rows: list[MetricRow], summary: dict[str, Any], pjson: str | None, small: dict[str, str],
) -> list[MetricRow]:
    """The baseline's D_f rows and the differences (``columns.baseline``; D is shared).

    ``rows``: the challenger's rows so far. Adds ``summary["baseline"]``: per attribute
    the baseline's D_f and df and the differences of D_f and df.
    """
    pairs = {name: (d, base[name]) for name, (d, _) in results.items() if name in base}
    mine: list[MetricRow] = []
    for name, (d, d_f) in pairs.items():
        mine += _inconclusive(_rows_for(name, params.view, d, d_f, params.method, pjson),
                              small.get(name))
    if len(pairs) > 1:
        mine += _aggregate_rows(params, pairs, pjson, small)
    mine = baseline_rows(mine)
    diffs = difference_rows(rows, mine)
    info: dict[str, Any] = {"attributes": {}}
    for name, (d, d_f) in pairs.items():
        diff = {r.metric: r for r in diffs if r.attribute == name}
        info["attributes"][name] = {
            "D_f": {"value": d_f.value, "lower": d_f.lower, "upper": d_f.upper,
                    "certified": d_f.certified, "avg": d_f.avg,
                    "witness": [d_f.key, d_f.nb_key]},
            "df": hfm_df(d.value, d_f.value),
            **{f"{m}_difference": {"value": diff[m].value, "lower": diff[m].lower,
                                   "upper": diff[m].upper, "status": diff[m].status}
               for m in ("D_f", "df") if m in diff},
        }
        if "cost" in d_f.extra:
            info["cost"] = d_f.extra["cost"]
    summary.setdefault("baseline", {}).update(info)
    return mine + diffs
