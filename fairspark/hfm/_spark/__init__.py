"""HFM distances on Spark: range-partitioned window scans with halos, exact searches.

Everything here takes a *points* DataFrame with the columns

``key`` (string), ``y`` (double, the label), ``yp`` (double, the prediction),
``x`` (array<double>, the scaled features), ``c0 .. c{A-1}`` (int group codes, one per
audited attribute/view)

and never collects raw rows: the driver only receives per-partition counts, capped
batches of candidate rows (certification) and small aggregates. The pandas UDFs run the
numpy kernels of :mod:`fairspark.hfm._kernels`.

Target ``tgt`` 0 is the label (D), 1 the prediction (D_f).

Modules: :mod:`.approx` (window scans, ApproxDist and pointwise bounds), :mod:`.exact`
(block nested loop), :mod:`.elim` (exact D by sample bounds and elimination; its
working table, passes, pair state, blob helpers and driver budget in :mod:`._work`,
:mod:`._passes`, :mod:`._state`, :mod:`._blobs`, :mod:`._driver`, its cost log in
:mod:`._cost`), and :mod:`._points` (the points table they share).
"""

from __future__ import annotations

from fairspark.hfm._spark._passes import code_counts_and_rows
from fairspark.hfm._spark._points import points_schema_check
from fairspark.hfm._spark.approx import (
    approx_scan,
    pointwise_rows,
    summarise_approx,
    summarise_binned,
    summarise_pointwise,
)
from fairspark.hfm._spark.elim import certify_exact
from fairspark.hfm.results import TARGETS, CertifiedResult

__all__ = [
    "TARGETS",
    "CertifiedResult",
    "approx_scan",
    "certify_exact",
    "code_counts_and_rows",
    "points_schema_check",
    "pointwise_rows",
    "summarise_approx",
    "summarise_binned",
    "summarise_pointwise",
]
