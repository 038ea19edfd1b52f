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

One audit's isolation (job group, time budget, failures, report section) is in
:mod:`fairspark._isolation`; the status file and the exit code of an exception in
:mod:`fairspark._run_status` (importable from here too); what ``summary.json`` says
about the run in :mod:`fairspark._run_summary`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fairspark._isolation import _failed, _render, _run_with_budget
from fairspark._run_status import _record_end, exit_code_for, write_status
from fairspark._run_summary import (
    OTHER_STAGE,
    RunFacts,
    _add_facts,
    _AuditsDone,
    _stage,
    _summary,
    time_between_stages,
)
from fairspark._testing import fault_point
from fairspark._version import SCHEMA_VERSION, __version__
from fairspark.audits.base import AuditContext, MetricRow, ReportSection
from fairspark.errors import (
    ConfigError,
    FairsparkInputError,
    RunLockedError,
    input_read_error,
)
from fairspark.io import read_input
from fairspark.numbers import fmt_fixed
from fairspark.outputs import (
    OutputLocation,
    OutputWriteError,
    check_no_overlap,
    one_line,
    to_long_rows,
)
from fairspark.prepare import prepare
from fairspark.registry import broken
from fairspark.run_summary import PreviousRun, RunSummary
from fairspark.scoring import ModelScoring, require_mlflow, resolve_models
from fairspark.status import FAILED_STATUSES, ExitCode

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from fairspark.audits.prepared import PreparedData
    from fairspark.audits.spec import AuditSpec
    from fairspark.config import Config
    from fairspark.nightly.history import PastRuns
    from fairspark.nightly.window import WindowRun

__all__ = [
    "EXIT_AUDIT_FAILED", "EXIT_CRASH", "EXIT_INPUT", "EXIT_OK", "EXIT_VIOLATION", "ComputedRun",
    "RunResult", "compute_run", "exit_code_for", "run_audit_job", "write_status",
]

log = logging.getLogger("fairspark")

EXIT_OK, EXIT_CRASH, EXIT_INPUT, EXIT_VIOLATION, EXIT_AUDIT_FAILED = (
    ExitCode.OK, ExitCode.CRASH, ExitCode.INPUT, ExitCode.VIOLATION, ExitCode.AUDIT_FAILED)

