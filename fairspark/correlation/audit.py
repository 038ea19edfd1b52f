"""The ``correlation`` audit: representative fairness metrics (Anahideh et al., 2021).

Output rows (``audit="correlation"``, one set per attribute and model family):

=========================== ============ ==================================================
metric                      metric_b     value / lower / upper, detail
=========================== ============ ==================================================
catalogue metric i          metric j     r*_ij, r* - e, r* + e; rounds and pair counts
``cluster``                 member       cluster number (1-based); its representative
``representative``          pivot        cluster size; the members it represents
``tau``                     --           tau used (given, or searched for k)
``acceptance_rate``         --           accepted / attempts; rejection reasons
``monte_carlo_se``          --           the matrix's Monte-Carlo SE; rounds, why they stopped
``model_accuracy``          --           mean, 2.5 % and 97.5 % quantiles (kept models)
=========================== ============ ==================================================

``run`` computes numbers only; the report section comes from
:func:`fairspark.correlation.report.render` (``SPEC.render``).

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fairspark import columns
from fairspark._values import nan_to_none, params_json
from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow, derive_seed
from fairspark.correlation._cluster import cluster_metrics, prefix_representatives, search_tau
from fairspark.correlation._estimate import (
    CorrelationEstimate,
    RoundsDecision,
    decide_rounds,
    estimate_correlations,
    matrix_se_path,
)
from fairspark.correlation._oracle import CELLS, DEFAULT_METRICS, make_model
from fairspark.correlation._rounds import cost_summary, round_cost_line, round_costs
from fairspark.correlation._spark import (
    AttemptTable,
    OracleJob,
    OracleSample,
    WaveHooks,
    _default_partitions,
    draw_stratified_sample,
    run_oracle_tasks,
    select_rounds,
)
from fairspark.correlation._summary import outcome_summary
from fairspark.correlation.params import CorrelationParams
from fairspark.correlation.results import (
    CorrelationResult,
    ModelResult,
    RoundSelection,
    rounds_text,
)
from fairspark.errors import AuditError, TimeBudgetExhaustedError
from fairspark.numbers import fmt_detail, fmt_setting
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "AuditHooks",
    "BudgetExhaustedError",
    "correlation_audit",
    "outcome_from_result",
    "outcome_rows",
    "outcome_summary",
    "run",
]

AUDIT = "correlation"

log = logging.getLogger("fairspark")


class BudgetExhaustedError(TimeBudgetExhaustedError):
    """The time budget ran out between waves; the partial result was handed over."""


# ---------------------------------------------------------------- computing the result
def _check_models(params: CorrelationParams) -> None:
    """Bad hyperparameters fail here, once, not inside every task."""
    for model in params.models:
        try:
            make_model(model, params.model_params.get(model), random_state=0)
        except (ValueError, TypeError) as exc:
            raise AuditError(f"correlation: {exc}") from exc


def _empty_cell_detail(name: str, counts: np.ndarray, population: np.ndarray | None) -> str:
    empty = [c for c in range(4) if counts[c] == 0]
    detail = (
        f"attribute {name!r}: cell(s) {', '.join(repr(CELLS[c]) for c in empty)} have no "
        f"labelled rows (cell counts {dict(zip(CELLS, counts.tolist(), strict=True))}); the "
        "sampling oracle (Algorithm 2) bootstraps from every group x label cell"
    )
    if population is not None and any(population[c] > 0 for c in empty):
        pop = dict(zip(CELLS, population.tolist(), strict=True))
        detail += f"; the labelled table has {pop}: a larger sample_rows may reach them"
    return detail


def _cell_failures(
    sample: OracleSample, names: Sequence[str]
) -> tuple[dict[str, str], dict[str, list[int]]]:
    """Attributes with an empty group x label cell in the sample, and every cell count."""
    failed: dict[str, str] = {}
    cells: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        counts = sample.for_attribute(i).cell_counts()
        cells[name] = counts.tolist()
        if (counts == 0).any():
            failed[name] = _empty_cell_detail(name, counts, sample.population_cells.get(name))
    return failed, cells


def _cluster(
    est: CorrelationEstimate, params: CorrelationParams, seed: int, res: ModelResult
) -> None:
    """Cluster the metrics with a defined correlation; record the others in ``excluded``."""
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
        res.status = Status.FAILED
        res.detail = "no metric has a defined correlation with another one"
        return
    sub = est.r[np.ix_(keep, keep)]
    res.clustered_metrics = [names[i] for i in keep]
    if params.n_representatives is not None:
        found = search_tau(sub, k=params.n_representatives, repeats=params.repeats, seed=seed)
        res.tau_detail = found.message
        if found.clustering is None:
            res.status, res.detail = Status.FAILED, found.message
            return
        res.clustering = found.clustering
    else:
        res.clustering = cluster_metrics(
            sub, tau=float(params.tau), repeats=params.repeats, seed=seed
        )
        res.tau_detail = (
            f"tau={params.tau} given; fewest clusters over {params.repeats} pivot orders"
        )


def _no_round_detail(sel: RoundSelection, params: CorrelationParams) -> str:
    """Why no round of a (attribute, model) reached N accepted models."""
    reasons = "; ".join(f"{k}: {v}" for k, v in sorted(sel.rejected_reasons.items()))
    if sel.pending:
        return (
            f"no round complete yet: {len(sel.pending)} of {params.max_rounds} rounds still "
            f"running ({sel.accepted} of {sel.attempts} attempts accepted so far)"
        )
    if sel.accepted == 0:
        return (
            f"every model rejected: 0 of {sel.attempts} attempts accepted "
            f"(min_accuracy={params.min_accuracy}; {reasons})"
        )
    return (
        f"no round reached n_samples={params.n_samples} accepted models within "
        f"{params.attempt_cap} attempts ({sel.accepted} of {sel.attempts} "
        f"accepted; {reasons})"
    )


@dataclass
class _AuditRun:
    """One run of the audit: what is known before the oracle tasks start, and the
    rounds of every (attribute, model) as they are planned and stopped."""

    params: CorrelationParams
    metrics: list[str]
    seed: int
    names: list[str]
    sample: OracleSample
    failed: dict[str, str]
    cells: dict[str, list[int]]
    #: cores of the session: a wave of ``rounds: auto`` keeps them busy
    cores: int = 1
    #: (attribute index, model) -> round ids planned (run, once the wave is back)
    planned: dict[tuple[int, str], int] = field(default_factory=dict)
    #: (attribute index, model) -> the stopping decision, once stopped
    decisions: dict[tuple[int, str], RoundsDecision] = field(default_factory=dict)
    #: (attribute index, model, kept round ids) -> representatives of that prefix
    reps_cache: dict[tuple, tuple[str, ...] | None] = field(default_factory=dict)

    @property
    def ok_attributes(self) -> list[int]:
        """Indices of the attributes whose four cells all have sample rows."""
        return [i for i, n in enumerate(self.names) if n not in self.failed]

    @property
    def first_wave(self) -> int:
        """Rounds of every (attribute, model) in the first wave."""
        p = self.params
        return p.rounds_min if p.auto_rounds else int(p.rounds)  # type: ignore[arg-type]

    def _select(self, attempts: Any, i: int, model: str, rounds: int) -> RoundSelection:
        p = self.params
        sub = attempts[(attempts["attr"] == i) & (attempts["model"] == model)]
        return select_rounds(sub, metrics=self.metrics, n_samples=p.n_samples, rounds=rounds,
                             attempt_cap=p.attempt_cap)

    def _decision(self, sel: RoundSelection, rounds_run: int, i: int, model: str
                  ) -> RoundsDecision:
        """The stopping rules on the kept rounds of ``0..rounds_run-1`` (or, for an
        integer ``rounds``, the standard error they reached)."""
        p = self.params
        per = (estimate_correlations(sel.values, metrics=self.metrics, ci_level=p.ci_level)
               .per_round if sel.values else None)
        if p.auto_rounds:
            reps = (self.reps_path(per, sel.round_ids, i, model)
                    if p.stable_rounds and per is not None else None)
            return decide_rounds(sel.round_ids, per, rounds_run=rounds_run,
                                 rounds_min=p.rounds_min, rounds_max=p.rounds_max,
                                 target_se=p.target_se, representatives=reps,
                                 stable_rounds=p.stable_rounds)
        se = float(matrix_se_path(per)[-1]) if per is not None else float("nan")
        return RoundsDecision(True, rounds_run, len(sel.values), se, "fixed")

    def reps_path(self, per_round: Any, round_ids: Sequence[int], i: int, model: str
                  ) -> list[tuple[str, ...] | None]:
        """The representatives (sorted names) after each prefix of the kept rounds.

        The clustering of each prefix is the one :func:`_cluster` reports when the rounds
        stop there (same r*, same pivot seed), so the representatives a ``stable`` stop
        reads are the ones the user gets. Prefixes are cached: a kept round's results
        never change once its wave is back.
        """
        seed = derive_seed(self.seed, AUDIT, "pivot", self.names[i], model)
        out = []
        for n in range(1, len(round_ids) + 1):
            key = (i, model, tuple(round_ids[:n]))
            if key not in self.reps_cache:
                self.reps_cache[key] = prefix_representatives(
                    per_round[:n], self.metrics, self.params, seed)
            out.append(self.reps_cache[key])
        return out

    def more_rounds(self, table: AttemptTable) -> dict[tuple[int, int], int | None]:
        """``run_oracle_tasks``' ``more_rounds``: stop an (attribute, model) or plan more.

        Every open (attribute, model) gets the rounds its standard error predicts
        (:func:`decide_rounds`), and at least enough that the wave has a round per core:
        a core left idle would cost the same wall time. Rounds past the stopping round
        are run but not used, so the result does not depend on these wave sizes.
        """
        p = self.params
        out: dict[tuple[int, int], int | None] = {}
        wants: dict[tuple[int, int, str], int] = {}
        for (i, model), run in self.planned.items():
            if (i, model) in self.decisions:
                continue
            mi = p.models.index(model)
            d = self._decision(self._select(table.attempts, i, model, run), run, i, model)
            if d.stopped:
                self.decisions[(i, model)] = d
                out[(i, mi)] = None
            else:
                wants[(i, mi, model)] = int(d.next_rounds or run + 1)
        step = math.ceil(self.cores / len(wants)) if wants else 0
        for (i, mi, model), n in wants.items():
            run = self.planned[(i, model)]
            self.planned[(i, model)] = out[(i, mi)] = min(p.rounds_max, max(n, run + step))
        return out

    def model_result(self, attempts: Any, i: int, model: str, cpu: Any = None) -> ModelResult:
        """Kept rounds, r* and clusters of attribute ``i`` and ``model`` (``cpu``: the
        attempts' CPU seconds per phase, :attr:`AttemptTable.cpu`)."""
        p = self.params
        run = self.planned.get((i, model), self.first_wave)
        stopped = self.decisions.get((i, model))
        sel = self._select(attempts, i, model, stopped.rounds if stopped else run)
        res = ModelResult(attribute=self.names[i], model=model, status=Status.OK, selection=sel,
                          rounds=stopped or self._decision(sel, run, i, model), rounds_run=run)
        if cpu is not None:
            res.cost = cost_summary(round_costs(cpu[(cpu["attr"] == i) & (cpu["model"] == model)]))
        if not sel.values:
            res.status = Status.NOT_COMPUTED if sel.pending else Status.FAILED
            res.detail = _no_round_detail(sel, p)
            return res
        res.estimate = estimate_correlations(sel.values, metrics=self.metrics, ci_level=p.ci_level)
        res.se_path = matrix_se_path(res.estimate.per_round).tolist()
        if p.auto_rounds and p.stable_rounds:
            res.reps_path = self.reps_path(res.estimate.per_round, sel.round_ids, i, model)
        _cluster(res.estimate, p, derive_seed(self.seed, AUDIT, "pivot", self.names[i], model), res)
        return res

    def log_rounds(self, wave: Any) -> None:
        """``run_oracle_tasks``' ``on_rounds``: one log line per round of a wave."""
        for row in round_costs(wave).itertuples(index=False):
            log.debug("%s", round_cost_line(row, attribute=self.names[int(row.attr)]))

    def result(self, table: AttemptTable | None, *, partial: bool = False) -> CorrelationResult:
        """The audit's result from the attempts run (``None``: no attribute to run)."""
        models = []
        if table is not None:
            models = [
                self.model_result(table.attempts, i, model, table.cpu)
                for i in self.ok_attributes
                for model in self.params.models
            ]
        return CorrelationResult(
            params=self.params,
            metrics=self.metrics,
            failed_attributes=self.failed,
            models=models,
            sample_rows=len(self.sample.y),
            population_rows=self.sample.population_rows,
            sample_cells=self.cells,
            waves=table.waves if table is not None else 0,
            shipped_as=table.shipped_as if table is not None else "none",
            partial=partial,
        )


def _check_budget(time_left: Callable[[], float] | None, waves: int) -> None:
    if time_left is not None and time_left() <= 0:
        raise BudgetExhaustedError(
            f"correlation: time budget used up after {waves} wave(s) of oracle tasks"
        )


@dataclass(frozen=True)
class AuditHooks:
    """How a running correlation audit talks to its caller (all optional).

    Attributes
    ----------
    time_left : seconds left of a time budget (``AuditContext.time_left``); checked
        after the sample and after every wave of oracle tasks.
    report_partial : receives the result of the rounds complete after each wave but
        the last, while ``time_left`` is finite.
    progress_sink : receives the progress (rounds done of at most how many, elapsed,
        estimate of the rest) whenever it is logged: at least every 30 s while rounds
        run (``AuditContext.progress_sink``).
    """

    time_left: Callable[[], float] | None = None
    report_partial: Callable[[CorrelationResult], None] | None = None
    progress_sink: Callable[[dict[str, Any]], None] | None = None


def correlation_audit(
    spark: SparkSession,
    df: DataFrame,
    *,
    attributes: Sequence[tuple[str, str]],
    params: CorrelationParams,
    seed: int,
    cols: columns.TableColumns = columns.PREPARED,
    hooks: AuditHooks | None = None,
) -> CorrelationResult:
    """Sample models, estimate metric correlations and cluster them, for each attribute.

    Parameters
    ----------
    spark : the session.
    df : Spark DataFrame with the prepared-table columns (only labelled rows are used).
    attributes : ``(name, privileged_flag_column)`` of each attribute (binary view).
    params : the audit parameters.
    seed : the run's base seed; every random draw derives from it.
    cols : the label, features, weight and key columns (the prepared table's).
    hooks : the time budget, partial results and progress (:class:`AuditHooks`).

    Returns
    -------
    CorrelationResult

    Raises
    ------
    BudgetExhaustedError
        ``time_left`` reached 0 before the last wave.
    """
    _check_models(params)
    hooks = hooks or AuditHooks()
    time_left, report_partial = hooks.time_left, hooks.report_partial
    names = [a for a, _ in attributes]
    sample = draw_stratified_sample(df, priv_cols=[c for _, c in attributes], attributes=names,
                                    max_rows=params.sample_rows,
                                    seed=derive_seed(seed, AUDIT, "sample"), cols=cols)
    if sample.population_rows == 0:
        raise AuditError("correlation: the table has no labelled row; models cannot be trained")
    failed, cells = _cell_failures(sample, names)
    state = _AuditRun(params=params, metrics=list(params.metrics or DEFAULT_METRICS), seed=seed,
                      names=names, sample=sample, failed=failed, cells=cells,
                      cores=max(1, _default_partitions(spark) // 4))
    state.planned = {(i, m): state.first_wave for i in state.ok_attributes for m in params.models}
    if not state.ok_attributes:
        return state.result(None)
    _check_budget(time_left, 0)

    def on_wave(table: AttemptTable) -> None:
        if report_partial is not None and time_left is not None and math.isfinite(time_left()):
            report_partial(state.result(table, partial=True))
        _check_budget(time_left, table.waves)

    # one wave (one Spark job) of every round, unless a time budget wants partial
    # results in between: then waves of one round per task; rounds: auto adds waves
    # until every (attribute, model) stopped
    budgeted = time_left is not None and math.isfinite(time_left())
    progress = _progress(params, len(state.planned), hooks.progress_sink)
    table = _oracle_tasks(
        spark, state, on_wave=on_wave, waves=budgeted,
        on_progress=lambda done, bound, note: progress.update(done, total=bound, note=note),
    )
    progress.update(progress.done, total=progress.done, note="finished", force=True)
    return state.result(table)


def _progress(
    params: CorrelationParams, combos: int, sink: Callable[[dict[str, Any]], None] | None
) -> Any:
    """The rounds' :class:`~fairspark.progress.Progress` (a line at least every 30 s)."""
    from fairspark.progress import Progress

    what = "correlation"
    if params.auto_rounds:
        what += f" (rounds: auto, stop at SE <= {fmt_setting(params.target_se)}"
        what += (f" or representatives unchanged over {params.stable_rounds} rounds)"
                 if params.stable_rounds else ")")
    return Progress(what=what, unit="rounds", total=combos * params.max_rounds, sink=sink)


def _oracle_tasks(
    spark: SparkSession, state: _AuditRun, *, on_wave: Callable[[AttemptTable], None],
    waves: bool = False, on_progress: Callable[[int, int, str], None] | None = None,
) -> AttemptTable:
    """Every attempt of the oracle for the attributes with four non-empty cells.

    ``waves``: run the rounds in waves of one round per task (partial results between
    them) instead of one wave. With ``rounds: auto`` the first wave runs ``rounds_min``
    rounds of every (attribute, model) and :meth:`_AuditRun.more_rounds` plans the next.
    """
    p = state.params
    job = OracleJob(
        attributes=state.ok_attributes,
        models=p.models,
        seeds=[derive_seed(state.seed, AUDIT, n) for n in state.names],
        n_samples=p.n_samples,
        rounds=state.first_wave,
        k=p.k,
        min_accuracy=p.min_accuracy,
        attempt_cap=p.attempt_cap,
        test_fraction=p.test_fraction,
        metrics=state.metrics,
        model_params=p.model_params,
        partitions=p.advanced.partitions,
        shipping=p.advanced.shipping,
        linear_fits=p.advanced.linear_fits,
        rounds_per_wave=(p.advanced.partitions or _default_partitions(spark)) if waves else None,
        max_rounds=p.max_rounds,
    )
    hooks = WaveHooks(on_wave=on_wave, on_progress=on_progress, on_rounds=state.log_rounds,
                      more_rounds=state.more_rounds if p.auto_rounds else None)
    return run_oracle_tasks(spark, state.sample, job, hooks)


# ---------------------------------------------------------------- long rows and summary
@dataclass(frozen=True)
class _RowMaker:
    """Rows of one (attribute, model family), sharing its ``params`` JSON."""

    attribute: str
    model: str
    params: str | None

    def __call__(self, metric: str, **kw: Any) -> MetricRow:
        return MetricRow(
            audit=AUDIT,
            attribute=self.attribute,
            metric=metric,
            model=self.model,
            params=self.params,
            **kw,
        )


def _row_maker(res: ModelResult, result: CorrelationResult) -> _RowMaker:
    p = result.params
    pj = params_json(
        model=res.model,
        model_params=p.model_params.get(res.model, {}),
        n_samples=p.n_samples,
        rounds=p.rounds,
        **({"rounds_min": p.rounds_min, "rounds_max": p.rounds_max, "target_se": p.target_se,
            "stable_rounds": p.stable_rounds} if p.auto_rounds else {}),
        k=p.k,
        min_accuracy=p.min_accuracy,
        ci_level=p.ci_level,
        tau=p.tau,
        n_representatives=p.n_representatives,
        repeats=p.repeats,
        sample_rows=result.sample_rows,
    )
    return _RowMaker(attribute=res.attribute, model=res.model, params=pj)


def _selection_rows(row: _RowMaker, res: ModelResult, params: CorrelationParams
                    ) -> list[MetricRow]:
    sel, d = res.selection, res.rounds
    assert sel is not None and d is not None
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(sel.rejected_reasons.items())) or "none"
    dropped = "; ".join(sel.dropped.values())
    detail = (
        f"accepted {sel.accepted} of {sel.attempts} attempts; rejected: {reasons}; "
        f"rounds used {len(sel.values)} of {d.rounds}"
    )
    if sel.pending:
        detail += f"; {len(sel.pending)} rounds still running"
    if dropped:
        detail += f"; dropped: {dropped}"
    rows = [
        row("acceptance_rate", value=sel.acceptance_rate, detail=detail),
        row("monte_carlo_se", value=nan_to_none(d.se),
            status=Status.OK if math.isfinite(d.se) else Status.NOT_COMPUTED,
            detail=rounds_text(d, params, res.rounds_run)),
    ]
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
    return rows


def _matrix_rows(row: _RowMaker, est: CorrelationEstimate) -> list[MetricRow]:
    rows = []
    for i, a in enumerate(est.metrics):
        for j, b in enumerate(est.metrics):
            r = est.r[i, j]
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
                    value=nan_to_none(r),
                    lower=nan_to_none(est.lower[i, j]),
                    upper=nan_to_none(est.upper[i, j]),
                    status=Status.OK if np.isfinite(r) else Status.NOT_COMPUTED,
                    detail=detail,
                )
            )
    return rows


