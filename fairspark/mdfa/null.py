"""A null reference for gamma that the audit computes itself.

gamma is positive on almost any real table: the certificate fits noise, and whatever
imbalance the weights leave between S = +1 and S = -1 turns into gamma as soon as the
decision depends on the imbalanced features. The spread of gamma over train/test
splits of one sample says nothing about either. So the verdict asks a different
question: is gamma larger than what decisions that depend on the audit features
*alone* would give on the same rows, with the same weights and certificates?

- **Null model**: ``P(Y = +1 | x)`` without S, a gradient-boosted classifier
  (LightGBM's by default, ``null_model: sklearn`` for scikit-learn's) cross-fitted
  over ``folds`` folds (every row's probability comes from a model that
  did not see it, so the redraws do not copy the observed decisions, S effect
  included).
- **Null draws**: ``K = min(null_draws, splits)`` outcome vectors ``Y*_k ~
  Bernoulli(p(x))``, each from its own seed derived from the attribute's null seed.
  Split ``i`` evaluates ``null_per_split`` of them (:func:`draws_of_split`; default
  2) with the split's own weights and a freshly fitted certificate for each: one
  extra certificate fit per draw (two with a tilt). With 20 splits and 20 draws every
  draw is then seen in two splits, so the split-to-split variance is estimated inside
  the draws instead of standing in from the observed splits.
- **Statistic**: the observed ``T = mean over its n splits of gamma_max``; each draw
  gives ``T*_k = mean over the m_k splits that evaluated it of gamma*_max``.
- **Like with like** (variance components): a split's gamma is ``mu + B + e``, where
  ``B`` (variance ``sigma_b^2``) belongs to the decision vector - what the draw of the
  decisions moves - and ``e`` (variance ``sigma_w^2``) to the split - weights, folds,
  certificate. Under the null, ``T`` varies by ``sigma_b^2 + sigma_w^2 / n``, but a draw's
  ``T*_k`` by ``sigma_b^2 + sigma_w^2 / m_k``: with ``m_k = n / K`` splits per draw (one
  at ``splits = null_draws``) the spread of the ``T*_k`` overstates that of ``T`` by up to
  ``sqrt(n)``-fold and the test loses its power. So ``sigma_w^2`` is estimated from the
  split-to-split variance inside the draws (pooled; from the observed splits when every
  draw has one split), ``sigma_b^2 = max(0, var(T*_k) - sigma_w^2 / m)`` with ``m`` the
  harmonic mean of the ``m_k``, and ``T - mean(T*)`` is scaled by
  ``scale = sqrt(sigma_b^2 + sigma_w^2 / n + var(T*_k) / K)`` (the last term: the
  reference mean is itself estimated from K draws).
- **Verdict**: evidence when ``T`` lies above ``mean(T*) + t_{K-1, 1-level} scale``
  (Student t with the K - 1 degrees of freedom of the draws, conservative for the
  well-estimated within part). ``p_value`` is the matching t tail probability;
  ``rank_p`` the plain Monte-Carlo one against the raw ``T*_k``,
  ``(1 + #{T*_k >= T}) / (K + 1)`` (conservative: the ``T*_k`` average fewer splits).

The verdict conditions on the rows (x, s) as sampled: the null draws redraw only the
decisions, from their distribution given the features (a conditional randomisation
test of "Y independent of S given x"), which is valid whatever population the rows
came from. It says whether *these* decisions depend on S beyond the features.

How large the effect is in the population the rows represent is another question,
answered by the reported gamma and its interval (:func:`corrected_gamma`). Every split
is cut from the same sample, so the mean over n splits does not average out which rows
were sampled: its variance about the population value is ``s_g^2 (1 / n + rho)``, with
``s_g^2`` the variance of the observed gamma over splits and ``rho = n_test / n_train``
(from the split table), the corrected resampled t of Nadeau & Bengio (2003, "Inference
for the generalization error", Machine Learning 52). The observed decisions are the
model's, not a draw, so the between-draw variance ``sigma_b^2`` that the verdict needs
does not enter the interval; the reference mean adds its own ``var(T*_k) / K``:

    ``scale^2 = s_g^2 (1 / n + rho) + var(T*_k) / K``

and the t quantile takes the Welch-Satterthwaite degrees of freedom of the two terms
(``n - 1`` and ``K - 1``). The sampling term ``rho s_g^2`` does not shrink with more
splits, so 20 splits give an interval about ``sqrt((1/20 + rho) / (1/100 + rho))`` =
1.05 times as wide as 100 splits (rho = 3/7). "Evidence" may come with an interval
that holds 0: the decisions on these rows depend on S, but the size of that
dependence in the population is not pinned down.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from fairspark.constants import DEFAULT_INTERVAL_LEVEL

__all__ = ["CORRECTED_COLUMNS", "CorrectedGamma", "NullReference", "corrected_gamma",
           "corrected_mean",
           "draws_of_split", "fit_null_model", "null_draws_used", "null_outcome", "null_reference",
           "predicted_half_width"]


def fit_null_model(
    x: np.ndarray, y: np.ndarray, *, seed: int, folds: int = 5, library: str = "lightgbm"
) -> np.ndarray:
    """Cross-fitted ``P(Y = +1 | x)`` for every row, estimated without S.

    A gradient-boosting classifier (depth 3, 100 rounds of learning rate 0.1, at least
    20 rows per leaf, 255 histogram bins) is fitted on ``folds - 1`` folds and predicts
    the remaining one.

    Parameters
    ----------
    x:
        Audit features ``(n, d)``.
    y:
        Decisions in {-1, +1}.
    seed:
        Seed of the fold assignment and the boosting.
    folds:
        Number of cross-fitting folds (at least 2).
    library:
        ``lightgbm`` (default: one thread, deterministic) or ``sklearn``
        (``HistGradientBoostingClassifier``, about five times the cost).

    Returns
    -------
    numpy.ndarray
        ``(n,)`` probabilities clipped to [0.001, 0.999]; the overall rate of +1 for
        every row when one fold lacks a class.
    """
    if library not in ("lightgbm", "sklearn"):
        raise ValueError(f"unknown null model library {library!r}; expected 'lightgbm' or "
                         "'sklearn'")
    x = np.asarray(x, dtype=float)
    yy = np.asarray(y) > 0
    n = len(yy)
    p = np.full(n, float(np.mean(yy)) if n else 0.5)
    rng = np.random.default_rng(seed)
    fold = rng.permutation(np.arange(n) % max(2, folds))
    for k in range(max(2, folds)):
        tr, te = fold != k, fold == k
        if not te.any():
            continue
        if len(np.unique(yy[tr])) < 2:
            p[te] = float(np.mean(yy[tr])) if tr.any() else p[te]
            continue
        model = _null_booster(library, seed=(seed + k) % (2**31 - 1)).fit(x[tr], yy[tr])
        p[te] = model.predict_proba(x[te])[:, 1]
    return np.clip(p, 0.001, 0.999)


def _null_booster(library: str, *, seed: int) -> Any:
    """The null model's booster of one fold (see :func:`fit_null_model`)."""
    if library == "sklearn":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(
            max_depth=3, max_iter=100, learning_rate=0.1, min_samples_leaf=20,
            early_stopping=False, random_state=seed,
        )
    from lightgbm import LGBMClassifier

    return LGBMClassifier(
        max_depth=3, num_leaves=8, n_estimators=100, learning_rate=0.1,
        min_child_samples=20, max_bin=255, num_threads=1, deterministic=True,
        force_row_wise=True, random_state=seed, verbose=-1,
    )


