"""The audit contract: what an audit receives and what it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairspark.errors import AuditError
from fairspark.sampling import derive_seed
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    import datetime as dt
    from collections.abc import Callable, Iterable

    from pyspark.sql import SparkSession

    from fairspark._params import AuditParams
    from fairspark.audits.prepared import AttributeInfo, PreparedData
    from fairspark.config_model import Config

__all__ = ["AuditContext", "AuditOutcome", "MetricRow", "ReportSection", "derive_seed"]


@dataclass
class MetricRow:
    """One long-format result row (the runner adds run and version columns)."""

    audit: str
    attribute: str
    metric: str
    value: float | None = None
    group: str | None = None
    metric_b: str | None = None
    model: str | None = None
    lower: float | None = None
    upper: float | None = None
    status: Status = Status.OK
    detail: str | None = None
    params: str | None = None


@dataclass
class ReportSection:
    """An HTML fragment for ``report.html`` (self-contained: only ``data:`` URIs)."""

    title: str
    html: str
    order: int = 100


@dataclass
class AuditOutcome:
    """What an audit returns: long rows, a nested summary and its typed result.

    ``result`` is whatever the audit's ``SPEC.render`` needs to draw its report
    section (the audit's own result type); the runner renders it in isolation and
    fills ``sections``. An audit does not render inside ``run``.
    """

    rows: list[MetricRow] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    sections: list[ReportSection] = field(default_factory=list)
    result: Any = None


@dataclass
class AuditContext:
    """Everything an audit may use. Audits never create a SparkSession.

    ``deadline`` (a :func:`time.monotonic` value) is set when the audit has a time
    budget; a long audit checks :meth:`time_left` between steps and hands its
    best result so far to :meth:`report_partial`, which the runner publishes as
    ``timed_out`` if the budget runs out.
    """

    spark: SparkSession
    prepared: PreparedData
    config: Config
    run_date: dt.date
    deadline: float | None = None
    partial: AuditOutcome | None = None
    cancelled: bool = False
    progress: Callable[[str, dict[str, Any]], None] | None = None
    #: the run's limit check rows (``audit = limits``, as dicts), set when the report
    #: sections are drawn, after the limits are judged: a chart beside a verdict draws
    #: the interval the verdict uses (empty while the audit runs)
    limit_rows: tuple[dict[str, Any], ...] = ()

    def seed_for(self, *parts: object) -> int:
        """A seed derived from the config's seed and the given labels."""
        return derive_seed(self.config.seed, *parts)

    def time_left(self) -> float:
        """Seconds left of the audit's budget (``inf`` without a budget)."""
        import time

        if self.cancelled:
            return 0.0
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def progress_sink(self, audit: str) -> Callable[[dict[str, Any]], None] | None:
        """Where an audit's :class:`~fairspark.progress.Progress` hands its updates
        (the run's running status), or None outside a job."""
        if self.progress is None:
            return None
        report = self.progress
        return lambda state: report(audit, state)

    def report_partial(self, outcome: AuditOutcome) -> None:
        """Record the best result so far (published as ``timed_out`` on a timeout)."""
        self.partial = outcome

    def attributes(self, params: AuditParams) -> list[AttributeInfo]:
        """The prepared sensitive views an audit looks at, in the prepared table's order.

        ``params.attributes`` names them (``None``: all). Unknown names are a config
        error when the config is loaded, so here they can only come from a config
        built around the validation; they raise :class:`AuditError`.
        """
        views = list(self.prepared.attributes)
        if params.attributes is None:
            return views
        by_name = {a.name: a for a in views}
        unknown = [n for n in params.attributes if n not in by_name]
        if unknown:
            raise AuditError(f"attributes {unknown} are not sensitive attributes "
                             f"(configured: {sorted(by_name)})")
        wanted = set(params.attributes)
        return [a for a in views if a.name in wanted]

    def redacted(self, extra: Iterable[str] = ()) -> set[str]:
        """Columns whose raw values must not appear in any output.

        The run-wide ``redact_columns`` plus an audit's own ``extra`` list.
        """
        return {*(getattr(self.config, "redact_columns", None) or []), *extra}
