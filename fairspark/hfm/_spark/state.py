"""The search state of :mod:`fairspark.hfm._spark.elimination`: one (target, attribute) pair.

:class:`PairState` holds where the search of one pair stands (the lower bound and its
witness, the cursor, the bounds not taken yet, the rounds); :data:`MARGIN` and
:func:`threshold` the elimination threshold every pass applies. The passes
(:mod:`.sample_bounds`, :mod:`.exact_scan`, :mod:`.block_elimination`), the engines
(:mod:`.engines`) and the algorithm (:mod:`.elimination`) all read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fairspark.hfm.results import CertifiedResult

__all__ = ["MARGIN", "Pair", "PairState", "threshold"]


Pair = tuple[int, int]


#: a row is eliminated only when its upper bound is below ``L * (1 - MARGIN)``
MARGIN = 1e-9


@dataclass
class PairState:
    """Where the search of one (target, attribute) stands.

    ``lb``/``key``/``nb_key``: the largest exact ``nn`` so far and its witness pair;
    ``cursor``: ``(bound, key)`` of the last row taken (rows are taken in decreasing
    bound); ``ub_rem``: the largest bound not taken yet; ``open_ub``: the largest running
    bound of the rows still being checked; ``rounds``: per round ``L`` and the largest
    bound of the rows it eliminated (the elimination invariant: always below ``L``);
    ``n_surv``: the pair's survivors of pass C (rows left to pass D), once counted.
    """

    lb: float = -math.inf
    key: str | None = None
    nb_key: str | None = None
    cursor: tuple[float, str] | None = None
    ub_rem: float = math.inf
    open_ub: float = -math.inf
    n_exact: int = 0
    n_checked: int = 0
    n_surv: int | None = None
    done: bool = False
    certified: bool = False
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    rounds: list[dict] = field(default_factory=list)

    def upper(self) -> float:
        """The upper end of the interval so far."""
        if self.certified:
            return self.lb
        return max(self.lb, self.ub_rem, self.open_ub)

    def raise_lb(self, d: float, key: str, nb_key: str | None) -> None:
        """An exact ``nn``: the lower bound, ties to the smallest key."""
        if d > self.lb or (d == self.lb and (self.key is None or key < self.key)):
            self.lb, self.key, self.nb_key = d, key, nb_key

    def result(self, n_above: int | None = None) -> CertifiedResult:
        """The interval and counts as a :class:`CertifiedResult`."""
        return CertifiedResult(
            lower=self.lb, upper=self.upper(), certified=self.certified, n_searched=self.n_exact,
            key=self.key, nb_key=self.nb_key, steps=list(self.steps), n_above=n_above,
            n_checked=self.n_checked, rounds=list(self.rounds),
        )


def threshold(lb: float) -> float:
    """Bounds below this cannot realise (or tie with) a distance ``lb``."""
    return lb - MARGIN * abs(lb) if math.isfinite(lb) else -math.inf
