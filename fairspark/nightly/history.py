"""Earlier runs' results, read back from the output location: the one reader of past runs.

A run reads them once, before it computes (:func:`read_past_runs`, a
:class:`PastRuns`): the trends and the limits' persistence read the trend and limit
rows of the last runs (:func:`load_history`); the decision box's change column reads
the last run's summary and the rows its decision lines read
(:func:`load_previous_run`); the schema check reads the last run's input schema
(:func:`previous_schema`). Which rows an
audit's trends and decision lines read is in its spec (``trend_metrics``,
``view_group``, ``decision_lines``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from fairspark.errors import FairsparkInputError
from fairspark.run_summary import RunSummary

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Mapping

    from fairspark.audits.spec import AuditSpec
    from fairspark.outputs import OutputLocation

__all__ = ["PastRuns", "SchemaChangedError", "describe_schema_change",
           "load_history", "load_previous_run", "previous_schema", "read_past_runs",
           "schema_change", "schema_hash"]

log = logging.getLogger("fairspark")


@dataclass(frozen=True)
class PastRuns:
    """What a run knows of the runs published before it, read once (:func:`read_past_runs`).

    Attributes
    ----------
    history:
        Trend and limit rows of the last ``output.trend_runs`` runs (:func:`load_history`;
        empty when there are none, when neither trends nor limits want them, or when
        they cannot be read).
    schema:
        ``{"run_date", "input_schema"}`` of the last run (:func:`previous_schema`), or
        ``None``.
    previous:
        ``summary['previous']`` (:func:`load_previous_run`), or ``None`` (not read).
    """

    history: pd.DataFrame = field(default_factory=pd.DataFrame)
    schema: dict[str, Any] | None = None
    previous: dict[str, Any] | None = None


def read_past_runs(out: OutputLocation, *, before: dt.date, trend_runs: int, limits: bool,
                   specs: Mapping[str, AuditSpec], items: Callable[..., dict[str, Any]],
                   timings: dict[str, float] | None = None) -> PastRuns:
    """The runs published at ``out`` before ``before``: history, schema, previous run.

    A part that cannot be read is logged and left empty: tonight's run goes on. The
    seconds of all three reads go to ``timings["previous runs"]`` (a line of the log's
    stage table). ``specs``
    (audit name -> spec) say which rows the trends and the decision box read; ``items``
    is what the report keeps of a run's decision lines (:func:`load_previous_run`).
    """
    t0 = time.perf_counter()
    history = pd.DataFrame()
    if trend_runs or limits:
        try:
            history = load_history(out, before=before, max_runs=max(trend_runs, 1),
                                   specs=specs)
        except Exception as err:  # noqa: BLE001 - history is a nicety; tonight's run goes on
            log.warning("could not read earlier runs from %s: %s", out.base, err)
    try:
        schema = previous_schema(out, before=before)
    except Exception as err:  # noqa: BLE001 - not comparing is better than not running
        from fairspark.outputs import one_line

        log.warning("could not read the previous run's input schema: %s", one_line(err))
        schema = None
    previous = load_previous_run(out, before=before, specs=specs, items=items)
    if timings is not None:
        from fairspark._run_summary import record_stage

        record_stage("previous runs", time.perf_counter() - t0, timings)
    return PastRuns(history=history, schema=schema, previous=previous)


def _rows_of(kind: str, specs: Mapping[str, AuditSpec]) -> Any:
    """The Spark condition on ``metrics.parquet`` rows that the trends (``"trend"``) or the
    decision box (``"decision"``) read: every ``limits`` row and, per audit, its trend
    metrics or (for an audit with decision lines) all its rows, in its ``view_group``."""
    from pyspark.sql import functions as F

    cond = F.col("audit") == "limits"
    for name, spec in specs.items():
        if kind == "trend" and spec.trend_metrics:
            c = (F.col("audit") == name) & F.col("metric").isin(list(spec.trend_metrics))
        elif kind == "decision" and spec.decision_lines is not None:
            c = F.col("audit") == name
        else:
            continue
        if spec.view_group is not None:
            c = c & (F.col("group") == spec.view_group)
        cond = cond | c
    return cond


def _dates_before(out: OutputLocation, before: Any) -> list[str]:
    """The published run dates before ``before``, oldest first."""
    return [d for d in out.list_run_dates() if d < str(before)]

_COLUMNS = ["run_date", "audit", "attribute", "group", "metric", "metric_b", "model", "value",
            "lower", "upper", "status", "config_hash", "fairspark_version"]


def load_history(
    out: OutputLocation, *, before: dt.date, max_runs: int, specs: Mapping[str, AuditSpec],
    max_rows_per_run: int = 20_000,
) -> pd.DataFrame:
    """Headline and limit rows of the last ``max_runs`` published runs before ``before``.

    Only result rows are read (never the audited table), at most
    ``max_rows_per_run`` of them per run, so the driver receives a bounded frame.
    """
    dates = _dates_before(out, before.isoformat())[-max_runs:]
    if not dates or max_runs == 0:
        return pd.DataFrame(columns=[*_COLUMNS, "schema_hash"])
    cond = _rows_of("trend", specs)
    frames = []
    for d in dates:
        path = out.path(f"run_date={d}", "metrics.parquet")
        try:
            df = out.read_parquet(path)
        except Exception as err:  # noqa: BLE001 - a damaged old run must not stop tonight's
            log.warning("history: cannot read %s: %s", path, str(err).splitlines()[0])
            continue
        cols = [c for c in _COLUMNS if c in df.columns]
        rows = df.where(cond).select(*cols).limit(max_rows_per_run).collect()
        frame = pd.DataFrame([r.asDict() for r in rows], columns=cols)
        # the other half of the comparability key: the input schema the run resolved
        frame["schema_hash"] = schema_hash(_run_schema(out, d))
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*_COLUMNS, "schema_hash"])
    hist = pd.concat(frames, ignore_index=True)
    hist["run_date"] = pd.to_datetime(hist["run_date"]).dt.date.astype(str)
    return hist


def load_previous_run(out: OutputLocation, *, before: Any, specs: Mapping[str, AuditSpec],
                      items: Callable[..., dict[str, Any]], max_rows: int = 50_000
                      ) -> dict[str, Any]:
    """The last published run before ``before``, as ``summary['previous']`` of this run.

    ``{"run_date": D, "config_hash": ..., "items": items(summary_D, rows_D, specs=specs)}``
    (the report's :func:`fairspark.report.decision.decision_items`, handed down by the
    runner: the report sits above the nightly layer) from D's
    ``summary.json`` and the rows of D's ``metrics.parquet`` that the decision box reads
    (the limits, and the rows of every audit with decision lines in its
    ``view_group``; at most ``max_rows``); ``{"run_date": None, "items": {}}`` when no
    earlier run is published. A previous run that cannot be read gives ``{"run_date":
    D, "error": ...}`` and a warning: the report then says the change could not be
    read, and tonight's run goes on.
    """
    d = None
    try:
        dates = _dates_before(out, before)
        if not dates:
            return {"run_date": None, "items": {}}
        d = dates[-1]
        prev = RunSummary.from_text(out.read_text(out.path(f"run_date={d}", "summary.json")))
        rows = [r.asDict() for r in out.read_parquet(
            out.path(f"run_date={d}", "metrics.parquet")).where(_rows_of("decision", specs))
            .limit(max_rows).collect()]
        return {"run_date": d, "config_hash": prev.config_hash,
                "items": items(prev, rows, specs=specs),
                # what the report compares tonight's data with (window, path, rows)
                "input": {k: getattr(prev.input, k) for k in ("path", "table", "where")},
                "rows_audited": prev.rows.audited}
    except Exception as err:  # noqa: BLE001 - the change column is a nicety
        msg = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
        log.warning("could not read the previous run (%s): %s", d or "listing", msg)
        return {"run_date": d or "unknown", "error": msg}


# ------------------------------------------------------------------------ input schema


def _run_schema(out: OutputLocation, run_date: str) -> dict[str, Any] | None:
    """``input_schema`` of the published run of ``run_date`` (``None``: not recorded)."""
    try:
        summary = RunSummary.from_text(
            out.read_text(out.path(f"run_date={run_date}", "summary.json")))
    except Exception as err:  # noqa: BLE001 - an old or damaged run is simply not compared
        log.warning("history: cannot read the summary of %s: %s", run_date,
                    str(err).splitlines()[0] if str(err) else type(err).__name__)
        return None
    schema = summary.input_schema
    return schema if isinstance(schema, dict) else None


def schema_hash(schema: dict[str, Any] | None) -> str | None:
    """A short hash of a run's ``input_schema`` (``None`` when it was not recorded).

    The features in order with their types and kinds, and the encoded dimension
    (left out when it is not known: no audit encoded the features).
    """
    if not schema:
        return None
    key = {"features": [[f.get("column"), f.get("type"), f.get("kind")]
                        for f in schema.get("features") or []]}
    if schema.get("encoded_dimension") is not None:
        key["encoded_dimension"] = schema["encoded_dimension"]
    blob = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def previous_schema(out: OutputLocation, *, before: dt.date) -> dict[str, Any] | None:
    """``{"run_date": D, "input_schema": ...}`` of the last published run before ``before``.

    ``None`` when no run is published before it; ``input_schema`` is ``None`` when
    that run did not record one (a run of an older fairspark) or cannot be read.
    """
    dates = _dates_before(out, before.isoformat())
    if not dates:
        return None
    return {"run_date": dates[-1], "input_schema": _run_schema(out, dates[-1])}


def schema_change(before: dict[str, Any] | None, after: dict[str, Any], *,
                  previous_run_date: str | None = None) -> dict[str, Any] | None:
    """What changed between two runs' input schemas; ``None`` when nothing did.

    Returns ``{"previous_run_date", "appeared": [{column, type}], "vanished": [{column,
    type}], "changed_type": [{column, before, after}], "changed_kind": [...],
    "encoded_dimension": {"before", "after"}}``. The encoded dimension counts as a
    change only when both runs know it (a run whose audits read no features does not
    encode them).
    """
    if not before:
        return None
    old = {f["column"]: f for f in before.get("features") or []}
    new = {f["column"]: f for f in after.get("features") or []}
    appeared = [{"column": c, "type": f.get("type")} for c, f in new.items() if c not in old]
    vanished = [{"column": c, "type": f.get("type")} for c, f in old.items() if c not in new]
    changed = [{"column": c, "before": old[c].get("type"), "after": f.get("type")}
               for c, f in new.items() if c in old and old[c].get("type") != f.get("type")]
    kinds = [{"column": c, "before": old[c].get("kind"), "after": f.get("kind")}
             for c, f in new.items() if c in old and old[c].get("kind") != f.get("kind")]
    dims = {"before": before.get("encoded_dimension"), "after": after.get("encoded_dimension")}
    dim_changed = None not in dims.values() and dims["before"] != dims["after"]
    if not (appeared or vanished or changed or kinds or dim_changed):
        return None
    return {"previous_run_date": previous_run_date, "appeared": appeared,
            "vanished": vanished, "changed_type": changed, "changed_kind": kinds,
            "encoded_dimension": dims}


def describe_schema_change(change: dict[str, Any]) -> str:
    """One sentence for the log, the warnings and the report's first screen."""
    parts = [f"{c['column']} changed type {c['before']} -> {c['after']}"
             for c in change.get("changed_type") or []]
    parts += [f"{c['column']} is now {c['after']} (was {c['before']})"
              for c in change.get("changed_kind") or []
              if c["column"] not in {x["column"] for x in change.get("changed_type") or []}]
    parts += [f"{c['column']} ({c['type']}) vanished" for c in change.get("vanished") or []]
    parts += [f"{c['column']} ({c['type']}) appeared" for c in change.get("appeared") or []]
    dims = change.get("encoded_dimension") or {}
    if None not in (dims.get("before"), dims.get("after")) and dims["before"] != dims["after"]:
        parts.append(f"encoded dimension {dims['before']} -> {dims['after']}")
    since = change.get("previous_run_date")
    return (f"the input schema changed since the run of {since or 'the previous run'}: "
            + "; ".join(parts) + "; its numbers are not comparable with that run's")


class SchemaChangedError(FairsparkInputError):
    """The input schema changed since the previous run and ``on_schema_change`` is ``fail``."""
