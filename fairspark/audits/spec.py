"""The audit contract's one description of an audit: :class:`AuditSpec`.

Each audit package has a ``spec.py`` with one ``SPEC``; the config, the runner, the
report, the decision box, the trends, the previous-run read and gating read
everything they need about an audit from it (see ``fairspark.registry``). A
spec module imports only the params model and small, light modules; the audit's
heavy modules (torch, scikit-learn, matplotlib) are imported by its entry points on
first use, so a broken method cannot stop the others from loading.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fairspark._params import AuditParams

__all__ = ["WINDOW_READS", "AuditSpec", "DecisionInput", "WindowRead"]

#: what an audit can read under a window (see ``AuditSpec.window_reads``)
WindowRead = Literal["cells", "sample", "newest"]
WINDOW_READS: tuple[str, ...] = ("cells", "sample", "newest")


@dataclass(frozen=True)
class DecisionInput:
    """What an audit's decision-line function reads (see ``AuditSpec.decision_lines``).

    Attributes
    ----------
    audit:
        The audit's name.
    rows:
        The run's long rows of this audit (as dicts: ``metrics.parquet`` or in memory).
    info:
        The audit's ``summary.json`` entry (``summary["audits"][audit]``; may be empty).
    anchor:
        The id of its report section (for "look at next" links), or ``None``.
    covered:
        Attributes that a limit on this audit already has a decision line for.
    limits:
        The run's ``limits`` rows that judge this audit's rows (``params['source_audit']``
        is the audit): a line whose word a limit check decides reads it from them (the
        champion/challenger headline follows its ``no_worse_than_baseline`` check).
    """

    audit: str
    rows: list[Mapping[str, Any]]
    info: Mapping[str, Any]
    anchor: str | None
    covered: frozenset[str] = frozenset()
    limits: list[Mapping[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class AuditSpec:
    """What the config, the runner, the report, the trends and gating know about an audit.

    Attributes
    ----------
    name:
        The audit's name: its config section (``audits.<name>``) and the ``audit``
        column of its rows.
    params:
        Its pydantic params model (a subclass of ``AuditParams``).
    run:
        ``run(ctx, params) -> AuditOutcome``. It computes numbers only; report
        sections come from ``render``.
    render:
        ``render(outcome, *, ctx, params) -> list[ReportSection]``, called by the
        runner inside its own error isolation (a rendering error keeps the numbers
        and marks the section), or ``None`` for no section.
    headlines:
        ``headlines(rows, *, summary) -> list[str]``, the verdicts in words at the
        top of the report, or ``None``.
    decision_lines:
        ``decision_lines(DecisionInput) -> list[DecisionLine]``: the audit's lines of
        the report's decision box (``fairspark.report.decision``), or ``None`` for
        none. The previous run's rows of an audit with decision lines are read back
        so that each line says what changed since then.
    load:
        Imports the audit's modules (the runner calls it through :meth:`run_fn`
        before any audit's clock starts, so no time budget pays for an import).
    metrics:
        Every metric name the audit's rows can carry (the ``metric`` column); a limit
        on any other name is a config error.
    trend_metrics:
        The metrics whose trend over earlier runs the report shows (and that are read
        back from earlier runs for it).
    headline_metrics:
        The comparisons the audit's own report section ranks first (``()``: none).
    view_group:
        The ``group`` value of the rows the trends and the decision box read (the
        group audit's pooled ``unprivileged`` comparison); ``None``: every row.
    interval:
        What the ``lower``/``upper`` of its rows are, which says how a limit judges
        them: ``"confidence"`` (a confidence interval or band: two one-sided tests,
        corrected over the run's family) or ``"bounds"`` (certified bounds: violated
        when entirely outside, passed when entirely inside).
    limits_per_group:
        A limit without ``group`` is judged on every unprivileged value against the
        reference where the audit has those rows (the pooled row is an extra,
        non-gating view), instead of on every matching row.
    limit_hint:
        What to look at next for a limit check on this audit, with ``{attr}`` for the
        attribute (``None``: "the <name> section").
    worker_modules:
        Modules the Spark worker daemon imports before it forks workers (the modules
        of the audit's Spark tasks; ``fairspark._threads.preload_modules``).
    title:
        The report title of the audit.
    order:
        Position of its sections in the report (smaller first).
    enabled_by_default:
        Whether a config without the section runs it.
    reads_features:
        Whether the audit reads the feature columns (then preparation counts the
        distinct values of categorical features for their ``max_categories`` check).
    joins_by_key:
        Whether the audit joins rows by ``columns.row_key`` (then preparation refuses
        a repeated key; rows sharing one would be merged, and a window's states record
        that the key was checked).
    window_reads:
        What the audit reads under a ``window``, its default first: ``"cells"`` (the
        group cells merged over the window's partitions), ``"sample"`` (the window's
        merged hash-rank sample) or ``"newest"`` (the newest partition's rows). The
        others listed are what ``window.<name>`` may choose instead.
    decimals:
        The fewest decimals its rows' numbers are printed with, wherever they appear
        (more when rounding would put a value outside its printed interval); the
        registry hands them to the printer (``fairspark.audits.lines``) when it loads
        the audits.
    window_sample_param:
        The parameter of its section that sizes the window's merged sample when the
        audit reads it (the rows a rescan of the same table would audit).
    path_params:
        Parameters of its section that are paths, read relative to the config file
        (made absolute when the config is loaded from a file).
    compares_baseline:
        Whether the audit also audits the baseline decision (``columns.baseline``) and
        writes ``model = baseline`` and ``challenger_minus_baseline`` rows; the others
        are said to audit the challenger only.
    """

    name: str
    params: type[AuditParams]
    run: Callable[..., Any]
    title: str
    order: int
    render: Callable[..., Any] | None = None
    headlines: Callable[..., Any] | None = None
    decision_lines: Callable[[DecisionInput], list[Any]] | None = None
    load: Callable[[], Any] | None = None
    metrics: tuple[str, ...] = field(default_factory=tuple)
    trend_metrics: tuple[str, ...] = field(default_factory=tuple)
    headline_metrics: tuple[str, ...] = field(default_factory=tuple)
    view_group: str | None = None
    interval: Literal["confidence", "bounds"] = "confidence"
    limits_per_group: bool = False
    limit_hint: str | None = None
    worker_modules: tuple[str, ...] = field(default_factory=tuple)
    enabled_by_default: bool = False
    reads_features: bool = True
    joins_by_key: bool = False
    window_reads: tuple[WindowRead, ...] = ("cells",)
    decimals: int = 3
    window_sample_param: str = "sample_rows"
    path_params: tuple[str, ...] = field(default_factory=tuple)
    compares_baseline: bool = False

    def __post_init__(self) -> None:
        bad = [r for r in self.window_reads if r not in WINDOW_READS]
        if not self.window_reads or bad:
            raise ValueError(f"audit {self.name!r}: window_reads must list one or more of "
                             f"{', '.join(WINDOW_READS)}, got {self.window_reads!r}")

    def run_fn(self) -> Callable[..., Any]:
        """The audit's entry point, with its modules imported."""
        if self.load is not None:
            self.load()
        return self.run

    def render_fn(self) -> Callable[..., Any] | None:
        """The section renderer, or ``None``."""
        return self.render

    def headlines_fn(self) -> Callable[..., Any] | None:
        """The headline function, or ``None``."""
        return self.headlines

    def is_view_row(self, row: Mapping[str, Any]) -> bool:
        """Whether a row of this audit is one the trends and the decision box read."""
        return self.view_group is None or row.get("group") == self.view_group

    def is_trend_row(self, row: Mapping[str, Any]) -> bool:
        """Whether a row of this audit is one of its trend series."""
        return row.get("metric") in self.trend_metrics and self.is_view_row(row)

    def look_next(self, attr: str) -> str:
        """What to look at next for a limit check on this audit's ``attr``."""
        return (self.limit_hint.format(attr=attr) if self.limit_hint
                else f"the {self.name} section")
