"""Group-metric core: weighted confusion cells per group -> the metric catalogue.

The statistics layer's metrics: every name another package uses is imported from here
(its modules are private to it):

- the catalogue (``_core``): :data:`CATALOGUE`, :data:`BASELINES`, :data:`RATES`, the
  confusion :data:`CELLS`, and the functions from counts to metrics;
- their intervals (``_intervals``): :func:`rate_interval`, :func:`comparison_intervals`,
  :func:`inequality_intervals`, :func:`z_value`;
- a baseline decision's paired comparison (``_paired``): :func:`paired_comparison`,
  :func:`paired_rates`, :func:`paired_inequality` and the ``model`` values of its rows;
- the Spark aggregation of the cells (``_spark``) and the cells of the preparation's one
  pass (:mod:`fairspark.metrics.cells`).
"""

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
    distance_from_parity,
    group_rates,
    inequality_indices,
    metric_range,
    rate_with_reason,
)
from fairspark.metrics._intervals import (
    Interval,
    Weights,
    comparison_intervals,
    comparison_support,
    effective_n,
    inequality_intervals,
    rate_interval,
    rate_support,
    wilson,
    z_value,
)
from fairspark.metrics._paired import (
    BASELINE_MODEL,
    DIFFERENCE_MODEL,
    DISTANCE_MODEL,
    INEQUALITY_KEYS,
    PairedValue,
    baseline_cell,
    marginal_cells,
    paired_comparison,
    paired_inequality,
    paired_rates,
)
from fairspark.metrics._spark import CELL_STATS, cell_counts, marginal_counts

__all__ = [
    "BASELINES",
    "BASELINE_MODEL",
    "CATALOGUE",
    "CELLS",
    "CELL_STATS",
    "COMPARED_RATES",
    "DIFFERENCE_MODEL",
    "DISTANCE_MODEL",
    "INEQUALITY_KEYS",
    "RATES",
    "Interval",
    "MetricSpec",
    "PairedValue",
    "RateSpec",
    "Weights",
    "baseline_cell",
    "catalogue_from_counts",
    "cell_counts",
    "compare_groups",
    "comparison_intervals",
    "comparison_reason",
    "comparison_support",
    "distance_from_parity",
    "effective_n",
    "group_rates",
    "inequality_indices",
    "inequality_intervals",
    "marginal_cells",
    "marginal_counts",
    "metric_range",
    "paired_comparison",
    "paired_inequality",
    "paired_rates",
    "rate_interval",
    "rate_support",
    "rate_with_reason",
    "wilson",
    "z_value",
]
