"""Representative fairness metrics by correlation estimation (METHODS §3, seed 002).

The public surface: the numpy kernels (sampling oracle, estimation, clustering) that the
Spark tasks run and tests call directly, the Spark functions, the result types and the
audit entry. The report section (``report.render``, matplotlib) is not imported here.
"""

from __future__ import annotations

from fairspark.correlation._cluster import (
    Clustering,
    TauSearch,
    cluster_metrics,
    pivot_clustering,
    pivot_orders,
    search_tau,
)
from fairspark.correlation._estimate import (
    CorrelationEstimate,
    estimate_correlations,
    pairwise_pearson,
)
from fairspark.correlation._oracle import (
    CELLS,
    DEFAULT_METRICS,
    MODEL_NAMES,
    AttemptResult,
    AttemptStatus,
    EmptyCellError,
    OracleData,
    RoundSplit,
    make_model,
    run_attempt,
    split_round,
)
from fairspark.correlation._spark import (
    AttemptTable,
    OracleSample,
    draw_stratified_sample,
    run_oracle_tasks,
    select_rounds,
)
from fairspark.correlation.audit import BudgetExhaustedError, correlation_audit, run
from fairspark.correlation.params import CorrelationParams
from fairspark.correlation.results import CorrelationResult, ModelResult, RoundSelection

__all__ = [
    "CELLS",
    "DEFAULT_METRICS",
    "MODEL_NAMES",
    "AttemptResult",
    "AttemptStatus",
    "AttemptTable",
    "BudgetExhaustedError",
    "Clustering",
    "CorrelationEstimate",
    "CorrelationParams",
    "CorrelationResult",
    "EmptyCellError",
    "ModelResult",
    "OracleData",
    "OracleSample",
    "RoundSelection",
    "RoundSplit",
    "TauSearch",
    "cluster_metrics",
    "correlation_audit",
    "draw_stratified_sample",
    "estimate_correlations",
    "make_model",
    "pairwise_pearson",
    "pivot_clustering",
    "pivot_orders",
    "run",
    "run_attempt",
    "run_oracle_tasks",
    "search_tau",
    "select_rounds",
    "split_round",
]
