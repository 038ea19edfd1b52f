"""The toolkit's shared constants: one home for a number more than one module uses.

A module that needs one of these imports it from here rather than writing the literal
again, so changing it changes every place that uses it. This module imports nothing.
"""

from __future__ import annotations

__all__ = ["DEFAULT_ALPHA", "DEFAULT_INTERVAL_LEVEL", "FLOAT_NOISE", "SIGNIFICANT_DIGITS"]

#: the interval level (coverage) of every interval unless an audit's ``ci_level`` says
#: otherwise; the report states the run's level (``RunSummary.interval_level``)
DEFAULT_INTERVAL_LEVEL = 0.95

#: the significance level of a test (``1 - DEFAULT_INTERVAL_LEVEL``)
DEFAULT_ALPHA = 0.05

#: floating-point rounding noise: two numbers closer than this are the same number (an
#: excess that did not move between runs, a ratio that is a whole number of rounds)
FLOAT_NOISE = 1e-9

#: significant digits of a printed number that is no result row's own
#: (:func:`fairspark.numbers.fmt_number`)
SIGNIFICANT_DIGITS = 3
