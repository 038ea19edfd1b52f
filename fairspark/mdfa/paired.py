"""mdfa's champion-against-challenger part (``columns.baseline``, issue 43).

The baseline decision travels in the challenger's stratified sample (one gather: the
sample is drawn by (s, challenger's y), and ``_yb`` rides along), and its statistics
come from the challenger's one aggregation
(:attr:`~fairspark.mdfa.results.GroupedStats.baseline`). The baseline is then audited
over the **same splits**: the same rows, the same split seeds (so the same 70/30 cuts,
certificate seeds and Algorithm 1 seeds), the same balancing weights (the view's nets
depend on x and s only, :func:`~fairspark.mdfa.certify.balance_split`) and the same
null draws: its null model ``P(Y_b = +1 | x)`` is fitted with the challenger's null
seed (same cross-fitting folds), and draw ``k`` thresholds the same uniforms
``U_k`` at ``p_b(x)`` instead of ``p_c(x)`` (:func:`~fairspark.mdfa.null.null_outcome`)
in the same splits (:func:`~fairspark.mdfa.null.draws_of_split`).

The paired interval (derivation)
--------------------------------
The audit reports, per decision, ``value = T - R`` with ``T`` the mean over the ``n``
splits of gamma and ``R`` the mean over the ``K`` null draws of a draw's mean gamma,
and the interval ``value -+ t_nu scale`` with ``scale^2 = s_g^2 (1/n + rho) +
var(T*_k) / K`` (:mod:`fairspark.mdfa.null`: Nadeau and Bengio's corrected resampled
variance of a mean over splits of one sample, ``rho = n_test / n_train``, plus the
reference mean's own; ``nu`` the Satterthwaite degrees of freedom of the two terms).

Challenger minus baseline is ``D = (T_c - R_c) - (T_b - R_b) = mean_i d_i -
mean_k e_k``, with ``d_i = gamma_c,i - gamma_b,i`` the per-split differences and
``e_k = T*_c,k - T*_b,k`` the per-draw differences (each over the same (split, draw)
evaluations). Both decisions' gammas of one split share its rows, weights and
certificate seed, and both draws ``k`` share their uniforms and splits, so the terms
are positively correlated and their separate intervals cannot be combined. But ``D``
is again "a mean over the splits of one sample less a mean over K draws", of the
paired quantities ``d_i`` and ``e_k``, so the same argument gives the same formula on
them:

    ``scale_D^2 = s_d^2 (1/n + rho) + var(e_k) / K``

(``s_d^2`` the variance over splits of ``d_i``: the covariance of the two decisions
within a split cancels there, as in a paired t test), ``nu`` from
``(s_d^2 (1/n + rho), n - 1)`` and ``(var(e_k) / K, K - 1)``, and the interval
``D -+ t_{nu, 0.975} scale_D``. :func:`~fairspark.mdfa.null.corrected_mean` computes
it from ``d_i`` and ``e_k``. Without a null reference (``null_draws: 0`` or fewer than
3 draws) each decision reports the raw mean over splits with the 2.5/97.5 percentiles
over splits; the difference then reports the mean of ``d_i`` with the percentiles of
``d_i``.

Cost: the Spark side is unchanged (one aggregation, one collect; one more int column
in the sample); on the executors every split is run once more for the baseline (its
certificates, null draws and Algorithm 1; the nets are shared, the weights and balance
diagnostics recomputed), and on the driver one more null model fit: about twice the
audit's split CPU.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fairspark._values import nan_to_none, params_json
from fairspark.audits.base import MetricRow
from fairspark.constants import DEFAULT_INTERVAL_LEVEL
from fairspark.mdfa.certify import MDFASample
from fairspark.mdfa.null import CORRECTED_COLUMNS, corrected_mean
from fairspark.mdfa.results import AttributeResult, Spread
from fairspark.mdfa.rows import AUDIT, attribute_rows, fmt
from fairspark.metrics import BASELINE_MODEL, DIFFERENCE_MODEL
from fairspark.status import Status

__all__ = ["GAMMA_METRICS", "PairedGamma", "baseline_rows", "baseline_sample",
           "difference_rows", "failed_rows", "null_long", "paired_gamma"]

#: the gamma rows (metric, split-table column) that get a paired difference
GAMMA_METRICS = (("gamma", "gamma_pos"), ("gamma_unfavourable", "gamma_neg"),
                 ("gamma_max", "gamma_max"))


def baseline_sample(
    sample: MDFASample, *, y_base: np.ndarray, null_seed: int | None, library: str
) -> MDFASample:
    """The challenger's sample with the baseline's decisions as y.

    The rows, features and view nets stay; the null model is the baseline's,
    ``P(Y_b = +1 | x)``, fitted with the challenger's null seed (``null_seed``; None:
    no null reference) by ``library``.
    """
    out = dataclasses.replace(sample, y=np.asarray(y_base, dtype=int), p_null=None,
                              null_seed=0)
    if null_seed is not None:
        out = out.with_null_model(seed=null_seed, library=library)
    return out


def null_long(splits: pd.DataFrame, observed: str) -> pd.DataFrame:
    """The null values of ``observed`` (``gamma_pos``, ``gamma_neg``, ``gamma_max``)
    in long form: columns ``split``, ``draw`` and ``value``, one row per split and null
    draw it evaluated (``null_draw`` and ``null_more``); empty without null draws."""
    col = CORRECTED_COLUMNS[observed]
    rows: list[tuple[int, int, float]] = []
    if "null_draw" in splits and col in splits:
        more = splits["null_more"] if "null_more" in splits else ["[]"] * len(splits)
        for split, draw, value, extra in zip(splits["split"], splits["null_draw"],
                                             splits[col], more, strict=True):
            if pd.isna(draw):
                continue
            rows.append((int(split), int(draw), float(value) if pd.notna(value) else np.nan))
            for k, pos, neg in json.loads(extra or "[]"):
                pos = np.nan if pos is None else float(pos)
                neg = np.nan if neg is None else float(neg)
                v = {"gamma_pos": pos, "gamma_neg": neg, "gamma_max": max(pos, neg)}[observed]
                rows.append((int(split), int(k), v))
    return pd.DataFrame(rows, columns=["split", "draw", "value"])


@dataclass
class PairedGamma:
    """Challenger minus baseline of one gamma over the same splits (module docstring).

    Attributes
    ----------
    value, lower, upper:
        ``D`` and its interval.
    raw:
        Mean over splits of the per-split differences ``d_i``.
    reference:
        Mean over draws of the per-draw differences ``e_k`` (None: no null reference).
    scale, dof:
        Standard error of ``D`` and the t quantile's degrees of freedom (None: the
        interval is the 2.5/97.5 percentiles of ``d_i``).
    splits, draws:
        ``n`` (splits where both gammas are finite) and ``K``.
    per_split:
        ``d_i`` in split order.
    """

    value: float
    lower: float | None
    upper: float | None
    raw: float
    reference: float | None
    scale: float | None
    dof: float | None
    splits: int
    draws: int
    per_split: list[float]

    @property
    def interval(self) -> str:
        """How the interval was computed, in words."""
        return ("95% paired corrected resampled t over the same splits and null draws"
                if self.scale is not None else
                "2.5/97.5 percentiles over splits of the per-split differences")


def paired_gamma(
    challenger: pd.DataFrame, baseline: pd.DataFrame, *, observed: str,
    coverage: float = DEFAULT_INTERVAL_LEVEL, observed_baseline: str | None = None,
) -> PairedGamma | None:
    """Challenger minus baseline of ``observed`` from the two split tables of the same
    splits (matched by ``split``; None when no split has both values finite).

    ``observed_baseline`` (default ``observed``) is the baseline's column: gamma_max is
    each decision's larger gamma(y), which may be of another y for the baseline; the
    difference ``(T_c - R_c) - (T_b - R_b)`` is then the same paired mean of the
    per-split and per-draw differences of the two columns."""
    ob = observed_baseline or observed
    left = challenger[["split", observed, "n_train", "n_test"]].rename(
        columns={observed: "g_c"})
    both = left.merge(baseline[["split", ob]].rename(columns={ob: "g_b"}), on="split",
                      how="inner")
    d = (pd.to_numeric(both["g_c"], errors="coerce")
         - pd.to_numeric(both["g_b"], errors="coerce")).to_numpy(dtype=float)
    ok = np.isfinite(d)
    if not ok.any():
        return None
    n_tr = float(pd.to_numeric(both.loc[ok, "n_train"], errors="coerce").sum())
    n_te = float(pd.to_numeric(both.loc[ok, "n_test"], errors="coerce").sum())
    draws = null_long(challenger, observed).merge(null_long(baseline, ob),
                                                  on=["split", "draw"], how="inner")
    e = pd.DataFrame({"draw": draws["draw"].astype(float),
                      "value": (draws["value_x"] - draws["value_y"]).astype(float)})
    c = (corrected_mean(d[ok], e, rho=n_te / n_tr if n_tr > 0 else 0.0, coverage=coverage)
         if len(e) else None)
    if c is not None:
        return PairedGamma(value=c.value, lower=c.lower, upper=c.upper, raw=c.raw,
                           reference=c.reference, scale=c.scale, dof=c.dof,
                           splits=int(ok.sum()), draws=c.draws, per_split=d[ok].tolist())
    sp = Spread.of(d[ok])
    return PairedGamma(value=float(sp.mean), lower=sp.p2_5, upper=sp.p97_5, raw=float(sp.mean),
                       reference=None, scale=None, dof=None, splits=int(ok.sum()), draws=0,
                       per_split=d[ok].tolist())


def _reported(res: AttributeResult, key: str) -> float | None:
    """The value of a decision's gamma row (less its reference where there is one)."""
    return res.reported(key)[0]


