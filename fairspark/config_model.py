"""The run configuration's models: one typed, validated object per section.

Every key is documented in ``docs/config.md``. This module knows no audit: the
``audits`` section's model is built from the specs it is given
(:func:`audits_model`), and a :class:`Config` is validated with those specs in its
validation context (``{"specs": ..., "broken": ...}``), which
:func:`fairspark.config.parse_config` passes from the registry. Modules below the
registry (preparation, the window, gating, the audit contract) import their config
types from here.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    SerializeAsAny,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from fairspark._config_mlflow import MlflowOutputConfig, RegisteredModelConfig
from fairspark._params import AuditParams, StrictModel
from fairspark.config_columns import ColumnsConfig
from fairspark.constants import DEFAULT_ALPHA
from fairspark.errors import ConfigError

Scalar = str | int | float | bool

__all__ = [
    "AuditSections",
    "Config",
    "InputConfig",
    "BaselineMargin",
    "LimitRule",
    "LimitsConfig",
    "ModelConfig",
    "RegisteredModelConfig",
    "audits_model",
]


class InputConfig(StrictModel):
    """Where the scored table comes from."""

    path: str | None = None
    format: Literal["parquet", "csv", "orc", "json"] = "parquet"
    table: str | None = None
    options: dict[str, Scalar] = Field(default_factory=dict)
    where: str | None = None
    #: the column the table is partitioned by, one value (a date, YYYY-MM-DD) a day:
    #: never a feature; with ``window`` each partition is aggregated once into a state
    partition_column: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> InputConfig:
        if (self.path is None) == (self.table is None):
            raise ValueError("give exactly one of 'input.path' or 'input.table'")
        return self


class WindowConfig(StrictModel):
    """A rolling window of daily partitions, audited from per-partition states.

    Each partition of ``input.partition_column`` in the window is aggregated once
    into a state stored under ``<output.path>/_states`` (its group cells, input-check
    counters, and a hash-rank sample of its rows); a night reads only the partitions
    it has no valid state for (see ``docs/operations.md``, "Incremental nightlies").
    """

    #: the window ends at the run date and holds this many days of partitions
    days: int = Field(30, ge=1, le=3660)
    #: rows of the window's merged sample, which the audits that read a sample audit;
    #: default: the largest ``sample_rows`` of those audits
    sample_rows: int | None = Field(None, ge=100)
    #: partitions to re-aggregate even when their state looks valid (``--restate``);
    #: not part of the config hash
    restate: list[str] = Field(default_factory=list)
    #: audit name -> what it reads under the window, where its spec offers a choice
    #: (``cells``, ``sample`` or ``newest``); written as ``window.<audit>: <choice>``,
    #: e.g. ``window: {hfm: sample}`` (default: each audit's own, see docs/config.md)
    reads: dict[str, Literal["cells", "sample", "newest"]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _audit_keys(cls, data: Any) -> Any:
        """``window.<audit>: <choice>`` keys go into :attr:`reads` (checked against the
        audits' specs by :meth:`Config.check_window`)."""
        if not isinstance(data, dict):
            return data
        extra = {k: v for k, v in data.items() if k not in cls.model_fields}
        if not extra:
            return data
        out = {k: v for k, v in data.items() if k in cls.model_fields}
        out["reads"] = {**(out.get("reads") or {}), **extra}
        return out


class ModelConfig(StrictModel):
    """What the audited model is and decides, in the reader's words (report only).

    Descriptive only: these keys do not change a number and stay out of the config hash.
    """

    name: str | None = None
    version: str | None = None
    description: str | None = None
    decision: str | None = None
    favourable: str | None = None


class PreparationConfig(StrictModel):
    """How the prepared table is built."""

    max_dropped_fraction: float = Field(0.05, ge=0, le=1)
    max_categories: int = Field(200, ge=2)
    #: what a run does when the resolved features (columns, types, encoded dimension)
    #: differ from the previous published run's: ``warn`` (log, summary.json, report;
    #: trends are not compared across it) or ``fail`` (exit 2 before any output)
    on_schema_change: Literal["warn", "fail"] = "warn"


class AuditSections(StrictModel):
    """Which audits run; a section that is present is enabled unless it says otherwise.

    The base of the model :func:`audits_model` builds from the audits' specs: one
    optional field per audit, typed by its ``SPEC.params``; an audit whose spec says
    ``enabled_by_default`` runs without a section. The model keeps the specs it was
    built from (:meth:`audit_specs`), so whoever holds a config holds them
    (the methods' names are no audit's).
    """

    _specs: ClassVar[Mapping[str, Any]] = {}
    _broken: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def audit_specs(cls) -> Mapping[str, Any]:
        """Audit name -> ``AuditSpec``, in run order: the specs this model was built from."""
        return cls._specs

    @classmethod
    def audit_spec(cls, name: str) -> Any:
        """The ``AuditSpec`` of audit ``name`` (``KeyError`` for an unknown name)."""
        return cls._specs[name]

    @classmethod
    def broken_plugins(cls) -> frozenset[str]:
        """Names of the audit plugins that could not be loaded (their sections are kept
        unread, and the run reports them failed)."""
        return cls._broken

    def enabled(self) -> dict[str, AuditParams]:
        """The enabled audits, in run order."""
        out: dict[str, AuditParams] = {}
        for name in self._specs:
            p = getattr(self, name)
            if p is not None and p.enabled:
                out[name] = p
        return out

    def feature_readers(self) -> list[str]:
        """The enabled audits that read the encoded features (``reads_features``), in
        run order."""
        return [n for n in self.enabled() if self.audit_spec(n).reads_features]

    def present(self) -> dict[str, AuditParams]:
        """Every audit section of the config (enabled or not), in run order."""
        return {n: getattr(self, n) for n in self._specs if getattr(self, n) is not None}


_MODELS: dict[tuple[int, ...], tuple[Any, type[AuditSections]]] = {}


def audits_model(specs: Mapping[str, Any], broken: tuple[str, ...] = ()
                 ) -> type[AuditSections]:
    """The ``audits`` section's model for these specs (built once per set of specs).

    Parameters
    ----------
    specs:
        Audit name -> ``AuditSpec``, in run order (``fairspark.registry.specs()``).
    broken:
        Names of audit plugins that could not be loaded: their sections are accepted
        as they are (a run reports those audits failed instead of refusing the config).
    """
    key = (*map(id, specs.values()), *map(hash, broken))
    if key not in _MODELS:
        fields: dict[str, Any] = {
            name: (spec.params | None,
                   Field(default_factory=spec.params) if spec.enabled_by_default else None)
            for name, spec in specs.items()}
        fields.update({name: (dict[str, Any] | None, None) for name in broken
                       if name not in specs})
        model = create_model("AuditsConfig", __base__=AuditSections,
                             __doc__=AuditSections.__doc__, **fields)
        model._specs = dict(specs)
        model._broken = frozenset(broken)
        # the specs are held with the model, so their ids stay theirs
        _MODELS[key] = (tuple(specs.values()), model)
    return _MODELS[key][1]


class OutputConfig(StrictModel):
    """Where results go."""

    path: str
    report: bool = True
    table: str | None = None
    trend_runs: int = Field(30, ge=0)
    lock_stale_s: float = Field(6 * 3600, gt=0)
    states_wait_s: float = Field(3600, ge=0)
    #: log the run to MLflow (see :class:`MlflowOutputConfig`)
    mlflow: MlflowOutputConfig | None = None


class BaselineMargin(StrictModel):
    """``no_worse_than_baseline``: the audited decision may be further from parity than
    the baseline on ``metric`` by at most ``margin`` (paired, same rows)."""

    metric: str
    margin: float = Field(0.0, ge=0)


class LimitRule(StrictModel):
    """One limit on a headline number, e.g. ``|statistical_parity_difference| <= 0.1``,
    or ``no_worse_than_baseline: {metric, margin}`` (a paired comparison with
    ``columns.baseline``)."""

    metric: str
    audit: str | None = None
    attribute: str | None = None
    group: str | None = None
    model: str | None = None
    max: float | None = None
    min: float | None = None
    abs_max: float | None = Field(None, ge=0)
    no_worse_than_baseline: BaselineMargin | None = None
    persistence: int = Field(1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _baseline_metric(cls, data: Any) -> Any:
        """``{no_worse_than_baseline: {metric, margin}}`` names its metric inside."""
        if isinstance(data, dict) and isinstance(data.get("no_worse_than_baseline"), dict):
            inner = data["no_worse_than_baseline"]
            if "metric" in inner and "metric" not in data:
                return {**data, "metric": inner["metric"]}
        return data

    @model_validator(mode="after")
    def _one_bound(self) -> LimitRule:
        if self.no_worse_than_baseline is not None:
            if self.no_worse_than_baseline.metric != self.metric:
                raise ValueError(f"limit on {self.metric!r}: 'no_worse_than_baseline.metric' "
                                 f"is {self.no_worse_than_baseline.metric!r}")
            if any(b is not None for b in (self.max, self.min, self.abs_max)):
                raise ValueError(f"limit on {self.metric!r}: give 'no_worse_than_baseline' or "
                                 "'min'/'max'/'abs_max', not both")
            return self
        if self.max is None and self.min is None and self.abs_max is None:
            raise ValueError(f"limit on {self.metric!r} needs 'max', 'min' or 'abs_max'")
        if self.abs_max is not None and (self.max is not None or self.min is not None):
            raise ValueError(f"limit on {self.metric!r}: give 'abs_max' or 'min'/'max', not both")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(f"limit on {self.metric!r}: 'min' is above 'max'")
        return self


class LimitsConfig(StrictModel):
    """Limits that gate the run (exit code 3 when one is violated)."""

    rules: list[LimitRule] = Field(default_factory=list)
    correction: Literal["holm", "bh", "none"] = "holm"
    alpha: float = Field(DEFAULT_ALPHA, gt=0, lt=1)
    fail_on_violation: bool = True
    #: a group with fewer rows, or fewer favourable decisions, is "too small to rank":
    #: it is still checked (and may gate) but is never named the worst group
    min_rank_rows: int = Field(30, ge=1)
    min_rank_favourable: int = Field(5, ge=0)


class SparkConfig(StrictModel):
    """Spark settings used when fairspark starts the session itself (CLI)."""

    master: str = "local[2]"
    app_name: str = "fairspark-audit"
    conf: dict[str, Scalar] = Field(default_factory=dict)
    #: a Spark Connect server (``sc://host:port``) to run against instead of a session of
    #: ``master``; ``local[n]`` is pyspark's own local Connect server
    remote: str | None = None

    @field_validator("remote")
    @classmethod
    def _connect_url(cls, v: str | None) -> str | None:
        if v is None or re.fullmatch(r"local(\[[0-9*]+\])?", v.strip()):
            return None if v is None else v.strip()
        shown = re.sub(r"(;\s*token\s*=)[^;]*", r"\1***", v, flags=re.IGNORECASE)
        host = r"(\[[0-9A-Fa-f:.]+\]|[^/:;?#\[\]]+)"
        if not re.fullmatch(rf"sc://{host}(:[0-9]+)?(/(;[^;]*)*)?", v.strip()):
            raise ValueError(f"expected a Spark Connect URL sc://host:port (with an optional "
                             f"/;param=value list), or local[n], got {shown!r}")
        return v.strip()


class Config(StrictModel):
    """The whole run configuration.

    Built by :func:`fairspark.config.parse_config` (a mapping) or
    :func:`fairspark.config.load_config` (a YAML file), which read the ``audits``
    section against the registered audits.

    Examples
    --------
    >>> from fairspark.config import parse_config
    >>> cfg = parse_config({"dataset": "loans", "input": {"path": "scored.parquet"},
    ...                     "columns": {"sensitive": [{"column": "sex", "privileged": "m"}],
    ...                                 "label": {"column": "y"},
    ...                                 "prediction": {"column": "p"}},
    ...                     "output": {"path": "out/loans"}})
    >>> cfg.columns.label.positive, cfg.seed, cfg.window is None
    ([1], 0, True)
    """

    dataset: str
    run_date: _dt.date | None = None
    seed: int = 0
    input: InputConfig
    columns: ColumnsConfig
    model: ModelConfig | None = None
    preparation: PreparationConfig = Field(default_factory=PreparationConfig)
    #: validated against the model of the specs in the validation context
    audits: SerializeAsAny[AuditSections] = Field(None, validate_default=True)
    output: OutputConfig
    spark: SparkConfig = Field(default_factory=SparkConfig)
    redact_columns: list[str] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    window: WindowConfig | None = None

    @field_validator("audits", mode="before")
    @classmethod
    def _audit_sections(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, AuditSections):
            return v
        context = info.context or {}
        if "specs" not in context:
            raise ValueError("the audit sections are read against the registered audits: "
                             "build the config with fairspark.config.parse_config")
        model = audits_model(context["specs"], tuple(context.get("broken", ())))
        return model.model_validate({} if v is None else v)

    @field_validator("run_date", mode="before")
    @classmethod
    def _iso_date(cls, v: Any) -> Any:
        if isinstance(v, _dt.date) or v is None:
            return v
        if isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v.strip()):
            return v.strip()
        raise ValueError(f"expected a date as YYYY-MM-DD, got {v!r}")

    def check_window(self) -> None:
        """A ``window`` needs a partitioned folder, and selects its partitions itself.

        Raises
        ------
        ConfigError
            Naming the key that is missing or in the way.
        """
        if self.window is None:
            return
        if self.columns.baseline is not None:
            raise ConfigError("config key 'columns.baseline' is not supported with 'window' "
                              "yet: the partitions' stored states hold one decision")
        if not self.input.partition_column:
            raise ConfigError("config key 'window' needs 'input.partition_column': the "
                              "column whose daily partitions the window is made of")
        if not self.input.path:
            raise ConfigError("config key 'window' reads a partitioned folder: give "
                              "'input.path' (a metastore 'input.table' is not supported "
                              "with a window)")
        if self.input.where:
            raise ConfigError("config key 'input.where' cannot be used with 'window': the "
                              "window selects its partitions itself (it ends at the run date)")
        specs = self.audits.audit_specs()
        for name, choice in self.window.reads.items():
            if name not in specs or len(specs[name].window_reads) < 2:
                can = sorted(n for n, sp in specs.items() if len(sp.window_reads) > 1)
                raise ConfigError(
                    f"unknown config key 'window.{name}': expected 'days', 'sample_rows', "
                    "'restate' or the name of an audit whose window reads can be chosen "
                    f"({', '.join(repr(n) for n in can) or 'none is registered'})")
            if choice not in specs[name].window_reads:
                raise ConfigError(
                    f"config key 'window.{name}': {choice!r} is not what audit {name!r} "
                    f"can read under a window (expected one of "
                    f"{', '.join(repr(r) for r in specs[name].window_reads)})")
        self._check_window_sample()
        last = self.effective_run_date()
        first = last - _dt.timedelta(days=self.window.days - 1)
        for part in self.window.restate:
            try:
                if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(part)):
                    raise ValueError
                day = _dt.date.fromisoformat(str(part))
            except ValueError:
                raise ConfigError(f"config key 'window.restate' (--restate): {str(part)!r} is "
                                  "not a partition date (expected a real date YYYY-MM-DD, "
                                  "e.g. 2026-11-14)") from None
            if not first <= day <= last:
                raise ConfigError(
                    f"config key 'window.restate' (--restate): {str(part)!r} is outside the "
                    f"window {first.isoformat()}..{last.isoformat()} ('window.days' "
                    f"{self.window.days} ending at the run date {last.isoformat()}): only "
                    "the window's partitions have states to aggregate again; restate a date "
                    "inside it, or run that date's night with --run-date")

    def window_read(self, name: str) -> str:
        """What audit ``name`` reads under this config's window: ``window.<name>``, else
        its spec's default (``cells`` without a window)."""
        if self.window is None:
            return "cells"
        return self.window.reads.get(name) or self.audits.audit_spec(name).window_reads[0]

    def _check_window_sample(self) -> None:
        """The window's merged sample needs a size when an audit reads it and none of
        those audits states one (their spec's ``window_sample_param``)."""
        win = self.window
        if win is None or win.sample_rows is not None:
            return
        enabled = self.audits.enabled()
        users = [n for n in enabled if self.window_read(n) == "sample"]
        params = {n: self.audits.audit_spec(n).window_sample_param for n in users}
        if not users or any(getattr(enabled[n], p, None) for n, p in params.items()):
            return
        keys = " or ".join(f"'audits.{n}.{p}'" for n, p in params.items())
        raise ConfigError(
            f"config key 'window.{users[0]}' is 'sample' but nothing sizes the window's "
            f"merged sample: set {keys} (the rows the audit audits, as a rescan caps "
            "them) or 'window.sample_rows'")

    def check_attributes(self) -> None:
        """Every audit's ``attributes`` must name configured views (the one rule).

        Called when a config is parsed and again when a run starts (for configs built
        in code).

        Raises
        ------
        ConfigError
            Naming the audit's key and the unknown name.
        """
        known = self.columns.attribute_names()
        bad = [f"config key 'audits.{name}.attributes': {a!r} is not a sensitive attribute or "
               "intersection"
               for name, params in self.audits.present().items()
               for a in params.attributes or [] if a not in known]
        if bad:  # every audit that names it, not only the first
            raise ConfigError(f"{'; '.join(bad)} (configured: {known})")

    def check_limits(self) -> None:
        """Every limit names a metric (and attribute) that an enabled audit can produce.

        A misspelled metric would otherwise match no row and turn gating off.

        Raises
        ------
        ConfigError
            Naming the rule's key, the unknown name and the closest known names.
        """
        import difflib

        enabled = self.audits.enabled()
        for i, rule in enumerate(self.limits.rules):
            key = f"limits.rules[{i}]"
            if rule.no_worse_than_baseline is not None and self.columns.baseline is None:
                raise ConfigError(f"config key '{key}.no_worse_than_baseline' compares with a "
                                  "baseline decision: set 'columns.baseline' (or "
                                  "--baseline-column)")
            if rule.audit is not None and rule.audit in self.audits.broken_plugins():
                continue  # the plugin could not be loaded: the run reports it failed
            if rule.audit is not None and rule.audit not in enabled:
                raise ConfigError(f"config key '{key}.audit': {rule.audit!r} is not an enabled "
                                  f"audit (enabled: {list(enabled)})")
            names = sorted({m for a in ([rule.audit] if rule.audit else enabled)
                            for m in self.audits.audit_spec(a).metrics})
            if rule.metric not in names:
                close = difflib.get_close_matches(rule.metric, names, n=3, cutoff=0.6)
                hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
                raise ConfigError(f"config key '{key}.metric': {rule.metric!r} is not a metric "
                                  f"of the enabled audits{hint}")
            known = [*self.columns.attribute_names(), "*"]
            if rule.attribute is not None and rule.attribute not in known:
                raise ConfigError(f"config key '{key}.attribute': {rule.attribute!r} is not a "
                                  f"sensitive attribute or intersection (configured: {known})")

    def config_hash(self) -> str:
        """A short hash of everything that can change the numbers: the comparability key.

        Left out: the run date, where outputs go, Spark settings, the descriptive
        ``model`` keys, and where the input comes from and which window of it is read
        (``input.path``, ``input.table``, ``input.where``). A nightly job points at a new
        partition or filters a new date window every night; its runs stay comparable as
        long as the columns, groups and audit parameters stay the same. What the input
        itself resolves to (features, their types, the encoded dimension) is the other
        half of the comparability key: ``summary.json`` ``input_schema``, compared by
        :func:`fairspark.nightly.history.schema_change`. ``preparation.on_schema_change``
        changes no number and is left out too, as are ``limits.min_rank_rows`` and
        ``limits.min_rank_favourable`` (they choose the group the report names worst).
        """
        skip: dict[str, Any] = {"run_date": True, "output": True, "spark": True,
                                "model": True, "input": {"path", "table", "where"},
                                "preparation": {"on_schema_change"},
                                "window": {"restate"},
                                # which group the report names worst, no number
                                "limits": {"min_rank_rows", "min_rank_favourable"}}
        d = self.model_dump(mode="json", exclude=skip)
        # an audit's tuning keys hash beside its other keys, as before its 'advanced'
        # block existed, so that runs before and after it stay comparable
        for name in d["audits"]:
            params = getattr(self.audits, name, None)
            if isinstance(params, AuditParams):
                d["audits"][name] = params.hash_dump()
        # keys added later hash as before while unset, so earlier runs stay comparable
        if d["columns"].get("baseline") is None:
            d["columns"].pop("baseline", None)
        for rule in (d.get("limits") or {}).get("rules") or []:
            if rule.get("no_worse_than_baseline") is None:
                rule.pop("no_worse_than_baseline", None)
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def effective_run_date(self) -> _dt.date:
        """The run date, defaulting to today (UTC)."""
        return self.run_date or _dt.datetime.now(_dt.timezone.utc).date()

    def with_local_paths_absolute(self, cwd: str | None = None) -> Config:
        """This config with its relative local paths made absolute against ``cwd``
        (default: the process's working directory).

        ``input.path``, ``output.path`` and ``audits.hfm.dr_model`` without a URI scheme
        are relative to where the command runs, as a user reads them. Spark resolves
        them against its JVM's working directory instead, which is another folder when
        the session was started elsewhere (a notebook's or a test's session reused by
        the CLI), so the CLI resolves them once, here.
        """
        import os
        from urllib.parse import urlparse

        base = cwd or os.getcwd()

        def absolute(path: str | None) -> str | None:
            # a URI (hdfs://, dbfs:/, models:/, runs:/ ...; a one-letter scheme is a
            # Windows drive) stays as it is
            if not path or len(urlparse(path).scheme) > 1 or os.path.isabs(path):
                return path
            return os.path.normpath(os.path.join(base, path))

        update: dict[str, Any] = {}
        if self.input.path and absolute(self.input.path) != self.input.path:
            update["input"] = self.input.model_copy(update={"path": absolute(self.input.path)})
        if absolute(self.output.path) != self.output.path:
            update["output"] = self.output.model_copy(update={"path": absolute(self.output.path)})
        sections = {}
        for name, spec in self.audits.audit_specs().items():
            section = getattr(self.audits, name, None)
            paths = {k: absolute(getattr(section, k)) for k in spec.path_params
                     if section is not None and getattr(section, k, None)}
            paths = {k: v for k, v in paths.items() if v != getattr(section, k)}
            if paths:
                sections[name] = section.model_copy(update=paths)
        if sections:
            update["audits"] = self.audits.model_copy(update=sections)
        return self.model_copy(update=update) if update else self

    def pinned(self) -> Config:
        """This config with its run date fixed (today, UTC, when not configured).

        A run resolves its date once, when it starts: every later reader (the status
        file, the published folder, the rows, the summary) then sees the same date,
        also when the run crosses midnight UTC.
        """
        if self.run_date is not None:
            return self
        return self.model_copy(update={"run_date": self.effective_run_date()})
