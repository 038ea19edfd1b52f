"""Result types of the HFM audit (Bian and Luo, 2024).

:class:`DistanceResult` is what :func:`fairspark.hfm.hfm_distances` returns per
(target, attribute); :class:`CertifiedResult` is one certification outcome of the Spark
side; :class:`HFMResult` is the audit's typed result that ``fairspark.hfm.report``
renders. This module imports nothing else of the package, so every other module can
import it.

References
----------
.. [1] Y. Bian and Y. Luo, "Measuring Model-Induced Discrimination via Efficient
   Fairness Approximation", arXiv:2405.09251, 2024.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["TARGETS", "CertifiedResult", "DistanceResult", "HFMResult"]

#: target 0 is the label (D), 1 the prediction (D_f)
TARGETS = ("label", "prediction")


@dataclass
class DistanceResult:
    """D (target 0, label) or D_f (target 1, prediction) of one attribute.

    Attributes
    ----------
    value : float
        The method's value of the distance (for a non-certified run: the upper end).
    lower, upper : float or None
        Interval that certainly holds the exact distance (``None`` where the method
        gives no guarantee beyond ``value >= exact``).
    certified : bool
        ``value`` is the exact distance.
    avg : float
        Averaged variant ``mean_p nn(p)`` (exact for ``exact``, else an upper bound).
    avg_exact : bool
        Whether ``avg`` is exact.
    key, nb_key : str or None
        Row keys of the witness pair.
    extra : dict
        Other numbers: ``approx``/``approx_avg`` (the paper's ApproxDist),
        ``pointwise``/``pointwise_avg``, ``n_searched``, ``steps``.
    """

    value: float
    lower: float | None
    upper: float | None
    certified: bool
    avg: float
    avg_exact: bool
    key: str | None = None
    nb_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CertifiedResult:
    """Outcome of certification for one (target, attribute)."""

    lower: float
    upper: float
    certified: bool
    n_searched: int
    key: str | None = None
    nb_key: str | None = None
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    n_above: int | None = None
    #: rows checked against growing blocks (eliminated or searched to the end)
    n_checked: int | None = None
    #: per elimination round: ``L``, block end, rows eliminated, their largest bound
    rounds: list[dict[str, Any]] = field(default_factory=list)
    #: where the passes ran: ``"driver"`` (small table, collected once) or ``"spark"``
    engine: str | None = None
    #: the cost model of the run (shared by every pair): per pass seconds, Spark jobs
    #: and stages, rows and feature bytes read, rows left (``CostLog.as_dict``)
    cost: dict[str, Any] | None = None


@dataclass
class HFMResult:
    """What the HFM report section is drawn from (``AuditOutcome.result``).

    Attributes
    ----------
    distances : dict
        Attribute name -> ``(D, D_f)`` results.
    witnesses : dict
        Row key -> raw values of the witness rows (redacted columns already left out).
    redacted : list of str
        Columns whose values are never shown (run-wide and the audit's own), sorted.
    partial : bool
        A result kept while certification runs (drawn without plots).
    baseline : dict
        With ``columns.baseline``: attribute name -> the baseline decision's D_f (D is
        shared); empty without one.
    """

    distances: dict[str, tuple[DistanceResult, DistanceResult]]
    witnesses: dict[str, dict[str, Any]] = field(default_factory=dict)
    redacted: list[str] = field(default_factory=list)
    partial: bool = False
    baseline: dict[str, DistanceResult] = field(default_factory=dict)
