"""The ``mdfa`` audit entry point: ``run(ctx, params) -> AuditOutcome``.

The method: Gitiaux and Rangwala, 2019 (docs/references.md).

``run`` computes numbers only (rows, summary and an :class:`~.results.MDFAResult`);
the report section is drawn from that result by :func:`fairspark.mdfa.report.render`.

References
----------
.. [1] X. Gitiaux and H. Rangwala, "Multi-Differential Fairness Auditor for Black Box
   Classifiers", arXiv:1903.07609, 2019.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairspark._threads import CpuTimedPool, driver_threads
from fairspark._values import nan_to_none, params_json
from fairspark.audits.base import AuditOutcome, MetricRow
from fairspark.columns import BASE, KEY, PRED, WEIGHT, X, input_col
from fairspark.errors import AuditError, TimeBudgetExhaustedError
from fairspark.mdfa._spark import (
    Y_COL,
    YB_COL,
    run_splits,
    s_column,
    view_samples,
    view_stats,
    y_column,
)
from fairspark.mdfa.certify import MDFASample, prepare_view
from fairspark.mdfa.diagnostics import AUC_LIMIT, SMD_LIMIT
from fairspark.mdfa.null import null_reference, predicted_half_width
from fairspark.mdfa.paired import baseline_rows, baseline_sample, difference_rows, failed_rows
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.results import (
    AttributeResult,
    GroupedStats,
    MDFAResult,
    Spread,
    finding,
    subgroup_summary,
)
from fairspark.mdfa.rows import attribute_rows
from fairspark.numbers import fmt_detail, fmt_fixed, fmt_level
from fairspark.progress import Progress
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover

    from fairspark.audits.base import AuditContext
    from fairspark.audits.prepared import AttributeInfo, PreparedData

__all__ = ["AttributeFailureError", "audit_attribute", "run", "summarise_splits"]

AUDIT = "mdfa"

log = logging.getLogger("fairspark")

#: the per-split numbers summarised over splits
_SPREAD_COLUMNS = ("gamma_pos", "gamma_neg", "gamma_max", "delta", "delta_unweighted",
                   "ratio_in_subgroup", "mass", "balance_auc", "balance_auc_before",
                   "max_abs_smd_before", "max_abs_smd_after", "outcome_gap_before",
                   "outcome_gap_after")


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


def _plan_features(
    prepared: PreparedData, params: MDFAParams, redact: set[str]
) -> FeaturePlan:
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
    """Words for one side of the binary view, e.g. ``unprivileged (Female)``."""
    if attr.kind == "predicate":
        truth = "false" if target_group == "unprivileged" else "true"
        return f"{target_group} (privileged predicate {truth})"
    priv = [v for v in attr.values if v in attr.privileged_values]
    unpriv = [v for v in attr.values if v not in attr.privileged_values]
    side = unpriv if target_group == "unprivileged" else priv
    shown = ", ".join(side[:6]) + (" ..." if len(side) > 6 else "")
    return f"{target_group} ({shown})"


def _other_label(attr: AttributeInfo, target_group: str) -> str:
    """Words for the s = -1 side."""
    return _target_label(attr, "privileged" if target_group == "unprivileged"
                         else "unprivileged")


def summarise_splits(splits: pd.DataFrame) -> dict[str, Spread]:
    """The :class:`~.results.Spread` over splits of each per-split number."""
    return {
        col: Spread.of(pd.to_numeric(splits[col], errors="coerce").to_numpy(dtype=float))
        for col in _SPREAD_COLUMNS
    }


def _check_time(ctx: AuditContext, name: str) -> None:
    """Stop at a step boundary once the budget is spent (the runner keeps the partial)."""
    if ctx.time_left() <= 0:
        raise TimeBudgetExhaustedError(f"mdfa: time budget spent before attribute {name!r} "
                                       "finished")


def _check_counts(stats: GroupedStats, *, name: str, target: str, min_rows: int) -> None:
    """Raise :class:`AttributeFailureError` when the cells cannot support mdfa."""
    n_pos, n_neg = stats.count(s=1), stats.count(s=-1)
    n_fav, n_all = stats.count(y=1), stats.count()
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
    if n_all < min_rows or min(n_pos, n_neg) < 10:
        raise AttributeFailureError(
            f"mdfa cannot audit attribute {name!r}: {int(n_all)} rows "
            f"({int(n_pos)} in the target group, {int(n_neg)} in the other); it needs at "
            f"least min_rows={min_rows} rows and 10 per group"
        )


@dataclass
class _View:
    """What one pass over the table gives an attribute view: its cell statistics and
    its collected sample, or why mdfa cannot audit it."""

    stats: GroupedStats
    rows: pd.DataFrame | None = None
    error: AttributeFailureError | None = None


def gather_views(
    ctx: AuditContext, params: MDFAParams, attrs: list[AttributeInfo], plan: FeaturePlan
) -> dict[str, _View]:
    """The statistics and samples of every attribute view, in two passes over the table.

    One aggregation gives every view's (s, y) cells (:func:`~._spark.view_stats`); the
    views whose cells can support mdfa get their stratified samples from one
    pre-filtered collect (:func:`~._spark.view_samples`), the same rows a collect per
    view would draw. With a baseline decision (``columns.baseline``) the same passes
    give its cells (``GroupedStats.baseline``) and carry it in the samples (``_yb``).
    """
    from pyspark.sql import functions as F

    prepared = ctx.prepared
    paired = bool(prepared.baseline_column)
    base = prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for(AUDIT, "max_rows"))
    df = base.select("*", y_column(PRED).alias(Y_COL),
                     *([y_column(BASE).alias(YB_COL)] if paired else []))
    s_cols = {a.name: s_column(priv_col=a.priv_col, target_group=params.target_group)
              for a in attrs}
    desc_cols = ([input_col(c) for c in plan.desc_numeric]
                 + [F.col(X)[i] for i in plan.desc_onehot_idx])
    names = list(s_cols)
    stats: dict[str, GroupedStats] = {}
    for i in range(0, len(names), 12):
        stats.update(view_stats(df, views={n: s_cols[n] for n in names[i:i + 12]},
                                desc_cols=desc_cols, desc_names=plan.desc_names,
                                weight_col=WEIGHT if prepared.weighted else None,
                                base_col=YB_COL if paired else None))
    out: dict[str, _View] = {}
    wanted = {}
    for attr in attrs:
        st = stats[attr.name]
        try:
            _check_counts(st, name=attr.name, target=_target_label(attr, params.target_group),
                          min_rows=params.min_rows)
        except AttributeFailureError as err:
            out[attr.name] = _View(stats=st, error=err)
            continue
        out[attr.name] = _View(stats=st)
        wanted[attr.name] = (s_cols[attr.name], ctx.seed_for(AUDIT, attr.name, "sample"),
                             st.cell_counts())
    if wanted:
        _check_time(ctx, next(iter(wanted)))
        columns = [F.col(X).alias("_x")] + [input_col(c).cast("double").alias(f"_d{j}")
                                            for j, c in enumerate(plan.desc_numeric)]
        columns += [F.col(YB_COL).alias("_yb")] if paired else []
        rows = view_samples(df, views=wanted, columns=columns, key_col=KEY,
                            cap=params.sample_rows)
        for name, pdf in rows.items():
            out[name].rows = pdf
    return out


def _sample(pdf: pd.DataFrame, *, name: str, plan: FeaturePlan) -> MDFASample:
    """One attribute's collected sample rows as an :class:`MDFASample`."""
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
    return MDFASample(
        x=x,
        s=pdf["_s"].to_numpy(dtype=int),
        y=pdf["_y"].to_numpy(dtype=int),
        desc=desc,
        feature_names=plan.names,
        desc_names=plan.desc_names,
    )