class RunResult:
    """What a run produced: exit code, output folder, rows and summary
    (``run_summary``, a :class:`~fairspark.run_summary.RunSummary`; ``summary`` is
    the content of ``summary.json`` as a dict)."""

    def __init__(self, exit_code: int, output_dir: str | None, rows: list[dict[str, Any]],
                 run_summary: RunSummary):
        self.exit_code = exit_code
        self.output_dir = output_dir
        self.rows = rows
        self.run_summary = run_summary

    @property
    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json`` (:meth:`RunSummary.to_json`; a new dict)."""
        return self.run_summary.to_json()


def _run_audits(ctx: AuditContext, config: Config, timings: dict[str, float], *,
                render: bool = True, window: WindowRun | None = None) -> _AuditsDone:
    """Run every enabled audit in isolation, each with a fresh context.

    With ``render`` false (no HTML report is written) no section is drawn. With a
    ``window``, an audit audits the prepared table the window gives it (the merged
    sample, the newest partition), or fails with the window's reason.
    """
    done = _AuditsDone()
    with _stage("load audits", timings):
        _import_audits(config)
    for name, params in config.audits.enabled().items():
        spec = config.audits.audit_spec(name)
        t0 = time.perf_counter()
        actx = dataclasses.replace(ctx)
        if window is not None and name in window.for_audit:
            actx = dataclasses.replace(ctx, prepared=window.for_audit[name])
        with _stage(f"audit {name}", timings):
            if window is not None and name in window.failed:
                outcome, info = _failed(name, window.failed[name])
            else:
                outcome, info = _run_with_budget(spec, actx, params)
        info["seconds"] = round(time.perf_counter() - t0, 3)
        info["params"] = params.flat_dump()
        if render:  # drawn once the limits are judged (_render_sections)
            done.pending.append((name, spec, outcome, actx, params))
        done.info[name] = info
        done.rows += outcome.rows
    for plugin in broken():  # an audit plugin that could not be loaded fails alone
        if plugin.name not in config.audits.broken_plugins():
            continue  # a config read against other specs does not know it
        outcome, info = _failed(plugin.name, plugin.message())
        done.info[plugin.name] = info
        done.rows += outcome.rows
    return done


def _render_sections(done: _AuditsDone) -> None:
    """Draw the audits' report sections, after the limits are judged: each renderer's
    context carries the run's limit rows (``AuditContext.limit_rows``), so a chart
    beside a verdict draws the interval that verdict uses (the adjusted one)."""
    checks = tuple(dict(r.__dict__) for r in done.rows if r.audit == "limits")
    for name, spec, outcome, actx, params in done.pending:
        # done.info[name], not a dict kept earlier: the redaction replaces those
        done.sections += _render(spec, outcome, dataclasses.replace(actx, limit_rows=checks),
                                 params, done.info[name])
    done.pending.clear()


def _import_audits(config: Config) -> None:
    """Import every enabled audit's module before the first audit's clock starts.

    mdfa's imports torch: 6-13 s on a busy 2-core machine, which its 0.5 s budget
    paid for. An import that fails is left to the audit's own run (it fails alone).
    """
    for name in config.audits.enabled():
        with contextlib.suppress(Exception):
            config.audits.audit_spec(name).run_fn()


@contextlib.contextmanager
def _input_errors(config: Config) -> Iterator[None]:
    """Turn Spark's "cannot read this file" errors into an input error (exit 2)."""
    try:
        yield
    except FairsparkInputError:
        raise
    except Exception as err:
        mapped = input_read_error(err, source=config.input.path or str(config.input.table))
        if mapped is None:
            raise
        raise mapped from None


def _scrub_redacted(done: _AuditsDone, prepared: PreparedData, config: Config) -> None:
    """The one redaction layer every audit passes through.

    Audits leave redacted columns out of what they show (``ctx.redacted()``); on top of
    that, the encoded names of a redacted categorical column (``col=value``) are
    replaced by ``col=<redacted>`` in every row's text, every summary entry and every
    section, so no value of a redacted column reaches an output by way of a feature
    name.
    """
    built = prepared._features[1] if prepared._features is not None else []
    names = sorted({n for n in built if "=" in n and n.split("=", 1)[0] in
                    set(config.redact_columns)}, key=len, reverse=True)
    if not names:
        return

    def clean(text: str) -> str:
        for n in names:
            text = text.replace(n, n.split("=", 1)[0] + "=<redacted>")
        return text

    done.rows[:] = [dataclasses.replace(r, detail=clean(r.detail) if r.detail else r.detail,
                                        params=clean(r.params) if r.params else r.params)
                    for r in done.rows]
    done.info.update(json.loads(clean(json.dumps(done.info, default=str))))
    done.sections[:] = [dataclasses.replace(sec, html=clean(sec.html)) for sec in done.sections]


def _scrub_all(done: _AuditsDone, prepared: PreparedData, window: WindowRun | None,
               config: Config) -> None:
    """:func:`_scrub_redacted` over every prepared table of the run (the window's too)."""
    for p in {id(p): p for p in [prepared, *(window.for_audit.values()
                                             if window else [])]}.values():
        _scrub_redacted(done, p, config)


def _feature_tables(prepared: PreparedData, window: WindowRun | None,
                    readers: list[str]) -> list[PreparedData]:
    """The prepared tables whose features the audits in ``readers`` read (once each)."""
    if window is None:
        return [prepared]
    tables = {id(t): t for n in readers if (t := window.for_audit.get(n)) is not None}
    return list(tables.values())


