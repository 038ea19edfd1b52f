"""The one number rule: every number a person reads goes through :func:`format_number`.

The HTML report, the INFO log lines, the CLI and the notebook display print numbers
with :func:`format_number` or one of the named forms below, each a fixed choice of its
arguments; JSON and Parquet keep numbers raw (unformatted). The forms:

- :func:`fmt_number`: a number that is no result row's own (the decision box's words,
  a p-value, a threshold found by an audit): :data:`~fairspark.constants.SIGNIFICANT_DIGITS`
  significant digits, a real minus sign (``−``);
- :func:`fmt_plain`: a number shown beside a row's own (an adjusted interval's ends,
  the two sides of a change between runs): one digit more, so it never reads as the
  row's rounded value;
- :func:`fmt_fixed`: a fixed number of decimals (a result row's value and interval,
  whose decimals the row decides: ``fairspark.audits.lines.row_decimals``; rates and
  correlations);
- :func:`fmt_setting`: a configured value (a limit, a margin, a level, a threshold)
  written as the user would write it (up to 6 significant digits, ``0.1`` not
  ``0.100``);
- :func:`fmt_level`: an interval level as a percentage (``95%``);
- :func:`fmt_count`: a count with thousands separators;
- :func:`fmt_detail`: a number inside a result row's stored ``detail`` text
  (``metrics.parquet``), written as Python writes it so stored text stays the same.

A missing number (``None`` or NaN) prints as ``–``; an infinity as ``∞`` / ``−∞``.
"""

from __future__ import annotations

import math
from typing import Any

from fairspark.constants import SIGNIFICANT_DIGITS

__all__ = ["MISSING", "fmt_count", "fmt_detail", "fmt_fixed", "fmt_level", "fmt_number",
           "fmt_plain", "fmt_setting", "format_number"]

#: how a missing number prints
MISSING = "–"
#: the minus sign of a printed number (a real minus, not a hyphen)
MINUS = "−"


def format_number(x: Any, *, digits: int | None = None, decimals: int | None = None,
                  signed: bool = False, minus: str = MINUS, missing: str = MISSING,
                  grouped: bool = False, infinity: str = "∞") -> str:
    """``x`` as a person reads it: the one number rule.

    Parameters
    ----------
    x:
        A number (``None`` and NaN are missing; anything else not a number is
        written as ``str``).
    digits:
        Significant digits (``format(x, ".{digits}g")``); the default is
        :data:`~fairspark.constants.SIGNIFICANT_DIGITS` unless ``decimals`` is given.
    decimals:
        A fixed number of decimals instead (``format(x, ".{decimals}f")``).
    signed:
        Write the sign of a positive number (``+0.009``).
    minus:
        The minus sign (``−``; ``-`` where the text must stay ASCII).
    missing:
        The text of a missing number.
    grouped:
        Thousands separators (``1,234``; with ``decimals=0``: a count).
    infinity:
        The text of an infinity (``∞``; ``inf`` in stored text).

    Examples
    --------
    >>> format_number(-0.012345)
    '−0.0123'
    >>> format_number(0.5, decimals=3, signed=True)
    '+0.500'
    >>> format_number(12345, decimals=0, grouped=True)
    '12,345'
    >>> format_number(float("nan"))
    '–'
    """
    if x is None:
        return missing
    if isinstance(x, bool) or not isinstance(x, int | float):
        try:
            x = float(x) if not isinstance(x, bool) else x
        except (TypeError, ValueError):
            return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return missing
        if math.isinf(x):
            return infinity if x > 0 else f"{minus}{infinity}"
    sign = "+" if signed else ""
    comma = "," if grouped else ""
    if decimals is not None:
        text = format(x, f"{sign}{comma}.{decimals}f")
    else:
        text = format(x, f"{sign}{comma}.{digits or SIGNIFICANT_DIGITS}g")
    return text.replace("-", minus) if minus != "-" else text


def fmt_number(x: float | None, signed: bool = False) -> str:
    """A number that is no result row's own: 3 significant digits, a real minus."""
    return format_number(x, signed=signed)


def fmt_plain(x: Any) -> str:
    """A number shown beside a row's own (an adjusted interval's ends, the two sides of
    a change between runs): 4 significant digits, ``–`` when missing."""
    return format_number(x, digits=SIGNIFICANT_DIGITS + 1, minus="-")


def fmt_fixed(x: Any, decimals: int, *, signed: bool = False, minus: str = MINUS) -> str:
    """``x`` with ``decimals`` decimals (a row's value, a rate, a correlation)."""
    return format_number(x, decimals=decimals, signed=signed, minus=minus)


def fmt_detail(x: Any, digits: int = SIGNIFICANT_DIGITS, *, decimals: int | None = None,
               signed: bool = False) -> str:
    """A number inside stored text (a result row's ``detail`` in ``metrics.parquet``, a
    ``summary.json`` sentence): Python's own ``.{digits}g`` (or ``.{decimals}f``; ``+``
    when ``signed``; ASCII minus, ``inf``, ``nan``), so stored text never changes with
    the display rule."""
    if signed and isinstance(x, float) and (math.isnan(x) or x == math.inf):
        return "+nan" if math.isnan(x) else "+inf"
    return format_number(x, digits=digits, decimals=decimals, signed=signed, minus="-",
                         missing="nan", infinity="inf")


def fmt_setting(x: Any) -> str:
    """A configured value as the user writes it (``0.1``, ``0.95``, ``1e-06``)."""
    return format_number(x, digits=6, minus="-")


def fmt_level(level: float) -> str:
    """An interval level as a percentage (``0.95`` -> ``95%``, ``0.975`` -> ``97.5%``)."""
    return f"{fmt_setting(100 * level)}%"


def fmt_count(x: Any) -> str:
    """A count with thousands separators (``n/a`` when missing)."""
    try:
        return format_number(int(x), decimals=0, grouped=True, minus="-")
    except (TypeError, ValueError):
        return "n/a" if x is None else str(x)
