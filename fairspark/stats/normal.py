"""The standard normal quantile: one function for every interval and test."""

from __future__ import annotations

from typing import overload

import numpy as np

__all__ = ["normal_quantile"]


@overload
def normal_quantile(p: float) -> float: ...
@overload
def normal_quantile(p: np.ndarray) -> np.ndarray: ...


def normal_quantile(p: float | np.ndarray) -> float | np.ndarray:
    """The standard normal quantile ``Phi^-1(p)`` (scipy's ``ndtri``, as ``norm.ppf``).

    Parameters
    ----------
    p:
        A probability, or an array of them, in ``[0, 1]`` (0 and 1 give ``-inf`` and
        ``inf``; outside, ``nan``).

    Returns
    -------
    float or numpy.ndarray
        A float for a scalar ``p``, else an array of ``p``'s shape.

    Examples
    --------
    >>> round(normal_quantile(0.975), 6)
    1.959964
    >>> normal_quantile(np.array([0.5, 0.0])).tolist()
    [0.0, -inf]
    """
    from scipy.special import ndtri

    out = ndtri(p)
    return float(out) if np.ndim(out) == 0 else out