def _check_before_run(config: Config) -> tuple[Config, ModelScoring]:
    """The config checks of :func:`~fairspark.config.load_config`, for runs built in code;
    then the registered models (``columns.*.model_uri``) looked up, no Spark job run:
    the config with their decision columns, and the scoring that adds them."""
    config.check_attributes()
    config.check_limits()
    config.check_window()
    for params in config.audits.present().values():
        params.check_files()
    require_mlflow(config)  # a model URI or output.mlflow without MLflow: exit 2 now
    return resolve_models(config)


def _limits(config: Config, rows: list[MetricRow], facts: RunFacts, history: Any,
            sections: list[ReportSection], *, fail: bool) -> tuple[dict[str, Any], bool]:
    """Judge the configured limits; add their rows and section; return (summary, would gate).

    ``fail`` is whether failing on a violation is on; the summary's ``gates`` is true
    only when a check would gate and ``fail`` is on (``fairspark.nightly.gating``).
    """
    if not config.limits.rules:
        return {}, False
    from fairspark.nightly.gating import evaluate_limits, limits_summary
    from fairspark.report.limits import limits_section

    long_now = _long(rows, config, facts)
    checks, limit_rows, unmatched = evaluate_limits(long_now, limits=config.limits,
                                                    specs=config.audits.audit_specs(),
                                                    history=history)
    rows += limit_rows
    sections.append(limits_section(checks, [r.__dict__ for r in limit_rows], unmatched,
                                   specs=config.audits.audit_specs(), limits=config.limits,
                                   fail_on_violation=fail))
    info = limits_summary(checks, unmatched, limits=config.limits, fail_on_violation=fail)
    return info, bool(info["would_gate"])


def _long(rows: list[MetricRow], config: Config, facts: RunFacts) -> list[dict[str, Any]]:
    return to_long_rows(
        rows, run_date=facts.run_date, dataset=config.dataset, config_hash=facts.config_hash,
        version=__version__, schema_version=SCHEMA_VERSION,
    )


def _exit_code(done: _AuditsDone, *, gating: bool, fail: bool) -> ExitCode:
    if any(i["status"] in FAILED_STATUSES for i in done.info.values()):
        return ExitCode.AUDIT_FAILED
    return ExitCode.VIOLATION if gating and fail else ExitCode.OK


def _trend_section(config: Config, history: Any, long_rows: list[dict[str, Any]],
                   facts: RunFacts, *, schema_hash: str | None = None) -> ReportSection | None:
    """Trends over the earlier runs; "no previous runs" when there are none.

    ``history=None`` (a run in memory, e.g. the notebook) and ``output.trend_runs: 0``
    give no section at all.
    """
    if history is None or config.output.trend_runs == 0:
        return None
    try:
        from fairspark.report.trends import no_history_section, trend_frame, trend_section

        if not len(history):
            return no_history_section(config_hash=facts.config_hash)
        frame = trend_frame(history, long_rows, run_date=facts.run_date.isoformat(),
                            config_hash=facts.config_hash, version=__version__,
                            specs=config.audits.audit_specs(), schema_hash=schema_hash)
        return trend_section(frame, specs=config.audits.audit_specs(),
                             rules=list(config.limits.rules))
    except Exception as err:  # noqa: BLE001 - a trend plot must not lose tonight's numbers
        log.warning("trend section could not be rendered: %s", err)
        return None


def _check_schema(config: Config, prepared: PreparedData,
                  previous: dict[str, Any] | None) -> None:
    """With ``preparation.on_schema_change: fail``, raise when the schema changed.

    Runs before any audit, on the columns, their types and (when an enabled audit
    reads the features, which are then encoded already) the encoded dimension.
    """
    from fairspark.nightly.history import SchemaChangedError, describe_schema_change, schema_change

    if config.preparation.on_schema_change != "fail" or not previous:
        return
    change = schema_change(previous.get("input_schema"), prepared.input_schema(),
                           previous_run_date=previous.get("run_date"))
    if change is not None:
        raise SchemaChangedError(
            f"{describe_schema_change(change)} (config key 'preparation.on_schema_change' is "
            "'fail'; set it to 'warn' to run and report the change, or fix the upstream table)")


