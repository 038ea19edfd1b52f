"""A run's ``summary.json`` as typed data: :class:`RunSummary` and its parts.

The runner assembles a :class:`RunSummary` (``fairspark._run_summary``); the report's
first screen, the decision box, the trends, the nightly history and the CLI read its
attributes. ``summary.json`` is written by :meth:`RunSummary.to_text` and read back by
:meth:`RunSummary.from_text` (or :meth:`RunSummary.from_json` for a parsed mapping):
the one place the file's keys are named. A summary written by an earlier version reads
too: a key it lacks takes its default, a key this version does not know is kept in the
part's ``extra`` and written back as it was.

The interval level and the model's performance line are fields of the run
(:attr:`RunSummary.interval_level`, :attr:`RunSummary.performance`), chosen once by
:func:`run_level` where the run is assembled; an older file without them gets them
from its audits by the same rule.

This module imports nothing of the toolkit above the values layer, so every layer
(audits' headlines included) may read a :class:`RunSummary`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from fairspark._values import json_text
from fairspark.constants import DEFAULT_INTERVAL_LEVEL

__all__ = [
    "AttributeGroups",
    "AuditEntry",
    "InputFacts",
    "LimitsFacts",
    "ModelCard",
    "ModelLine",
    "PreviousRun",
    "RowCounts",
    "RunSummary",
    "as_run_summary",
    "run_level",
]

_P = TypeVar("_P", bound="_Part")


@dataclass
class _Part:
    """A mapping of ``summary.json`` as a dataclass: known keys are fields (in the
    file's order), unknown ones are kept in ``extra`` (written back after them).

    A field that is ``None`` is left out of the file unless ``_ALWAYS`` names it (a
    key every file has, ``null`` when unknown). A subclass names its nested parts in
    ``_NESTED`` (field -> part class) and its dicts of parts in ``_NESTED_MAP``.
    """

    _ALWAYS: ClassVar[frozenset[str]] = frozenset()
    _NESTED: ClassVar[dict[str, type[_Part]]] = {}
    _NESTED_MAP: ClassVar[dict[str, type[_Part]]] = {}

    @classmethod
    def from_json(cls: type[_P], data: Mapping[str, Any] | None) -> _P:
        """The part of a parsed ``summary.json`` mapping (``None``: every default)."""
        data = dict(data or {})
        known = {f.name for f in dataclasses.fields(cls) if f.name != "extra"}
        kw: dict[str, Any] = {}
        for name in known & data.keys():
            value = data[name]
            if name in cls._NESTED and isinstance(value, Mapping):
                value = cls._NESTED[name].from_json(value)
            elif name in cls._NESTED_MAP and isinstance(value, Mapping):
                part = cls._NESTED_MAP[name]
                value = {str(k): part.from_json(v if isinstance(v, Mapping) else {})
                         for k, v in value.items()}
            kw[name] = value
        kw["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**kw)

    def to_json(self) -> dict[str, Any]:
        """The part as ``summary.json`` holds it (plain values, the file's key order)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None and f.name not in self._ALWAYS:
                continue
            if isinstance(value, _Part):
                value = value.to_json()
            elif isinstance(value, dict) and f.name in self._NESTED_MAP:
                value = {k: v.to_json() if isinstance(v, _Part) else v
                         for k, v in value.items()}
            out[f.name] = value
        out.update(getattr(self, "extra", {}))
        return out


@dataclass
class InputFacts(_Part):
    """``input``: where the rows came from and what the decision and label are.

    ``label_positive`` / ``decision_positive`` are the favourable values as they are
    in the data; a scored decision has ``decision_rule`` (``score >= threshold``),
    ``score`` and ``threshold`` instead of ``decision_positive``.
    """

    _ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"path", "table", "format", "where", "label", "decision", "favourable"})

    path: str | None = None
    table: str | None = None
    format: str | None = None
    where: str | None = None
    label: str | None = None
    decision: str | None = None
    favourable: str | None = None
    label_positive: list[Any] | None = None
    decision_positive: list[Any] | None = None
    decision_rule: str | None = None
    score: str | None = None
    threshold: float | None = None
    #: a notebook run's input (a DataFrame held by the caller)
    source: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AttributeGroups(_Part):
    """``rows.attributes.<name>``: the groups' sizes and the privileged values."""

    values: dict[str, Any] = field(default_factory=dict)
    privileged: list[Any] = field(default_factory=list)
    kind: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def unprivileged_value(self) -> str | None:
        """The one value that is not privileged, when there is exactly one."""
        priv = set(map(str, self.privileged or []))
        rest = [str(v) for v in (self.values or {}) if str(v) not in priv]
        return rest[0] if priv and len(rest) == 1 else None


