"""Result types of mdfa: one split, the grouped statistics, one attribute, the audit.

They hold numbers only; :mod:`fairspark.mdfa.audit` fills them and
:mod:`fairspark.mdfa.report` draws them, so neither imports the other.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fairspark.mdfa.null import CorrectedGamma, NullReference, corrected_gamma
from fairspark.numbers import fmt_count, fmt_detail

#: the position of the audit's report section (``SPEC.order``)
ORDER = 35

__all__ = [
    "ORDER",
    "AttributeResult",
    "GroupedStats",
    "MDFAResult",
    "SplitResult",
    "Spread",
    "finding",
    "split_frame",
    "split_schema",
    "subgroup_summary",
    "verdict",
]

#: Spark type of each :class:`SplitResult` annotation (``X | None`` is nullable ``X``)
_SPARK_TYPES = {"int": "int", "float": "double", "str": "string"}


@dataclass
class SplitResult:
    """What one random train/test split of mdfa found (one row of the split table).

    Its fields, in order, are the columns (and, through their annotations, the Spark
    types) of the table :func:`fairspark.mdfa.run_splits` returns.

    Attributes
    ----------
    split:
        Split number (recorded only).
    gamma_pos, gamma_neg, gamma_max:
        Held-out certificate gamma for y = +1, y = -1 and their maximum.
    n_train, n_test:
        Rows in the split's training and held-out parts (the interval's sampling term,
        :mod:`fairspark.mdfa.null`, needs their ratio).
    l2, mmd:
        L2 strength chosen for the balancing net and its held-out MMD (None: uniform).
    y_wv:
        Outcome y of Algorithm 1 (None: Algorithm 1 not run).
    delta, delta_unweighted, ratio_in_subgroup:
        Worst violation: weighted log-ratio (Alg. 1 line 4), unweighted log-ratio and
        the ratio itself, ``Pr[Y=y | S=+1, G] / Pr[Y=y | S=-1, G]`` (the paper's DT_G);
        None where undefined.
    mass, t:
        Training mass of the worst subgroup and the step t it was found at.
    trace:
        JSON list of the evaluated steps ``{"t", "mass", "delta"}``.
    description:
        JSON of the subgroup's description per group (``"+1"``/``"-1"``) and the
        number of held-out rows (``"n_test"``).
    balance_auc, balance_auc_before:
        Held-out weighted (unweighted) ROC AUC of predicting S from the audit features
        (0.5 = balanced); see :mod:`fairspark.mdfa.diagnostics`.
    max_abs_smd_before, max_abs_smd_after:
        Largest held-out |standardised mean difference| of an audit feature between
        S = +1 and S = -1, without and with the weights.
    balance_poor:
        1 when balance_auc > AUC_LIMIT or max_abs_smd_after > SMD_LIMIT, else 0.
    smd:
        JSON list of ``[before, after]`` SMD per audit feature (feature order).
    outcome_gap_before, outcome_gap_after:
        Held-out gap between S = +1 and S = -1 in the features-only ``P(Y = +1 | x)``
        (the null model), without and with the weights: the imbalance that turns into
        gamma, which the linear AUC and the SMDs can miss (None: no null model).
    null_draw:
        Which null draw this split evaluated (None: no null reference).
    gamma_null_pos, gamma_null_neg, gamma_null_max:
        gamma(+1), gamma(-1) and their max for that null draw (decisions redrawn from
        ``P(Y | x)`` without S; :mod:`fairspark.mdfa.null`).
    null_more:
        JSON list of ``[draw, gamma_null_pos, gamma_null_neg]`` of the split's other
        null draws (``null_per_split`` > 1).
    rules, rule_fidelity:
        Readable rules of the subgroup, one readable condition per line (the leaves of
        a small decision tree that say "in the subgroup", e.g. ``age <= 24 and
        priors_count >= 3``), and their agreement with the certificate on the held-out
        rows.
    cpu_balance, cpu_certificate, cpu_null, cpu_violation:
        CPU seconds of the split's phases: the balancing (split, standardise, net,
        weights, diagnostics), the certificates for gamma, the null draws'
        certificates, and Algorithm 1 with its rules (None: the phase did not run).
    """

    split: int
    gamma_pos: float
    gamma_neg: float
    gamma_max: float
    n_train: int | None = None
    n_test: int | None = None
    l2: float | None = None
    mmd: float | None = None
    balance_auc: float | None = None
    balance_auc_before: float | None = None
    max_abs_smd_before: float | None = None
    max_abs_smd_after: float | None = None
    balance_poor: int | None = None
    smd: str = "[]"
    outcome_gap_before: float | None = None
    outcome_gap_after: float | None = None
    null_draw: int | None = None
    gamma_null_pos: float | None = None
    gamma_null_neg: float | None = None
    gamma_null_max: float | None = None
    null_more: str = "[]"
    y_wv: int | None = None
    delta: float | None = None
    delta_unweighted: float | None = None
    ratio_in_subgroup: float | None = None
    mass: float | None = None
    t: int | None = None
    trace: str = "[]"
    description: str = "{}"
    rules: str = ""
    rule_fidelity: float | None = None
    cpu_balance: float | None = None
    cpu_certificate: float | None = None
    cpu_null: float | None = None
    cpu_violation: float | None = None


def _spark_type(annotation: str) -> str:
    return _SPARK_TYPES[annotation.removesuffix(" | None")]


def split_schema() -> str:
    """The Spark DDL schema of the split table, from the fields of :class:`SplitResult`."""
    return ", ".join(
        f"{f.name} {_spark_type(str(f.type))}" for f in dataclasses.fields(SplitResult)
    )


def split_frame(splits: list[SplitResult]) -> pd.DataFrame:
    """The split table: one row per split, one typed column per field of SplitResult."""
    fields = dataclasses.fields(SplitResult)
    pdf = pd.DataFrame([dataclasses.astuple(r) for r in splits], columns=[f.name for f in fields])
    for f in fields:
        kind = _spark_type(str(f.type))
        if kind == "double":
            pdf[f.name] = pd.to_numeric(pdf[f.name], errors="coerce").astype("float64")
        elif kind == "int":
            pdf[f.name] = pd.array(pdf[f.name], dtype="Int32")
        else:
            pdf[f.name] = pdf[f.name].astype("object")
    return pdf


@dataclass
class Spread:
    """Mean, sd, 2.5/97.5 percentiles over the finite per-split values of one number.

    ``n`` counts the finite values, ``n_inf`` the infinite ones (left out of the rest).
    """

    mean: float | None
    sd: float | None
    p2_5: float | None
    p97_5: float | None
    n: int
    n_inf: int

    @classmethod
    def of(cls, values: np.ndarray) -> Spread:
        """The spread of ``values`` (NaN and +-inf left out)."""
        v = values[np.isfinite(values)]
        return cls(
            mean=float(np.mean(v)) if len(v) else None,
            sd=float(np.std(v, ddof=1)) if len(v) > 1 else None,
            p2_5=float(np.percentile(v, 2.5)) if len(v) else None,
            p97_5=float(np.percentile(v, 97.5)) if len(v) else None,
            n=int(np.isfinite(values).sum()),
            n_inf=int(np.isinf(values).sum()),
        )

    def as_dict(self) -> dict[str, Any]:
        """The summary.json form."""
        return dataclasses.asdict(self)


def verdict(
    spread: Spread, *, null: NullReference | None = None, poor_splits: int = 0,
    splits: int = 0,
) -> str:
    """Words for gamma_max, judged against its null reference (:mod:`fairspark.mdfa.null`).

    "evidence of multi-differential unfairness" only when the mean gamma_max is above
    the null reference's prediction bound; without a null reference no verdict (the
    spread over train/test splits of one sample is not a sampling error). With poor
    balance in at least half of the ``splits`` (``poor_splits``) a warning that gamma
    itself mixes imbalance with differential treatment.
    """
    m = spread.mean
    if m is None:
        return "not computed"
    if null is None:
        words = ("not judged: no null reference (null_draws = 0 or fewer than 3 null "
                 "draws); the spread over splits of one sample is not a sampling error")
    else:
        # the test statistic, not the reported gamma_max (AttributeResult.reported)
        ref = (f"test statistic (raw mean over splits of the larger gamma(y) of each "
               f"split) {fmt_detail(m, decimals=4)} against {fmt_detail(null.mean, decimals=4)} "
               f"(sd {fmt_detail(null.sd, decimals=4)}) for decisions "
               f"redrawn from the audit features alone, {null.draws} draws; "
               f"p = {fmt_detail(null.p_value, 2)}, level {fmt_detail(null.level, 6)}")
        words = (f"evidence of multi-differential unfairness ({ref})" if null.evidence else
                 f"no evidence of multi-differential unfairness ({ref})")
    if splits and 2 * poor_splits >= splits:
        from fairspark.mdfa.diagnostics import AUC_LIMIT, SMD_LIMIT

        words += (
            f"; the weights leave the groups unbalanced in {poor_splits} of {splits} "
            f"splits (held-out AUC of S from the features > {AUC_LIMIT} or a feature's "
            f"|SMD| > {SMD_LIMIT}), so gamma alone cannot be read as differential "
            "treatment: part of it is imbalance the weights did not remove (the null "
            "reference carries the same imbalance)"
        )
    return words


#: the per-label gammas whose larger one is the reported gamma_max
LABEL_KEYS = ("gamma_pos", "gamma_neg")


def _larger(values: dict[str, float | None]) -> str | None:
    """The key of the larger finite value (the first on a tie), None when none is."""
    best = None
    for k, v in values.items():
        if v is not None and np.isfinite(v) and (best is None or v > values[best]):
            best = k
    return best


@dataclass
class GroupedStats:
    """Aggregates of one attribute over the whole audited table.

    Attributes
    ----------
    cells:
        One row per (s, y) with ``n`` (rows), ``w`` (weight sum) and, per description
        column ``j``, ``sum_j`` and ``sq_j``.
    desc_names:
        Names of the description columns.
    baseline:
        The same statistics with the baseline decision (``columns.baseline``) as y, on
        the same rows and from the same aggregation; None without a baseline.
    """

    cells: pd.DataFrame
    desc_names: list[str]
    baseline: GroupedStats | None = None

    def count(self, *, s: int | None = None, y: int | None = None, weighted: bool = False) -> float:
        """Rows (or weight) in the cells matching s and y (None: any)."""
        m = np.ones(len(self.cells), dtype=bool)
        if s is not None:
            m &= self.cells["s"].to_numpy() == s
        if y is not None:
            m &= self.cells["y"].to_numpy() == y
        return float(self.cells.loc[m, "w" if weighted else "n"].sum())

    def cell_counts(self) -> dict[tuple[int, int], int]:
        """Rows per (s, y) cell."""
        return {(int(r.s), int(r.y)): int(r.n) for r in self.cells.itertuples(index=False)}

    def group_description(self, s: int) -> dict[str, Any]:
        """Means and standard deviations (population) of the description columns in group s."""
        c = self.cells[self.cells["s"] == s]
        n = float(c["n"].sum())
        if n == 0:
            return {"n": 0, "mean": None, "sd": None}
        means, sds = [], []
        for j in range(len(self.desc_names)):
            m = float(c[f"sum_{j}"].sum()) / n
            var = max(float(c[f"sq_{j}"].sum()) / n - m * m, 0.0)
            means.append(m)
            sds.append(var**0.5)
        return {"n": int(n), "mean": means, "sd": sds}

    def rate(self, *, s: int, y: int) -> float:
        """Weighted Pr[Y = y | S = s] (NaN for an empty group)."""
        den = self.count(s=s, weighted=True)
        return self.count(s=s, y=y, weighted=True) / den if den > 0 else float("nan")


@dataclass
class AttributeResult:
    """Everything mdfa found for one attribute.

    Attributes
    ----------
    attribute, target_label:
        The attribute's name and words for its s = +1 group.
    other_label:
        Words for its s = -1 group.
    splits:
        The split table (:func:`split_frame`), ordered by split.
    stats:
        Grouped statistics over all audited rows.
    sample_rows:
        Rows of the collected sample.
    features, dropped_constant:
        Audit features used and constant ones left out.
    aggregates:
        :class:`Spread` over splits of gamma_pos, gamma_neg, gamma_max, delta,
        delta_unweighted, ratio_in_subgroup and mass.
    y_counts:
        Outcome y of Algorithm 1 -> number of splits that used it, most frequent
        first (empty when Algorithm 1 did not run).
    y_major:
        The most frequent of them (None when Algorithm 1 did not run).
    ratio_overall:
        ``Pr[Y=y_major | S=+1] / Pr[Y=y_major | S=-1]`` over all audited rows (the
        paper's DI, the aggregate counterpart of ``ratio_in_subgroup``), None where
        undefined. Computed once: the ``outcome_ratio_overall`` row of metrics.parquet
        and the report show this value.
    null:
        The observed mean gamma_max against its null reference
        (:func:`fairspark.mdfa.null.null_reference`; None: none).
    splits_stop:
        How many splits ran and why no more did (``splits: auto``), in words.
    l2:
        The balancing net's L2 strength used by the splits (chosen once, or fixed),
        None when each split chose its own or there is no net.
    view_cpu:
        CPU seconds of the work done once for the view on the driver: ``null_model``
        and ``balancing_net`` (see :meth:`cost`).
    """

    attribute: str
    target_label: str
    splits: pd.DataFrame
    stats: GroupedStats
    sample_rows: int
    features: list[str]
    dropped_constant: list[str]
    aggregates: dict[str, Spread] = field(default_factory=dict)
    y_counts: dict[int, int] = field(default_factory=dict)
    y_major: int | None = None
    ratio_overall: float | None = None
    other_label: str = "other group"
    null: NullReference | None = None
    splits_stop: str | None = None
    l2: float | None = None
    view_cpu: dict[str, float] = field(default_factory=dict)

    def cost(self) -> dict[str, Any]:
        """Where the attribute's CPU went: seconds per split by phase (mean over the
        splits; Algorithm 1 over the splits that ran it), their sums over the splits,
        and the per-view work (``view_cpu``: the null model and the balancing net)."""
        phases = {"balancing": "cpu_balance", "certificate": "cpu_certificate",
                  "null": "cpu_null", "algorithm_1": "cpu_violation"}
        per, total = {}, {}
        for name, col in phases.items():
            v = (pd.to_numeric(self.splits[col], errors="coerce").to_numpy(dtype=float)
                 if col in self.splits else np.array([]))
            v = v[np.isfinite(v)]
            per[name] = float(v.mean()) if len(v) else None
            total[name] = float(v.sum()) if len(v) else 0.0
        splits_total = float(sum(total.values()))
        return {"splits": len(self.splits), "cpu_s_per_split": per,
                "cpu_s_splits": total, "cpu_s_view": dict(self.view_cpu),
                "cpu_s": splits_total + float(sum(self.view_cpu.values()))}

    @property
    def corrected(self) -> dict[str, CorrectedGamma]:
        """The reported gammas: ``gamma_pos`` and ``gamma_neg`` less their
        features-only null reference, with 95% intervals
        (:func:`fairspark.mdfa.null.corrected_gamma`), and ``gamma_max``, the larger of
        the two (:meth:`max_key`) with its interval; empty without a null reference."""
        out = {}
        for key in LABEL_KEYS:
            c = corrected_gamma(self.splits, observed=key) if key in self.splits else None
            if c is not None:
                out[key] = c
        top = _larger({k: c.value for k, c in out.items()})
        if top is not None:
            out["gamma_max"] = out[top]
        return out

    def max_key(self) -> str | None:
        """Which gamma(y) the reported gamma_max is: ``gamma_pos`` or ``gamma_neg``,
        the one with the larger reported value (the favourable label on a tie; None
        when neither was computed).

        gamma_max is the maximum it is named for, the max over y of the printed
        gamma(y), not the mean over splits of per-split maxima (which, less its own
        reference, can fall below a printed gamma(y)); the verdict's test statistic,
        the raw mean over splits of the per-split max, is named as such
        (:func:`verdict`)."""
        corrected = self.corrected
        if corrected:
            return _larger({k: c.value for k, c in corrected.items() if k in LABEL_KEYS})
        return _larger({k: self.aggregates[k].mean for k in LABEL_KEYS
                        if k in self.aggregates})

    def reported(self, key: str) -> tuple[float | None, float | None, float | None]:
        """The value and 95% interval of a gamma as its metrics.parquet row has them:
        less the features-only reference where there is one, else the raw mean over
        splits with the 2.5/97.5 percentiles; ``gamma_max`` is :meth:`max_key`'s."""
        if key == "gamma_max":
            top = self.max_key()
            if top is None:
                return None, None, None
            key = top
        c = self.corrected.get(key)
        if c is not None:
            return c.value, c.lower, c.upper
        g = self.aggregates[key]
        return g.mean, g.p2_5, g.p97_5

    @property
    def poor_balance_splits(self) -> int:
        """Splits whose held-out balance is poor (see :mod:`fairspark.mdfa.diagnostics`)."""
        v = pd.to_numeric(self.splits.get("balance_poor", pd.Series(dtype=float)),
                          errors="coerce")
        return int((v == 1).sum())

    def verdict(self) -> str:
        """The gamma_max verdict with the balance warning."""
        return verdict(self.aggregates["gamma_max"], null=self.null,
                       poor_splits=self.poor_balance_splits, splits=len(self.splits))

    def smd_table(self, redacted: set[str] | list[str] = ()) -> list[dict[str, Any]]:
        """Mean over splits of each audit feature's SMD before and after weighting;
        ``redacted`` columns (and their one-hot levels) are left out by name."""
        per = [json.loads(v) for v in self.splits.get("smd", []) if v and v != "[]"]
        out = []
        for j, name in enumerate(self.features):
            if name.split("=", 1)[0] in set(redacted):
                continue
            vals = np.array([p[j] for p in per if len(p) > j], dtype=float)
            if not len(vals):
                continue
            b, a = vals[:, 0], vals[:, 1]
            out.append({"feature": name,
                        "before": float(np.nanmean(b)) if np.isfinite(b).any() else None,
                        "after": float(np.nanmean(a)) if np.isfinite(a).any() else None})
        return out