def _schema_info(prepared: PreparedData, previous: dict[str, Any] | None) -> dict[str, Any]:
    """``input_schema`` (with its hash) and, when it changed, ``schema_change`` for the summary.

    A change is logged and added to the run's warnings; the trends do not compare
    across it (the history rows carry each run's schema hash).
    """
    from fairspark.nightly.history import describe_schema_change, schema_change, schema_hash

    schema = prepared.input_schema()
    schema["hash"] = schema_hash(schema)
    info: dict[str, Any] = {"input_schema": schema}
    if not previous:
        return info
    change = schema_change(previous.get("input_schema"), schema,
                           previous_run_date=previous.get("run_date"))
    if change is not None:
        text = describe_schema_change(change)
        log.warning("%s", text)
        prepared.warnings.append(text)
        info["schema_change"] = {**change, "action": "warn", "message": text}
    return info


def _publish(out: OutputLocation, config: Config, run_date: Any, summary: RunSummary,
             long_rows: list[dict[str, Any]], sections: list[ReportSection], *,
             started: float | None = None) -> str:
    """Write the run to a staging folder and publish it for the date.

    The metrics and report writes are timed into ``summary.stage_timings`` before
    ``summary.json`` is written, so the summary carries them; with ``started`` (the
    process's start) so does :data:`OTHER_STAGE`, the time between the stages so far.
    """
    staging = out.staging(run_date)
    timings = summary.stage_timings
    try:
        with _stage("write: metrics", timings):
            out.write_metrics(staging, long_rows)
        if config.output.report:
            with _stage("write: report", timings):
                _write_report(out, staging, summary, long_rows, sections,
                              specs=config.audits.audit_specs())
        if config.output.table:  # part of the publish: a failing write publishes nothing
            with _stage("write: table", timings):
                _write_table(out, config.output.table, staging, run_date)
        if started is not None:  # its lines then sum to the process's time until now
            timings[OTHER_STAGE] = time_between_stages(timings, started)
        out.write_text(f"{staging}/summary.json", summary.to_text())
        return out.publish(staging, run_date)
    except BaseException:
        with contextlib.suppress(Exception):
            out.discard(staging)
        raise


def _write_table(out: OutputLocation, table: str, staging: str, run_date: Any) -> None:
    """The staged rows of ``run_date`` into the metastore table ``table`` (before the
    date is published); a failure is an :class:`OutputWriteError` naming the table."""
    from fairspark.nightly.warehouse import append_to_table

    try:
        append_to_table(out.spark, table=table, folder=staging, run_date=run_date)
    except Exception as err:
        raise OutputWriteError(
            f"cannot write the rows of {run_date} to the metastore table {table!r} "
            f"('output.table'): {one_line(err)}; nothing was published, an earlier run of "
            "the date is intact") from err


