"""mdfa's long result rows of one attribute (``MetricRow``), from its
:class:`~.results.AttributeResult`: the gammas, the null reference, the balance of the
weights and Algorithm 1's worst violation.

The audited decision's rows carry no ``model``; the baseline decision's
(``columns.baseline``) are the same rows with ``model = baseline``
(:mod:`fairspark.mdfa.paired`).
"""

from __future__ import annotations

from fairspark.audits.base import MetricRow
from fairspark.mdfa.diagnostics import AUC_LIMIT, SMD_LIMIT
from fairspark.mdfa.results import AttributeResult, finding
from fairspark.numbers import fmt_detail, format_number
from fairspark.status import Status

__all__ = ["attribute_rows", "balance_rows", "fmt", "gamma_rows", "null_rows", "row_note",
           "violation_rows"]

AUDIT = "mdfa"


def fmt(v: float | None, nd: int = 4) -> str:
    """``v`` with ``nd`` decimals, ``n/a`` for None (stored in a row's ``detail``:
    Python's own text for NaN and infinities, :func:`fairspark.numbers.format_number`)."""
    if v is None:
        return "n/a"
    return format_number(v, decimals=nd, minus="-", missing="nan", infinity="inf")


def row_note(res: AttributeResult) -> str:
    """What every row of the attribute says about its sample and splits."""
    note = (
        f"s=+1 is the {res.target_label}; {len(res.splits)} splits of a {res.sample_rows}-row "
        f"sample; lower/upper = 2.5/97.5 percentiles over splits"
    )
    if res.dropped_constant:
        note += f"; constant features left out: {res.dropped_constant}"
    return note


def gamma_rows(res: AttributeResult, pjson: str | None) -> list[MetricRow]:
    """gamma, gamma_unfavourable and gamma_max: less their features-only reference
    with its 95% interval, or the raw mean with the 2.5/97.5 percentiles over splits."""
    note, rows, corrected, top = row_note(res), [], res.corrected, res.max_key()
    for metric, key, what in (
        ("gamma", "gamma_pos", "gamma(y=+1, favourable)"),
        ("gamma_unfavourable", "gamma_neg", "gamma(y=-1, unfavourable)"),
        ("gamma_max", "gamma_max", "max over y of gamma(y), here "
         f"{'gamma(y=+1)' if top == 'gamma_pos' else 'gamma(y=-1)'}"),
    ):
        # gamma_max is the larger of the two rows above, with its interval
        key = (top or "gamma_pos") if key == "gamma_max" else key
        g, c = res.aggregates[key], corrected.get(key)
        judged = f"{res.verdict()}; " if metric == "gamma_max" else ""
        raw = (f"raw mean over splits {fmt(g.mean)} (sd {fmt(g.sd)}, 2.5-97.5% "
               f"{fmt(g.p2_5)} - {fmt(g.p97_5)})")
        if c is None:  # no null reference: the raw mean, biased upwards
            value, lower, upper = g.mean, g.p2_5, g.p97_5
            said = f"{what}: {raw}, not corrected (no null reference)"
        else:  # less the features-only reference (the raw mean reads high), 95% interval
            value, lower, upper = c.value, c.lower, c.upper
            said = (f"{what} less its features-only reference: {fmt(c.value)} (95% "
                    f"interval {fmt(c.lower)} - {fmt(c.upper)}); {raw}, features-only "
                    f"reference {fmt(c.reference)} ({c.draws} draws)")
        rows.append(MetricRow(
            audit=AUDIT, attribute=res.attribute, group=res.target_label, metric=metric,
            value=value, lower=lower, upper=upper, detail=f"{said}; {judged}{note}",
            params=pjson,
        ))
    return rows


def null_rows(res: AttributeResult, pjson: str | None) -> list[MetricRow]:
    """The null reference of the verdict: mean over null draws of the draw's mean
    gamma_max, with the 2.5/97.5 percentiles over draws (none without a reference)."""
    ref = res.null
    if ref is None:
        return []
    return [MetricRow(
        audit=AUDIT, attribute=res.attribute, group=res.target_label, metric="gamma_null",
        value=ref.mean, lower=ref.p2_5, upper=ref.p97_5,
        detail=f"gamma_max for decisions redrawn from P(Y | audit features) without S "
        f"(cross-fitted), {ref.draws} draws with the same rows, weights and splits: mean "
        f"{fmt(ref.mean)}, sd {fmt(ref.sd)}; observed {fmt(ref.observed)}, excess "
        f"{fmt(ref.excess)}, p = {fmt_detail(ref.p_value)} (Monte Carlo "
        f"{fmt_detail(ref.rank_p)}); evidence when observed > {fmt(ref.bound)} (level "
        f"{fmt_detail(ref.level, 6)}); {row_note(res)}",
        params=pjson,
    )]


