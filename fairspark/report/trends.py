"""The report's Trends section: tonight's rows against the published runs before it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd
from markupsafe import escape

from fairspark._values import nan_to_none
from fairspark.audits.base import ReportSection
from fairspark.audits.lines import fmt_plain, row_number, row_text
from fairspark.metrics import distance_from_parity
from fairspark.nightly.trend_groups import breached as _breached
from fairspark.nightly.trend_groups import (
    limit_lines,
    pooled_superseded,
    worst_group_series,
)
from fairspark.numbers import fmt_number, fmt_setting

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

    from fairspark.audits.spec import AuditSpec

__all__ = ["badness", "change_between", "fair_value", "no_history_section", "trend_frame",
           "trend_section"]

_MAX_SERIES = 24


def trend_frame(history: pd.DataFrame, rows: list[dict[str, Any]], *, run_date: str,
                config_hash: str, version: str, specs: Mapping[str, AuditSpec],
                schema_hash: str | None = None) -> pd.DataFrame:
    """History plus tonight's headline rows, one row per (series, run date).

    ``schema_hash`` is tonight's input schema (the history frame carries each earlier
    run's); two runs whose schema hashes differ are not compared.
    """
    now = []
    for r in rows:
        spec = specs.get(str(r.get("audit")))
        if spec is None or not spec.is_trend_row(r):
            continue
        now.append({**{k: r.get(k) for k in ("audit", "attribute", "group", "metric", "model",
                                              "value", "lower", "upper", "status")},
                    "run_date": run_date, "config_hash": config_hash,
                    "fairspark_version": version, "metric_b": r.get("metric_b"),
                    "schema_hash": schema_hash})
    cur = pd.DataFrame(now)
    hist = history[history["audit"] != "limits"] if len(history) else history
    frame = pd.concat([hist, cur], ignore_index=True) if len(hist) else cur
    if frame.empty:
        return frame
    # one series per (audit, attribute, metric, second metric, model): a correlation
    # representative names its metric in metric_b, and three of them are three series
    second = (frame["metric_b"] if "metric_b" in frame else pd.Series(None, index=frame.index))
    frame["series"] = (frame["audit"] + " · " + frame["attribute"].astype(str) + " · "
                       + frame["metric"].astype(str)
                       + second.fillna("").map(lambda m: f" · {m}" if m else "")
                       + frame["model"].fillna("").map(lambda m: f" · {m}" if m else ""))
    # where a limit is judged per group: tonight's worst group's series, with its limit
    worst = worst_group_series(history, rows, run_date=run_date, config_hash=config_hash,
                               version=version, schema_hash=schema_hash, specs=specs)
    if len(worst):
        frame = pd.concat([frame, worst], ignore_index=True)
    return frame.sort_values(["series", "run_date"]).reset_index(drop=True)


# ------------------------------------------------------------------------------ trends

#: flag -> (sort rank, words); worst first (the table's row class adds ✖ / ? / ✔)
_FLAG_ORDER: dict[str, tuple[int, str]] = {
    "worse": (0, "worse"), "changed": (1, "changed"), "better": (2, "better"),
    "within noise": (3, "within noise"), "": (4, ""),
}


def fair_value(metric: str) -> float | None:
    """The value a metric takes when nothing separates the groups (``None``: no such value).

    Differences (and mdfa's delta and gamma, HFM's df and discriminative risk DR) are
    fair at 0, ratios such as disparate impact at 1. HFM's D and D_f describe distances
    in the data and have no fair value of their own.
    """
    if metric in ("disparate_impact",) or metric.endswith("_ratio"):
        return 1.0
    if (metric.endswith("_difference") or metric in ("df", "delta", "DR")
            or metric.startswith("gamma")):
        return 0.0
    return None


def badness(metric: str, value: float | None) -> float | None:
    """How unfair ``value`` of ``metric`` is (larger = worse; ``None``: no direction).

    Distance from the fair value, the one definition
    (:func:`fairspark.metrics._core.distance_from_parity`): ``|v|`` for differences and
    delta, ``|ln v|`` for ratios (0.5 and 2 are equally far from 1; a ratio at or below 0
    is infinitely far); for df, DR and gamma the value itself (a
    negative df or gamma is no separation at all, and lower is better).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    fair = fair_value(metric)
    if fair is None:
        return None
    if metric in ("df", "DR") or metric.startswith("gamma"):
        return float(value)
    # the one distance from parity (fairspark.metrics._core.distance_from_parity)
    d = float(distance_from_parity("ratio" if fair == 1.0 else "difference", value))
    return math.inf if fair == 1.0 and value <= 0 else d