@dataclass
class ComputedRun:
    """A run's results in memory, before anything is written (see :func:`compute_run`)."""

    exit_code: ExitCode
    long_rows: list[dict[str, Any]]
    run_summary: RunSummary
    sections: list[ReportSection]

    @property
    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json`` (:meth:`RunSummary.to_json`; a new dict)."""
        return self.run_summary.to_json()


def _prepare_input(spark: SparkSession, config: Config, *, df: Any,
                   timings: dict[str, float], scoring: Any = None) -> tuple[Any, Any]:
    """Read and prepare the input (``df``, or ``config.input``; a window's partitions
    when ``config.window`` is set): ``(prepared, window)``, the window None without one.
    ``config.input`` is read in fewer tasks when the driver's heap holds fewer
    (:func:`_heap_preflight`, checked before any Spark job)."""
    read_tasks = _heap_preflight(spark, config, df=df, scoring=scoring)
    fault_point("input:read")
    window = None
    if config.window is not None:
        if df is not None:
            raise ConfigError("config key 'window' reads its partitions from 'input.path'; "
                              "a table passed in code cannot be audited with a window")
        from fairspark.nightly.window import prepare_window

        with _input_errors(config), _stage("prepare", timings):
            window = prepare_window(spark, config, timings=timings)
        prepared = window.prepared
    else:
        if df is None:
            with _input_errors(config), _stage("read", timings):
                df = read_input(spark, input_config=config.input)
            if read_tasks is not None:
                df = df.coalesce(read_tasks)
        if scoring is not None:  # registered models score the table in the same scan
            df = scoring.apply(spark, df)
        with _input_errors(config), _stage("prepare", timings):
            # a registered model's scores are computed in the scan: its one reader
            # would score the table again in every job of its own, so the cache stays
            prepared = prepare(df, config=config,
                               persist_features=bool(getattr(scoring, "models", None)) or None)
    for step, seconds in prepared.timings.items():  # the steps inside "prepare"
        timings[f"prepare: {step}"] = seconds
        log.info("stage   %-28s %7s s", f"prepare: {step}", fmt_fixed(seconds, 2))
    return prepared, window


def _read_columns(config: Config, scoring: Any) -> tuple[list[str] | None, list[str]]:
    """(columns, excluded) the preparation's scan reads: every feature (a null one drops
    the row) beside the role columns. ``columns`` is ``None`` for every column but
    ``excluded``: with ``columns.features: all_others``, and (nothing excluded) when a
    registered model, a ``privileged_expr`` or ``input.where`` may read any column."""
    c = config.columns
    if (getattr(scoring, "models", None) or config.input.where
            or any(s.privileged_expr is not None for s in c.sensitive)):
        return None, []
    if c.features == "all_others":
        return None, list(c.exclude)
    decisions = [d for d in (c.prediction, c.score, c.baseline) if d is not None]
    if any(getattr(d, "column", None) is None for d in decisions):
        return None, []
    return [*(s.column for s in c.sensitive), c.label.column, *c.features,
            *(d.column for d in decisions), *(x for x in (c.weight, c.row_key) if x)], []


def _heap_preflight(spark: SparkSession, config: Config, *, df: Any,
                    scoring: Any = None) -> int | None:
    """Check the driver's heap before the preparation's scan (:mod:`fairspark._memory`).

    Returns ``None`` when the scan fits (or is not checked: only a classic ``local[n]``
    session reading local Parquet files is), else the number of tasks that may read at
    once (fewer than the task slots; the input is then read in that many tasks).

    Raises
    ------
    ConfigError
        Not even one task's row group fits the heap (exit 2, before any output).
    """
    from fairspark._memory import read_check

    path = config.input.path
    if df is not None or config.window is not None or not path or config.input.format != "parquet":
        return None
    columns, excluded = _read_columns(config, scoring)
    check = read_check(spark, path=path, columns=columns, exclude=excluded)
    if check is None or check.tasks_that_fit >= check.tasks:
        return None
    if check.tasks_that_fit == 0:
        raise ConfigError(f"config key 'spark.conf.spark.driver.memory': {check.reason()}")
    log.warning("%s; reading it in %d task(s) instead (slower, the same rows)",
                check.reason(), check.tasks_that_fit)
    return check.tasks_that_fit


def _encode_features(config: Config, prepared: Any, window: Any,
                     timings: dict[str, float]) -> None:
    """Encode the features once for every audit that reads them, before the schema check
    and the audits; a window encodes what its audits audit. When several audits read
    them the prepared rows are persisted here (each read encodes them), outside any
    audit's time budget; a single reader computes the encoding in its own jobs (its
    stage and budget include it, and this stage only finds the entries' names)."""
    readers = config.audits.feature_readers()
    if readers:
        with _input_errors(config), _stage("encode features", timings):
            for p in _feature_tables(prepared, window, readers):
                _ = p.feature_names


