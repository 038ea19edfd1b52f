"""Algorithm 1 of mdfa (the worst violation) and the readable rules of its subgroup.

Plain numpy / scikit-learn; :func:`fairspark.mdfa.certify.run_split` calls
:func:`worst_violation` in every split that runs Algorithm 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from fairspark.mdfa.auditors import LeafVotes, Predictor, fit_certificate, make_auditor
from fairspark.numbers import fmt_detail
from fairspark.sampling import derive_seed

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.mdfa.params import MDFAParams

__all__ = ["SplitPart", "WorstViolation", "group_description", "readable_rules", "rules_of",
           "violation_delta", "worst_violation"]


def violation_delta(
    in_g: np.ndarray, *, s: np.ndarray, y: np.ndarray, w: np.ndarray | None, y_value: int
) -> float:
    """ln of the ratio of (w-)counts of Y=y in G between s=+1 and s=-1.

    With ``w`` given: Alg. 1 line 4, ``sum_{G,Y=y,S=+1} w / sum_{G,Y=y,S=-1} w``
    (balanced weights make it ``Pr_w[Y=y|S=+1,G] / Pr_w[Y=y|S=-1,G]``). With
    ``w=None``: ``ln(Pr[Y=y | S=+1, G] / Pr[Y=y | S=-1, G])`` from plain counts.
    NaN when a group is absent from G; +-inf when one side has no Y=y.
    """
    hit = in_g & (y == y_value)
    if w is not None:
        num = float(np.sum(w[hit & (s > 0)]))
        den = float(np.sum(w[hit & (s < 0)]))
        if num == 0 and den == 0:
            return float("nan")
    else:
        n_pos = int(np.sum(in_g & (s > 0)))
        n_neg = int(np.sum(in_g & (s < 0)))
        if n_pos == 0 or n_neg == 0:
            return float("nan")
        num = np.sum(hit & (s > 0)) / n_pos
        den = np.sum(hit & (s < 0)) / n_neg
        if num == 0 and den == 0:
            return float("nan")
    if den == 0:
        return float("inf")
    if num == 0:
        return float("-inf")
    return float(math.log(num / den))


@dataclass
class WorstViolation:
    """Result of Algorithm 1 on one split."""

    t: int
    mass_train: float
    in_g_test: np.ndarray
    predictor: Predictor | None
    trace: list[dict[str, float]]


@dataclass
class SplitPart:
    """One side (training or held-out) of a split: certificate features, s, y, weights."""

    z: np.ndarray
    s: np.ndarray
    y: np.ndarray
    w: np.ndarray


class _WVASteps:
    """The fits of Algorithm 1 by step t, each fitted once, and the trace of the steps.

    At step t the rows with Y = y and S = -1 weigh ``u_i (1 + xi t)``, the others
    ``u_i``; a step records its training mass and held-out delta in :attr:`trace`.
    With the random forest and ``regrow`` > 0 the forest is grown at t = 0 and every
    ``regrow`` steps, and the steps between re-estimate its leaf votes from their
    weights (:class:`~.auditors.LeafVotes`); ``regrow = 0`` grows it once; ``regrow = 1`` (and
    every other auditor) refits at every step.
    """

    def __init__(self, *, params: MDFAParams, train: SplitPart, test: SplitPart, y_value: int,
                 seed: int):
        self.auditor, self.train, self.test = params.auditor, train, test
        self.trees, self.forest = params.violation_trees, params.forest
        self.y_value, self.xi, self.seed = y_value, params.xi, seed
        self.regrow = params.violation_regrow if params.auditor == "random_forest" else 1
        r = 1 if y_value > 0 else -1
        self.target = r * train.s * train.y
        self.boosted = (train.y == y_value) & (train.s < 0)
        self.cache: dict[int, tuple[float, Predictor]] = {}
        self.forests: dict[int, tuple[LeafVotes, np.ndarray]] = {}
        self.trace: list[dict[str, float]] = []

    def _grown(self, t: int) -> tuple[Predictor, np.ndarray, np.ndarray]:
        """c_t from the forest grown at the last regrowth step at or before t, with its
        answers on the training and held-out rows."""
        base = 0 if self.regrow == 0 else (t // self.regrow) * self.regrow
        tr = self.train
        if base not in self.forests:
            wb = tr.w * (1.0 + self.xi * base * self.boosted)
            model = make_auditor(self.auditor, seed=derive_seed(self.seed, "wva", base),
                                 trees=self.trees, forest=self.forest)
            model.fit(tr.z, self.target, sample_weight=wb)
            lv = LeafVotes(model, tr.z, self.target)
            self.forests[base] = (lv, model.leaves(self.test.z))
        lv, ids_te = self.forests[base]
        c = lv.predictor(tr.w * (1.0 + self.xi * t * self.boosted))
        return c, c(tr.z, lv.ids_tr), c(self.test.z, ids_te)

    def at(self, t: int) -> tuple[float, Predictor]:
        """Training mass of G_t = {c_t = 1} among Y = y, and c_t."""
        if t not in self.cache:
            tr, te = self.train, self.test
            if self.regrow != 1 and len(np.unique(self.target)) > 1:
                c, c_tr, c_te = self._grown(t)
            else:
                wt = tr.w * (1.0 + self.xi * t * self.boosted)
                c = fit_certificate(self.auditor, tr.z, self.target, wt,
                                    seed=derive_seed(self.seed, "wva", t), trees=self.trees,
                                    forest=self.forest)
                c_tr, c_te = c(tr.z), c(te.z)
            g_tr = c_tr == 1
            mass = float(np.sum(tr.w[g_tr & (tr.y == self.y_value)]) / np.sum(tr.w))
            g_te = c_te == 1
            d = violation_delta(g_te, s=te.s, y=te.y, w=te.w, y_value=self.y_value)
            self.trace.append({"t": t, "mass": mass, "delta": d})
            self.cache[t] = (mass, c)
        return self.cache[t]


def _last_good_step(ok: Callable[[int], bool], *, search: str, max_iterations: int) -> int:
    """The last t in 1..max_iterations with ``ok(t)`` (0: none), walking or bisecting.

    ``sequential`` tries t = 1, 2, ... until the first failure; ``bisection`` doubles t
    until a failure (or max_iterations), then bisects between the last success and it.
    Both give the same t when ``ok`` holds on a prefix of the steps.
    """
    good = 0
    if search == "sequential":
        t = 1
        while t <= max_iterations and ok(t):
            good = t
            t += 1
        return good
    bad = None
    t = 1
    while t <= max_iterations:
        if ok(t):
            good = t
            t *= 2
        else:
            bad = t
            break
    if bad is None and good < max_iterations:
        if ok(max_iterations):
            good = max_iterations
        else:
            bad = max_iterations
    if bad is not None:
        while bad - good > 1:
            mid = (good + bad) // 2
            if ok(mid):
                good = mid
            else:
                bad = mid
    return good


def worst_violation(
    train: SplitPart, test: SplitPart, *, y_value: int, params: MDFAParams, seed: int
) -> WorstViolation:
    """Algorithm 1 (WVA): reweight, refit, stop when the subgroup's mass drops below alpha.

    At step t the rows with Y = y and S = -1 (for y = +1 these are the paper's
    ``a_i != y_i, y_i = y``; in general the rows whose target r S Y is -1 among Y = y)
    weigh ``u_i (1 + xi t)``, the others ``u_i``. The mass of G_t = {c_t = 1} is
    ``sum_{c_t=1, Y=y} u / sum u`` on the training part. The answer is the last t
    whose mass is >= alpha; the trace records every evaluated t with the held-out
    delta (Alg. 1 line 4, u-weighted).

    Parameters
    ----------
    train, test:
        The split's training and held-out parts (certificate features, s, y, weights).
    y_value:
        The outcome searched (+1 or -1).
    params:
        The audit's options it reads: ``auditor``, ``violation_trees``, ``xi``,
        ``alpha``, ``wva_search`` and ``max_iterations``.
    seed:
        Seed of the auditor fits.
    """
    steps = _WVASteps(params=params, train=train, test=test, y_value=y_value, seed=seed)
    alpha = params.alpha
    if steps.at(0)[0] < alpha:
        return WorstViolation(0, steps.at(0)[0], np.zeros(len(test.z), bool), None, steps.trace)
    good = _last_good_step(lambda t: steps.at(t)[0] >= alpha, search=params.wva_search,
                           max_iterations=params.max_iterations)
    mass, c = steps.at(good)
    steps.trace.sort(key=lambda d: d["t"])
    return WorstViolation(good, mass, c(test.z) == 1, c, steps.trace)


def group_description(
    desc: np.ndarray, s: np.ndarray, y: np.ndarray, in_g: np.ndarray, y_value: int
) -> dict[str, Any]:
    out: dict[str, Any] = {"n_test": len(s)}
    for key, grp in (("+1", s > 0), ("-1", s < 0)):
        m = in_g & grp
        n = int(m.sum())
        out[key] = {
            "n": n,
            "mean": desc[m].mean(0).tolist() if n else None,
            "sd": desc[m].std(0).tolist() if n else None,
            "rate": float(np.mean(y[m] == y_value)) if n else None,
        }
    return out



def _fmt_threshold(v: float) -> str:
    return fmt_detail(v)


def _condition(name: str, lo: float | None, hi: float | None, integer: bool) -> str:
    """``lo < x <= hi`` in words; integer columns as ``x >= a`` / ``x <= b``, one-hot
    columns (``col=value``, split at 0.5) as ``col is value`` / ``col is not value``."""
    if "=" in name:
        col, val = name.split("=", 1)
        if lo is not None and lo >= 0 and (hi is None or hi >= 1):
            return f"{col} is {val}"
        if hi is not None and hi < 1 and (lo is None or lo < 0):
            return f"{col} is not {val}"
    if integer:
        a = None if lo is None else math.floor(lo) + 1
        b = None if hi is None else math.floor(hi)
        if a is not None and b is not None:
            return f"{name} = {a}" if a == b else f"{a} <= {name} <= {b}"
        return f"{name} >= {a}" if a is not None else f"{name} <= {b}"
    if lo is not None and hi is not None:
        return f"{_fmt_threshold(lo)} < {name} <= {_fmt_threshold(hi)}"
    return f"{name} > {_fmt_threshold(lo)}" if lo is not None else f"{name} <= {_fmt_threshold(hi)}"


def readable_rules(tree: DecisionTreeClassifier, *, names: list[str], desc: np.ndarray) -> str:
    """The regions a fitted tree puts in the subgroup (class True), one per line, as
    readable conditions joined by "and" (``age <= 24 and priors_count >= 3``).

    A node whose leaves all say True is one region (its path only); bounds on the same
    column along a path are merged to the tightest; integer-valued columns are shown
    with integer bounds (sklearn's ``x <= 24.5`` is ``x <= 24``).
    """
    tr = tree.tree_
    pos = list(tree.classes_).index(True) if True in tree.classes_ else None
    if pos is None:
        return ""
    integer = [bool(np.all(np.isfinite(desc[:, j])) and np.all(desc[:, j] == np.round(desc[:, j])))
               for j in range(desc.shape[1])]

    def all_true(node: int) -> bool:
        if tr.children_left[node] < 0:
            return int(np.argmax(tr.value[node][0])) == pos
        return all_true(tr.children_left[node]) and all_true(tr.children_right[node])

    regions: list[tuple[dict[int, list[float | None]], int]] = []

    def walk(node: int, bounds: dict[int, list[float | None]]) -> None:
        if all_true(node):
            regions.append((bounds, int(tr.n_node_samples[node])))
            return
        if tr.children_left[node] < 0:
            return
        j, thr = int(tr.feature[node]), float(tr.threshold[node])
        lo, hi = bounds.get(j, [None, None])
        left = {**bounds, j: [lo, thr if hi is None else min(hi, thr)]}
        right = {**bounds, j: [thr if lo is None else max(lo, thr), hi]}
        walk(tr.children_left[node], left)
        walk(tr.children_right[node], right)

    walk(0, {})
    lines = []
    for bounds, n in sorted(regions, key=lambda r: -r[1]):
        conds = [_condition(names[j], lo, hi, integer[j]) for j, (lo, hi) in sorted(bounds.items())]
        lines.append(f"{' and '.join(conds) or 'everyone'} ({n} held-out rows)")
    return "\n".join(lines)


def rules_of(
    desc: np.ndarray, in_g: np.ndarray, *, names: list[str], seed: int, depth: int
) -> tuple[str, float | None]:
    """A depth-limited decision tree fitted to the subgroup: readable regions, fidelity."""
    if not (in_g.any() and (~in_g).any() and desc.shape[1] > 0):
        return "", None
    tree = DecisionTreeClassifier(
        max_depth=depth, random_state=derive_seed(seed, "rules") % (2**32)
    ).fit(desc, in_g)
    text = readable_rules(tree, names=list(names), desc=desc)
    return text, float(np.mean(tree.predict(desc) == in_g))