def _violation_summary(res: AttributeResult) -> None:
    """Fill the outcome counts of Algorithm 1, the majority outcome and the overall
    outcome ratio (once)."""
    ywv = pd.to_numeric(res.splits["y_wv"], errors="coerce").dropna()
    if not len(ywv):
        return
    counts = ywv.astype(int).value_counts()
    res.y_counts = {int(k): int(v) for k, v in counts.items()}
    res.y_major = int(counts.idxmax())
    r_neg = res.stats.rate(s=-1, y=res.y_major)
    res.ratio_overall = nan_to_none(
        res.stats.rate(s=1, y=res.y_major) / r_neg if r_neg > 0 else None)


@dataclass
class _ViewWork:
    """An attribute view made ready on the driver: its sample with the null model and
    the view's balancing nets, the parameters with the L2 kept, and the seeds."""

    attr: AttributeInfo
    stats: GroupedStats
    target: str
    sample: MDFASample
    params: MDFAParams
    seeds: list[int]
    view_cpu: dict[str, float]
    y_base: np.ndarray | None = None  # the baseline decision of the sample's rows


def prepare_attribute(
    ctx: AuditContext, params: MDFAParams, attr: AttributeInfo, plan: FeaturePlan,
    view: _View | None = None,
) -> _ViewWork:
    """The driver's work on one attribute before its splits: the sample, the null
    model and the view's balancing nets (:func:`~.certify.prepare_view`).

    Its CPU seconds are this thread's (``time.thread_time``), so :func:`run` can
    prepare the next view while the splits of this one run on the executors.

    Raises
    ------
    AttributeFailureError
        When the attribute cannot be audited (message names the attribute).
    """
    name = attr.name
    if not plan.x_idx:
        raise AttributeFailureError(
            f"mdfa cannot audit attribute {name!r}: every audit feature is constant "
            f"({plan.dropped_constant})"
        )
    if view is None:
        view = gather_views(ctx, params, [attr], plan)[name]
    if view.error is not None:
        raise view.error
    target = _target_label(attr, params.target_group)
    _check_time(ctx, name)
    sample = _sample(view.rows, name=name, plan=plan)
    y_base = view.rows["_yb"].to_numpy(dtype=int) if "_yb" in view.rows else None
    view.rows = None  # the sample's arrays are all the splits need
    seeds = [ctx.seed_for(AUDIT, name, "split", i) for i in range(params.planned_splits())]
    # the null model and the view's nets in the driver's threads (independent work; each
    # job single-threaded, so the numbers do not depend on the threads)
    with ThreadPoolExecutor(max_workers=driver_threads(),
                            thread_name_prefix="mdfa-prep") as threads:
        null_pool, net_pool = CpuTimedPool(threads), CpuTimedPool(threads)
        nulled = (null_pool.submit(sample.with_null_model,
                                   seed=ctx.seed_for(AUDIT, name, "null"),
                                   library=params.null_model)
                  if params.null_draws > 0 else None)
        c0 = time.thread_time()
        sample, params = prepare_view(sample, seeds=seeds, params=params, pool=net_pool,
                                      check=lambda: _check_time(ctx, name))
        own = time.thread_time() - c0
        if nulled is not None:
            fitted = nulled.result()
            sample = dataclasses.replace(sample, p_null=fitted.p_null,
                                         null_seed=fitted.null_seed)
    view_cpu = {"null_model": null_pool.cpu_s, "balancing_net": net_pool.cpu_s + own}
    return _ViewWork(attr=attr, stats=view.stats, target=target, sample=sample,
                     params=params, seeds=seeds, view_cpu=view_cpu, y_base=y_base)


