"""A round's logistic regressions fitted together: batched Newton in numpy.

The oracle's attempts of one round differ only in their bootstrap sample (and the
estimator's ``random_state``, which the L2 logistic regression does not use). A block
of attempts is therefore one computation: the bootstrap rows of every attempt stacked
into a ``(B, K, d + 1)`` array (padded with rows of weight 0), Newton's method on all
B penalised likelihoods at once, and the test-set predictions of all B models as one
matrix product ``x_test @ W^T``.

The objective is scikit-learn's for ``LogisticRegression(penalty="l2")`` with the
solvers ``lbfgs``, ``newton-cg``, ``newton-cholesky``, ``sag`` and ``saga``::

    C * sum_i log(1 + exp(-y_i (x_i w + b))) + ||w||^2 / 2     (b not penalised)

a strictly convex function with one minimiser, which Newton's method (with a
backtracking line search) reaches to ``|step| <= 1e-10``; scikit-learn's lbfgs stops
at its ``tol`` (1e-4) earlier, so the two fits agree to about that tolerance and the
batched one is the closer to the minimiser. The Hessian is formed in float32 (it only
sets the direction; the fixed point depends on the float64 gradient alone), which
halves its cost. Families or hyperparameters outside this objective (``linear_svm``,
an L1 penalty, ``class_weight``, ...) keep the per-model scikit-learn fit.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.special import expit

from fairspark.audits.base import derive_seed
from fairspark.correlation._oracle import (
    _MODEL_DEFAULTS,
    AttemptResult,
    AttemptStatus,
    OracleData,
    OracleModel,
    RoundSplit,
    _bootstrap,
    judge_counts,
    run_attempt,
)

__all__ = ["batched_family", "fit_logistic_batched", "run_attempts_batched",
           "run_round_batched", "task_attempt"]

#: solvers whose objective leaves the intercept unpenalised (liblinear's does not)
_SOLVERS = frozenset({"lbfgs", "newton-cg", "newton-cholesky", "sag", "saga"})
#: hyperparameters that do not change the minimiser (or are honoured: C, fit_intercept)
_NEUTRAL = frozenset({"C", "fit_intercept", "max_iter", "tol", "solver", "penalty",
                      "random_state", "verbose", "n_jobs", "warm_start"})
#: attempts fitted together: the stacked rows take B x K x (d + 1) x 12 bytes
_BLOCK = 64
#: the mean solution of the last block fitted (a warm start for the round's next block)
_LAST_MEAN: list[np.ndarray | None] = [None]


def batched_family(model: str, params: Mapping[str, Any] | None) -> bool:
    """Whether family ``model`` with ``params`` is fitted by :func:`fit_logistic_batched`.

    Only ``logistic_regression`` with an L2 penalty (the default), no class weights and
    a solver that leaves the intercept unpenalised.
    """
    if model != "logistic_regression":
        return False
    kw = {**_MODEL_DEFAULTS[model], **(params or {})}
    if set(kw) - _NEUTRAL:
        return False
    return kw.get("penalty", "l2") == "l2" and kw.get("solver", "lbfgs") in _SOLVERS


def fit_logistic_batched(
    x: np.ndarray, y: np.ndarray, rows: np.ndarray, mask: np.ndarray, *, c: float,
    fit_intercept: bool = True, max_iter: int = 100, start: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Minimise the L2 logistic objective of every bootstrap sample by Newton's method.

    Parameters
    ----------
    x : (n, d) float64 features of the rows drawn from.
    y : (n,) labels in {0, 1}.
    rows : (B, K) int row indices of each sample (a bootstrap's repeated row appears
        repeatedly: an integer weight); padding entries anything.
    mask : (B, K) 1.0 for a sample's rows, 0.0 for padding.
    c : inverse regularisation strength (scikit-learn's ``C``).
    fit_intercept : fit an unpenalised intercept.
    max_iter : Newton iterations at most.
    start : (d + 1,) or (d,) starting point (coefficients, then the intercept) shared by
        every sample, e.g. the mean solution of a previous block of the same round (a
        warm start: fewer iterations to the same minimiser); None: zeros.

    Returns
    -------
    coef : (B, d) and intercept : (B,) (zeros without ``fit_intercept``).
    """
    xe, xe32 = _extended(x, fit_intercept)
    b, d1 = len(rows), xe.shape[1]
    xs, ys = xe[rows], y[rows] * mask  # (B, K, d1), the one large array
    reg = np.ones(d1)
    if fit_intercept:
        reg[-1] = 0.0
    w = np.zeros((b, d1)) if start is None else np.tile(np.asarray(start, np.float64), (b, 1))
    h = np.empty((b, d1, d1))
    fresh = np.ones(b, dtype=bool)  # the Hessian to recompute at this iteration
    active = np.ones(b, dtype=bool)
    z = np.zeros(rows.shape) if start is None else np.einsum("bkd,bd->bk", xs, w)
    for _ in range(max_iter):
        if not active.any():
            break
        p = expit(z)
        g = c * np.einsum("bk,bkd->bd", (p - ys) * mask, xs) + reg * w
        for i in np.flatnonzero(fresh & active):  # one (K, d1) gemm per sample
            xi = xe32[rows[i]]
            s = (mask[i] * p[i] * (1.0 - p[i])).astype(np.float32)
            h[i] = c * ((xi.T * s) @ xi).astype(np.float64) + np.diag(reg + 1e-12)
        step = np.linalg.solve(h, g[:, :, None])[:, :, 0] * active[:, None]
        f0 = _objective(z, ys, mask, w, reg, c)
        dec = np.einsum("bd,bd->b", g, step)
        t = np.ones(b)
        dz = np.einsum("bkd,bd->bk", xs, step)
        for _ls in range(40):  # backtracking (Armijo) per sample
            bad = (_objective(z - t[:, None] * dz, ys, mask, w - t[:, None] * step, reg, c)
                   > f0 - 1e-4 * t * dec + 1e-12 * np.abs(f0))
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
        moved = np.max(np.abs(t[:, None] * step), axis=1)
        scale = 1.0 + np.max(np.abs(w), axis=1)
        w -= t[:, None] * step
        z -= t[:, None] * dz
        # near the minimiser the weights p(1 - p) stop moving: keep the Hessian
        fresh = moved > 1e-3 * scale
        active &= moved > 1e-10 * scale
    coef = w[:, :-1] if fit_intercept else w
    return coef, (w[:, -1] if fit_intercept else np.zeros(b))


