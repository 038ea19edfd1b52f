"""The sampling oracle of Algorithm 2 (Anahideh et al., 2021): a numpy/scikit-learn kernel.

One call of :func:`run_attempt` is one numbered attempt: draw cell weights, bootstrap a
training sample, train one model, evaluate it on the round's test set and return its
accuracy and metric vector. The Spark tasks (``_spark.py``) call exactly this function;
unit tests call it without Spark.

Random-number protocol (fixed, so that any run can be replayed)
---------------------------------------------------------------
``seed`` is the base seed of one attribute (``ctx.seed_for("correlation", attribute)``).

- Round split: ``rng = default_rng(derive_seed(seed, "split", round_id))``; for each
  cell ``c`` in :data:`CELLS` order, ``perm = rng.permutation(rows of c)`` (rows in
  ascending index order), the first ``n_test(c)`` go to the test set, the rest train.
- Attempt: ``rng = default_rng(derive_seed(seed, round_id, attempt))``;
  ``u = rng.random(4)``, ``w = u / u.sum()``, ``size_c = rint(w_c * K)``; for each cell
  in order ``rng.integers(0, n_train(c), size_c)`` indexes the cell's (sorted) training
  rows; then ``random_state = rng.integers(0, 2**31 - 1)`` seeds the estimator.

The bootstrap and the estimator therefore depend on (seed, round, attempt) only, never
on which task or executor ran the attempt, and different model families see the same
bootstrap samples (common random numbers).

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np

from fairspark.metrics import (
    CATALOGUE,
    catalogue_from_counts,
    compare_groups,
    group_rates,
)
from fairspark.numbers import fmt_detail
from fairspark.sampling import derive_seed

__all__ = [
    "CELLS",
    "DEFAULT_METRICS",
    "MODEL_NAMES",
    "PHASES",
    "AttemptResult",
    "AttemptStatus",
    "EmptyCellError",
    "OracleData",
    "OracleModel",
    "RoundSplit",
    "judge_counts",
    "make_model",
    "run_attempt",
    "split_round",
]

#: Group x label cells of the binary view, in the order the oracle draws them.
CELLS: tuple[str, ...] = (
    "unprivileged, unfavourable label",
    "unprivileged, favourable label",
    "privileged, unfavourable label",
    "privileged, favourable label",
)

#: The 20 signed catalogue metrics of Anahideh et al. (2021), in catalogue order.
DEFAULT_METRICS: tuple[str, ...] = tuple(CATALOGUE)

MODEL_NAMES: tuple[str, ...] = ("logistic_regression", "random_forest", "knn", "linear_svm", "mlp")

#: The phases of an attempt whose CPU seconds are measured inside the task
#: (``time.process_time``): the bootstrap draw, the model fit, the test-set
#: predictions and the confusion counts with the catalogue metrics.
PHASES: tuple[str, ...] = ("draw", "fit", "predict", "metrics")

# Defaults chosen for many small fits (K ~ 1000 rows): cheap but not degenerate.
_MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "logistic_regression": {"max_iter": 200},
    "random_forest": {"n_estimators": 50, "n_jobs": 1},
    "knn": {"n_neighbors": 5, "n_jobs": 1},
    "linear_svm": {"max_iter": 2000},
    "mlp": {"hidden_layer_sizes": (16,), "max_iter": 200},
}


#: estimator class -> its parameter names (``get_params`` inspects the signature: slow
#: next to a 1000-row logistic regression when asked once per attempt)
_VALID_PARAMS: dict[type, frozenset[str]] = {}


class AttemptStatus(StrEnum):
    """What became of one attempt of the sampling oracle."""

    ACCEPTED = "accepted"  #: test accuracy at least ``min_accuracy``
    REJECTED = "rejected"  #: accuracy below ``min_accuracy``, or a single-class bootstrap
    FAILED = "failed"  #: the estimator raised


class EmptyCellError(ValueError):
    """A group x label cell has no training rows, so Algorithm 2 cannot draw from it."""


@dataclass(frozen=True)
class OracleData:
    """The shipped sample of one attribute's binary view.

    Attributes
    ----------
    x : (n, d) float64 features (``_fs_x``).
    y : (n,) float64 labels, 1.0 = favourable.
    priv : (n,) bool, privileged flag of the attribute.
    w : (n,) float64 row weights (used in the test-set counts only).
    """

    x: np.ndarray
    y: np.ndarray
    priv: np.ndarray
    w: np.ndarray

    @property
    def cell(self) -> np.ndarray:
        """Cell id of every row: ``2 * privileged + label`` (index into :data:`CELLS`)."""
        return 2 * self.priv.astype(np.int64) + (self.y > 0.5).astype(np.int64)

    def cell_counts(self) -> np.ndarray:
        """Rows per cell, in :data:`CELLS` order."""
        return np.bincount(self.cell, minlength=4)


@dataclass(frozen=True)
class RoundSplit:
    """Row indices of one round: each cell's training rows and the test rows (sorted)."""

    train_cells: tuple[np.ndarray, ...]
    test: np.ndarray