def audit_prepared(ctx: AuditContext, work: _ViewWork, plan: FeaturePlan,
                   ran: tuple[pd.DataFrame, str] | None = None) -> AttributeResult:
    """The splits of one prepared attribute view and their result (``ran``: the split
    table and why it stopped, when the splits already ran)."""
    name, params = work.attr.name, work.params
    _check_time(ctx, name)  # prepare_view trains on the driver: no Spark job to cancel
    splits, stop = ran if ran is not None else _run_waves(ctx, work.sample, seeds=work.seeds,
                                                          params=params, name=name)
    res = AttributeResult(
        attribute=name, target_label=work.target,
        other_label=_other_label(work.attr, params.target_group),
        splits=splits, stats=work.stats,
        sample_rows=len(work.sample.s), features=plan.names,
        dropped_constant=plan.dropped_constant, aggregates=summarise_splits(splits),
        null=null_reference(splits, level=params.verdict_level),
        splits_stop=stop, l2=params.l2, view_cpu=work.view_cpu,
    )
    _violation_summary(res)
    _log_cost(name, res.cost())
    return res


def audit_attribute(
    ctx: AuditContext, params: MDFAParams, attr: AttributeInfo, plan: FeaturePlan,
    view: _View | None = None,
) -> AttributeResult:
    """The parallel splits of one attribute, on its statistics and sample (``view``,
    from :func:`gather_views`; gathered for this attribute alone when None).

    Raises
    ------
    AttributeFailureError
        When the attribute cannot be audited (message names the attribute).
    """
    return audit_prepared(ctx, prepare_attribute(ctx, params, attr, plan, view), plan)


