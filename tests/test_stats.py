"""The statistics layer's one normal quantile (``fairspark.stats.normal_quantile``)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from fairspark.stats import normal_quantile

PKG = Path(__file__).resolve().parents[1] / "fairspark"


def _phi(x: float) -> float:
    """The standard normal CDF from the error function, independent of the quantile."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@pytest.mark.parametrize("p", [1e-12, 0.001, 0.025, 0.3, 0.5, 0.8, 0.95, 0.975, 0.995])
def test_quantile_inverts_the_normal_cdf(p):
    z = normal_quantile(p)
    assert isinstance(z, float)
    assert _phi(z) == pytest.approx(p, rel=1e-13)


def test_quantile_known_values_arrays_and_ends():
    # z_0.975 = 1.95996398454005423552... (Abramowitz and Stegun, table 26.5: 1.959963985)
    assert normal_quantile(0.975) == pytest.approx(1.959963984540054, abs=2e-16)
    assert normal_quantile(0.5) == 0.0
    got = normal_quantile(np.array([[0.025, 0.975], [0.0, 1.0]]))
    assert got.shape == (2, 2)
    assert got[0, 0] == pytest.approx(-got[0, 1], abs=1e-15)
    assert got[1].tolist() == [-math.inf, math.inf]


def test_no_other_normal_quantile_in_the_package():
    """One normal quantile: no module but fairspark/stats/normal.py computes one."""
    pattern = re.compile(r"\binv_cdf\(|\bnorm\.ppf\(|\bndtri\b|\berfinv\b")
    found = [f"{p.relative_to(PKG.parent)}:{i}" for p in PKG.rglob("*.py")
             if p.name != "normal.py" or p.parent.name != "stats"
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, f"normal quantiles outside fairspark.stats.normal_quantile: {found}"
