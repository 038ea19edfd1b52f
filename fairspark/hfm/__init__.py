"""HFM and ApproxDist (Bian and Luo, 2024): harmonic fairness via manifolds on Spark.

Public surface:

- :func:`hfm_distances` - D and D_f per attribute of a points DataFrame by
  ``certified`` (the exact D), ``approx`` (the paper's ApproxDist) or ``pointwise``.
- :func:`points_from_table`, :func:`make_projections` - build its inputs;
  :class:`DistanceOptions` (method, window, outputs) and :class:`CertifyOptions`
  (the ``certified`` search) - its options (``HFMParams.distance_options`` and
  ``HFMParams.certify_options`` build them from the audit's config).
- :class:`DistanceResult` - one distance with interval, witnesses and extras;
  :class:`HFMResult` - the audit's result that its report section is drawn from.
- numpy kernels (what the pandas UDFs run): :func:`window_scan`,
  :func:`nn_other_group`, :func:`approx_dist_numpy`, :func:`exact_nn_numpy`,
  :func:`sample_projections`, :func:`project`, :func:`hfm_df`, :func:`default_m2`.
- :class:`HFMParams` - the audit's config model; the audit is ``SPEC`` in
  ``fairspark.hfm.spec`` (``fairspark.hfm.audit:run``, ``fairspark.hfm.report:render``).

The names below are imported on first use, so loading ``fairspark.hfm.spec`` (which
the registry does when the config is read) imports only the params model.

References
----------
.. [1] Y. Bian and Y. Luo, "Measuring Model-Induced Discrimination via Efficient
   Fairness Approximation", arXiv:2405.09251, 2024.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["approx_dist_numpy", "default_m2", "hfm_df", "project", "sample_projections",
         "window_scan"], "fairspark.hfm._kernels"),
    **dict.fromkeys(["exact_nn_numpy", "nn_other_group"], "fairspark.hfm._nn"),
    **dict.fromkeys(["CertifyOptions", "DistanceOptions", "hfm_distances",
                     "make_projections", "points_from_table"], "fairspark.hfm.compute"),
    "HFMParams": "fairspark.hfm.params",
    **dict.fromkeys(["DistanceResult", "HFMResult"], "fairspark.hfm.results"),
}

__all__ = sorted(_EXPORTS)  # resolved by __getattr__


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fairspark.hfm' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
