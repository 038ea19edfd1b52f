"""HFM and ApproxDist (METHODS §1): harmonic fairness via manifolds on Spark.

Public surface:

- :func:`hfm_distances` - D and D_f per attribute of a points DataFrame by
  ``exact``, ``approx`` (the paper's ApproxDist), ``pointwise`` or ``certified``.
- :func:`points_from_table`, :func:`make_projections` - build its inputs.
- :class:`DistanceResult` - one distance with interval, witnesses and extras;
  :class:`HFMResult` - the audit's result that its report section is drawn from.
- numpy kernels (what the pandas UDFs run): :func:`window_scan`,
  :func:`nn_other_group`, :func:`approx_dist_numpy`, :func:`exact_nn_numpy`,
  :func:`sample_projections`, :func:`project`, :func:`hfm_df`, :func:`default_m2`.
- :class:`HFMParams` - the audit's config model; the audit is ``SPEC`` in
  ``fairspark.hfm.spec`` (``fairspark.hfm.audit:run``, ``fairspark.hfm.report:render``).
"""

from __future__ import annotations

from fairspark.hfm._kernels import (
    approx_dist_numpy,
    default_m2,
    exact_nn_numpy,
    hfm_df,
    nn_other_group,
    project,
    sample_projections,
    window_scan,
)
from fairspark.hfm.compute import hfm_distances, make_projections, points_from_table
from fairspark.hfm.params import HFMParams
from fairspark.hfm.results import DistanceResult, HFMResult

__all__ = [
    "DistanceResult",
    "HFMParams",
    "HFMResult",
    "approx_dist_numpy",
    "default_m2",
    "exact_nn_numpy",
    "hfm_df",
    "hfm_distances",
    "make_projections",
    "nn_other_group",
    "points_from_table",
    "project",
    "sample_projections",
    "window_scan",
]