def _which(metric: str, key: str, key_b: str) -> str:
    """Which per-split gammas a difference row's ``metric`` is the difference of."""
    names = {"gamma_pos": "gamma(y=+1)", "gamma_neg": "gamma(y=-1)"}
    if metric != "gamma_max" or key not in names or key_b not in names:
        return metric
    return (f"gamma_max (the challenger's {names[key]} less the baseline's "
            f"{names[key_b]})")


def baseline_rows(res: AttributeResult, pjson: str | None) -> list[MetricRow]:
    """The baseline decision's rows: the audited decision's rows of ``res`` with
    ``model = baseline``, less the balance rows (the weights depend on the features
    and the groups only: the audited decision's balance rows are the baseline's)."""
    return [dataclasses.replace(r, model=BASELINE_MODEL)
            for r in attribute_rows(res, pjson, balance=False)]


def difference_rows(
    challenger: AttributeResult, baseline: AttributeResult, *, column: str,
) -> tuple[list[MetricRow], dict[str, dict]]:
    """The paired-difference rows of gamma, gamma_unfavourable and gamma_max
    (``model = challenger_minus_baseline``) and their summary.

    ``params`` carries, as the group audit's difference rows do, the two decisions'
    values (``challenger``, ``baseline``), ``se``, and ``worse`` with ``worse_se``,
    ``worse_lower``, ``worse_upper`` (what ``no_worse_than_baseline`` reads): for gamma
    "further from parity" is larger, so ``worse`` is the difference itself.
    """
    rows, summary = [], {}
    top_c, top_b = challenger.max_key(), baseline.max_key()
    for metric, key in GAMMA_METRICS:
        key_b = key
        if key == "gamma_max" and top_c is not None and top_b is not None:
            # gamma_max is each decision's larger gamma(y) (AttributeResult.max_key):
            # the difference of those two, paired over the same splits and draws
            key, key_b = top_c, top_b
        pg = paired_gamma(challenger.splits, baseline.splits, observed=key,
                          observed_baseline=key_b)
        c_val, b_val = _reported(challenger, key), _reported(baseline, key_b)
        extra = {"challenger": nan_to_none(c_val), "baseline": nan_to_none(b_val)}
        if pg is None:
            rows.append(MetricRow(
                audit=AUDIT, attribute=challenger.attribute, group=challenger.target_label,
                metric=metric, model=DIFFERENCE_MODEL, status=Status.NOT_COMPUTED,
                detail="no split has a finite gamma for both decisions",
                params=params_json(baseline_column=column, **extra)))
            continue
        extra |= {"se": pg.scale, "worse": pg.value, "worse_se": pg.scale,
                  "worse_lower": pg.lower, "worse_upper": pg.upper}
        ref = ("" if pg.reference is None else
               f", less the paired null reference {fmt(pg.reference)} ({pg.draws} draws)")
        rows.append(MetricRow(
            audit=AUDIT, attribute=challenger.attribute, group=challenger.target_label,
            metric=metric, model=DIFFERENCE_MODEL, value=pg.value, lower=pg.lower,
            upper=pg.upper,
            detail=(f"challenger minus baseline ({column}) of {_which(metric, key, key_b)} over "
                    f"the same {pg.splits} "
                    f"splits: mean per-split difference {fmt(pg.raw)}{ref}; challenger "
                    f"{fmt(c_val)}, baseline {fmt(b_val)}; interval: {pg.interval}"),
            params=params_json(baseline_column=column, ci_level=DEFAULT_INTERVAL_LEVEL,
                               interval=pg.interval, splits=pg.splits, draws=pg.draws,
                               dof=pg.dof, **extra)))
        summary[metric] = {"difference": pg.value, "lower": pg.lower, "upper": pg.upper,
                           "raw": pg.raw, "reference": pg.reference, "splits": pg.splits,
                           "draws": pg.draws, **extra}
    return rows, summary


def failed_rows(res: AttributeResult, reason: str, *, column: str) -> list[MetricRow]:
    """A failed baseline row and not-computed difference rows (the baseline decision
    cannot be audited by mdfa, e.g. it never varies), the audited decision's kept."""
    out = [MetricRow(audit=AUDIT, attribute=res.attribute, group=res.target_label,
                     metric="gamma_max", model=BASELINE_MODEL, status=Status.FAILED,
                     detail=reason, params=params_json(baseline_column=column))]
    out += [MetricRow(audit=AUDIT, attribute=res.attribute, group=res.target_label,
                      metric=metric, model=DIFFERENCE_MODEL, status=Status.NOT_COMPUTED,
                      detail=f"the baseline decision was not audited: {reason}",
                      params=params_json(baseline_column=column))
            for metric, _ in GAMMA_METRICS]
    return out
