"""Statistics with no fairness in them: the normal quantile and p-value adjustment.

The bottom of fairspark's statistics layer (:mod:`fairspark.metrics`, the metric
catalogue and its intervals, sits beside it): every interval, test and correction of
the audits, the limits and the decision box reads its normal quantile and its family
adjustment from here.
"""

from fairspark.stats.adjust import adjust_pvalues, family_level
from fairspark.stats.normal import normal_quantile

__all__ = ["adjust_pvalues", "family_level", "normal_quantile"]