def _percent(v: float | None) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{fmt_detail(100 * v, decimals=0)}%"


def _outcome_words(y: int) -> str:
    return "the favourable decision" if y > 0 else "the unfavourable decision"


def _group_words(label: str) -> str:
    """``"unprivileged (Female)"`` -> ``"Female"``; a predicate label stays as it is."""
    if label.endswith(")") and "(" in label and "predicate" not in label:
        return label[label.index("(") + 1:-1]
    return label


def subgroup_summary(res: AttributeResult) -> dict[str, Any] | None:
    """Averages over the splits whose Algorithm 1 used ``res.y_major``: held-out share of
    the subgroup, its estimated size among the audited rows (rounded; with the 2.5 and
    97.5 percentiles over those splits) and the rate of Y = y_major per group inside it
    (None when Algorithm 1 did not run or found nothing).

    The share is of the held-out rows, unweighted: how many people the subgroup holds.
    It is not ``subgroup_mass``, Algorithm 1's stopping quantity (the balancing-weighted
    training mass of the subgroup among Y = y, compared with ``alpha``).
    """
    if res.y_major is None:
        return None
    share, rates = [], {"+1": [], "-1": []}
    for y, raw in zip(res.splits["y_wv"], res.splits["description"], strict=True):
        if y is None or pd.isna(y) or int(y) != res.y_major or not raw or raw == "{}":
            continue
        d = json.loads(raw)
        n_test = d.get("n_test")
        n_g = sum(int((d.get(k) or {}).get("n") or 0) for k in ("+1", "-1"))
        if n_test:
            share.append(n_g / n_test)
        for k in ("+1", "-1"):
            r = (d.get(k) or {}).get("rate")
            if r is not None:
                rates[k].append(float(r))
    if not share or not rates["+1"] or not rates["-1"]:
        return None
    total = res.stats.count()
    lo, hi = np.percentile(share, [2.5, 97.5])
    return {
        "share": float(np.mean(share)),
        "people": round(float(np.mean(share)) * total),
        "people_low": round(float(lo) * total),
        "people_high": round(float(hi) * total),
        "splits": len(share),
        "audited_rows": round(total),
        "rate_target": float(np.mean(rates["+1"])),
        "rate_other": float(np.mean(rates["-1"])),
        "rate_target_overall": res.stats.rate(s=1, y=res.y_major),
        "rate_other_overall": res.stats.rate(s=-1, y=res.y_major),
    }


