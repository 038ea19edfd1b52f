"""The mdfa section of ``report.html``: ``render(outcome, *, ctx, params)``.

Drawn from the audit's :class:`~fairspark.mdfa.results.MDFAResult` with the package's
template ``templates/section.html.j2``; figures are ``data:`` URIs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairspark.audits.base import ReportSection
from fairspark.audits.lines import row_number
from fairspark.audits.sections import render_template
from fairspark.mdfa.diagnostics import AUC_LIMIT, SMD_LIMIT
from fairspark.mdfa.results import ORDER, AttributeResult, MDFAResult, finding
from fairspark.numbers import fmt_count, format_number
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.base import AuditContext, AuditOutcome
    from fairspark.mdfa.params import MDFAParams

__all__ = ["TITLE", "render", "render_section", "representative_split"]

#: the section's heading in report.html
TITLE = "mdfa: multi-differential fairness"


def _f(v: Any, nd: int = 4) -> str:
    """``v`` with ``nd`` decimals (the number rule), ``n/a`` when missing."""
    if isinstance(v, float) and math.isinf(v):
        return format_number(v, minus="-", infinity="+inf" if v > 0 else "inf")
    return format_number(v, decimals=nd, minus="-", missing="n/a")


def representative_split(splits: pd.DataFrame) -> int | None:
    """Index of the split whose delta is closest to the median delta (None: no delta)."""
    d = pd.to_numeric(splits["delta"], errors="coerce")
    ok = d[np.isfinite(d)]
    if ok.empty:
        return None
    return int((ok - ok.median()).abs().idxmin())


def _description_rows(res: AttributeResult) -> tuple[list[list[str]], str]:
    """Population and sub-population description of ``res`` (y = its majority outcome)."""
    if res.y_major is None:
        return [], ""
    y_major = res.y_major
    # only the splits whose Algorithm 1 used y_major: their rates are of the same outcome
    desc = [json.loads(d) for y, d in zip(res.splits["y_wv"], res.splits["description"],
                                          strict=True)
            if d and d != "{}" and not pd.isna(y) and int(y) == y_major]
    if not desc:
        return [], ""
    pop = {s: res.stats.group_description(s) for s in (1, -1)}
    rows = []
    names = res.stats.desc_names

    def sub(key: str, field: str, j: int | None, nd: int = 2) -> str:
        vals = []
        for d in desc:
            g = d.get(key) or {}
            if g.get(field) is None:
                continue
            vals.append(g[field] if j is None else g[field][j])
        if not vals:
            return "n/a"
        # row counts are whole people: the mean over splits is rounded
        return fmt_count(round(float(np.mean(vals)))) if nd == 0 else _f(float(np.mean(vals)), nd)

    for j, name in enumerate(names):
        cells = [name]
        for s in (1, -1):
            p = pop[s]
            cells.append(f"{_f(p['mean'][j], 2)} ({_f(p['sd'][j], 2)})" if p["mean"] else "n/a")
        for key in ("+1", "-1"):
            cells.append(f"{sub(key, 'mean', j)} ({sub(key, 'sd', j)})")
        rows.append(cells)
    rate = [f"rate of Y={y_major:+d}"]
    for s in (1, -1):
        rate.append(_f(res.stats.rate(s=s, y=y_major), 3))
    for key in ("+1", "-1"):
        rate.append(sub(key, "rate", None))
    size = ["rows (sub-population: held-out, per split)"]
    size += [fmt_count(pop[s]["n"]) for s in (1, -1)]
    size += [sub(k, "n", None, nd=0) for k in ("+1", "-1")]
    return [*rows, rate, size], f"{y_major:+d}"


def _figure(results: list[AttributeResult]) -> str | None:
    from fairspark.audits.figures import figure_to_data_uri

    return figure_to_data_uri(_draw(results)) if results else None


def _draw(results: list[AttributeResult]) -> Any:
    """The section's figure: gamma_max over splits with the reference and the bound
    that decide the verdict, and Algorithm 1's delta by step."""
    from fairspark.audits.figures import plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    ax = axes[0]
    data = [pd.to_numeric(r.splits["gamma_max"], errors="coerce").dropna().to_numpy()
            for r in results]
    ax.boxplot(data)
    ax.set_xticks(range(1, len(results) + 1), [r.attribute for r in results])
    ax.axhline(0.0, color="grey", lw=0.8, ls="--")
    for i, r in enumerate(results, start=1):  # what decides the verdict, per attribute
        if r.null is None:
            continue
        ax.hlines(r.null.mean, i - 0.4, i + 0.4, colors="tab:blue", linestyles="-", lw=1.5,
                  label="features-only reference" if i == 1 else None)
        ax.hlines(r.null.bound, i - 0.4, i + 0.4, colors="tab:red", linestyles="--", lw=1.5,
                  label="evidence above (the verdict's bound)" if i == 1 else None)
        ax.plot([i], [r.null.observed], marker="D", color="black", ls="none",
                label="raw mean" if i == 1 else None)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    ax.set_ylabel("raw gamma_max per split")
    ax.set_title("gamma_max over splits, its reference and bound")
    ax = axes[1]
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-")]
    for i, r in enumerate(results):  # a marker and a dash per attribute, not colour alone
        k = representative_split(r.splits)
        if k is None:
            continue
        marker, dash = styles[i % len(styles)]
        tr = json.loads(r.splits.loc[k, "trace"])
        ts = [d["t"] for d in tr if d.get("delta") is not None]
        ds = [d["delta"] for d in tr if d.get("delta") is not None]
        if ts:
            line = ax.plot(ts, ds, marker=marker, ls=dash, label=r.attribute)[0]
            chosen = r.splits.loc[k, "t"]
            if chosen is not None and not pd.isna(chosen):
                ax.axvline(int(chosen), color=line.get_color(), ls=":", lw=1)
    ax.set_xlabel("Algorithm 1 iteration t (evaluated steps)")
    ax.set_ylabel("delta (held-out, weighted)")
    ax.set_title("delta across Algorithm 1 (median-delta split;\nthin dotted line: the answer)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return fig


def _lead(res: AttributeResult) -> str:
    """One plain sentence per attribute: the verdict on a scale, then the finding."""
    # one name, one number: gamma_max as its row has it (the larger printed gamma(y))
    g, lo, hi = res.reported("gamma_max")
    raw, ref = res.aggregates["gamma_max"].mean, res.null
    if g is None or raw is None:
        return f"{res.attribute}: gamma was not computed."
    if ref is None:
        head = (f"{res.attribute}: gamma_max {_f(g)}, not judged (no null reference: "
                "null_draws = 0).")
    else:
        judged = ("clearly above" if ref.evidence else "not clearly above")
        head = (f"{res.attribute}: gamma_max {_f(g)} [{_f(lo)}, {_f(hi)}]; its test "
                f"statistic (raw mean over splits of the larger gamma(y)) {_f(raw, 3)} is "
                f"{judged} what decisions that depend on the audit features alone give on "
                f"these rows ({_f(ref.mean, 3)}, sd {_f(ref.sd, 3)}): "
                f"{'evidence' if ref.evidence else 'no evidence'} that "
                f"decisions depend on {res.attribute} beyond the features.")
        if ref.evidence and lo is not None and hi is not None and lo <= 0.0:
            head += (f" How large that dependence is in the population these rows "
                     f"represent is not pinned down: gamma_max {_f(g, 3)} above the "
                     f"reference, 95% interval {_f(lo, 3)} to {_f(hi, 3)}.")
    said = finding(res)
    if not said:
        return head
    if ref is not None and ref.evidence:
        return f"{head} {said}"
    return (f"{head} Algorithm 1 still names a worst-treated subgroup (not evidence by "
            f"itself): {said}")



def _reported(res: AttributeResult, key: str) -> tuple[Any, Any, Any]:
    """The value and 95% interval of a gamma as its metrics.parquet row has them."""
    return res.reported(key)


def _draws_note(res: AttributeResult) -> str:
    """How many null draws the reference and its p rest on, and why that many."""
    if res.null is None:
        return "no null reference"
    return (f"{res.null.draws} null draws (K = min(null_draws, splits of the first wave); "
            f"each split evaluates two of them)")


def _pair(rows: Mapping[str, Any], before: str, after: str, old: str) -> str:
    """``before → after`` of two result rows as they print everywhere, else ``old``."""
    if before in rows and after in rows:
        return f"{row_number(rows[before])} → {row_number(rows[after])}"
    return old


def _one(rows: Mapping[str, Any], metric: str, old: str) -> str:
    return row_number(rows[metric]) if metric in rows else old


def _item(res: AttributeResult, redacted: list[str] | None = None,
          rows: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The template's view of one attribute (``rows``: its result rows by metric, whose
    numbers are printed as everywhere else in the report)."""
    a = res.aggregates
    rows = rows or {}
    gm = rows.get("gamma_max")
    g = a["gamma_max"]
    desc_rows, y_label = _description_rows(res)
    k = representative_split(res.splits)
    return {
        "attribute": res.attribute,
        "splits_note": (f"{len(res.splits)}, {res.splits_stop}" if res.splits_stop
                        else str(len(res.splits))),
        "target": res.target_label,
        # one number per name: the gammas are the metrics.parquet rows' values (the raw
        # mean less the features-only reference; the raw mean where there is none)
        "g_pos": _one(rows, "gamma", _f(_reported(res, "gamma_pos")[0])),
        "g_neg": _one(rows, "gamma_unfavourable", _f(_reported(res, "gamma_neg")[0])),
        "g_max": ("{} [{}, {}]".format(*(row_number(gm, s) for s in ("value", "ci_low",
                                                                       "ci_high")))
                  if gm is not None else
                  "{} [{}, {}]".format(*(_f(v) for v in _reported(res, "gamma_max")))),
        "g_raw": f"{_f(g.mean)} ({_f(g.sd)}) [{_f(g.p2_5)}, {_f(g.p97_5)}]",
        "draws_note": _draws_note(res),
        "verdict": res.verdict(),
        "evidence": bool(res.null is not None and res.null.evidence),
        "null": (f"{_f(res.null.mean)} (sd {_f(res.null.sd)}, {res.null.draws} draws); "
                 f"p = {format_number(res.null.p_value, digits=2)}"
                 if res.null is not None else "not computed"),
        "excess": _f(res.null.excess) if res.null is not None else "n/a",
        "lead": _lead(res),
        "auc": _pair(rows, "balance_auc_before", "balance_auc",
                     f"{_f(a['balance_auc_before'].mean, 3)} → {_f(a['balance_auc'].mean, 3)}"),
        "smd": _pair(rows, "max_abs_smd_before", "max_abs_smd_after",
                     f"{_f(a['max_abs_smd_before'].mean, 3)} → "
                     f"{_f(a['max_abs_smd_after'].mean, 3)}"),
        "poor": f"{res.poor_balance_splits} of {len(res.splits)}",
        "gap": (f"{_f(a['outcome_gap_before'].mean, 3)} → {_f(a['outcome_gap_after'].mean, 3)}"
                if "outcome_gap_after" in a else "n/a"),
        "smd_rows": [[d["feature"], _f(d["before"], 3), _f(d["after"], 3)]
                     for d in res.smd_table(redacted or ())],
        "delta": _one(rows, "delta", _f(a["delta"].mean, 3)),
        "ratio_in_subgroup": _one(rows, "outcome_ratio_in_subgroup",
                                  _f(a["ratio_in_subgroup"].mean, 3)),
        # the outcome_ratio_overall of metrics.parquet, computed once by the audit
        "ratio_overall": (_one(rows, "outcome_ratio_overall", "") if y_label else "")
        or _f(res.ratio_overall if y_label else None, 3),
        "finding": finding(res) or "",
        "other": res.other_label,
        "desc_rows": desc_rows,
        "y_label": y_label,
        "rules": [ln for ln in str(res.splits.loc[k, "rules"] or "").splitlines() if ln]
        if k is not None else [],
        "fidelity": _f(res.splits.loc[k, "rule_fidelity"], 3) if k is not None else "",
    }


def render_section(*, result: MDFAResult, params: MDFAParams,
                   rows: list[Any] | None = None) -> ReportSection:
    """The mdfa report section for the audited attributes of ``result`` (``rows``: the
    audit's result rows, whose numbers it prints as the rest of the report does)."""
    by: dict[str, dict[str, Any]] = {}
    for r in rows or []:
        if getattr(r, "status", None) == Status.OK:
            by.setdefault(str(r.attribute), {})[str(r.metric)] = r
    html = render_template(
        "fairspark.mdfa", "section.html.j2",
        results=[_item(res, result.redacted, by.get(res.attribute))
                 for res in result.attributes], params=params,
        auc_limit=AUC_LIMIT, smd_limit=SMD_LIMIT,
        figure=_figure(result.attributes), redacted=result.redacted,
    )
    return ReportSection(title=TITLE, html=html, order=ORDER)


def render(
    outcome: AuditOutcome, *, ctx: AuditContext | None = None, params: MDFAParams
) -> list[ReportSection]:
    """The report sections of an mdfa outcome (``SPEC.render``).

    Parameters
    ----------
    outcome:
        What :func:`fairspark.mdfa.audit.run` returned (or handed to
        ``report_partial``); its ``result`` is an :class:`MDFAResult`.
    ctx:
        The audit context (unused: the result carries what the section shows).
    params:
        The ``audits.mdfa`` section of the config.

    Returns
    -------
    list of ReportSection
        One section, or none when no attribute could be audited.
    """
    result = outcome.result
    if not isinstance(result, MDFAResult) or not result.attributes:
        return []
    return [render_section(result=result, params=params, rows=outcome.rows)]
