"""Small value helpers shared by every audit: NaN to null, the one rule for numbers in
JSON, the ``params`` JSON of a row."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

__all__ = ["json_text", "json_value", "nan_to_none", "params_json"]


def nan_to_none(x: Any) -> float | None:
    """``x`` as a float, or ``None`` when it is missing or NaN (infinities are kept)."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def json_value(x: Any) -> Any:
    """``x`` with every value JSON can carry: the one rule of every JSON fairspark writes.

    NaN becomes ``null``, an infinity the string ``"inf"`` or ``"-inf"`` (JSON has no
    number for it, and Python's ``Infinity`` is not JSON), numpy scalars their Python
    value, dates ISO strings; dicts (keys as strings), lists and tuples recursively.
    """
    if hasattr(x, "item") and not isinstance(x, dict | list | tuple | str):  # numpy scalar
        try:
            x = x.item()
        except (TypeError, ValueError):
            return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(x, dict):
        return {str(k): json_value(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_value(v) for v in x]
    if isinstance(x, dt.date):
        return x.isoformat()
    return x


def json_text(x: Any, **dumps: Any) -> str:
    """``json.dumps`` of :func:`json_value` (``x``): always valid JSON (``allow_nan``
    off); other values become their ``str``."""
    return json.dumps(json_value(x), allow_nan=False, default=str, **dumps)


def params_json(params: dict[str, Any] | None = None, /, **kw: Any) -> str | None:
    """The ``params`` column of a long row: sorted-key JSON (:func:`json_text`),
    ``None`` when empty."""
    d = {**(params or {}), **kw}
    if not d:
        return None
    return json_text(d, sort_keys=True)