@dataclass
class RowCounts(_Part):
    """``rows``: rows read, audited, unlabelled and dropped (by reason), features and
    the protected attributes' groups."""

    _NESTED_MAP: ClassVar[dict[str, type[_Part]]] = {"attributes": AttributeGroups}

    read: int | None = None
    audited: int | None = None
    unlabelled: int | None = None
    dropped: dict[str, Any] = field(default_factory=dict)
    weighted: bool | None = None
    features: dict[str, Any] | None = None
    attributes: dict[str, AttributeGroups] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelLine(_Part):
    """The model's performance on the labelled rows (the report's "Performance" line)."""

    _ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"accuracy", "base_rate", "positive_rate", "labelled_rows"})

    accuracy: float | None = None
    base_rate: float | None = None
    positive_rate: float | None = None
    labelled_rows: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelCard(_Part):
    """``model``: what the configuration says about the audited model."""

    name: str | None = None
    version: str | None = None
    description: str | None = None
    decision: str | None = None
    favourable: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class AuditEntry(_Part):
    """``audits.<name>``: how an audit ended and what it reports beside its rows.

    ``results`` is the audit's own nested entry (every key but the ones named here),
    read by the audit's decision lines; ``baseline`` names the baseline decision
    (champion against challenger) when the audit compared one.
    """

    _ALWAYS: ClassVar[frozenset[str]] = frozenset({"status"})

    status: str | None = None
    detail: str | None = None
    seconds: float | None = None
    params: dict[str, Any] | None = None
    report_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def results(self) -> dict[str, Any]:
        """The audit's own entry (its nested results, as the audit wrote them)."""
        return self.extra

    @property
    def baseline(self) -> Mapping[str, Any] | None:
        """The baseline the audit compared with (``column``, ``decision``), if any."""
        b = self.extra.get("baseline")
        return b if isinstance(b, Mapping) else None

    @property
    def interval_level(self) -> float | None:
        """The interval level the audit's parameters state (``ci_level``), if any."""
        level = (self.params or {}).get("ci_level")
        return float(level) if isinstance(level, int | float) and 0 < level < 1 else None


@dataclass
class LimitsFacts(_Part):
    """``limits``: the one count of checks and the gate fields
    (:func:`fairspark.nightly.gating.limits_summary`)."""

    _ALWAYS: ClassVar[frozenset[str]] = frozenset({"status"})

    status: str | None = None
    gates: bool | None = None
    would_gate: bool | None = None
    fail_on_violation: bool | None = None
    checks: int = 0
    violated: int = 0
    inconclusive: int = 0
    passed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def not_evaluated(self) -> list[Mapping[str, Any]]:
        """Each rule that made no check, with its sentence."""
        return [x for x in self.extra.get("not_evaluated") or [] if isinstance(x, Mapping)]

    def gating(self) -> bool:
        """Whether some check is violated for its required runs in a row (``would_gate``;
        ``gates`` in older files)."""
        return bool(self.would_gate if self.would_gate is not None else self.gates)


@dataclass
class PreviousRun(_Part):
    """``previous``: the last run published before this one, as the change column reads
    it (:func:`fairspark.nightly.history.load_previous_run`).

    ``run_date`` is ``None`` when nothing was published before; ``error`` says why a
    previous run could not be read.
    """

    _ALWAYS: ClassVar[frozenset[str]] = frozenset({"run_date"})

    run_date: str | None = None
    config_hash: str | None = None
    items: dict[str, Any] | None = None
    input: dict[str, Any] | None = None
    rows_audited: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def run_level(audits: Mapping[str, AuditEntry]) -> tuple[float, ModelLine | None]:
    """The run's interval level and the model's performance line, from its audits.

    The level is the one the audits' parameters state (the first in run order that
    states one, :data:`fairspark.constants.DEFAULT_INTERVAL_LEVEL` when none does);
    the performance is the entry of the audit that measured it (the group audit
    computes it on the labelled rows).
    """
    level = next((a.interval_level for a in audits.values() if a.interval_level is not None),
                 DEFAULT_INTERVAL_LEVEL)
    perf = next((a.results["performance"] for a in audits.values()
                 if isinstance(a.results.get("performance"), Mapping)), None)
    return level, (ModelLine.from_json(perf) if perf is not None else None)