def null_outcome(p: np.ndarray, *, seed: int) -> np.ndarray:
    """One null outcome vector: ``+1`` with probability ``p``, else ``-1``."""
    u = np.random.default_rng(seed).random(len(p))
    return np.where(u < p, 1, -1).astype(int)


def null_draws_used(null_draws: int, splits: int) -> int:
    """``K``: the number of null draws the splits are spread over (0: none)."""
    return max(0, min(int(null_draws), int(splits)))


def draws_of_split(split: int, *, k: int, per_split: int = 1) -> list[int]:
    """The null draws split ``split`` evaluates: ``(split + r c) mod k`` for ``r <
    min(per_split, k)``, with ``c`` the smallest integer at least ``k / per_split``
    that is coprime to ``k``.

    Over ``k`` consecutive splits every draw is then seen ``per_split`` times, and two
    draws rarely share both of their splits (``c`` coprime to ``k`` makes the
    ``r c`` distinct), so the draws' means are not pairwise tied together.
    """
    k = int(k)
    if k <= 0:
        return []
    per = max(1, min(int(per_split), k))
    c = max(1, math.ceil(k / per))
    while math.gcd(c, k) != 1:
        c += 1
    return [int((int(split) + r * c) % k) for r in range(per)]


@dataclass
class NullReference:
    """The observed gamma_max against its null reference (see the module docstring).

    Attributes
    ----------
    observed:
        ``T``, the mean over splits of gamma_max.
    draws:
        ``K``, the number of null draws with a finite statistic.
    mean, sd:
        Mean and standard deviation of ``T*`` over the draws.
    p2_5, p97_5:
        Percentiles of ``T*``.
    bound:
        The ``1 - level`` prediction bound of a new null statistic.
    excess:
        ``T - mean(T*)``: the part of gamma that the features alone do not explain.
    p_value, rank_p:
        Student-t and Monte-Carlo p-values of ``T``.
    level:
        The level of the verdict.
    evidence:
        ``T > bound``.
    sd_between, sd_within:
        Estimated ``sigma_b`` (decision vector) and ``sigma_w`` (split) of one split's
        gamma_max under the null.
    scale:
        The standard error of ``T - mean(T*)`` the bound uses (given the rows).
    """

    observed: float
    draws: int
    mean: float
    sd: float
    p2_5: float
    p97_5: float
    bound: float
    excess: float
    p_value: float
    rank_p: float
    level: float
    evidence: bool
    sd_between: float | None = None
    sd_within: float | None = None
    scale: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The summary.json form."""
        return asdict(self)


def _satterthwaite(terms: list[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of ``sum a_i`` for independent variance
    estimates ``a_i`` with ``nu_i`` degrees of freedom, given as ``(a_i, nu_i)``."""
    total = sum(a for a, _ in terms)
    den = sum(a * a / nu for a, nu in terms if nu > 0 and a > 0)
    if total <= 0 or den <= 0:
        return float(max(1.0, min(nu for _, nu in terms)))
    return float(max(1.0, total * total / den))


