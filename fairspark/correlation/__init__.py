"""Representative fairness metrics by correlation estimation (Anahideh et al., 2021).

The public surface: the numpy kernels (sampling oracle, estimation, clustering) that the
Spark tasks run and tests call directly, the Spark functions, the result types and the
audit entry. The report section (``report.render``, matplotlib) is not imported here.

The names below are imported on first use, so loading ``fairspark.correlation.spec``
(which the registry does when the config is read) imports only the params model.

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        [
            "Clustering",
            "TauSearch",
            "cluster_metrics",
            "pivot_clustering",
            "pivot_orders",
            "search_tau",
        ],
        "fairspark.correlation._cluster",
    ),
    **dict.fromkeys(
        ["CorrelationEstimate", "estimate_correlations", "pairwise_pearson"],
        "fairspark.correlation._estimate",
    ),
    **dict.fromkeys(
        [
            "AttemptResult",
            "AttemptStatus",
            "CELLS",
            "DEFAULT_METRICS",
            "EmptyCellError",
            "MODEL_NAMES",
            "OracleData",
            "OracleModel",
            "RoundSplit",
            "make_model",
            "run_attempt",
            "split_round",
        ],
        "fairspark.correlation._oracle",
    ),
    **dict.fromkeys(
        [
            "AttemptTable",
            "OracleJob",
            "OracleSample",
            "WaveHooks",
            "draw_stratified_sample",
            "run_oracle_tasks",
            "select_rounds",
        ],
        "fairspark.correlation._spark",
    ),
    **dict.fromkeys(
        ["AuditHooks", "BudgetExhaustedError", "correlation_audit", "run"],
        "fairspark.correlation.audit",
    ),
    **dict.fromkeys(["CorrelationParams"], "fairspark.correlation.params"),
    **dict.fromkeys(
        ["CorrelationResult", "ModelResult", "RoundSelection"], "fairspark.correlation.results"
    ),
}

__all__ = sorted(_EXPORTS)  # resolved by __getattr__


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fairspark.correlation' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
