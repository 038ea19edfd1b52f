"""mdfa: multi-differential fairness auditor (METHODS §2, paper seed 001).

Public surface: the audit entry point and its report section, the result types, the
driver-side kernels (usable without Spark), the Spark helpers and the synthetic
generator with a planted violation.

Modules: ``params`` (config model), ``spec`` (registry entry), ``audit`` (``run``),
``results`` (result types), ``_spark`` (Spark side), ``certify`` and ``balance``
(numpy/torch kernels), ``report`` (section, template in ``templates/``),
``synthetic`` (generator).
"""

from __future__ import annotations

from fairspark.mdfa._spark import (
    collect_sample,
    grouped_stats,
    run_splits,
    run_splits_local,
    with_mdfa_columns,
)
from fairspark.mdfa.audit import run, summarise_splits
from fairspark.mdfa.balance import BalancingNet, balanced_weights, fit_balancing
from fairspark.mdfa.certify import (
    MDFASample,
    WorstViolation,
    certificate_gamma,
    fit_certificate,
    make_auditor,
    run_split,
    violation_delta,
    worst_violation,
)
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.report import render
from fairspark.mdfa.results import (
    AttributeResult,
    GroupedStats,
    MDFAResult,
    SplitResult,
    Spread,
    split_frame,
    split_schema,
)
from fairspark.mdfa.synthetic import SyntheticData, make_synthetic, planted_gamma

__all__ = [
    "AttributeResult",
    "BalancingNet",
    "GroupedStats",
    "MDFAParams",
    "MDFAResult",
    "MDFASample",
    "SplitResult",
    "Spread",
    "SyntheticData",
    "WorstViolation",
    "balanced_weights",
    "certificate_gamma",
    "collect_sample",
    "fit_balancing",
    "fit_certificate",
    "grouped_stats",
    "make_auditor",
    "make_synthetic",
    "planted_gamma",
    "render",
    "run",
    "run_split",
    "run_splits",
    "run_splits_local",
    "split_frame",
    "split_schema",
    "summarise_splits",
    "violation_delta",
    "with_mdfa_columns",
    "worst_violation",
]
