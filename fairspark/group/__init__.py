"""The ``group`` audit: the group-metric catalogue with intervals (``docs/metrics.md``).

Parts, as in every audit package: ``params`` (:class:`GroupParams`), ``spec``
(``SPEC``), ``audit`` (``run``: one Spark aggregation, numbers only), ``results``
(:class:`GroupResult`), ``report`` (``render`` and ``headlines``, template in
``templates/``). The formulas live in :mod:`fairspark.metrics`.
"""

from __future__ import annotations

from fairspark.group.params import GroupParams

__all__ = ["GroupParams"]
