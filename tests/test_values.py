"""The one rule for numbers in JSON: params and summary agree."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

from fairspark._values import json_text, params_json
from fairspark.run_summary import RunSummary


def _strict(text: str):
    """Parse as JSON proper: Python's NaN / Infinity extensions are refused."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


VALUE = {"a": float("nan"), "b": float("inf"), "c": -np.inf, "d": np.float32(0.5),
         "e": [np.int64(3), (1.5, float("nan"))], "f": dt.date(2026, 12, 1), 7: "x"}
EXPECTED = {"a": None, "b": "inf", "c": "-inf", "d": 0.5, "e": [3, [1.5, None]],
            "f": "2026-12-01", "7": "x"}


@pytest.mark.parametrize("write", [
    lambda v: params_json(v),
    # summary.json's one writer: the keys it does not know are written as they are
    lambda v: RunSummary.from_json(v).to_text(),
    lambda v: json_text(v),
])
def test_params_and_summary_json_are_valid_json_with_the_same_rule(write):
    written = _strict(write(VALUE))
    assert {k: written[k] for k in EXPECTED} == EXPECTED


def test_params_json_sorts_keys_and_is_none_when_empty():
    assert params_json() is None and params_json({}) is None
    assert params_json({"b": 1}, a=2) == '{"a": 2, "b": 1}'
    with pytest.raises(ValueError, match="not JSON"):  # the old text, for contrast
        _strict(json.dumps({"x": float("inf")}))
