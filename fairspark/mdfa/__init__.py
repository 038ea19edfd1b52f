"""mdfa: multi-differential fairness auditor (Gitiaux and Rangwala, 2019).

Public surface: the audit entry point and its report section, the result types, the
driver-side kernels (usable without Spark), the Spark helpers and the synthetic
generator with a planted violation.

Modules: ``params`` (config model), ``spec`` (registry entry), ``audit`` (``run``),
``results`` (result types), ``_spark`` (Spark side), ``certify``, ``balance`` and
``diagnostics`` (numpy/torch kernels; held-out balance of the weights), ``null`` (the
verdict's null reference: decisions redrawn from the features alone), ``report``
(section, template in ``templates/``), ``synthetic`` (generator).

The names below are imported on first use, so loading ``fairspark.mdfa.spec`` (which
the registry does when the config is read) does not import torch or scikit-learn.

References
----------
.. [1] X. Gitiaux and H. Rangwala, "Multi-Differential Fairness Auditor for Black Box
   Classifiers", arXiv:1903.07609, 2019.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["collect_sample", "grouped_stats", "run_splits", "run_splits_local",
         "with_mdfa_columns"], "fairspark.mdfa._spark"),
    **dict.fromkeys(["run", "summarise_splits"], "fairspark.mdfa.audit"),
    **dict.fromkeys(["BalancingNet", "balanced_weights", "fit_balancing"],
                    "fairspark.mdfa.balance"),
    **dict.fromkeys(
        ["MDFASample", "SplitState", "WorstViolation", "balance_split", "certificate_gamma",
         "ViewBalance", "choose_l2", "fit_certificate", "make_auditor", "prepare_view",
         "run_split", "violation_delta", "worst_violation"],
        "fairspark.mdfa.certify"),
    "MDFAParams": "fairspark.mdfa.params",
    **dict.fromkeys(["NullReference", "fit_null_model", "null_reference"],
                    "fairspark.mdfa.null"),
    **dict.fromkeys(["BalanceDiagnostics", "balance_diagnostics"], "fairspark.mdfa.diagnostics"),
    "render": "fairspark.mdfa.report",
    **dict.fromkeys(
        ["AttributeResult", "GroupedStats", "MDFAResult", "SplitResult", "Spread",
         "split_frame", "split_schema"], "fairspark.mdfa.results"),
    **dict.fromkeys(["SyntheticData", "make_synthetic", "planted_gamma"],
                    "fairspark.mdfa.synthetic"),
}

__all__ = sorted(_EXPORTS)  # resolved by __getattr__


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fairspark.mdfa' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