@dataclass
class RunSummary(_Part):
    """A run's ``summary.json``.

    Attributes
    ----------
    run_date, dataset, config_hash, started_utc, command:
        The run's facts (``run_date`` ISO, ``started_utc`` ISO UTC).
    versions, spark, seeds, stage_timings:
        Versions of the toolkit and libraries, the Spark session's facts, the seeds,
        and the seconds of each stage.
    input, rows, model:
        :class:`InputFacts`, :class:`RowCounts`, :class:`ModelCard` (or ``None``).
    audits:
        Audit name -> :class:`AuditEntry`, in run order.
    limits:
        :class:`LimitsFacts`, ``None`` without configured limits.
    exit_code:
        The run's exit code.
    interval_level, performance:
        The run's interval level and the model's :class:`ModelLine` (:func:`run_level`).
    previous:
        :class:`PreviousRun`, ``None`` for a run that read no history (in memory).
    input_schema, schema_change, registered_models, window, run_id, mlflow, warnings:
        Written when the run has them.
    """

    _ALWAYS: ClassVar[frozenset[str]] = frozenset(
        {"run_date", "dataset", "config_hash", "exit_code"})

    _NESTED: ClassVar[dict[str, type[_Part]]] = {
        "input": InputFacts, "rows": RowCounts, "model": ModelCard, "limits": LimitsFacts,
        "previous": PreviousRun, "performance": ModelLine}
    _NESTED_MAP: ClassVar[dict[str, type[_Part]]] = {"audits": AuditEntry}

    run_date: str = ""
    dataset: str | None = None
    config_hash: str | None = None
    started_utc: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    input: InputFacts = field(default_factory=InputFacts)
    rows: RowCounts = field(default_factory=RowCounts)
    seeds: dict[str, Any] = field(default_factory=dict)
    model: ModelCard | None = None
    audits: dict[str, AuditEntry] = field(default_factory=dict)
    warnings: list[str] | None = None
    limits: LimitsFacts | None = None
    exit_code: int | None = None
    stage_timings: dict[str, float] = field(default_factory=dict)
    spark: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    interval_level: float = DEFAULT_INTERVAL_LEVEL
    performance: ModelLine | None = None
    input_schema: dict[str, Any] | None = None
    schema_change: dict[str, Any] | None = None
    registered_models: dict[str, Any] | None = None
    window: dict[str, Any] | None = None
    run_id: str | None = None
    previous: PreviousRun | None = None
    mlflow: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> RunSummary:
        """The summary of a parsed ``summary.json`` (any version: missing keys take their
        defaults; the interval level and performance of an older file come from its
        audits, :func:`run_level`)."""
        out = super().from_json(data)
        data = data or {}
        if "interval_level" not in data or "performance" not in data:
            level, perf = run_level(out.audits)
            if "interval_level" not in data:
                out.interval_level = level
            if "performance" not in data:
                out.performance = perf
        if out.exit_code is not None:
            out.exit_code = int(out.exit_code)
        return out

    @classmethod
    def from_text(cls, text: str) -> RunSummary:
        """Read ``summary.json``'s text."""
        return cls.from_json(json.loads(text))

    def to_text(self) -> str:
        """``summary.json``'s text (:func:`fairspark._values.json_text`: NaN -> null,
        non-finite numbers never written as bare ``NaN``)."""
        return json_text(self.to_json(), indent=2, sort_keys=False)

    @property
    def unprivileged_values(self) -> dict[str, str]:
        """Attribute -> its one unprivileged value, for the attributes that have exactly
        one (their pooled ``unprivileged`` row is that group)."""
        out = {}
        for name, a in self.rows.attributes.items():
            value = a.unprivileged_value()
            if value is not None:
                out[name] = value
        return out

    @property
    def failed_audits(self) -> list[str]:
        """The audits whose status makes the run exit with 4, in run order."""
        from fairspark.status import FAILED_STATUSES

        return [n for n, a in self.audits.items() if a.status in FAILED_STATUSES]

    def fails_on_violation(self) -> bool:
        """Whether a violated limit fails this run (older summaries: exit code 3)."""
        lim = self.limits
        if lim is not None and lim.fail_on_violation is not None:
            return bool(lim.fail_on_violation)
        return self.exit_code == 3


def as_run_summary(summary: RunSummary | Mapping[str, Any] | None) -> RunSummary:
    """``summary`` as a :class:`RunSummary` (a parsed ``summary.json`` mapping is read by
    :meth:`RunSummary.from_json`; ``None`` is an empty summary)."""
    if isinstance(summary, RunSummary):
        return summary
    return RunSummary.from_json(summary)
