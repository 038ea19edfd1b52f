"""Report sections of the nightly features: limits (at the top) and run-over-run trends."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import pandas as pd
from markupsafe import escape

from fairspark.audits.base import ReportSection
from fairspark.nightly.history import HEADLINE_METRICS
from fairspark.status import Verdict

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.nightly.gating import Check

__all__ = ["headlines", "limits_section", "trend_frame", "trend_section"]

_MAX_SERIES = 24


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.4g}"


def headlines(rows: list[dict[str, Any]], *, summary: dict[str, Any]) -> list[str]:
    """Verdicts in words for the limits (used by the report's summary)."""
    out = []
    checks = [r for r in rows if r.get("audit") == "limits"]
    if not checks:
        return out
    gating = [r for r in checks if json.loads(r.get("params") or "{}").get("gates")]
    violated = [r for r in checks if r["status"] == Verdict.VIOLATED]
    for r in gating:
        out.append(f"LIMIT VIOLATED: {r['metric_b']} for {r['attribute']}"
                   f"{'/' + r['group'] if r.get('group') else ''} "
                   f"(value {_fmt(r['value'])}, interval [{_fmt(r.get('lower'))}, "
                   f"{_fmt(r.get('upper'))}]).")
    waiting = [r for r in violated if r not in gating]
    if waiting:
        out.append(f"{len(waiting)} limit(s) violated but not yet for the configured number "
                   "of consecutive runs.")
    n_pass = sum(r["status"] == Verdict.PASSED for r in checks)
    n_inc = sum(r["status"] == Verdict.INCONCLUSIVE for r in checks)
    out.append(f"{len(checks)} limit check(s): {len(violated)} violated, {n_pass} passed, "
               f"{n_inc} inconclusive (the interval straddles the limit).")
    return out


def limits_section(checks: list[Check], rows: list[dict[str, Any]],
                   unmatched: list[str]) -> ReportSection:
    """A table of every limit check, violated ones first."""
    order = {Verdict.VIOLATED: 0, Verdict.INCONCLUSIVE: 1, Verdict.PASSED: 2}
    body = []
    for r in sorted(rows, key=lambda r: (order.get(r["status"], 3), r["attribute"])):
        gates = json.loads(r.get("params") or "{}").get("gates")
        cls = ("bad" if r["status"] == Verdict.VIOLATED
               else "warn" if r["status"] == Verdict.INCONCLUSIVE else "good")
        body.append(
            f"<tr class='{cls}'><td>{escape(r['metric_b'])}</td><td>{escape(r['attribute'])}"
            f"</td><td>{escape(r.get('group') or '')}</td><td>{_fmt(r['value'])}</td>"
            f"<td>[{_fmt(r.get('lower'))}, {_fmt(r.get('upper'))}]</td>"
            f"<td><b>{escape(r['status'])}</b>{' — gates' if gates else ''}</td>"
            f"<td class='small'>{escape(r.get('detail') or '')}</td></tr>")
    miss = "".join(f"<li>{escape(m)}</li>" for m in unmatched)
    html = (
        "<p>Each limit is judged on the uncertainty of its number: the confidence interval "
        "(group metrics), the certified interval (HFM) or the band over splits (mdfa). "
        "<em>Inconclusive</em> means the interval straddles the limit.</p>"
        "<table class='metrics'><thead><tr><th>limit</th><th>attribute</th><th>group</th>"
        "<th>value</th><th>interval</th><th>verdict</th><th>how</th></tr></thead><tbody>"
        + "".join(body) + "</tbody></table>"
        + (f"<p class='warn'>Rules that matched nothing:</p><ul>{miss}</ul>" if miss else "")
    )
    return ReportSection(title="Limits", html=html, order=1)


def trend_frame(history: pd.DataFrame, rows: list[dict[str, Any]], *, run_date: str,
                config_hash: str, version: str) -> pd.DataFrame:
    """History plus tonight's headline rows, one row per (series, run date)."""
    now = []
    for r in rows:
        metrics = HEADLINE_METRICS.get(r.get("audit"), ())
        if r.get("metric") not in metrics or r.get("metric_b"):
            continue
        if r["audit"] == "group" and r.get("group") != "unprivileged":
            continue
        now.append({**{k: r.get(k) for k in ("audit", "attribute", "group", "metric", "model",
                                              "value", "lower", "upper", "status")},
                    "run_date": run_date, "config_hash": config_hash,
                    "fairspark_version": version, "metric_b": None})
    cur = pd.DataFrame(now)
    hist = history[history["audit"] != "limits"] if len(history) else history
    frame = pd.concat([hist, cur], ignore_index=True) if len(hist) else cur
    if frame.empty:
        return frame
    frame["series"] = (frame["audit"] + " · " + frame["attribute"].astype(str) + " · "
                       + frame["metric"].astype(str)
                       + frame["model"].fillna("").map(lambda m: f" · {m}" if m else ""))
    return frame.sort_values(["series", "run_date"]).reset_index(drop=True)


def _flags(s: pd.DataFrame) -> tuple[str, str]:
    """(flag, note) comparing the last two points of one series."""
    if len(s) < 2:
        return "", "first run"
    a, b = s.iloc[-2], s.iloc[-1]
    if a["config_hash"] != b["config_hash"] or a["fairspark_version"] != b["fairspark_version"]:
        return "", "config or version changed: not comparable"
    if any(pd.isna(x) for x in (a["lower"], a["upper"], b["lower"], b["upper"])):
        return "", "no interval"
    if b["lower"] > a["upper"] or b["upper"] < a["lower"]:
        return "changed", "intervals do not overlap: larger than the uncertainty explains"
    return "", "within the uncertainty"


def trend_section(frame: pd.DataFrame) -> ReportSection | None:
    """Small multiples of every headline series over run dates, with change flags."""
    if frame is None or frame.empty or frame["run_date"].nunique() < 2:
        return None
    from fairspark.report.figures import figure_to_data_uri, plt

    series = list(dict.fromkeys(frame["series"]))[:_MAX_SERIES]
    ncol = 3
    nrow = math.ceil(len(series) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(11, 2.6 * nrow), squeeze=False)
    table = []
    for ax, name in zip(axes.flat, series, strict=False):
        s = frame[frame["series"] == name].reset_index(drop=True)
        x = list(range(len(s)))
        v = s["value"].astype(float)
        lo = (v - s["lower"].astype(float)).clip(lower=0).fillna(0)
        hi = (s["upper"].astype(float) - v).clip(lower=0).fillna(0)
        ax.errorbar(x, v, yerr=[lo, hi], fmt="o-", ms=3, capsize=2, lw=1)
        for i in range(1, len(s)):
            if (s.loc[i, "config_hash"] != s.loc[i - 1, "config_hash"]
                    or s.loc[i, "fairspark_version"] != s.loc[i - 1, "fairspark_version"]):
                ax.axvline(i - 0.5, color="tab:orange", ls="--", lw=1)
        flag, note = _flags(s)
        if flag:
            ax.plot([x[-1]], [v.iloc[-1]], "s", color="tab:red", ms=7)
        ax.set_title(name, fontsize=8)
        ax.set_xticks(x)
        ax.set_xticklabels([d[5:] for d in s["run_date"]], fontsize=6, rotation=45)
        ax.set_xlabel("run date", fontsize=7)
        ax.set_ylabel(str(s["metric"].iloc[0]), fontsize=7)
        ax.tick_params(axis="y", labelsize=6)
        last = s.iloc[-1]
        prev = s.iloc[-2] if len(s) > 1 else None
        table.append(
            f"<tr class='{'bad' if flag else ''}'><td>{escape(name)}</td>"
            f"<td>{_fmt(prev['value']) if prev is not None else '–'}</td>"
            f"<td>{_fmt(last['value'])} [{_fmt(last['lower'])}, {_fmt(last['upper'])}]</td>"
            f"<td>{'<b>changed</b>' if flag else ''}</td>"
            f"<td class='small'>{escape(note)}</td></tr>")
    for ax in list(axes.flat)[len(series):]:
        ax.axis("off")
    fig.suptitle("Headline numbers over run dates (orange dashes: config or version changed; "
                 "red square: change beyond the intervals)", fontsize=9)
    fig.tight_layout()
    uri = figure_to_data_uri(fig)
    html = (
        f"<img alt='Trends of headline numbers' src='{uri}' style='max-width:100%'>"
        "<table class='metrics'><thead><tr><th>series</th><th>previous</th>"
        "<th>tonight [interval]</th><th>flag</th><th>note</th></tr></thead><tbody>"
        + "".join(table) + "</tbody></table>"
    )
    return ReportSection(title="Trends over previous runs", html=html, order=2)