def _scale(metric: str, *xs: float | None) -> tuple[Any, str]:
    """(transform, name): ratios on the log scale when every number is positive."""
    if fair_value(metric) == 1.0 and all(x is not None and x > 0 for x in xs):
        return math.log, "log"
    return (lambda x: x), "linear"


def change_between(metric: str, a: Any, b: Any) -> tuple[str, str]:
    """(word, note) for the move of ``metric`` from run ``a`` to run ``b``.

    ``a`` and ``b`` have ``value``, ``lower``, ``upper`` (mappings or Series). The
    move is beyond noise when the difference ``b - a`` lies outside its own interval:
    ``|b - a| > sqrt(h_a^2 + h_b^2)``, with ``h`` each run's interval half-width (the
    difference of two independent estimates; ratios on the log scale). Then it is
    **worse** / **better** (further from / closer to the fair value, see
    :func:`badness`) or **changed** for a number with no fair side; otherwise **within
    noise**. Without a value: ``""``; without intervals: ``""`` with a note. The
    decision box and the trends both use this one rule and these words.
    """
    get = (lambda m, k: m.get(k)) if not isinstance(a, pd.Series) else (lambda m, k: m[k])
    va, vb = nan_to_none(get(a, "value")), nan_to_none(get(b, "value"))
    if va is None or vb is None:
        return "", "no value in one of the two runs"
    move = f"{fmt_plain(va)} → {fmt_plain(vb)}"
    ba, bb = badness(metric, va), badness(metric, vb)
    way = ("worse" if bb > ba else "better" if bb < ba else "") if (
        ba is not None and bb is not None) else ""
    fair = fair_value(metric)
    la, ua = nan_to_none(get(a, "lower")), nan_to_none(get(a, "upper"))
    lb, ub = nan_to_none(get(b, "lower")), nan_to_none(get(b, "upper"))
    if None in (la, ua, lb, ub):
        if va == vb:
            return "", f"unchanged ({fmt_plain(vb)}); no interval"
        what = (f"{way}: {'further from' if way == 'worse' else 'closer to'} {fmt_setting(fair)}"
                if way else "higher" if vb > va else "lower")
        return "", f"{what} ({move}); no interval to tell whether that is more than noise"
    if va == vb:
        return "", f"unchanged ({fmt_plain(vb)})"
    f, scale = _scale(metric, va, vb, la, ua, lb, ub)
    d = f(vb) - f(va)
    h = math.hypot((f(ua) - f(la)) / 2, (f(ub) - f(lb)) / 2)
    on = " on the log scale" if scale == "log" else ""
    ds, hs = fmt_number(d, signed=True), fmt_number(h)
    if abs(d) <= h:
        return "within noise", (
            f"within noise ({move}; the difference {ds}{on} is inside its interval ±{hs})"
            + (f", nominally {way}" if way else ""))
    if not way:
        return "changed", (f"{'higher' if vb > va else 'lower'} ({move}); the difference "
                           f"{ds}{on} is beyond its interval ±{hs}. This number has "
                           "no better or worse side")
    return way, (f"{way}: {'further from' if way == 'worse' else 'closer to'} the fair "
                 f"value {fmt_setting(fair)} ({move}); the difference {ds}{on} is beyond "
                 f"its interval ±{hs}, so the change is larger than the uncertainty explains")


def _flag(s: pd.DataFrame) -> tuple[str, str]:
    """(flag, note) for the last two points of one series (:func:`change_between`)."""
    if len(s) < 2:
        return "", "first run of this series"
    a, b = s.iloc[-2], s.iloc[-1]
    if a["config_hash"] != b["config_hash"] or a["fairspark_version"] != b["fairspark_version"]:
        return "", "config or fairspark version changed: not comparable with the run before"
    if _schema_changed(a, b):
        return "", ("not comparable: schema changed (the input's features differ from the "
                    "run before)")
    return change_between(str(b["metric"]), a, b)


def _schema_changed(a: pd.Series, b: pd.Series) -> bool:
    """Both runs recorded their input schema (``schema_hash``) and the two differ."""
    ha, hb = a.get("schema_hash"), b.get("schema_hash")
    return isinstance(ha, str) and isinstance(hb, str) and ha != hb


def _y_ranges(frame: pd.DataFrame, limits: dict[str, list[float]]
              ) -> dict[str, tuple[float, float]]:
    """One y-range per metric, shared by all its series (the trend plots' one rule).

    It spans every finite value and interval bound of that metric over the runs shown,
    its fair value and every limit drawn on it, plus 8% margin, so two panels of the
    same metric are read on the same scale and a tiny wobble is never blown up to fill
    a panel.
    """
    out: dict[str, tuple[float, float]] = {}
    for metric, m in frame.groupby("metric"):
        vals = pd.concat([m[c] for c in ("value", "lower", "upper")]).astype(float)
        pts = [float(v) for v in vals if math.isfinite(v)]
        fair = fair_value(str(metric))
        if fair is not None:
            pts.append(fair)
        for name in m["series"].unique():
            pts += limits.get(name, [])
        if not pts:
            continue
        lo, hi = min(pts), max(pts)
        pad = (hi - lo) * 0.08 or max(abs(hi) * 0.1, 0.01)
        out[str(metric)] = (lo - pad, hi + pad)
    return out


