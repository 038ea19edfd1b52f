"""One audit in isolation: its Spark jobs, its time budget, its failures, its section.

:func:`_run_with_budget` runs an audit in its own scope of Spark jobs (a job group,
or a session tag on Spark Connect) and, past its ``timeout_s``, cancels them and
keeps the audit's last partial result (:func:`_timed_out`); :func:`_run_one` turns any
failure of the audit into a failed outcome instead of an exception, so the other
audits run; :func:`_render` draws the
audit's report sections apart from its numbers. :mod:`fairspark.runner` runs every
enabled audit through these.
"""

from __future__ import annotations

import dataclasses
import html as _html
import logging
import time
import traceback
import uuid
from typing import TYPE_CHECKING, Any

from fairspark._signals import raise_if_stopping, stop_signal
from fairspark._values import nan_to_none
from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow, ReportSection
from fairspark.errors import AuditError, TimeBudgetExhaustedError
from fairspark.numbers import fmt_setting
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.spec import AuditSpec

log = logging.getLogger("fairspark")

#: the statuses a timed-out audit's partial rows are relabelled from
_PARTIAL_STATUSES = (Status.OK, Status.NOT_CERTIFIED, Status.INCONCLUSIVE)


def _failed(name: str, msg: str) -> tuple[AuditOutcome, dict[str, Any]]:
    row = MetricRow(audit=name, attribute="*", metric="*", status=Status.FAILED, detail=msg)
    return AuditOutcome(rows=[row]), {"status": Status.FAILED, "detail": msg}


def _run_one(spec: AuditSpec, ctx: AuditContext, params: Any) -> tuple[AuditOutcome, dict]:
    """Run one audit; a failure becomes a failed outcome instead of an exception."""
    name = spec.name
    try:
        outcome = spec.run_fn()(ctx, params)
    except TimeBudgetExhaustedError:
        log.info("audit %s stopped at its time budget", name)
        return _timed_out(name, ctx, getattr(params, "timeout_s", None) or 0.0)
    except AuditError as err:
        log.warning("audit %s failed: %s", name, err)
        return _failed(name, str(err))
    except Exception as err:  # noqa: BLE001 - one broken audit must not stop the others
        if stop_signal() is not None:  # its jobs were cancelled by the run's SIGTERM/SIGINT
            raise_if_stopping()  # the main thread stops here; an audit's own thread ends
            return _failed(name, "stopped: the run received a signal")
        msg = f"{type(err).__name__}: {err}"
        if ctx.cancelled:  # its jobs were cancelled at the time budget: expected, one line
            log.info("audit %s stopped after its Spark jobs were cancelled", name)
            return _failed(name, f"cancelled at the time budget: {msg.splitlines()[0][:200]}")
        log.error("audit %s raised %s\n%s", name, msg, traceback.format_exc())
        return _failed(name, msg)
    outcome.rows[:] = [_undefined_is_not_ok(r) for r in outcome.rows]
    # an audit's optional quantities (summary "optional_metrics", e.g. HFM's DR) fail
    # alone: their failed rows stay failed but do not fail the audit
    optional = set(outcome.summary.get("optional_metrics") or ())
    failed = [r for r in outcome.rows if r.status == Status.FAILED and r.metric not in optional]
    status = outcome.summary.get("status") or (Status.FAILED if failed else Status.OK)
    if failed and status == Status.OK:
        status = Status.FAILED
    info = {**outcome.summary, "status": status}
    if outcome.rows and all(r.status == Status.NOT_COMPUTED for r in outcome.rows):
        # an audit that computed nothing is a failed audit (exit 4), never "ok"
        reasons = "; ".join(dict.fromkeys(r.detail for r in outcome.rows if r.detail))
        info["status"] = Status.FAILED
        info["detail"] = f"no metric of audit {name} could be computed: {reasons}"[:2000]
    if failed and "detail" not in info:
        info["detail"] = "; ".join(dict.fromkeys(f"{r.attribute}: {r.detail}" for r in failed))
    return outcome, info


def _undefined_is_not_ok(row: MetricRow) -> MetricRow:
    """A row without a value is never ``ok``: it is ``not_computed`` with its reason."""
    if nan_to_none(row.value) is not None or row.status != Status.OK:
        return row
    return dataclasses.replace(row, status=Status.NOT_COMPUTED,
                               detail=row.detail or "no value could be computed on this data")