def audit_baseline(
    ctx: AuditContext, work: _ViewWork, res: AttributeResult, plan: FeaturePlan
) -> AttributeResult:
    """The baseline decision (``columns.baseline``) over the splits ``res`` ran for the
    audited decision: the same rows, split seeds, weights and null draws
    (:mod:`~.paired`); one more null model on the driver, the splits once more.

    Raises
    ------
    AttributeFailureError
        When the baseline's decisions cannot support mdfa (e.g. they never vary).
    """
    name, params = work.attr.name, work.params
    try:
        _check_counts(work.stats.baseline, name=name, target=work.target,
                      min_rows=params.min_rows)
    except AttributeFailureError as err:
        raise AttributeFailureError(f"baseline decision: {err}") from err
    _check_time(ctx, name)
    c0 = time.thread_time()
    sample = baseline_sample(work.sample, y_base=work.y_base, library=params.null_model,
                             null_seed=(ctx.seed_for(AUDIT, name, "null")
                                        if params.null_draws > 0 else None))
    cpu = {"null_model": time.thread_time() - c0, "balancing_net": 0.0}  # nets shared
    seeds = work.seeds[:len(res.splits)]
    splits = run_splits(ctx.spark, sample, seeds=seeds, params=params)
    mine = dataclasses.replace(work, stats=work.stats.baseline, sample=sample, seeds=seeds,
                               view_cpu=cpu)
    return audit_prepared(ctx, mine, plan,
                          ran=(splits, f"the audited decision's {len(seeds)} splits"))


def _log_cost(name: str, cost: dict[str, Any]) -> None:
    """One DEBUG line: the attribute's CPU seconds per split by phase and per view
    (internal cost; ``summary.json`` keeps it)."""
    per = ", ".join(f"{k.replace('_', ' ')} {'-' if v is None else fmt_fixed(v, 2)}"
                    for k, v in cost["cpu_s_per_split"].items())
    view = ", ".join(f"{k.replace('_', ' ')} {fmt_fixed(v, 2)}"
                     for k, v in cost["cpu_s_view"].items())
    log.debug("mdfa %s: CPU s per split (%d splits): %s; once for the view: %s; total %.1f",
             name, cost["splits"], per, view, cost["cpu_s"])