def _panel(ax: Any, s: pd.DataFrame, name: str, flag: str, limits: list[float],
           ylim: tuple[float, float] | None) -> None:
    x = list(range(len(s)))
    v = s["value"].astype(float)
    lo = (v - s["lower"].astype(float)).clip(lower=0).fillna(0)
    hi = (s["upper"].astype(float) - v).clip(lower=0).fillna(0)
    # arrays, not Series: matplotlib reads a one-run series (a new one, e.g. a baseline's
    # first night) with float(Series), which pandas deprecates
    ax.errorbar(x, v.to_numpy(), yerr=[lo.to_numpy(), hi.to_numpy()], fmt="o-", ms=3,
                capsize=2, lw=1, color="#2457a6")
    for i in range(1, len(s)):
        if (s.loc[i, "config_hash"] != s.loc[i - 1, "config_hash"]
                or s.loc[i, "fairspark_version"] != s.loc[i - 1, "fairspark_version"]
                or _schema_changed(s.loc[i - 1], s.loc[i])):
            ax.axvline(i - 0.5, color="#7a4f00", ls=":", lw=1.2)
    for lim in limits:
        ax.axhline(lim, color="#a8231b", ls="--", lw=1)
    fair = fair_value(str(s["metric"].iloc[0]))
    if fair is not None:
        ax.axhline(fair, color="#555", lw=0.6)
    if flag == "within noise":
        flag = ""
    if flag:
        marker = {"worse": "v", "better": "^"}.get(flag, "D")
        ax.plot([x[-1]], [v.iloc[-1]], marker, color="#a8231b" if flag == "worse" else "#1f6e3a"
                if flag == "better" else "#7a4f00", ms=9)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(name + (f" ({flag})" if flag else ""), fontsize=9, wrap=True)
    ax.set_xticks(x)
    ax.set_xticklabels([str(d)[5:] for d in s["run_date"]], rotation=45)
    ax.set_ylabel(str(s["metric"].iloc[0]))


def no_history_section(*, config_hash: str | None = None) -> ReportSection:
    """The trends section of a run that has no earlier published run to compare with."""
    html = ("<p><b>No previous runs.</b> This is the first run published at this output "
            "location (or earlier runs could not be read), so there is nothing to compare "
            "with yet. From the next run on, this section draws every headline number over "
            "the run dates and says whether it got better or worse"
            + (f"; runs are comparable while their config hash stays {escape(config_hash)}"
               if config_hash else "") + ".</p>")
    return ReportSection(title="Trends over previous runs", html=html, order=2)


def _trend_figure(frame: pd.DataFrame, drawn: list[tuple], info: list[tuple]) -> str:
    """The small multiples of the drawn series as a ``<figure>`` with its caption.

    Each panel is its own image in a grid that wraps (``.trend-panels``): three or more
    across on a wide screen, one under the other on a phone, each at a readable size,
    and a title never runs into its neighbour's (long titles wrap inside their panel).
    """
    from fairspark.audits.figures import figure_to_data_uri, plt

    ylim = _y_ranges(frame[frame["series"].isin([t[0] for t in drawn])],
                     {t[0]: t[4] for t in drawn})
    panels = []
    for name, s, flag, _note, lims in drawn:
        fig, ax = plt.subplots(figsize=(3.6, 2.9))
        _panel(ax, s, name, flag, lims, ylim.get(str(s["metric"].iloc[0])))
        fig.tight_layout()
        alt = (f"{name} over {s['run_date'].nunique()} run dates"
               + (f", {flag}" if flag else ""))
        panels.append(f"<img alt='{escape(alt)}' src='{figure_to_data_uri(fig)}'>")
    n_flag = sum(1 for t in info if t[2])
    label = (f"Trend panels of {len(drawn)} headline series over "
             f"{frame['run_date'].nunique()} run dates; {n_flag} flagged: "
             + (", ".join(f"{t[0]} {t[2]}" for t in info if t[2]) or "none") + ".")
    return (
        f"<figure aria-label='{escape(label)}'><div class='trend-panels'>"
        + "".join(panels) + "</div>"
        "<figcaption>Headline numbers over run dates, worst change first. Each panel: "
        "value and interval per run (blue), the fair value (grey line), the configured "
        "limits (red dashes), a dotted brown line where the config, the input schema or "
        "the fairspark version changed (not comparable across it), and a marker on "
        "tonight's point when it moved "
        "beyond the uncertainty (▼ red: worse, ▲ green: better, ◆: changed, no better side)."
        " One y-scale rule: all panels of the same metric share one range, spanning its "
        "values, intervals, fair value and limits. Where a limit is judged per group, a "
        "<em>worst group</em> panel follows tonight's worst group (the decision box's) "
        "through the earlier runs with the interval its verdict used and the limit; the "
        "pooled panel of that metric is the view that does not gate and carries no line of "
        "that limit.</figcaption></figure>"
    )