#: id(x) -> (x, x with the intercept column, its float32 copy): once per shipped sample
_EXTENDED: dict[tuple[int, bool], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _extended(x: np.ndarray, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray]:
    key = (id(x), fit_intercept)
    hit = _EXTENDED.get(key)
    if hit is None or hit[0] is not x:
        if len(_EXTENDED) > 4:
            _EXTENDED.clear()
        xe = (np.hstack([x, np.ones((len(x), 1))]) if fit_intercept
              else np.asarray(x, np.float64))
        hit = _EXTENDED[key] = (x, xe, xe.astype(np.float32))
    return hit[1], hit[2]


def _objective(z: np.ndarray, y: np.ndarray, m: np.ndarray, w: np.ndarray, reg: np.ndarray,
               c: float) -> np.ndarray:
    """``C * sum(m * (log(1 + e^z) - y z)) + sum(reg * w^2) / 2`` per sample."""
    return c * (m * (np.logaddexp(0.0, z) - y * z)).sum(axis=1) + 0.5 * (reg * w * w).sum(axis=1)


def run_attempts_batched(
    data: OracleData, split: RoundSplit, oracle: OracleModel, *, seed: int, round_id: int,
    attempts: Sequence[int], start: np.ndarray | None = None,
) -> list[AttemptResult]:
    """The attempts ``attempts`` of a round, their logistic regressions fitted together.

    Each attempt draws its bootstrap exactly as :func:`~._oracle.run_attempt` does (the
    same rows, the same single-class rejection); the fits, the predictions and the
    confusion counts are batched. The CPU seconds of a phase are split evenly over the
    block's attempts. ``start``: a warm start for the Newton iterations
    (:func:`fit_logistic_batched`); the mean solution of the block is left in
    :data:`_LAST_MEAN` for the next block of the round.
    """
    kw = {**_MODEL_DEFAULTS[oracle.model], **(oracle.model_params or {})}
    c0 = time.process_time()
    idx, fit_ids = [], []
    out: list[AttemptResult | None] = [None] * len(attempts)
    nan_vec = np.full(len(oracle.metrics), np.nan)
    for j, attempt in enumerate(attempts):
        rng = np.random.default_rng(derive_seed(seed, round_id, attempt))
        rows = _bootstrap(split, rng, k=oracle.k, round_id=round_id)
        if len(np.unique(data.y[rows])) < 2:
            out[j] = AttemptResult(AttemptStatus.REJECTED, "training sample has a single class",
                                   np.nan, nan_vec)
        else:
            idx.append(rows)
            fit_ids.append(j)
    c1 = time.process_time()
    judged: list[AttemptResult] = []
    c2 = c3 = c1
    if fit_ids:
        kmax = max(len(r) for r in idx)
        pad = np.stack([np.pad(r, (0, kmax - len(r))) for r in idx])
        mask = np.stack([np.arange(kmax) < len(r) for r in idx]).astype(np.float64)
        coef, icpt = fit_logistic_batched(
            data.x, data.y, pad, mask, c=float(kw.get("C", 1.0)),
            fit_intercept=bool(kw.get("fit_intercept", True)),
            max_iter=min(int(kw.get("max_iter", 100)), 100), start=start)
        _LAST_MEAN[0] = np.append(coef.mean(axis=0), icpt.mean()) if kw.get(
            "fit_intercept", True) else coef.mean(axis=0)
        c2 = time.process_time()
        pred = (data.x[split.test] @ coef.T + icpt) > 0  # (n_test, B): sklearn's rule
        c3 = time.process_time()
        judged = _judge_block(data, split, pred, oracle)
    c4 = time.process_time()
    nfit = max(len(fit_ids), 1)
    for j, res in zip(fit_ids, judged, strict=True):
        out[j] = res
    share_draw = (c1 - c0) / len(attempts)
    done, fitted_ids = [], set(fit_ids)
    for j, res in enumerate(out):
        assert res is not None
        fitted = j in fitted_ids
        cpu = (share_draw, (c2 - c1) / nfit if fitted else 0.0,
               (c3 - c2) / nfit if fitted else 0.0, (c4 - c3) / nfit if fitted else 0.0)
        done.append(AttemptResult(res.status, res.reason, res.accuracy, res.metrics, cpu))
    return done


def _judge_block(data: OracleData, split: RoundSplit, pred: np.ndarray,
                 oracle: OracleModel) -> list[AttemptResult]:
    """Every model's weighted confusion cells per group by matrix products, then judged."""
    y_t, w_t, p_t = data.y[split.test] > 0.5, data.w[split.test], data.priv[split.test]
    pf = pred.astype(np.float64)
    counts = []
    for grp in (~p_t, p_t):
        wp, wn = w_t * (grp & y_t), w_t * (grp & ~y_t)
        tp, fp = wp @ pf, wn @ pf
        counts.append((tp, fp, wn.sum() - fp, wp.sum() - tp))
    out = []
    for b in range(pred.shape[1]):
        unpriv, priv = ({"tp": float(tp[b]), "fp": float(fp[b]), "tn": float(tn[b]),
                         "fn": float(fn[b])} for tp, fp, tn, fn in counts)
        out.append(judge_counts(unpriv, priv, metrics=oracle.metrics,
                                min_accuracy=oracle.min_accuracy))
    return out


def run_round_batched(
    data: OracleData, split: RoundSplit, oracle: OracleModel, *, seed: int, round_id: int,
    first: int, need: int, cap: int,
) -> list[tuple[int, AttemptResult]]:
    """A round as the sequential loop runs it: attempts ``first, first + 1, ...`` until
    ``need`` are accepted or attempt ``cap`` is reached, computed in blocks; every
    block after the first starts its Newton iterations from the previous block's mean
    model (the same minimisers, fewer iterations; the round is one task's, so the
    start does not depend on partitioning).

    A block is at most the acceptances still needed, so with every attempt accepted
    no attempt past the N-th runs; results past it in a block are dropped. The
    attempts returned (ids and results) are those of the sequential loop.
    """
    out: list[tuple[int, AttemptResult]] = []
    accepted, attempt = 0, first
    start, _LAST_MEAN[0] = None, None
    while accepted < need and attempt < cap:
        nb = min(need - accepted, cap - attempt, _BLOCK)
        ids = list(range(attempt, attempt + nb))
        block = run_attempts_batched(data, split, oracle, seed=seed, round_id=round_id,
                                     attempts=ids, start=start)
        start = _LAST_MEAN[0]  # the next block starts from this one's mean model
        for a, res in zip(ids, block, strict=True):
            out.append((a, res))
            attempt += 1
            accepted += res.status == AttemptStatus.ACCEPTED
            if accepted >= need:
                break
    return out


def task_attempt(
    data: OracleData, split: RoundSplit, oracle: OracleModel, *, seed: int, round_id: int,
    attempt: int, linear_fits: str = "batched",
) -> AttemptResult:
    """One attempt as the Spark tasks compute it: batched for a batched family (a block
    of one attempt: each sample's Newton path does not depend on the block), else
    :func:`~._oracle.run_attempt`."""
    if linear_fits == "batched" and batched_family(oracle.model, oracle.model_params):
        return run_attempts_batched(data, split, oracle, seed=seed, round_id=round_id,
                                    attempts=[attempt])[0]
    return run_attempt(data, split, oracle, seed=seed, round_id=round_id, attempt=attempt)
