"""Pivot clustering of metrics (Bansal et al., 2004) and the search of tau for k representatives.

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
.. [2] N. Bansal, A. Blum and S. Chawla, "Correlation Clustering", Machine Learning
   56, 89-113, 2004.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairspark.numbers import fmt_detail
from fairspark.sampling import derive_seed

__all__ = [
    "Clustering",
    "TauSearch",
    "cluster_metrics",
    "pivot_clustering",
    "pivot_orders",
    "prefix_representatives",
    "search_tau",
]


@dataclass(frozen=True)
class Clustering:
    """Clusters of metric indices; the pivot of each cluster is its representative.

    ``clusters`` holds ``(pivot, members)`` in the order the pivots were picked;
    ``members`` includes the pivot. ``repeat`` is the index of the pivot order kept.
    """

    tau: float
    clusters: tuple[tuple[int, tuple[int, ...]], ...]
    repeat: int

    @property
    def representatives(self) -> list[int]:
        """The pivots."""
        return [p for p, _ in self.clusters]

    @property
    def labels(self) -> dict[int, int]:
        """Metric index -> cluster number (0-based, pick order)."""
        return {j: c for c, (_, mem) in enumerate(self.clusters) for j in mem}

    def __len__(self) -> int:
        return len(self.clusters)


def pivot_clustering(
    r: np.ndarray, *, tau: float, order: np.ndarray
) -> list[tuple[int, tuple[int, ...]]]:
    """One pass of the pivot algorithm with a given pivot order.

    The next pivot is the first unclustered metric in ``order``; every unclustered
    metric ``j`` with ``r[pivot, j] >= tau`` joins its cluster (NaN never joins).
    """
    r = np.asarray(r, dtype=np.float64)
    left = set(range(r.shape[0]))
    out = []
    for p in order:
        p = int(p)
        if p not in left:
            continue
        with np.errstate(invalid="ignore"):
            members = [p] + [j for j in sorted(left) if j != p and r[p, j] >= tau]
        left.difference_update(members)
        out.append((p, tuple(members)))
    return out


def pivot_orders(m: int, *, repeats: int, seed: int) -> list[np.ndarray]:
    """R random pivot orders (uniform permutations), each from its own derived seed."""
    return [
        np.random.default_rng(derive_seed(seed, "pivot", i)).permutation(m) for i in range(repeats)
    ]


def _best(r: np.ndarray, tau: float, orders: list[np.ndarray]) -> Clustering:
    best = None
    for i, order in enumerate(orders):
        cl = pivot_clustering(r, tau=tau, order=order)
        if best is None or len(cl) < len(best.clusters):
            best = Clustering(tau=float(tau), clusters=tuple(cl), repeat=i)
    assert best is not None
    return best


def cluster_metrics(r: np.ndarray, *, tau: float, repeats: int, seed: int) -> Clustering:
    """Pivot clustering repeated ``repeats`` times; the one with fewest clusters wins.

    Ties go to the earliest repeat, so the result depends on ``seed`` only.
    """
    r = np.asarray(r, dtype=np.float64)
    return _best(r, tau, pivot_orders(r.shape[0], repeats=repeats, seed=seed))


@dataclass(frozen=True)
class TauSearch:
    """Result of searching tau for k representatives.

    ``clustering`` is None when k is not reachable; ``reachable`` maps each reachable
    cluster count to the (lowest, highest) tau candidate giving it; ``message`` says
    what was chosen or why nothing was.
    """

    k: int
    clustering: Clustering | None
    reachable: dict[int, tuple[float, float]] = field(default_factory=dict)
    message: str = ""

    @property
    def tau(self) -> float | None:
        """The tau used, or None."""
        return None if self.clustering is None else self.clustering.tau


def search_tau(r: np.ndarray, *, k: int, repeats: int, seed: int) -> TauSearch:
    """Find tau giving exactly ``k`` clusters (Anahideh et al., 2021).

    The cluster count is not monotone in tau under random pivots, so instead of the
    paper's binary search every distinct off-diagonal r* value (and one value above the
    largest, where every metric is alone) is tried with the same R pivot orders. Among
    the taus that give k clusters the largest is used: it keeps each cluster's members
    most strongly correlated with their representative.
    """
    r = np.asarray(r, dtype=np.float64)
    m = r.shape[0]
    off = r[~np.eye(m, dtype=bool)]
    cand = np.unique(off[np.isfinite(off)])
    top = float(cand.max()) if cand.size else 1.0
    cand = np.append(cand, np.nextafter(top, np.inf))
    orders = pivot_orders(m, repeats=repeats, seed=seed)
    reachable: dict[int, tuple[float, float]] = {}
    chosen: Clustering | None = None
    for tau in cand:  # ascending, so the last match is the largest tau
        cl = _best(r, float(tau), orders)
        lo, _ = reachable.get(len(cl), (float(tau), float(tau)))
        reachable[len(cl)] = (lo, float(tau))
        if len(cl) == k:
            chosen = cl
    if chosen is None:
        counts = ", ".join(
            f"{c} (tau {fmt_detail(lo)}..{fmt_detail(hi)})"
            for c, (lo, hi) in sorted(reachable.items())
        )
        msg = (
            f"{k} representatives are not reachable with {m} metrics and {repeats} pivot "
            f"orders; reachable cluster counts: {counts}"
        )
        return TauSearch(k=k, clustering=None, reachable=reachable, message=msg)
    msg = f"tau={fmt_detail(chosen.tau, 6)}: the largest r* threshold giving {k} clusters"
    return TauSearch(k=k, clustering=chosen, reachable=reachable, message=msg)


def prefix_representatives(per_round: np.ndarray, metrics: Sequence[str],
                           params: Any, seed: int) -> tuple[str, ...] | None:
    """The representatives (sorted) of the clustering of r* over ``per_round``'s rounds.

    r* and the clustered metrics as ``estimate_correlations`` and ``audit._cluster`` make
    them (``params``: the audit's ``CorrelationParams``); None where the clustering
    fails (k representatives unreachable).
    """
    defined = np.isfinite(per_round)
    n = defined.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(defined, per_round, 0.0).sum(axis=0)
        r = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    off = r.copy()
    np.fill_diagonal(off, np.nan)
    keep = [j for j in range(len(metrics)) if np.isfinite(off[j]).any()]
    if not keep:
        return None
    sub = r[np.ix_(keep, keep)]
    if params.n_representatives is not None:
        cl = search_tau(sub, k=params.n_representatives, repeats=params.repeats,
                        seed=seed).clustering
    else:
        cl = cluster_metrics(sub, tau=float(params.tau), repeats=params.repeats, seed=seed)
    return None if cl is None else tuple(sorted(metrics[keep[q]] for q in cl.representatives))