@dataclass(frozen=True)
class AttemptResult:
    """Outcome of one attempt.

    ``status`` is ``accepted``, ``rejected`` (accuracy below ``min_accuracy``, or a
    training sample with a single class) or ``failed`` (the estimator raised);
    ``reason`` says why when not accepted. ``metrics`` follows the requested names.
    ``cpu`` holds the CPU seconds of the attempt's :data:`PHASES`, in that order (0 for
    a phase that did not run).
    """

    status: AttemptStatus
    reason: str | None
    accuracy: float
    metrics: np.ndarray
    cpu: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)


def _n_test(n: int, test_fraction: float) -> int:
    if n <= 1:
        return 0
    return int(min(max(np.floor(test_fraction * n + 0.5), 1), n - 1))


def split_round(data: OracleData, *, seed: int, round_id: int, test_fraction: float) -> RoundSplit:
    """The stratified train/test split of round ``round_id`` (see the module protocol).

    Every cell with at least two rows keeps at least one row on each side.
    """
    rng = np.random.default_rng(derive_seed(seed, "split", round_id))
    cell = data.cell
    train, test = [], []
    for c in range(len(CELLS)):
        perm = rng.permutation(np.flatnonzero(cell == c))
        nt = _n_test(len(perm), test_fraction)
        test.append(perm[:nt])
        train.append(np.sort(perm[nt:]))
    return RoundSplit(tuple(train), np.sort(np.concatenate(test)))


def make_model(name: str, params: Mapping[str, Any] | None = None, *, random_state: int):
    """A fresh scikit-learn estimator of family ``name`` with config hyperparameters.

    Raises
    ------
    ValueError
        Unknown family, or a hyperparameter the estimator does not have.
    """
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.svm import LinearSVC

    classes = {
        "logistic_regression": LogisticRegression,
        "random_forest": RandomForestClassifier,
        "knn": KNeighborsClassifier,
        "linear_svm": LinearSVC,
        "mlp": MLPClassifier,
    }
    if name not in classes:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(classes)}")
    cls = classes[name]
    kw = dict(_MODEL_DEFAULTS[name])
    kw.update(params or {})
    if name == "mlp" and isinstance(kw.get("hidden_layer_sizes"), list):
        kw["hidden_layer_sizes"] = tuple(kw["hidden_layer_sizes"])
    valid = _VALID_PARAMS.get(cls)
    if valid is None:  # the estimator's parameter names, looked up once per process
        valid = _VALID_PARAMS[cls] = frozenset(cls().get_params())
    unknown = sorted(set(kw) - set(valid))
    if unknown:
        raise ValueError(
            f"model {name!r}: unknown hyperparameters {unknown}; "
            f"{cls.__name__} accepts {sorted(valid)}"
        )
    if "random_state" in valid:
        kw["random_state"] = random_state
    return cls(**kw)


def _group_counts(y: np.ndarray, pred: np.ndarray, w: np.ndarray) -> dict[str, float]:
    yb, pb = y > 0.5, pred > 0.5
    return {
        "tp": float(w[yb & pb].sum()),
        "fp": float(w[~yb & pb].sum()),
        "tn": float(w[~yb & ~pb].sum()),
        "fn": float(w[yb & ~pb].sum()),
    }


@dataclass(frozen=True)
class OracleModel:
    """What one call of the sampling oracle trains and how it judges it.

    Attributes
    ----------
    model, model_params
        Estimator family and hyperparameters (:func:`make_model`).
    k
        Bootstrap size K; cell ``c`` contributes ``rint(w_c K)`` rows.
    min_accuracy
        Accept/reject threshold on the test-set accuracy.
    metrics
        Catalogue metrics to return, in this order.
    """

    model: str
    k: int
    min_accuracy: float
    metrics: Sequence[str] = DEFAULT_METRICS
    model_params: Mapping[str, Any] | None = None


