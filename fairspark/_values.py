"""Small value helpers shared by every audit: NaN to null, the ``params`` JSON of a row."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["nan_to_none", "params_json"]


def nan_to_none(x: Any) -> float | None:
    """``x`` as a float, or ``None`` when it is missing or NaN (infinities are kept)."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def params_json(params: dict[str, Any] | None = None, /, **kw: Any) -> str | None:
    """The ``params`` column of a long row: sorted-key JSON, ``None`` when empty.

    NaN values become ``null`` so the text is valid JSON for any reader.
    """
    d = {**(params or {}), **kw}
    if not d:
        return None

    def clean(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(d), sort_keys=True, default=str)