def _run_waves(
    ctx: AuditContext, sample: MDFASample, *, seeds: list[int], params: MDFAParams,
    name: str,
) -> tuple[pd.DataFrame, str]:
    """Run the splits: all of a fixed ``splits``, or waves of ``splits: auto``.

    Returns the split table and why it stopped (in words, for the summary and the
    report). Progress is logged at least every 30 s and handed to ``ctx.progress``.
    """
    total = len(seeds)
    auto = params.splits == "auto"
    wave = min(params.splits_wave, total) if auto else total
    progress = Progress(what=f"mdfa {name}", unit="splits", total=total,
                        sink=ctx.progress_sink(AUDIT))
    progress.update(0, note=f"auto: waves of {wave}, at most {total}" if auto else None,
                    force=True)
    tables: list[pd.DataFrame] = []
    why = f"as configured (splits: {total})"
    done = 0
    while done < total:
        n = min(wave, total - done)

        def tick(k: int, _n: int, base: int = done) -> None:
            progress.update(base + k, note=f"wave of {_n}" if auto else None)

        tables.append(run_splits(ctx.spark, sample, seeds=seeds[done:done + n],
                                 params=params, first=done, on_progress=tick))
        done += n
        if not auto or done >= total:
            if auto:
                why = f"splits: auto reached splits_max = {total}"
            break
        table = pd.concat(tables, ignore_index=True)
        hw = predicted_half_width(table, n_splits=min(total, done + wave), k=params.null_k(),
                                  per_split=params.null_per_split)
        if hw is None:
            why = ("no null reference: the interval is the spread over splits, which "
                   "more splits do not narrow")
            break
        gain = 1.0 - hw[1] / hw[0] if hw[0] > 0 else 0.0
        if gain < params.splits_tolerance:
            why = (f"splits: auto stopped: another wave of {wave} would narrow the gamma_max "
                   f"interval by {fmt_detail(100 * gain, decimals=1)}% (half-width "
                   f"{fmt_detail(hw[0], decimals=4)} -> {fmt_detail(hw[1], decimals=4)}), "
                   f"less than splits_tolerance = {fmt_level(params.splits_tolerance)}")
            break
        log.info("mdfa %s: %d splits; another wave should narrow the gamma_max interval "
                 "by %s%%: running it", name, done, fmt_fixed(100 * gain, 1))
        _check_time(ctx, name)
    progress.update(done, total=done, note=None, force=True)
    log.info("mdfa %s: %d splits, %s", name, done, why)
    return pd.concat(tables, ignore_index=True).sort_values("split").reset_index(drop=True), why


@dataclass
class _Progress:
    """What the audit has so far: rows, summary and results of the finished attributes."""

    redacted: list[str]
    rows: list[MetricRow] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=lambda: {"attributes": {}})
    results: list[AttributeResult] = field(default_factory=list)
    baselines: list[AttributeResult] = field(default_factory=list)

    def failed(self, name: str, reason: str, pjson: str | None) -> None:
        self.rows.append(MetricRow(audit=AUDIT, attribute=name, metric="gamma_max",
                                   status=Status.FAILED, detail=reason, params=pjson))
        self.summary["attributes"][name] = {"status": Status.FAILED, "reason": reason}

    def done(self, res: AttributeResult, pjson: str | None) -> None:
        self.results.append(res)
        self.rows += attribute_rows(res, pjson)
        self.summary["attributes"][res.attribute] = {
            "status": Status.OK,
            "target_group": res.target_label,
            "sample_rows": res.sample_rows,
            "splits": len(res.splits),
            "splits_stop": res.splits_stop,
            "l2": res.l2,
            "cost": res.cost(),
            "verdict": res.verdict(),
            "balance": {
                "poor_splits": res.poor_balance_splits,
                "auc_limit": AUC_LIMIT, "smd_limit": SMD_LIMIT,
                "smd": res.smd_table(self.redacted),
            },
            "null": res.null.as_dict() if res.null is not None else None,
            # the reported gammas (rows): raw mean less the features-only reference
            "corrected": {k: c.as_dict() for k, c in res.corrected.items()},
            "finding": finding(res),
            "subgroup": subgroup_summary(res),
            **{k: v.as_dict() for k, v in res.aggregates.items()},
        }

    def paired(self, res: AttributeResult, base: AttributeResult | str, pjson: str | None,
               column: str) -> None:
        """The baseline decision's rows (or why it failed) and the paired gammas."""
        info = self.summary.setdefault("baseline", {"column": column, "attributes": {}})
        if isinstance(base, str):
            self.rows += failed_rows(res, base, column=column)
            info["attributes"][res.attribute] = {"status": Status.FAILED, "reason": base}
            return
        self.baselines.append(base)
        rows, diff = difference_rows(res, base, column=column)
        self.rows += baseline_rows(base, pjson) + rows
        info["attributes"][res.attribute] = {
            "status": Status.OK, "verdict": base.verdict(), "cost": base.cost(),
            "corrected": {k: c.as_dict() for k, c in base.corrected.items()},
            "gamma_max": base.aggregates["gamma_max"].as_dict(), "difference": diff}

    def outcome(self) -> AuditOutcome:
        """The outcome so far (copies: later attributes do not change a reported one)."""
        return AuditOutcome(
            rows=list(self.rows), summary=copy.deepcopy(self.summary),
            result=MDFAResult(attributes=list(self.results), redacted=list(self.redacted),
                              baselines=list(self.baselines)),
        )


