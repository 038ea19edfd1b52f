"""What a run's ``summary.json`` says about the run itself.

:class:`RunFacts` (the date, config hash and start time a run resolves once),
:class:`_AuditsDone` (the rows, sections and summary entries of the audits that ran),
and :func:`_summary`, which assembles the run's
:class:`~fairspark.run_summary.RunSummary`: the input, the rows, the seeds, each
audit's entry, the limits, the exit code, the stage timings, the versions
(:func:`_versions`), the Spark session (:func:`_spark_facts`), and once for the run
its interval level and the model's performance line.
:mod:`fairspark.runner` builds it; both classes are importable from there too.
The stage table's clock is here as well: :func:`_stage` (a line of the log and of
``stage_timings``), :func:`record_stage` and :func:`time_between_stages` (the
``other`` line, so that the lines sum to the process's wall time).
"""

from __future__ import annotations

import contextlib
import logging
import platform
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairspark._version import SCHEMA_VERSION, __version__
from fairspark.audits.base import MetricRow, ReportSection
from fairspark.numbers import fmt_fixed, fmt_setting
from fairspark.run_summary import (
    AuditEntry,
    InputFacts,
    LimitsFacts,
    ModelCard,
    RowCounts,
    RunSummary,
    run_level,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from fairspark.audits.prepared import PreparedData
    from fairspark.config import Config


log = logging.getLogger("fairspark")

#: the stage line of the time between the named stages (the run's checks, its lock)
OTHER_STAGE = "other"


@contextlib.contextmanager
def _stage(name: str, timings: dict[str, float]) -> Iterator[None]:
    """Time the block into ``timings[name]`` and log its line of the stage table (a
    name ``a: b`` is a part of stage ``a``)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        record_stage(name, time.perf_counter() - t0, timings)


def record_stage(name: str, seconds: float, timings: dict[str, float]) -> None:
    """``timings[name]`` and the log's line of the stage table for a stage timed
    elsewhere (the process's start-up, the time between the stages)."""
    timings[name] = round(seconds, 3)
    log.info("stage %-30s %7s s", name, fmt_fixed(seconds, 2))


def time_between_stages(timings: Mapping[str, float], started: float) -> float:
    """Seconds since ``started`` (a ``time.perf_counter()``) on no line of ``timings``
    (not counting :data:`OTHER_STAGE`'s own): a line ``a: b`` is a part of ``a``,
    unless ``a`` is still running (has no line yet)."""
    top = {k for k in timings if ": " not in k}
    return round(max(time.perf_counter() - started - sum(
        v for k, v in timings.items() if k != OTHER_STAGE
        and (": " not in k or k.split(": ")[0] not in top)), 0.0), 3)


@dataclass(frozen=True)
class RunFacts:
    """What a run resolves once and every part of it reads: its date, config hash and
    start time (``time.time()``)."""

    run_date: Any
    config_hash: str
    started: float = 0.0


@dataclass
class _AuditsDone:
    """The rows, sections and ``summary.json`` entries of every audit that ran."""

    rows: list[MetricRow] = field(default_factory=list)
    sections: list[ReportSection] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    #: (name, spec, outcome, context, params) of each audit whose section is drawn once
    #: the limits are judged (``fairspark.runner._render_sections``)
    pending: list[tuple[Any, ...]] = field(default_factory=list)


def _summary(spark: SparkSession, config: Config, prepared: PreparedData, *,
             facts: RunFacts, done: _AuditsDone, limits_info: dict[str, Any],
             exit_code: int, timings: dict[str, float]) -> RunSummary:
    """The run's :class:`~fairspark.run_summary.RunSummary`, assembled once: its
    interval level and the model's performance line are chosen here
    (:func:`~fairspark.run_summary.run_level`), not by whichever audit a reader finds
    first. ``stage_timings`` is ``timings`` itself (the writes still to come add to it)."""
    audits = {name: AuditEntry.from_json(info) for name, info in done.info.items()}
    level, performance = run_level(audits)
    summary = RunSummary(
        run_date=facts.run_date.isoformat(),
        dataset=config.dataset,
        config_hash=facts.config_hash,
        started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(facts.started)),
        versions=_versions(spark),
        input=_input_facts(config, prepared),
        rows=RowCounts.from_json(prepared.summary()),
        seeds={"seed": config.seed},
        model=(ModelCard.from_json(config.model.model_dump(exclude_none=True))
               if getattr(config, "model", None) is not None else None),
        audits=audits,
        warnings=list(prepared.warnings) if prepared.warnings else None,
        limits=LimitsFacts.from_json(limits_info) if limits_info else None,
        exit_code=int(exit_code),
        spark=_spark_facts(spark, remote=config.spark.remote),
        command=" ".join(sys.argv),
        interval_level=level,
        performance=performance,
    )
    summary.stage_timings = timings
    return summary


def _add_facts(summary: RunSummary, schema_info: dict[str, Any], models: dict[str, Any],
               window: Any) -> None:
    """Add what the run learns after its audits: the input's schema (and its change since
    the previous run), the registered models and the window (a
    ``fairspark.nightly.window.WindowRun`` or ``None``; typed loosely, the nightly layer
    sits above this one)."""
    summary.input_schema = schema_info["input_schema"]
    summary.schema_change = schema_info.get("schema_change")
    summary.registered_models = models.get("registered_models")
    if window is not None:
        summary.window = window.info


def _input_facts(config: Config, prepared: PreparedData) -> InputFacts:
    """``input``: the source, the label and decision columns, and their favourable
    values as they are in the data (for the report's first screen)."""
    cols = config.columns
    facts = InputFacts(
        path=config.input.path, table=config.input.table, format=config.input.format,
        where=config.input.where, label=prepared.label_column,
        decision=prepared.decision_column, favourable=cols.favourable,
        label_positive=list(cols.label.positive))
    if cols.prediction is not None:
        facts.decision_positive = list(cols.prediction.positive)
    elif cols.score is not None:
        # the model card: the score audited and the threshold that decides
        facts.decision_rule = f"{cols.score.column} >= {fmt_setting(cols.score.threshold)}"
        facts.score = cols.score.column
        facts.threshold = float(cols.score.threshold)
    return facts


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


def _spark_facts(spark: SparkSession, *, remote: str | None = None) -> dict[str, Any]:
    """Master, application id and the driver's memory: what was set, by whom, what the
    JVM got (a local session the CLI started is sized from the machine, so the
    driver's memory is reported rather than assumed).

    A Spark Connect session (:func:`fairspark.session.is_connect`) has no
    ``SparkContext`` and no JVM in this process: its facts are what the server reports
    through ``spark.conf`` (master, application id, driver memory when set), the
    server's host and the configured URL (``remote``, its token redacted); the
    driver's heap is the server's and not known here (``None``).
    """
    from fairspark.session import is_connect

    if is_connect(spark):
        return _connect_facts(spark, remote)
    from fairspark._memory import driver_max_heap

    conf = spark.sparkContext.getConf()
    source = conf.get("spark.fairspark.driverMemorySource", None)
    memory = conf.get("spark.driver.memory", None)
    heap = driver_max_heap(spark)
    return {
        "session": "classic",
        "master": spark.sparkContext.master, "app_id": spark.sparkContext.applicationId,
        "driver_memory": memory,
        "driver_memory_set_by": source or ("config or spark-submit" if memory else
                                           "Spark's default (1g)"),
        "driver_max_heap_bytes": int(heap) if heap != float("inf") else None,
    }


def _connect_facts(spark: SparkSession, remote: str | None) -> dict[str, Any]:
    from pyspark.errors import PySparkException

    from fairspark.session import redact_remote

    def conf(key: str) -> str | None:
        try:  # a managed server (Databricks) may refuse to show a setting
            return spark.conf.get(key, None)
        except PySparkException:
            return None

    memory = conf("spark.driver.memory")
    source = conf("spark.fairspark.driverMemorySource")  # pyspark's local server: the CLI's
    return {
        "session": "connect",
        "remote": redact_remote(remote) if remote else None,
        "server_host": spark.client.host,
        "master": conf("spark.master"), "app_id": conf("spark.app.id"),
        "driver_memory": memory,
        "driver_memory_set_by": source or ("the Connect server" if memory else
                                           "the Connect server (not reported)"),
        "driver_max_heap_bytes": None,
    }
