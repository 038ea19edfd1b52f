"""Group-metric core: weighted confusion cells per group -> the metric catalogue."""

from fairspark.metrics._core import (
    BASELINES,
    CATALOGUE,
    CELLS,
    COMPARED_RATES,
    RATES,
    MetricSpec,
    RateSpec,
    catalogue_from_counts,
    compare_groups,
    comparison_reason,
    group_rates,
    inequality_indices,
    rate_with_reason,
)
from fairspark.metrics._spark import CELL_STATS, cell_counts, marginal_counts

__all__ = [
    "BASELINES",
    "CATALOGUE",
    "CELLS",
    "CELL_STATS",
    "COMPARED_RATES",
    "RATES",
    "MetricSpec",
    "RateSpec",
    "catalogue_from_counts",
    "cell_counts",
    "compare_groups",
    "comparison_reason",
    "group_rates",
    "inequality_indices",
    "marginal_counts",
    "rate_with_reason",
]
