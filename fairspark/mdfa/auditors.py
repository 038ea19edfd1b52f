"""The certificate's concept classes (Gitiaux and Rangwala, 2019): the estimators c is fitted with.

``random_forest`` (the paper: 100 trees of depth 2) is grown by one of two libraries:

- ``lightgbm`` (default): LightGBM's random-forest mode on 63 histogram bins, bagging
  63.2% of the rows per tree without replacement (the expected share of distinct rows
  in a bootstrap draw) and ``floor(sqrt(d))`` features per node, as scikit-learn's
  forest draws them. With ``boost_from_average`` off every tree starts from the score
  0, so a leaf's value is ``4 (p - 1/2)`` with ``p`` the weighted share of target +1
  among its rows, and the forest's raw score (the sum of its trees' leaf values) is
  positive exactly where the mean of the leaves' ``p`` is above 1/2: scikit-learn's
  rule for its forest (``predict`` = the class of the larger mean probability, ties
  to -1).
- ``sklearn``: :class:`sklearn.ensemble.RandomForestClassifier` with bootstraps and
  exact thresholds, about ten times the cost on 35,000 rows.

Both give a :class:`Forest`: ``fit``, ``predict`` and ``leaves`` (each row's leaf in
every tree, numbered across the forest), which :class:`LeafVotes` uses to re-estimate
the leaves' votes from new row weights without growing the trees again.

References
----------
.. [1] X. Gitiaux and H. Rangwala, "Multi-Differential Fairness Auditor for Black Box
   Classifiers", arXiv:1903.07609, 2019.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["AUDITORS", "FOREST_LIBRARIES", "Forest", "LeafVotes", "Predictor",
           "certificate_gamma", "fit_certificate", "make_auditor"]

Predictor = Callable[[np.ndarray], np.ndarray]

#: the concept classes of the certificate
AUDITORS = ("random_forest", "svm_rbf", "linear_svm", "logistic_regression")
#: the libraries that grow ``random_forest``
FOREST_LIBRARIES = ("lightgbm", "sklearn")

#: histogram bins of the LightGBM forest
MAX_BIN = 63
#: share of the rows each LightGBM tree is grown on (1 - 1/e, a bootstrap's distinct rows)
BAGGING = 0.632


class Forest:
    """A random forest of depth-``depth`` trees voting in {-1, +1}.

    Parameters
    ----------
    trees:
        Number of trees.
    seed:
        Seed of the bagging and the features drawn per node.
    library:
        ``lightgbm`` or ``sklearn`` (module docstring).
    depth:
        Depth of every tree.
    """

    def __init__(self, *, trees: int, seed: int, library: str = "lightgbm", depth: int = 2):
        if library not in FOREST_LIBRARIES:
            raise ValueError(f"unknown forest library {library!r}; expected one of "
                             f"{list(FOREST_LIBRARIES)}")
        self.trees, self.seed, self.library, self.depth = int(trees), int(seed), library, depth
        self.model: Any = None
        self.n_nodes = 0
        self._offsets: np.ndarray | None = None

    def fit(self, z: np.ndarray, target: np.ndarray, sample_weight: np.ndarray) -> Forest:
        """Grow the trees on rows ``z`` with labels ``target`` in {-1, +1}."""
        z = np.asarray(z, dtype=float)
        if self.library == "sklearn":
            from sklearn.ensemble import RandomForestClassifier

            self.model = RandomForestClassifier(
                n_estimators=self.trees, max_depth=self.depth, random_state=self.seed % (2**32),
                n_jobs=1).fit(z, target, sample_weight=sample_weight)
            sizes = np.array([e.tree_.node_count for e in self.model.estimators_])
        else:
            self.model = self._fit_lightgbm(z, target, sample_weight)
            sizes = np.full(self.model.num_trees(), 2 ** self.depth)
        self._offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.n_nodes = int(np.sum(sizes))
        return self

    def _fit_lightgbm(self, z: np.ndarray, target: np.ndarray, weight: np.ndarray) -> Any:
        import lightgbm as lgb

        d = z.shape[1]
        data_params = {"max_bin": MAX_BIN, "min_data_in_leaf": 1, "feature_pre_filter": False,
                       "verbose": -1}
        params = {
            "objective": "binary", "boosting": "rf", "num_leaves": 2 ** self.depth,
            "max_depth": self.depth, "bagging_fraction": BAGGING, "bagging_freq": 1,
            "feature_fraction_bynode": max(1, math.isqrt(d)) / d,
            "min_sum_hessian_in_leaf": 1e-12, "lambda_l2": 0.0, "min_gain_to_split": 0.0,
            "boost_from_average": False, "num_threads": 1, "deterministic": True,
            "force_row_wise": True, "seed": self.seed % (2**31), **data_params,
        }
        ds = lgb.Dataset(z, label=(np.asarray(target) > 0).astype(float),
                         weight=np.asarray(weight, dtype=float), params=data_params)
        return lgb.train(params, ds, num_boost_round=self.trees)

    def predict(self, z: np.ndarray) -> np.ndarray:
        """The forest's vote in {-1, +1} (ties to -1)."""
        z = np.asarray(z, dtype=float)
        if self.library == "sklearn":
            return self.model.predict(z).astype(int)
        return np.where(self.model.predict(z, raw_score=True) > 0, 1, -1).astype(int)

    def leaves(self, z: np.ndarray) -> np.ndarray:
        """``(n, trees)``: each row's leaf in every tree, numbered across the forest."""
        z = np.asarray(z, dtype=float)
        if self.library == "sklearn":
            ids = self.model.apply(z)
        else:
            ids = self.model.predict(z, pred_leaf=True)
        return np.asarray(ids, dtype=np.int64).reshape(len(z), -1) + self._offsets