def compute_run(
    spark: SparkSession,
    config: Config,
    *,
    df: Any = None,
    past: PastRuns | None = None,
    fail_on_violation: bool | None = None,
    timings: dict[str, float] | None = None,
    render: bool = True,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
) -> ComputedRun:
    """Prepare, run every enabled audit, judge the limits: everything but the writing.

    The CLI (:func:`run_audit_job`) and the notebook API (``fairspark.audit``) share it.

    Parameters
    ----------
    df:
        The scored table; ``None`` reads ``config.input``.
    past:
        The runs published before this one
        (:func:`fairspark.nightly.history.read_past_runs`): their long rows (limits'
        persistence, trends; an empty frame means there are none and the trends
        section says "no previous runs") and the previous run's input schema, which
        tonight's resolved schema is compared with (``summary.json`` ``schema_change``;
        with ``preparation.on_schema_change: fail`` a change raises before any audit
        runs). ``None``: a run without an output history (no trends section).
    fail_on_violation:
        Overrides ``limits.fail_on_violation``.
    timings:
        Stage timings are added here.
    render:
        Draw the audits' report sections (the CLI skips them when
        ``output.report`` is false: nothing would show them).
    progress:
        Called with (audit, progress dict) by long audit stages
        (:class:`fairspark.progress.Progress`); the CLI writes it into the running
        status file.
    """
    import pandas as pd

    timings = {} if timings is None else timings
    have_history = past is not None
    history = past.history if past is not None else pd.DataFrame()
    previous_schema = past.schema if past is not None else None
    config = config.pinned()
    facts = RunFacts(run_date=config.effective_run_date(), config_hash=config.config_hash(),
                     started=time.time())
    config, scoring = _check_before_run(config)
    prepared, window = _prepare_input(spark, config, df=df, timings=timings, scoring=scoring)
    try:
        _encode_features(config, prepared, window, timings)
        _check_schema(config, prepared, previous_schema)
        ctx = AuditContext(spark=spark, prepared=prepared, config=config, run_date=facts.run_date,
                           progress=progress)
        done = _run_audits(ctx, config, timings, render=render, window=window)
        with _stage("limits and report", timings):  # judged, drawn, summed up
            schema_info = _schema_info(prepared, previous_schema)
            _scrub_all(done, prepared, window, config)
            fail = (config.limits.fail_on_violation if fail_on_violation is None
                    else fail_on_violation)
            limits_info, gating = _limits(config, done.rows, facts, history, done.sections,
                                          fail=fail)
            _render_sections(done)
            _scrub_all(done, prepared, window, config)  # the sections drawn just now too
            exit_code = _exit_code(done, gating=gating, fail=fail)
            long_rows = _long(done.rows, config, facts)
            trend = _trend_section(config, history if have_history else None, long_rows,
                                   facts, schema_hash=schema_info["input_schema"]["hash"])
            if trend is not None:
                done.sections.append(trend)
            summary = _summary(spark, config, prepared, facts=facts, done=done,
                               limits_info=limits_info, exit_code=exit_code, timings=timings)
            _add_facts(summary, schema_info, scoring.annotate(long_rows), window)
    finally:
        if window is not None:
            window.unpersist()
        else:
            prepared.unpersist()
    return ComputedRun(exit_code, long_rows, summary, done.sections)


def run_audit_job(
    spark: SparkSession, config: Config, *, fail_on_violation: bool | None = None,
    timings: dict[str, float] | None = None,
    started: float | None = None,
) -> RunResult:
    """Run the configured audits on the configured input and publish the outputs.

    Run-level input errors (:class:`~fairspark.errors.FairsparkInputError`) are
    raised before anything is written; the caller maps them to exit code 2.

    Parameters
    ----------
    fail_on_violation:
        Overrides ``limits.fail_on_violation`` (``--no-fail-on-violation``): when
        false a violated limit is reported but the exit code stays 0.
    timings:
        The stage table so far (the CLI's ``session start``); the run's stages are
        added after it, and ``summary.json`` ``stage_timings`` holds them all.
    started:
        ``time.perf_counter()`` at the process's start (the CLI's): ``summary.json``
        then has an ``other`` line, the time between the stages, and its lines sum to
        the process's wall time until it is written.

    Returns
    -------
    RunResult
        ``exit_code`` is 0, 3 (a limit gates) or 4 (some audit failed or timed out).
    """
    timings = {} if timings is None else timings
    config = config.pinned()  # one run date for the lock, the folder, the rows and status
    run_date = config.effective_run_date()
    run_id = uuid.uuid4().hex[:16]
    _check_before_run(config)
    # the outputs never land in the input (nor a rerun's clean-up in the input)
    check_no_overlap(config.output.path, {"input.path": config.input.path or ""})
    out = OutputLocation(spark, config.output.path)
    out.check_writable()  # a file or a read-only folder: exit 2 before the input is read
    if config.output.table:  # a name or database that cannot be written: exit 2 now
        from fairspark.nightly.warehouse import check_table

        check_table(spark, config.output.table)
    try:
        return _locked_run(spark, config, out, run_date, run_id, timings,
                           fail_on_violation=fail_on_violation, started=started)
    except BaseException as err:
        # a signal or an error while the lock was taken (before the run's own handler)
        if not getattr(err, "fairspark_status_written", False) and not isinstance(
                err, RunLockedError):
            _record_end(out, run_date, run_id, err)
        raise


