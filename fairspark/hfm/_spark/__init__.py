"""HFM distances on Spark: range-partitioned window scans with halos, exact searches.

Everything here takes a *points* DataFrame with the columns

``key`` (string), ``y`` (double, the label), ``yp`` (double, the prediction),
``x`` (array<double>, the scaled features), ``c0 .. c{A-1}`` (int group codes, one per
audited attribute/view)

and never collects raw rows: the driver only receives per-partition counts, capped
batches of candidate rows (certification) and small aggregates. The pandas UDFs run the
numpy kernels of :mod:`fairspark.hfm._kernels`.

Target ``tgt`` 0 is the label (D), 1 the prediction (D_f).

Modules: :mod:`.approx` (window scans, ApproxDist and pointwise bounds) and the exact D
by sample bounds and elimination (``certified``): :mod:`.elimination` (the algorithm),
:mod:`.engines` (where its passes run: Spark or the driver), :mod:`.sample_bounds`
(pass A), :mod:`.exact_scan` (passes B and D), :mod:`.block_elimination` (pass C),
:mod:`.records` (the records they exchange), :mod:`.state` (a pair's search state),
:mod:`.blobs` (blob and Arrow column helpers), :mod:`.driver` (the driver's budget,
collects and threads), :mod:`.cost` (the cost log); :mod:`.points` (the points table
they share).
"""

from __future__ import annotations

from fairspark.hfm._spark.approx import (
    approx_scan,
    pointwise_rows,
    summarise_approx,
    summarise_binned,
    summarise_pointwise,
)
from fairspark.hfm._spark.elimination import certify_exact
from fairspark.hfm._spark.points import points_schema_check
from fairspark.hfm._spark.sample_bounds import code_counts_and_rows
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