class LeafVotes:
    """A forest grown once whose leaf votes are re-estimated from new row weights.

    Each tree keeps its splits; a leaf's vote becomes the weighted share of target
    +1 among the training rows that fall in it (every training row, not the tree's
    bagged rows), and the forest says +1 where the mean vote over trees is above 1/2,
    the rule of both libraries' forests (module docstring).

    Parameters
    ----------
    forest:
        A fitted :class:`Forest`.
    z_tr:
        The training rows.
    target:
        Their labels in {-1, +1}.
    """

    def __init__(self, forest: Forest, z_tr: np.ndarray, target: np.ndarray):
        self.forest = forest
        self.ids_tr = forest.leaves(z_tr)
        self.pos = np.asarray(target) > 0

    def votes(self, weights: np.ndarray) -> np.ndarray:
        """Each leaf's share of target +1 under ``weights`` (1/2 in an empty leaf)."""
        trees = self.ids_tr.shape[1]
        flat = self.ids_tr.ravel()
        w = np.asarray(weights, dtype=float)
        up = np.bincount(flat, weights=np.repeat(np.where(self.pos, w, 0.0), trees),
                         minlength=self.forest.n_nodes)
        tot = np.bincount(flat, weights=np.repeat(w, trees), minlength=self.forest.n_nodes)
        return np.divide(up, tot, out=np.full(len(tot), 0.5), where=tot > 0)

    def predictor(self, weights: np.ndarray) -> Callable[..., np.ndarray]:
        """The forest with its leaves voting under ``weights``: ``c(z, ids=None)`` in
        {-1, +1}, where ``ids`` are the rows' :meth:`Forest.leaves` when known."""
        v = self.votes(weights)

        def predict(zz: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
            ids = self.forest.leaves(zz) if ids is None else ids
            return np.where(v[ids].mean(axis=1) > 0.5, 1, -1).astype(int)

        return predict


def make_auditor(name: str, *, seed: int, trees: int = 100, forest: str = "lightgbm") -> Any:
    """A fresh estimator for the certificate's concept class (``trees``: the forest's
    size, 100 as in the paper; ``forest``: the library that grows it)."""
    rs = seed % (2**32)
    if name == "random_forest":
        return Forest(trees=trees, seed=rs, library=forest)
    if name == "svm_rbf":
        from sklearn.svm import SVC

        return SVC(kernel="rbf", C=1.0, gamma="scale")
    if name == "linear_svm":
        from sklearn.svm import LinearSVC

        return LinearSVC(C=1.0, random_state=rs)
    if name == "logistic_regression":
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(C=1.0, max_iter=500)
    raise ValueError(f"unknown auditor {name!r}; expected one of {list(AUDITORS)}")


def fit_certificate(
    auditor: str, z: np.ndarray, target: np.ndarray, weights: np.ndarray, *, seed: int,
    trees: int = 100, forest: str = "lightgbm",
) -> Predictor:
    """Fit c to predict ``target`` in {-1, +1} with sample weights; return x -> {-1, +1}.

    A target with one class gives the constant certificate.
    """
    classes = np.unique(target)
    if len(classes) == 1:
        const = int(classes[0])
        return lambda zz: np.full(len(zz), const, dtype=int)
    model = make_auditor(auditor, seed=seed, trees=trees, forest=forest)
    model.fit(z, target, sample_weight=weights)
    return lambda zz: model.predict(zz).astype(int)


def certificate_gamma(
    c: np.ndarray, *, s: np.ndarray, y: np.ndarray, w: np.ndarray, y_value: int
) -> float:
    """Lemma 3.1: ``gamma(y) = (Pr_w[c = r S Y] + rho(y) - 1) / 4``, r = sign(y).

    ``rho(y) = Pr_w[S = r Y]``. For balanced weights this is Eq. (4),
    ``Pr_w[G, Y=y] (Pr_w[S=+1 | G, Y=y] - 1/2)`` with G = {c = 1}.
    """
    r = 1 if y_value > 0 else -1
    tot = float(np.sum(w))
    if tot <= 0:
        return float("nan")
    acc = float(np.sum(w * (c == r * s * y))) / tot
    rho = float(np.sum(w * (s == r * y))) / tot
    return (acc + rho - 1.0) / 4.0