def _timed_out(name: str, ctx: AuditContext, budget: float) -> tuple[AuditOutcome, dict]:
    msg = f"audit {name} ran past its time budget of {fmt_setting(budget)} s"
    partial = ctx.partial
    if partial is None:
        row = MetricRow(audit=name, attribute="*", metric="*", status=Status.TIMED_OUT,
                        detail=f"{msg}; no partial result")
        return AuditOutcome(rows=[row]), {"status": Status.TIMED_OUT, "detail": msg}
    rows = []
    for r in partial.rows:
        if r.status in _PARTIAL_STATUSES:
            r = dataclasses.replace(r, status=Status.TIMED_OUT,
                                    detail=(r.detail + "; " if r.detail else "") + msg)
        rows.append(r)
    info = {**partial.summary, "status": Status.TIMED_OUT,
            "detail": f"{msg}; partial result kept"}
    return dataclasses.replace(partial, rows=rows), info


def _run_with_budget(spec: AuditSpec, ctx: AuditContext, params: Any) -> tuple[AuditOutcome, dict]:
    """Run an audit in its own scope of Spark jobs; past ``params.timeout_s`` cancel them.

    Every audit's Spark jobs carry the scope ``fairspark-<audit>-<id>`` (on a classic
    session a job group, which the status tracker and the Spark UI show; on Spark
    Connect a session tag; :mod:`fairspark._jobs`). With a budget the audit runs in a
    thread; when the budget runs out its jobs are cancelled and its last partial
    result is kept.
    """
    from fairspark._jobs import cancel_scope, in_scope, scope_thread

    name = spec.name
    budget = getattr(params, "timeout_s", None)
    spark = ctx.spark
    scope = f"fairspark-{name}-{uuid.uuid4().hex[:8]}"
    if budget is None:
        with in_scope(spark, scope, f"fairspark audit {name}"):
            return _run_one(spec, ctx, params)
    ctx.deadline = time.monotonic() + budget
    box: dict[str, Any] = {}

    def target() -> None:
        with in_scope(spark, scope, f"fairspark audit {name}"):
            box["result"] = _run_one(spec, ctx, params)

    thread = scope_thread(spark, target)
    thread.start()
    thread.join(budget)
    if "result" in box:
        return box["result"]
    ctx.cancelled = True  # time_left() is 0 from now on: the audit's loops stop at their check
    log.warning("audit %s: time budget of %s s exhausted; cancelling its Spark jobs", name,
                fmt_setting(budget))
    cancel_scope(spark, scope)
    # let it unwind, cancelling the jobs it still starts, for at most budget + 4 s (so
    # that an audit stage ends within 2x its budget + 5 s); a thread still running in
    # driver-side Python then is abandoned and stops at its next time check
    end = time.monotonic() + min(budget + _GRACE_S, _MAX_GRACE_S)
    while thread.is_alive() and time.monotonic() < end:
        thread.join(min(0.5, max(end - time.monotonic(), 0.0)))
        _cancel_active(spark, scope)
    if thread.is_alive():
        log.warning("audit %s did not stop within %s s of its budget; left to stop at its "
                    "next time check", name, fmt_setting(min(budget + _GRACE_S, _MAX_GRACE_S)))
    return _timed_out(name, ctx, budget)


#: how long a timed-out audit may take to unwind: budget + _GRACE_S, at most _MAX_GRACE_S
_GRACE_S, _MAX_GRACE_S = 4.0, 30.0


def _cancel_active(spark: Any, scope: str) -> None:
    """Cancel the audit's jobs again if it has active ones (started after the first cancel)."""
    from fairspark._jobs import cancel_scope_if_active

    try:
        cancel_scope_if_active(spark, scope)
    except Exception as err:  # noqa: BLE001 - best effort while the audit unwinds
        log.debug("could not cancel the jobs of %s: %s", scope, err)


def _render(spec: AuditSpec, outcome: AuditOutcome, ctx: AuditContext, params: Any,
            info: dict[str, Any]) -> list[ReportSection]:
    """The audit's report sections, rendered in isolation from its numbers.

    A rendering error keeps every row and summary entry, records ``report_error`` in
    the audit's summary and puts a short notice where the section would be.
    """
    if spec.render is None or outcome.result is None:
        return list(outcome.sections)
    try:
        return [*outcome.sections, *spec.render_fn()(outcome, ctx=ctx, params=params)]
    except Exception as err:  # noqa: BLE001 - a plotting bug must not lose the numbers
        msg = f"{type(err).__name__}: {err}"
        log.warning("report section of %s could not be rendered: %s", spec.name, msg)
        info["report_error"] = msg
        note = (f'<p class="warn">This section could not be rendered ({_html.escape(msg)}); '
                "the audit's numbers are in metrics.parquet and summary.json.</p>")
        return [*outcome.sections, ReportSection(title=spec.title, html=note, order=spec.order)]