def _components(
    g: np.ndarray, long: pd.DataFrame, rho: float
) -> dict[str, Any] | None:
    """Variance components of the observed mean against its null draws (module
    docstring): ``g`` the observed per-split values (finite), ``long`` the null values
    (columns ``draw``, ``value``: one row per split and draw it evaluated), ``rho`` =
    n_test / n_train. None when fewer than 3 draws have a finite value."""
    ok = long["draw"].notna() & np.isfinite(long["value"])
    if not len(g) or not ok.any():
        return None
    groups = long.loc[ok, "value"].groupby(long.loc[ok, "draw"].astype(int))
    per = groups.mean().to_numpy(dtype=float)
    sizes = groups.size().to_numpy(dtype=float)
    if len(per) < 3:
        return None
    t_obs, n = float(np.mean(g)), len(g)
    m, sd, kk = float(np.mean(per)), float(np.std(per, ddof=1)), len(per)
    var_g = float(np.var(g, ddof=1)) if n > 1 else 0.0
    dof_within = float(np.sum(sizes - 1))
    if dof_within > 0:  # pooled split-to-split variance inside the draws
        var_w = float(groups.var(ddof=1).fillna(0.0).mul(sizes - 1).sum() / dof_within)
    else:  # one split per draw: the observed splits' spread stands in
        var_w = var_g if n > 1 else sd**2
        dof_within = float(max(1, n - 1))
    m_harm = float(kk / np.sum(1.0 / sizes))
    var_b = max(0.0, sd**2 - var_w / m_harm)
    var_s = rho * (var_g if n > 1 else var_w)
    scale = math.sqrt(var_b + var_w / n + sd**2 / kk)
    # the interval about the population: Nadeau & Bengio's s_g^2 (1/n + rho) for the
    # observed mean and the reference mean's own variance sd^2 / K
    obs_var = (var_g if n > 1 else var_w) * (1.0 / n + rho)
    ref_var = sd**2 / kk
    dof = _satterthwaite([(obs_var, float(max(1, n - 1))), (ref_var, float(kk - 1))])
    return {"t_obs": t_obs, "n": n, "m": m, "sd": sd, "kk": kk, "per": per,
            "var_w": var_w, "var_b": var_b, "var_s": var_s, "var_g": var_g,
            "scale": scale, "scale_sampled": math.sqrt(obs_var + ref_var),
            "dof_sampled": dof, "dof_within": dof_within, "rho": rho}


