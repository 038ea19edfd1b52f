"""One audit run: read, prepare once, run every enabled audit in isolation, publish.

Exit codes (precedence 2 > 1 > 4 > 0):

- 0: every audit completed;
- 2: the run could not start (bad config, missing column, wrong type, empty input):
  nothing is written for the date;
- 4: at least one audit (or one attribute of an audit) failed; the others completed
  and everything is published with the failure and its reason;
- 1: an unexpected crash.
"""

from __future__ import annotations

import contextlib
import logging
import platform
import sys
import time
import traceback
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

__all__ = ["EXIT_OK", "EXIT_CRASH", "EXIT_INPUT", "EXIT_AUDIT_FAILED", "RunResult", "run_audit_job"]

log = logging.getLogger("fairspark")

EXIT_OK, EXIT_CRASH, EXIT_INPUT, EXIT_AUDIT_FAILED = 0, 1, 2, 4


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
    except Exception as err:
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


def run_audit_job(spark: SparkSession, config: Config) -> RunResult:
    """Run the configured audits on the configured input and publish the outputs.

    Run-level input errors (:class:`~fairspark.errors.FairsparkInputError`) are
    raised before anything is written; the caller maps them to exit code 2.

    Returns
    -------
    RunResult
        ``exit_code`` is 0 or 4 (some audit failed).
    """
    timings: dict[str, float] = {}
    run_date = config.effective_run_date()
    started = time.time()
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
        with _stage(f"audit {name}", timings):
            outcome, info = _run_one(name, ctx, params)
        info["seconds"] = round(time.perf_counter() - t0, 3)
        info["params"] = params.model_dump(mode="json")
        audits_info[name] = info
        rows += outcome.rows
        sections += outcome.sections

    any_failed = any(i["status"] == "failed" for i in audits_info.values())
    exit_code = EXIT_AUDIT_FAILED if any_failed else EXIT_OK
    long_rows = to_long_rows(
        rows, run_date=run_date, dataset=config.dataset, config_hash=config.config_hash(),
        version=__version__, schema_version=SCHEMA_VERSION,
    )
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
        "exit_code": exit_code,
        "stage_timings": timings,
        "spark": {"master": spark.sparkContext.master, "app_id": spark.sparkContext.applicationId},
        "command": " ".join(sys.argv),
    }

    with _stage("write", timings):
        out = OutputLocation(spark, config.output.path)
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
    prepared.df.unpersist()
    log.info("outputs published to %s (exit code %d)", final, exit_code)
    return RunResult(exit_code, final, long_rows, summary)


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