def finding(res: AttributeResult) -> str | None:
    """The worst violation in one sentence a person can act on (None: Algorithm 1 did
    not run or found no subgroup).

    E.g. "In the worst-treated subgroup of about 1,300 people (4% of the 32,000 audited
    rows; 900 to 1,700 across the splits), Female get the unfavourable decision 84% of
    the time and Male 48% (over all audited rows: 89% and 70%)."
    """
    sub = subgroup_summary(res)
    if sub is None:
        return None
    y = res.y_major if res.y_major is not None else 0
    pct = _percent
    return (
        f"In the worst-treated subgroup of about {fmt_count(sub['people'])} people "
        f"({pct(sub['share'])} of the {fmt_count(sub['audited_rows'])} audited rows; "
        f"{fmt_count(sub['people_low'])} to {fmt_count(sub['people_high'])} across the "
        "splits), "
        f"{_group_words(res.target_label)} get {_outcome_words(y)} "
        f"{pct(sub['rate_target'])} of the time and {_group_words(res.other_label)} "
        f"{pct(sub['rate_other'])} (over all audited rows: {pct(sub['rate_target_overall'])} "
        f"and {pct(sub['rate_other_overall'])})."
    )


@dataclass
class MDFAResult:
    """The typed result of the mdfa audit (``AuditOutcome.result``), drawn by the report.

    Attributes
    ----------
    attributes:
        Results of the attributes mdfa could audit, in configured order.
    redacted:
        Columns left out of every description (sorted).
    baselines:
        The baseline decision's results (``columns.baseline``) over the same splits, of
        the attributes where it could be audited (:mod:`fairspark.mdfa.paired`).
    """

    attributes: list[AttributeResult] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    baselines: list[AttributeResult] = field(default_factory=list)