def _columns(splits: pd.DataFrame, observed: str, null: str):
    """The observed values, the null values in long form (``draw``, ``value``, one row
    per split and draw) and ``rho = n_test / n_train`` of a split table (ValueError
    naming the columns when the split sizes are missing)."""
    missing = [c for c in ("n_train", "n_test") if c not in splits]
    if missing:
        raise ValueError(f"split table lacks {missing}: the interval's sampling term needs "
                         "each split's training and held-out row counts")
    g = pd.to_numeric(splits[observed], errors="coerce").to_numpy(dtype=float)
    n_tr = float(pd.to_numeric(splits["n_train"], errors="coerce").sum())
    n_te = float(pd.to_numeric(splits["n_test"], errors="coerce").sum())
    rho = n_te / n_tr if n_tr > 0 else 0.0
    draws = pd.to_numeric(splits["null_draw"], errors="coerce").tolist()
    values = pd.to_numeric(splits[null], errors="coerce").tolist()
    if "null_more" in splits:  # the split's other draws: [draw, gamma_pos, gamma_neg]
        for more in splits["null_more"]:
            for k, pos, neg in json.loads(more or "[]"):
                pos = np.nan if pos is None else float(pos)
                neg = np.nan if neg is None else float(neg)
                draws.append(k)
                values.append({"gamma_null_pos": pos, "gamma_null_neg": neg,
                               "gamma_null_max": max(pos, neg)}[null])
    long = pd.DataFrame({"draw": pd.to_numeric(pd.Series(draws, dtype=object)),
                         "value": pd.Series(values, dtype=float)})
    return g[np.isfinite(g)], long, rho


def null_reference(splits: pd.DataFrame, *, level: float) -> NullReference | None:
    """Compare the mean gamma_max of ``splits`` with its null draws.

    Parameters
    ----------
    splits:
        The split table with ``gamma_max``, ``null_draw`` and ``gamma_null_max``.
    level:
        One-sided level of the verdict (e.g. 0.01).

    Returns
    -------
    NullReference or None
        None when fewer than 3 null draws have a finite statistic.
    """
    from scipy import stats

    if "null_draw" not in splits or "gamma_null_max" not in splits:
        return None
    c = _components(*_columns(splits, "gamma_max", "gamma_null_max"))
    if c is None:
        return None
    t_obs, m, sd, kk, scale, per = c["t_obs"], c["m"], c["sd"], c["kk"], c["scale"], c["per"]
    bound = m + float(stats.t.ppf(1.0 - level, kk - 1)) * scale
    if scale > 0:
        p_value = float(stats.t.sf((t_obs - m) / scale, kk - 1))
    else:
        p_value = 0.0 if t_obs > m else 1.0
    return NullReference(
        observed=t_obs, draws=kk, mean=m, sd=sd,
        p2_5=float(np.percentile(per, 2.5)), p97_5=float(np.percentile(per, 97.5)),
        bound=bound, excess=t_obs - m, p_value=p_value,
        rank_p=float((1 + np.sum(per >= t_obs)) / (kk + 1)), level=float(level),
        evidence=bool(t_obs > bound), sd_between=math.sqrt(c["var_b"]),
        sd_within=math.sqrt(c["var_w"]), scale=scale,
    )


#: the split-table columns of each reported gamma and of its null draws
CORRECTED_COLUMNS = {"gamma_pos": "gamma_null_pos", "gamma_neg": "gamma_null_neg",
                     "gamma_max": "gamma_null_max"}


