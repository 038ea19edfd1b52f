"""One audit run: read, prepare once, run every enabled audit in isolation, publish.

Exit codes (precedence 2 > 1 > 4 > 3 > 0):

- 0: every audit completed and no limit gates;
- 2: the run could not start (bad config, missing column, wrong type, empty input):
  nothing is written for the date;
- 4: at least one audit (or one attribute of an audit) failed or timed out; the
  others completed and everything is published with the failure and its reason;
- 3: a configured limit is violated (for its required number of consecutive runs);
- 1: an unexpected crash.

Besides the exit code (which cluster-mode deployments lose), every run that knows its
output location writes ``<output>/_status/run_date=<D>.json``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import platform
import sys
import time
import traceback
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fairspark._version import SCHEMA_VERSION, __version__
from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow, ReportSection
from fairspark.audits.registry import get_audit
from fairspark.errors import AuditError, FairsparkInputError
from fairspark.io import read_input
from fairspark.outputs import OutputLocation, summary_json, to_long_rows
from fairspark.prepare import prepare

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from fairspark.config import Config

__all__ = [
    "EXIT_AUDIT_FAILED", "EXIT_CRASH", "EXIT_INPUT", "EXIT_OK", "EXIT_VIOLATION", "RunResult",
    "run_audit_job", "write_status",
]

log = logging.getLogger("fairspark")

EXIT_OK, EXIT_CRASH, EXIT_INPUT, EXIT_VIOLATION, EXIT_AUDIT_FAILED = 0, 1, 2, 3, 4


class RunResult:
    """What a run produced: exit code, output folder, rows and summary."""

    def __init__(self, exit_code: int, output_dir: str | None, rows: list[dict[str, Any]],
                 summary: dict[str, Any]):
        self.exit_code = exit_code
        self.output_dir = output_dir
        self.rows = rows
        self.summary = summary


@contextlib.contextmanager
def _stage(name: str, timings: dict[str, float]) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        timings[name] = round(dt, 3)
        log.info("stage %-22s %7.2f s", name, dt)


def _versions(spark: SparkSession) -> dict[str, str]:
    import numpy
    import pandas
    import sklearn

    return {
        "fairspark": __version__,
        "schema": str(SCHEMA_VERSION),
        "spark": spark.version,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "pandas": pandas.__version__,
        "scikit-learn": sklearn.__version__,
    }


def _run_one(name: str, ctx: AuditContext, params: Any) -> tuple[AuditOutcome, dict[str, Any]]:
    """Run one audit; a failure becomes a failed outcome instead of an exception."""
    try:
        outcome = get_audit(name)(ctx, params)
    except AuditError as err:
        msg = str(err)
        log.warning("audit %s failed: %s", name, msg)
        row = MetricRow(audit=name, attribute="*", metric="*", status="failed", detail=msg)
        return AuditOutcome(rows=[row]), {"status": "failed", "detail": msg}
    except Exception as err:  # noqa: BLE001 - one broken audit must not stop the others
        msg = f"{type(err).__name__}: {err}"
        log.error("audit %s raised %s\n%s", name, msg, traceback.format_exc())
        row = MetricRow(audit=name, attribute="*", metric="*", status="failed", detail=msg)
        return AuditOutcome(rows=[row]), {"status": "failed", "detail": msg}
    failed = [r for r in outcome.rows if r.status == "failed"]
    status = outcome.summary.get("status") or ("failed" if failed else "ok")
    if failed and status == "ok":
        status = "failed"
    info = {**outcome.summary, "status": status}
    if failed and "detail" not in info:
        info["detail"] = "; ".join(dict.fromkeys(f"{r.attribute}: {r.detail}" for r in failed))
    return outcome, info


def _timed_out(name: str, ctx: AuditContext, budget: float) -> tuple[AuditOutcome, dict[str, Any]]:
    msg = f"audit {name} ran past its time budget of {budget:g} s"
    partial = ctx.partial
    if partial is None:
        row = MetricRow(audit=name, attribute="*", metric="*", status="timed_out",
                        detail=f"{msg}; no partial result")
        return AuditOutcome(rows=[row]), {"status": "timed_out", "detail": msg}
    rows = []
    for r in partial.rows:
        if r.status in ("ok", "not_certified", "inconclusive"):
            r = dataclasses.replace(r, status="timed_out",
                                    detail=(r.detail + "; " if r.detail else "") + msg)
        rows.append(r)
    info = {**partial.summary, "status": "timed_out", "detail": f"{msg}; partial result kept"}
    return AuditOutcome(rows=rows, summary=partial.summary, sections=partial.sections), info


def _run_with_budget(name: str, ctx: AuditContext, params: Any) -> tuple[AuditOutcome, dict]:
    """Run an audit; past ``params.timeout_s`` cancel its Spark jobs and keep its partial."""
    budget = getattr(params, "timeout_s", None)
    if budget is None:
        return _run_one(name, ctx, params)
    from pyspark import InheritableThread

    sc = ctx.spark.sparkContext
    group = f"fairspark-{name}-{uuid.uuid4().hex[:8]}"
    ctx.deadline = time.monotonic() + budget
    box: dict[str, Any] = {}

    def target() -> None:
        sc.setJobGroup(group, f"fairspark audit {name}", interruptOnCancel=True)
        box["result"] = _run_one(name, ctx, params)

    thread = InheritableThread(target=target, daemon=True)
    thread.start()
    thread.join(budget)
    if "result" in box:
        return box["result"]
    ctx.cancelled = True
    log.warning("audit %s: time budget of %g s exhausted; cancelling its Spark jobs", name, budget)
    sc.cancelJobGroup(group)
    thread.join(30.0)  # let it unwind; a thread stuck in driver-side Python is abandoned
    return _timed_out(name, ctx, budget)


def run_audit_job(
    spark: SparkSession, config: Config, *, fail_on_violation: bool | None = None
) -> RunResult:
    """Run the configured audits on the configured input and publish the outputs.

    Run-level input errors (:class:`~fairspark.errors.FairsparkInputError`) are
    raised before anything is written; the caller maps them to exit code 2.

    Parameters
    ----------
    fail_on_violation:
        Overrides ``limits.fail_on_violation`` (``--no-fail-on-violation``): when
        false a violated limit is reported but the exit code stays 0.

    Returns
    -------
    RunResult
        ``exit_code`` is 0, 3 (a limit gates) or 4 (some audit failed or timed out).
    """
    timings: dict[str, float] = {}
    run_date = config.effective_run_date()
    started = time.time()
    if config.audits.hfm is not None:  # also for runs built in code, not from a file
        config.audits.hfm.check_dr_model()
    with _stage("read", timings):
        df = read_input(spark, input_config=config.input)
    with _stage("prepare", timings):
        prepared = prepare(df, config=config)
    ctx = AuditContext(spark=spark, prepared=prepared, config=config, run_date=run_date)

    rows: list[MetricRow] = []
    sections: list[ReportSection] = []
    audits_info: dict[str, Any] = {}
    for name, params in config.audits.enabled().items():
        t0 = time.perf_counter()
        actx = dataclasses.replace(ctx)
        with _stage(f"audit {name}", timings):
            outcome, info = _run_with_budget(name, actx, params)
        info["seconds"] = round(time.perf_counter() - t0, 3)
        info["params"] = params.model_dump(mode="json")
        audits_info[name] = info
        rows += outcome.rows
        sections += outcome.sections

    out = OutputLocation(spark, config.output.path)
    history = _history(out, config, run_date)
    long_now = to_long_rows(
        rows, run_date=run_date, dataset=config.dataset, config_hash=config.config_hash(),
        version=__version__, schema_version=SCHEMA_VERSION,
    )
    limits_info: dict[str, Any] = {}
    gating = False
    if config.limits.rules:
        from fairspark.nightly.gating import evaluate_limits
        from fairspark.nightly.report import limits_section

        checks, limit_rows, unmatched = evaluate_limits(
            long_now, limits=config.limits, history=history)
        rows += limit_rows
        sections.append(limits_section(checks, [r.__dict__ for r in limit_rows], unmatched))
        gating = any(c.gates for c in checks)
        verdicts = [c.verdict for c in checks]
        limits_info = {
            "status": "violated" if "violated" in verdicts else
                      "inconclusive" if "inconclusive" in verdicts else "passed",
            "gates": gating,
            "checks": len(checks),
            "violated": verdicts.count("violated"),
            "passed": verdicts.count("passed"),
            "inconclusive": verdicts.count("inconclusive"),
            "unmatched": unmatched,
            "correction": config.limits.correction,
            "alpha": config.limits.alpha,
        }
        if gating:
            limits_info["detail"] = "; ".join(
                f"{r.metric_b} ({r.attribute})" for r, c in zip(limit_rows, checks, strict=True)
                if c.gates)
    fail = config.limits.fail_on_violation if fail_on_violation is None else fail_on_violation
    any_failed = any(i["status"] in ("failed", "timed_out") for i in audits_info.values())
    exit_code = (EXIT_AUDIT_FAILED if any_failed
                 else EXIT_VIOLATION if gating and fail else EXIT_OK)
    long_rows = to_long_rows(
        rows, run_date=run_date, dataset=config.dataset, config_hash=config.config_hash(),
        version=__version__, schema_version=SCHEMA_VERSION,
    )
    try:
        from fairspark.nightly.report import trend_frame, trend_section

        sec = trend_section(trend_frame(history, long_rows, run_date=run_date.isoformat(),
                                        config_hash=config.config_hash(), version=__version__))
        if sec is not None:
            sections.append(sec)
    except Exception as err:  # noqa: BLE001 - a trend plot must not lose tonight's numbers
        log.warning("trend section could not be rendered: %s", err)
    summary: dict[str, Any] = {
        "run_date": run_date.isoformat(),
        "dataset": config.dataset,
        "config_hash": config.config_hash(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "versions": _versions(spark),
        "input": {
            "path": config.input.path, "table": config.input.table,
            "format": config.input.format, "where": config.input.where,
            "label": prepared.label_column, "decision": prepared.decision_column,
            "favourable": config.columns.favourable,
        },
        "rows": prepared.summary(),
        "seeds": {"seed": config.seed},
        "audits": audits_info,
        **({"limits": limits_info} if limits_info else {}),
        "exit_code": exit_code,
        "stage_timings": timings,
        "spark": {"master": spark.sparkContext.master, "app_id": spark.sparkContext.applicationId},
        "command": " ".join(sys.argv),
    }

    with _stage("write", timings):
        staging = out.staging(run_date)
        try:
            out.write_metrics(staging, long_rows)
            if config.output.report:
                _write_report(out, staging, summary, long_rows, sections)
            out.write_text(f"{staging}/summary.json", summary_json(summary))
            final = out.publish(staging, run_date)
        except BaseException:
            with contextlib.suppress(Exception):
                out.delete(staging)
            raise
    # the timing of the write stage itself is recorded in the log; summary.json is
    # already published at this point.
    prepared.unpersist()
    if config.output.table:
        with _stage("warehouse table", timings):
            from fairspark.nightly.warehouse import append_to_table

            append_to_table(spark, table=config.output.table, folder=final, run_date=run_date)
    write_status(out, run_date, exit_code=exit_code, summary=summary)
    log.info("outputs published to %s (exit code %d)", final, exit_code)
    return RunResult(exit_code, final, long_rows, summary)


def _history(out: OutputLocation, config: Config, run_date: Any):
    import pandas as pd

    if config.output.trend_runs == 0 and not config.limits.rules:
        return pd.DataFrame()
    try:
        from fairspark.nightly.history import load_history

        return load_history(out, before=run_date, max_runs=max(config.output.trend_runs, 1))
    except Exception as err:  # noqa: BLE001 - history is a nicety; tonight's run goes on
        log.warning("could not read earlier runs from %s: %s", out.base, err)
        return pd.DataFrame()


def write_status(out: OutputLocation, run_date: Any, *, exit_code: int,
                 summary: dict[str, Any] | None = None, error: str | None = None) -> None:
    """Write ``<output>/_status/run_date=<D>.json``: the exit code for schedulers that lose it."""
    audits = (summary or {}).get("audits") or {}
    status = {
        "run_date": str(run_date),
        "exit_code": exit_code,
        "meaning": {0: "ok", 1: "crash", 2: "bad config or input", 3: "limit violated",
                    4: "audit failed"}.get(exit_code, "unknown"),
        "failed_audits": {k: v.get("detail") for k, v in audits.items()
                          if v.get("status") in ("failed", "timed_out")},
        "limits": (summary or {}).get("limits"),
        "error": error,
        "output": out.path(f"run_date={run_date}") if exit_code in (0, 3, 4) else None,
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        out.write_text(out.path("_status", f"run_date={run_date}.json"),
                       json.dumps(status, indent=2, default=str))
    except Exception as err:  # noqa: BLE001
        log.warning("could not write the status file: %s", err)


def _write_report(out: OutputLocation, staging: str, summary: dict[str, Any],
                  long_rows: list[dict[str, Any]], sections: list[ReportSection]) -> None:
    try:
        from fairspark.report.render import render_report_html
    except ImportError:  # pragma: no cover - lands with the report work
        log.warning("report renderer not available; report.html not written")
        return
    html = render_report_html(summary=summary, rows=long_rows, sections=sections)
    out.write_text(f"{staging}/report.html", html)


def exit_code_for(exc: BaseException) -> int:
    """The exit code of an exception that ended a run."""
    if isinstance(exc, FairsparkInputError):
        return EXIT_INPUT
    return EXIT_CRASH