def violation_rows(res: AttributeResult, pjson: str | None) -> list[MetricRow]:
    """Rows of Algorithm 1's worst violation and the overall outcome ratio (none when it
    did not run)."""
    if res.y_major is None:
        return []
    note, rows = row_note(res), []
    y_note = ", ".join(f"y={k:+d} in {v}" for k, v in res.y_counts.items())
    said = finding(res)
    for metric, key in (("delta", "delta"), ("delta_unweighted", "delta_unweighted"),
                        ("outcome_ratio_in_subgroup", "ratio_in_subgroup"),
                        ("subgroup_mass", "mass")):
        g = res.aggregates[key]
        extra = f"; {g.n_inf} splits infinite (excluded)" if g.n_inf else ""
        if key == "ratio_in_subgroup" and said:
            extra += f"; {said}"
        rows.append(MetricRow(
            audit=AUDIT, attribute=res.attribute, group=res.target_label, metric=metric,
            value=g.mean, lower=g.p2_5, upper=g.p97_5,
            status=Status.OK if g.mean is not None else Status.INCONCLUSIVE,
            detail=f"worst violation (Alg. 1) for {y_note} splits; mean {fmt(g.mean)}, "
            f"sd {fmt(g.sd)}, {g.n} finite splits{extra}; {note}",
            params=pjson,
        ))
    y = res.y_major
    rows.append(MetricRow(
        audit=AUDIT, attribute=res.attribute, group=res.target_label,
        metric="outcome_ratio_overall", value=res.ratio_overall,
        status=Status.OK if res.ratio_overall is not None else Status.INCONCLUSIVE,
        detail=f"Pr[Y={y:+d} | S=+1] / Pr[Y={y:+d} | S=-1] over all audited "
        f"rows (the counterpart of outcome_ratio_in_subgroup over the whole table; not the "
        f"group audit's disparate_impact, which compares favourable rates of the "
        f"unprivileged and privileged groups); {note}",
        params=pjson,
    ))
    return rows


def balance_rows(res: AttributeResult, pjson: str | None) -> list[MetricRow]:
    """Held-out balance diagnostics of the weights (mean over splits, percentiles)."""
    note, rows = row_note(res), []
    poor = (f"balance poor (AUC > {AUC_LIMIT} or max |SMD| after > {SMD_LIMIT}) in "
            f"{res.poor_balance_splits} of {len(res.splits)} splits")
    for metric, what in (
        ("balance_auc", "held-out weighted ROC AUC of S from the audit features "
                        "(logistic regression; 0.5 = balanced)"),
        ("balance_auc_before", "the same AUC without the weights"),
        ("max_abs_smd_before", "largest held-out |standardised mean difference| of an "
                               "audit feature between S=+1 and S=-1, unweighted"),
        ("max_abs_smd_after", "the same with the weights"),
    ):
        g = res.aggregates[metric]
        rows.append(MetricRow(
            audit=AUDIT, attribute=res.attribute, group=res.target_label, metric=metric,
            value=g.mean, lower=g.p2_5, upper=g.p97_5,
            status=Status.OK if g.mean is not None else Status.INCONCLUSIVE,
            detail=f"{what}: mean {fmt(g.mean)}, sd {fmt(g.sd)}; {poor}; {note}",
            params=pjson,
        ))
    return rows


def attribute_rows(res: AttributeResult, pjson: str | None, *,
                   balance: bool = True) -> list[MetricRow]:
    """Every row of one audited attribute (``balance=False`` leaves out the balance
    rows, which depend on the features and the groups only)."""
    return (gamma_rows(res, pjson) + null_rows(res, pjson)
            + (balance_rows(res, pjson) if balance else []) + violation_rows(res, pjson))
