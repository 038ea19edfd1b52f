"""mdfa: multi-differential fairness auditor (METHODS §2, paper seed 001).

Public surface: the audit entry point, the driver-side kernels (usable without Spark),
the Spark helpers and the synthetic generator with a planted violation.
"""

from __future__ import annotations

from fairspark.mdfa.audit import run, summarise_splits
from fairspark.mdfa.balance import BalancingNet, balanced_weights, fit_balancing
from fairspark.mdfa.certify import (
    MDFASample,
    certificate_gamma,
    fit_certificate,
    make_auditor,
    run_split,
    violation_delta,
    worst_violation,
)
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.spark import (
    grouped_stats,
    run_splits,
    run_splits_local,
    stratified_sample,
    with_mdfa_columns,
)
from fairspark.mdfa.synthetic import SyntheticData, make_synthetic, planted_gamma

__all__ = [
    "BalancingNet",
    "MDFAParams",
    "MDFASample",
    "SyntheticData",
    "balanced_weights",
    "certificate_gamma",
    "fit_balancing",
    "fit_certificate",
    "grouped_stats",
    "make_auditor",
    "make_synthetic",
    "planted_gamma",
    "run",
    "run_split",
    "run_splits",
    "run_splits_local",
    "stratified_sample",
    "summarise_splits",
    "violation_delta",
    "with_mdfa_columns",
    "worst_violation",
]