def _cluster_rows(row: _RowMaker, res: ModelResult, est: CorrelationEstimate) -> list[MetricRow]:
    rows = [
        row("cluster", metric_b=m, status=Status.NOT_COMPUTED, detail=why)
        for m, why in res.excluded.items()
    ]
    cl = res.clustering
    if cl is None:
        return [*rows, row("tau", status=Status.FAILED, detail=res.detail or res.tau_detail)]
    names = res.clustered_metrics
    rows.append(row("tau", value=cl.tau, detail=res.tau_detail))
    for c, (piv, members) in enumerate(cl.clusters, start=1):
        pname = names[piv]
        represented = ", ".join(names[j] for j in members)
        rows.append(
            row(
                "representative",
                metric_b=pname,
                value=float(len(members)),
                detail=f"cluster {c}; represents: {represented}",
            )
        )
        pi = est.metrics.index(pname)
        for j in members:
            r = est.r[pi, est.metrics.index(names[j])]
            rows.append(
                row(
                    "cluster",
                    metric_b=names[j],
                    value=float(c),
                    detail=f"representative: {pname}; r*={fmt_detail(r, decimals=4)}",
                )
            )
    return rows


def _model_rows(res: ModelResult, result: CorrelationResult) -> list[MetricRow]:
    row = _row_maker(res, result)
    rows = []
    if res.selection is not None:
        rows += _selection_rows(row, res, result.params)
    if res.estimate is None:
        return [*rows, row("*", status=res.status, detail=res.detail)]
    return [*rows, *_matrix_rows(row, res.estimate), *_cluster_rows(row, res, res.estimate)]


