"""The correlation audit's nested ``summary.json`` entry (see ``audit.py``)."""

from __future__ import annotations

from typing import Any

from fairspark._values import nan_to_none
from fairspark.correlation._oracle import CELLS
from fairspark.correlation.params import CorrelationParams
from fairspark.correlation.results import CorrelationResult, ModelResult
from fairspark.status import Status

__all__ = ["outcome_summary"]


def _model_summary(res: ModelResult, params: CorrelationParams) -> dict[str, Any]:
    d: dict[str, Any] = {"status": res.status}
    if res.detail:
        d["detail"] = res.detail
    s = res.selection
    if s is not None:
        d.update(
            attempts=s.attempts,
            accepted=s.accepted,
            rounds_used=len(s.values),
            acceptance_rate=s.acceptance_rate,
        )
        if s.pending:
            d["rounds_pending"] = len(s.pending)
    if res.rounds is not None:
        d.update(
            rounds=res.rounds.rounds,
            rounds_run=res.rounds_run,
            monte_carlo_se=nan_to_none(res.rounds.se),
            target_se=params.target_se if params.auto_rounds else None,
            stopped_by=res.rounds.reason,
            monte_carlo_se_by_round=[nan_to_none(round(v, 6)) for v in res.se_path],
        )
        if params.auto_rounds:
            d["stable_rounds"] = params.stable_rounds
        if res.reps_path:
            d["representatives_by_round"] = [list(r) if r is not None else None
                                             for r in res.reps_path]
    if res.clustering is not None:
        n = res.clustered_metrics
        d["tau"] = res.clustering.tau
        d["representatives"] = [n[p] for p in res.clustering.representatives]
        d["clusters"] = {n[p]: [n[j] for j in mem] for p, mem in res.clustering.clusters}
    if res.excluded:
        d["excluded"] = res.excluded
    if res.cost is not None:
        d["cost"] = res.cost
    return d


def outcome_summary(result: CorrelationResult) -> dict[str, Any]:
    """The nested summary of ``summary.json``."""
    out: dict[str, Any] = {
        "sample_rows": result.sample_rows,
        "population_labelled_rows": result.population_rows,
        "sample_cells": {
            a: dict(zip(CELLS, c, strict=True)) for a, c in result.sample_cells.items()
        },
        "waves": result.waves,
        "shipped_as": result.shipped_as,
        "attributes": {},
    }
    for name, why in result.failed_attributes.items():
        out["attributes"][name] = {"status": Status.FAILED, "detail": why}
    for res in result.models:
        out["attributes"].setdefault(res.attribute, {})[res.model] = _model_summary(
            res, result.params
        )
    costs = [r.cost for r in result.models if r.cost is not None]
    if costs:
        out["cost"] = {"cpu_s": {p: round(sum(c["cpu_s"][p] for c in costs), 4)
                                 for p in costs[0]["cpu_s"]},
                       "rounds_run": sum(c["rounds_run"] for c in costs)}
    out["status"] = Status.FAILED if result.failed else Status.OK
    return out