def run(ctx: AuditContext, params: MDFAParams) -> AuditOutcome:
    """Run mdfa on every selected attribute of ``ctx.prepared``.

    With a time budget it checks ``ctx.time_left()`` before each attribute and
    between the driver steps of one, and hands the finished attributes to
    ``ctx.report_partial`` after each; when the budget is spent it raises
    :class:`~fairspark.errors.TimeBudgetExhaustedError` and the runner publishes the
    last partial result as ``timed_out``.

    Parameters
    ----------
    ctx:
        The audit context (Spark session, prepared data, config, seeds).
    params:
        The ``audits.mdfa`` section of the config.

    Returns
    -------
    AuditOutcome
        Rows gamma, gamma_unfavourable, gamma_max, gamma_null (the verdict's null
        reference), the balance diagnostics, delta, delta_unweighted,
        outcome_ratio_in_subgroup, subgroup_mass and outcome_ratio_overall per attribute
        (failed rows for attributes mdfa cannot audit), a summary and the
        :class:`~.results.MDFAResult` the report draws.
    """
    redacted = ctx.redacted()
    plan = _plan_features(ctx.prepared, params, redacted)
    attrs = ctx.attributes(params)
    pjson = params_json(params.flat_dump(), features_used=plan.names,
                        constant_features_dropped=plan.dropped_constant)
    progress = _Progress(redacted=sorted(redacted))
    views: dict[str, _View] = {}
    if attrs and plan.x_idx:  # every view's statistics and sample in one pass each
        _check_time(ctx, attrs[0].name)
        views = gather_views(ctx, params, attrs, plan)
    # the driver prepares view i + 1 (null model, balancing nets) while the splits of
    # view i run on the executors; the results do not depend on it
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mdfa-view")

    def submit(i: int) -> Future | None:
        if i >= len(attrs):
            return None
        return pool.submit(prepare_attribute, ctx, params, attrs[i], plan,
                           views.get(attrs[i].name))

    try:
        ahead = submit(0)
        for i, attr in enumerate(attrs):
            _check_time(ctx, attr.name)
            try:
                work = ahead.result()
            except AttributeFailureError as err:
                ahead = submit(i + 1)
                progress.failed(attr.name, str(err), pjson)
                ctx.report_partial(progress.outcome())
                continue
            ahead = submit(i + 1)
            try:
                res = audit_prepared(ctx, work, plan)
                progress.done(res, pjson)
            except AttributeFailureError as err:
                progress.failed(attr.name, str(err), pjson)
                res = None
            if res is not None and work.y_base is not None:  # columns.baseline
                try:
                    base: AttributeResult | str = audit_baseline(ctx, work, res, plan)
                except AttributeFailureError as err:
                    base = str(err)
                progress.paired(res, base, pjson, ctx.prepared.baseline_column)
            ctx.report_partial(progress.outcome())
    finally:  # a budget spent or an error: do not wait for a view being prepared
        pool.shutdown(wait=False, cancel_futures=True)
    statuses = [v["status"] for v in progress.summary["attributes"].values()]
    if statuses and all(s == Status.FAILED for s in statuses):
        progress.summary["status"] = Status.FAILED
    return progress.outcome()