def outcome_rows(result: CorrelationResult) -> list[MetricRow]:
    """The long-format rows of a :class:`CorrelationResult` (see the module table)."""
    rows = [
        MetricRow(audit=AUDIT, attribute=name, metric="*", status=Status.FAILED, detail=why)
        for name, why in result.failed_attributes.items()
    ]
    for res in result.models:
        rows += _model_rows(res, result)
    return rows


def outcome_from_result(result: CorrelationResult) -> AuditOutcome:
    """Rows, summary and the result itself (the report renders it, ``SPEC.render``)."""
    return AuditOutcome(rows=outcome_rows(result), summary=outcome_summary(result), result=result)


def run(ctx: AuditContext, params: CorrelationParams) -> AuditOutcome:
    """Entry point of the ``correlation`` audit (``fairspark.correlation.spec.SPEC``).

    With a time budget, the rounds complete after each wave of oracle tasks go to
    ``ctx.report_partial``; past the budget no further wave starts.
    """
    attrs = ctx.attributes(params)
    if not attrs:
        raise AuditError("correlation: no sensitive attribute to audit")
    df = ctx.prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for(AUDIT, "cap"))
    result = correlation_audit(
        ctx.spark,
        df,
        attributes=[(a.name, a.priv_col) for a in attrs],
        params=params,
        seed=ctx.config.seed,
        hooks=AuditHooks(
            time_left=ctx.time_left,
            report_partial=lambda partial: ctx.report_partial(outcome_from_result(partial)),
            progress_sink=ctx.progress_sink(AUDIT),
        ),
    )
    return outcome_from_result(result)