def _locked_run(spark: SparkSession, config: Config, out: OutputLocation, run_date: Any,
                run_id: str, timings: dict[str, float], *,
                fail_on_violation: bool | None, started: float | None) -> RunResult:
    """The body of :func:`run_audit_job` that holds the date's lock."""
    with out.lock(run_date, run_id=run_id, stale_after_s=config.output.lock_stale_s):
        for line in out.recover(run_date):
            log.warning("recovered from an earlier killed run: %s", line)
        write_status(out, run_date, exit_code=None, run_id=run_id)
        try:
            from fairspark.nightly.history import read_past_runs
            from fairspark.report.decision import decision_items

            # the runs published before this one, read once: trends, persistence, the
            # schema check and the change column all read this
            past = read_past_runs(out, before=run_date, trend_runs=config.output.trend_runs,
                                  limits=bool(config.limits.rules),
                                  specs=config.audits.audit_specs(), items=decision_items,
                                  timings=timings)

            def running(audit: str, state: dict[str, Any]) -> None:
                write_status(out, run_date, exit_code=None, run_id=run_id,
                             progress={"audit": audit, **state})

            run = compute_run(spark, config, past=past, fail_on_violation=fail_on_violation,
                              timings=timings, render=config.output.report, progress=running)
            run.run_summary.run_id = run_id
            run.run_summary.previous = (PreviousRun.from_json(past.previous)
                                        if past.previous is not None else None)
            with _stage("write", timings):
                try:
                    final = _publish(out, config, run_date, run.run_summary, run.long_rows,
                                     run.sections, started=started)
                except OutputWriteError:
                    raise
                except Exception as err:  # a full disk, a lost permission: one line
                    raise OutputWriteError(
                        f"cannot write the outputs of {run_date} under {out.base}: "
                        f"{one_line(err)}; nothing was published, an earlier run of the "
                        "date is intact") from err
        except BaseException as err:
            _record_end(out, run_date, run_id, err)
            raise
    # the whole write stage (summary.json and the publish included) is timed in the
    # log only: summary.json is already published at this point. Its metrics, report
    # and table writes are in summary.json as "write: metrics" / "write: report" /
    # "write: table".
    if config.output.mlflow is not None:  # never changes the exit code; a failure is a note
        from fairspark.tracking import log_published_run

        with _stage("mlflow", timings):
            run.run_summary.mlflow = log_published_run(
                out, config.output.mlflow, final, summary=run.run_summary,
                long_rows=run.long_rows)
    write_status(out, run_date, exit_code=run.exit_code, summary=run.run_summary, run_id=run_id)
    log.info("outputs published to %s (exit code %d)", final, run.exit_code)
    return RunResult(int(run.exit_code), final, run.long_rows, run.run_summary)


def _write_report(out: OutputLocation, staging: str, summary: RunSummary,
                  long_rows: list[dict[str, Any]], sections: list[ReportSection], *,
                  specs: Mapping[str, AuditSpec]) -> None:
    from fairspark.report.render import render_report_html

    html = render_report_html(summary=summary, rows=long_rows, sections=sections, specs=specs)
    out.write_text(f"{staging}/report.html", html)