def trend_section(frame: pd.DataFrame, *, specs: Mapping[str, AuditSpec],
                  rules: list[Any] | None = None, max_panels: int = _MAX_SERIES
                  ) -> ReportSection | None:
    """Every headline series over run dates: flags, limits, one y-scale per metric.

    Parameters
    ----------
    frame:
        :func:`trend_frame` (history plus tonight).
    specs:
        Audit name -> spec (a rule without ``group`` matches an audit's series in
        its ``view_group``).
    rules:
        The configured limit rules (``LimitRule`` or dicts); the ones matching a series
        are drawn on its panel as red dashes.
    max_panels:
        Panels drawn at most; the series beyond it (the least flagged) are still in the
        table and named in an "N more" list under the figure. Nothing is dropped.

    Returns
    -------
    ReportSection or None
        The section; with fewer than two run dates, the "no previous runs" section.
    """
    if frame is None or frame.empty or frame["run_date"].nunique() < 2:
        return no_history_section()
    rules = list(rules or [])
    superseded = pooled_superseded(frame)
    info = []
    for name in dict.fromkeys(frame["series"]):
        s = frame[frame["series"] == name].reset_index(drop=True)
        flag, note = _flag(s)
        info.append((name, s, flag, note, limit_lines(rules, s.iloc[-1], specs, superseded)))
    # worst first: flag, then the limited series, then the catalogue order
    # worst first: worse, then a series beyond a configured limit tonight (a breach
    # outranks a move), then better, changed (no fair side: HFM's D), within noise
    breached = {t[0] for t in info if _breached(rules, t[1].iloc[-1], specs, superseded)}
    info.sort(key=lambda t: (0 if t[2] == "worse" else 1 if t[0] in breached
                             else 1 + _FLAG_ORDER[t[2]][0], not t[4]))
    # a series with no value in any run (e.g. DR without a model) has nothing to draw
    empty = [t for t in info if t[1]["value"].astype(float).isna().all()]
    info = [t for t in info if t not in empty] + empty
    plotted = [t for t in info if t not in empty]
    drawn, rest = plotted[:max_panels], plotted[max_panels:]
    figure = _trend_figure(frame, drawn, info) if drawn else ""
    table = []
    for name, s, flag, note, lims in info:
        last = s.iloc[-1]
        prev = s.iloc[-2] if len(s) > 1 else None
        now = last.to_dict()
        cls = {"worse": "bad", "changed": "warn", "better": "good"}.get(flag, "")
        lim = ", ".join(fmt_setting(x) for x in lims) or "–"
        table.append(
            f"<tr class='{cls}'><td>{escape(name)}</td>"
            # tonight's point is tonight's row: printed (and marked) as everywhere else
            f"<td>{row_text(prev.to_dict()) if prev is not None else '–'}</td>"
            f"<td>{row_number(now)} [{row_number(now, 'ci_low')}, "
            f"{row_number(now, 'ci_high')}]</td>"
            f"<td>{lim}</td><td>{'<b>' + _FLAG_ORDER[flag][1] + '</b>' if flag else '–'}</td>"
            f"<td class='small'>{escape(note)}</td></tr>")
    more = ""
    if rest:
        more = (f"<p class='small'><b>{len(rest)} more series not drawn</b> (the table below "
                "lists every series): " + ", ".join(escape(t[0]) for t in rest) + ".</p>")
    if empty:
        more += ("<p class='small'>Not drawn, no value in any run (not computed): "
                 + ", ".join(escape(t[0]) for t in empty) + ".</p>")
    html = (
        figure
        + more
        + "<div class='tablewrap'><table class='metrics'><caption>Every headline series "
        "(nothing is dropped), worst change first: tonight against the previous run. "
        "<em>Worse</em> / <em>better</em> = further from / closer to the fair value by more "
        "than the intervals allow; the note says how it moved otherwise.</caption>"
        "<thead><tr><th>series</th><th>previous</th><th>tonight [interval]</th>"
        "<th>limits</th><th>flag</th><th>note</th></tr></thead><tbody>"
        + "".join(table) + "</tbody></table></div>"
    )
    return ReportSection(title="Trends over previous runs", html=html, order=2)