def run_attempt(
    data: OracleData,
    split: RoundSplit,
    oracle: OracleModel,
    *,
    seed: int,
    round_id: int,
    attempt: int,
) -> AttemptResult:
    """One call of the sampling oracle (Algorithm 2) for attempt ``attempt`` of a round.

    Parameters
    ----------
    data, split
        The attribute's sample and the round's split (:func:`split_round`).
    oracle
        The estimator, bootstrap size, acceptance threshold and metrics.
    seed, round_id, attempt
        Base seed and ids; the attempt's random state is
        ``derive_seed(seed, round_id, attempt)``.

    Returns
    -------
    AttemptResult
        Accuracy and metric vector on the round's test set (NaN where a metric is
        undefined on that test set).

    Raises
    ------
    EmptyCellError
        A cell has no training rows but the draw asks rows from it.
    """
    model, k, metrics = oracle.model, oracle.k, oracle.metrics
    c0 = time.process_time()
    rng = np.random.default_rng(derive_seed(seed, round_id, attempt))
    idx = _bootstrap(split, rng, k=k, round_id=round_id)
    random_state = int(rng.integers(0, 2**31 - 1))
    nan_vec = np.full(len(metrics), np.nan)
    y_train = data.y[idx]
    single = len(np.unique(y_train)) < 2
    c1 = time.process_time()
    if single:
        return AttemptResult(AttemptStatus.REJECTED, "training sample has a single class",
                             np.nan, nan_vec, (c1 - c0, 0.0, 0.0, 0.0))
    est = make_model(model, oracle.model_params, random_state=random_state)
    c2 = c3 = c1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning on tiny bootstraps
            est.fit(data.x[idx], y_train)
            c2 = time.process_time()
            pred = est.predict(data.x[split.test])
            c3 = time.process_time()
    except Exception as exc:  # noqa: BLE001 - one bad fit must not end the round
        c4 = time.process_time()
        return AttemptResult(AttemptStatus.FAILED, f"{type(exc).__name__}: {exc}", np.nan,
                             nan_vec, (c1 - c0, max(c2, c1) - c1, c4 - max(c2, c1), 0.0))
    res = _judge(data, split, pred, metrics=metrics, min_accuracy=oracle.min_accuracy)
    return replace(res, cpu=(c1 - c0, c2 - c1, c3 - c2, time.process_time() - c3))


def _bootstrap(split: RoundSplit, rng: np.random.Generator, *, k: int, round_id: int) -> np.ndarray:
    """Row indices of one attempt's training sample: ``rint(w_c K)`` draws from cell c."""
    u = rng.random(len(CELLS))
    sizes = np.rint(u / u.sum() * k).astype(np.int64)
    parts = []
    for c, rows in enumerate(split.train_cells):
        if sizes[c] == 0:
            continue
        if len(rows) == 0:
            raise EmptyCellError(
                f"cell '{CELLS[c]}' has no training rows in round {round_id}; "
                "Algorithm 2 draws from every group x label cell"
            )
        parts.append(rows[rng.integers(0, len(rows), size=sizes[c])])
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def _judge(
    data: OracleData,
    split: RoundSplit,
    pred: np.ndarray,
    *,
    metrics: Sequence[str],
    min_accuracy: float,
) -> AttemptResult:
    """Accuracy and metric vector of a model's test-set predictions; accept or reject."""
    y_t, w_t, p_t = data.y[split.test], data.w[split.test], data.priv[split.test]
    unpriv = _group_counts(y_t[~p_t], pred[~p_t], w_t[~p_t])
    priv = _group_counts(y_t[p_t], pred[p_t], w_t[p_t])
    return judge_counts(unpriv, priv, metrics=metrics, min_accuracy=min_accuracy)


def judge_counts(
    unpriv: dict[str, float], priv: dict[str, float], *, metrics: Sequence[str],
    min_accuracy: float,
) -> AttemptResult:
    """Accuracy and metric vector from each group's weighted confusion cells."""
    with np.errstate(all="ignore"):
        if set(metrics) <= set(CATALOGUE):
            # the same values as catalogue_from_counts for these keys, without its
            # inequality indices (GEI/Theil), which no catalogue metric needs
            cat = compare_groups(unpriv, priv)
            both = {c: unpriv[c] + priv[c] for c in ("tp", "fp", "tn", "fn")}
            cat["accuracy"] = group_rates(both)["accuracy"]
        else:
            cat = catalogue_from_counts(unpriv, priv)
    acc = float(cat["accuracy"])
    vec = np.array([float(cat[m]) for m in metrics], dtype=np.float64)
    if not acc >= min_accuracy:
        return AttemptResult(
            AttemptStatus.REJECTED,
            f"accuracy {fmt_detail(acc, decimals=4)} < min_accuracy {min_accuracy}", acc, vec
        )
    return AttemptResult(AttemptStatus.ACCEPTED, None, acc, vec)