@dataclass
class CorrectedGamma:
    """gamma less what decisions that depend on the audit features alone give
    (the reported gamma at the defaults).

    The raw mean over splits is biased upwards: the certificate turns whatever
    imbalance the weights leave, and the noise it fits, into gamma (about 0.006 on the
    paper's synthetic design, 0.007 on COMPAS, for decisions with no S effect at all).
    The null draws carry the same bias through the same weights and certificates, so
    ``value = raw - reference`` removes it, and its interval carries the uncertainty of
    both and of the sampled rows: ``value -+ t_{nu, (1 + coverage) / 2} scale`` with
    ``scale^2 = s_g^2 (1 / n + rho) + var(T*_k) / K`` (Nadeau and Bengio's corrected
    resampled variance of the observed mean, plus the reference mean's own) and
    ``nu`` the Satterthwaite degrees of freedom of the two terms (module docstring).
    For gamma_max, ``value`` is the verdict's
    ``excess``; the verdict judges it on the verdict's own scale (given the rows), so
    "evidence" may come with an interval that holds 0.

    Attributes
    ----------
    value:
        ``raw - reference``.
    lower, upper:
        The ``coverage`` interval of ``value``.
    raw:
        Mean over splits of the observed gamma (the paper's estimate).
    reference:
        Mean over the K null draws of a draw's mean gamma.
    scale:
        Standard error of ``value`` about the population gamma.
    sd_sampling:
        ``sqrt(rho s_g^2)``, the sampling term of ``scale``.
    draws:
        K.
    coverage:
        Two-sided coverage of ``lower``/``upper``.
    dof:
        Satterthwaite degrees of freedom of the t quantile of the interval.
    """

    value: float
    lower: float
    upper: float
    raw: float
    reference: float
    scale: float
    draws: int
    coverage: float
    sd_sampling: float | None = None
    dof: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The summary.json form."""
        return asdict(self)


def _gamma_components(splits: pd.DataFrame, observed: str) -> dict[str, Any] | None:
    """The variance components of ``observed`` against its null column (None without
    null draws or with fewer than 3)."""
    null = CORRECTED_COLUMNS[observed]
    if "null_draw" not in splits or null not in splits:
        return None
    return _components(*_columns(splits, observed, null))


def corrected_gamma(
    splits: pd.DataFrame, *, observed: str = "gamma_max", coverage: float = DEFAULT_INTERVAL_LEVEL
) -> CorrectedGamma | None:
    """The bias-corrected mean of ``observed`` (``gamma_pos``, ``gamma_neg`` or
    ``gamma_max``) and its interval (None without at least 3 null draws)."""
    null = CORRECTED_COLUMNS[observed]
    if "null_draw" not in splits or null not in splits:
        return None
    g, long, rho = _columns(splits, observed, null)
    return corrected_mean(g, long, rho=rho, coverage=coverage)


def corrected_mean(
    g: np.ndarray, long: pd.DataFrame, *, rho: float, coverage: float = DEFAULT_INTERVAL_LEVEL
) -> CorrectedGamma | None:
    """:func:`corrected_gamma` from its parts: the per-split values ``g``, the null
    values in long form ``long`` (columns ``draw`` and ``value``, one row per split
    and draw it evaluated) and ``rho = n_test / n_train``. A paired difference of two
    decisions over the same splits and draws is its per-split and per-draw
    differences (:mod:`fairspark.mdfa.paired`). None with fewer than 3 finite draws."""
    from scipy import stats

    g = np.asarray(g, dtype=float)
    c = _components(g[np.isfinite(g)], long, rho)
    if c is None:
        return None
    value = c["t_obs"] - c["m"]
    half = float(stats.t.ppf(0.5 + coverage / 2.0, c["dof_sampled"])) * c["scale_sampled"]
    return CorrectedGamma(value=value, lower=value - half, upper=value + half,
                          raw=c["t_obs"], reference=c["m"], scale=c["scale_sampled"],
                          draws=c["kk"], coverage=float(coverage),
                          sd_sampling=math.sqrt(c["var_s"]), dof=c["dof_sampled"])


def predicted_half_width(
    splits: pd.DataFrame, *, n_splits: int, k: int, per_split: int = 1,
    observed: str = "gamma_max", coverage: float = DEFAULT_INTERVAL_LEVEL,
) -> tuple[float, float] | None:
    """The half-width of the reported interval of ``observed`` now and with
    ``n_splits`` splits, from the variance components of the splits so far.

    Both come from the same model of the components (:func:`corrected_gamma`'s
    ``scale^2 = s_g^2 (1 / n + rho) + (sigma_b^2 + sigma_w^2 / m) / K``, with ``m`` the
    harmonic mean of the splits per draw when the splits evaluate
    :func:`draws_of_split`, and the Satterthwaite degrees of freedom of the two terms),
    so their ratio is what more splits buy: the ``splits: auto`` rule adds a wave only
    while ``1 - predicted / now`` is at least ``splits_tolerance``. The sampling term
    ``rho s_g^2`` does not shrink.

    Parameters
    ----------
    splits:
        The split table so far (with null draws).
    n_splits:
        The number of splits to predict for.
    k:
        K, the null draws the splits cycle through.
    per_split:
        Null draws per split.
    observed:
        ``gamma_max`` (default), ``gamma_pos`` or ``gamma_neg``.
    coverage:
        Two-sided coverage of the interval.

    Returns
    -------
    tuple of float or None
        (half-width now, predicted half-width), None without at least 3 null draws.
    """
    from scipy import stats

    c = _gamma_components(splits, observed)
    if c is None:
        return None
    var_b, var_w, kk, rho = c["var_b"], c["var_w"], c["kk"], c["rho"]
    var_g = c["var_g"] if c["n"] > 1 else var_w

    def half(n: int) -> float:
        seen = [d for i in range(int(n)) for d in draws_of_split(i, k=k, per_split=per_split)]
        sizes = np.bincount(np.asarray(seen, dtype=int), minlength=int(k)).astype(float)
        sizes = sizes[sizes > 0]
        m = float(len(sizes) / np.sum(1.0 / sizes))
        obs_var, ref_var = var_g * (1.0 / n + rho), (var_b + var_w / m) / kk
        dof = _satterthwaite([(obs_var, float(max(1, n - 1))), (ref_var, float(kk - 1))])
        return float(stats.t.ppf(0.5 + coverage / 2.0, dof)) * math.sqrt(obs_var + ref_var)

    return half(c["n"]), half(n_splits)
