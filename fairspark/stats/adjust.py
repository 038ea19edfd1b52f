"""p-value adjustment of a family of tests, and the one per-test level it amounts to."""

from __future__ import annotations

import numpy as np

__all__ = ["adjust_pvalues", "family_level"]


def adjust_pvalues(p: np.ndarray, method: str) -> np.ndarray:
    """Holm (step-down FWER) or Benjamini-Hochberg (FDR) adjusted p-values."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    if m == 0 or method == "none":
        return p.copy()
    order = np.argsort(p, kind="mergesort")
    ps = p[order]
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum((m - np.arange(m)) * ps, 1.0))
    elif method == "bh":
        adj = np.minimum.accumulate(m / np.arange(m, 0, -1) * ps[::-1])[::-1]
        adj = np.minimum(adj, 1.0)
    else:
        raise ValueError(f"unknown correction {method!r}")
    out = np.empty(m)
    out[order] = adj
    return out


def family_level(p_adjusted: np.ndarray, method: str, alpha: float) -> float:
    """One per-check level that reproduces a corrected family's rejections.

    Every correction used here rejects the hypotheses whose *unadjusted* p-value is at
    most one threshold ``alpha*`` that depends on the family only. With ``m``
    hypotheses of which ``K`` are rejected (adjusted p <= alpha) and sorted p-values
    ``p_(1) <= ... <= p_(m)``:

    - ``none``: ``alpha* = alpha``.
    - Holm: step-down, ``p_(k)`` is rejected iff ``p_(j) <= alpha / (m - j + 1)`` for
      every ``j <= k``. The rejected have ``p_(k) <= alpha / (m - k + 1) <= alpha / (m -
      K)``; the first kept has ``p_(K+1) > alpha / (m - K)`` (that is where the
      step-down stopped) and every later one is at least as large. So ``alpha* = alpha
      / (m - K)`` (``alpha`` when all are rejected, ``K = m``).
    - Benjamini-Hochberg: ``K = max{k: p_(k) <= k alpha / m}``; the rejected have ``p <=
      p_(K) <= K alpha / m``, the kept ``p_(j) > j alpha / m >= (K + 1) alpha / m``. So
      ``alpha* = max(K, 1) alpha / m`` (with ``K = 0`` every p exceeds ``alpha / m``).

    Parameters
    ----------
    p_adjusted:
        The family's adjusted p-values (:func:`adjust_pvalues`).
    method:
        ``holm``, ``bh`` or ``none``.
    alpha:
        The family's level.

    Returns
    -------
    float
        ``alpha*``: a hypothesis is rejected exactly when its unadjusted p <= ``alpha*``.
    """
    m = len(p_adjusted)
    if method == "none" or m == 0:
        return alpha
    k = int(np.sum(np.asarray(p_adjusted) <= alpha))
    if method == "holm":
        return alpha / max(m - k, 1)
    return max(k, 1) * alpha / m
