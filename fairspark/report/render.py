"""``report.html``: one self-contained page a person opens from disk.

The page is rendered with Jinja2 from ``templates/report.html.j2`` with the CSS
inlined. Order: the run's outcome and verdicts in words, a table of the audits,
then every audit's sections (sorted by ``order``), then the input and run
metadata. Figures are embedded as ``data:`` URIs
(:func:`fairspark.audits.figures.figure_to_data_uri`); any ``src``/``href`` or CSS
``url()`` that is not a ``data:`` URI is removed from the page before it is written.

Verdicts in words come from the audits: each audit's ``SPEC.headlines`` (and, for the
limits, ``HEADLINES``) is a function taking the long rows (and the summary) and
returning sentences; an audit whose headline function is missing or fails gets none.
Titles come from ``SPEC.title``. A number printed from a result row carries the row
it names (``<span class="num" data-audit=... data-stat=...>``, see
:func:`fairspark.audits.lines.marks_to_html`).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup

from fairspark._version import SCHEMA_VERSION, __version__
from fairspark.audits.lines import marks_to_html
from fairspark.numbers import fmt_count, fmt_fixed, fmt_level, fmt_plain
from fairspark.report.decision import audited_brief, audited_facts, decision_box
from fairspark.run_summary import AuditEntry, LimitsFacts, RunSummary, as_run_summary
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.spec import AuditSpec

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "HEADLINES",
    "external_references",
    "render_report",
    "render_report_html",
    "template_env",
]

log = logging.getLogger("fairspark")

#: headline functions of the parts of a run that are not audits (audits: SPEC.headlines)
def _limits_headlines(rows: list[dict[str, Any]], *, summary: RunSummary) -> list[str]:
    """:func:`fairspark.report.limits.headlines` (imported on use)."""
    from fairspark.report.limits import headlines

    return headlines(rows, summary=summary)


HEADLINES: dict[str, Callable[..., list[str]]] = {"limits": _limits_headlines}

_TITLES = {"limits": "Fairness limits"}


def _title(name: str, specs: Mapping[str, AuditSpec]) -> str:
    spec = specs.get(name)
    return spec.title if spec is not None else _TITLES.get(name, name)


def _headline_fn(name: str, specs: Mapping[str, AuditSpec]) -> Callable[..., list[str]] | None:
    spec = specs.get(name)
    return spec.headlines_fn() if spec is not None else HEADLINES.get(name)


_HEADING_RE = re.compile(r"<(/?)h([1-6])\b", re.IGNORECASE)
_CSS_URL_RE = re.compile(r"""url\(\s*(?!['"]?data:)[^)]*\)""", re.IGNORECASE)
_IMPORT_RE = re.compile(r"@import[^;]*;", re.IGNORECASE)
#: attributes that make a browser load (or navigate to) what they name
_URL_ATTRS = frozenset({"src", "href", "srcset", "action", "poster", "xlink:href", "formaction",
                        "data", "background"})

#: The page's Content-Security-Policy: nothing loads from outside the page (images and
#: fonts only as ``data:`` URIs, no script at all: fairspark writes none), no form, no
#: ``<base>``. A browser enforces it on every part of the page, the audits' sections and
#: a third-party audit's included, so the page never needs rewriting after it is
#: rendered: values from the data reach it only through the template engine's escaping.
CONTENT_SECURITY_POLICY = ("default-src 'none'; img-src data:; font-src data:; "
                           "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")


class _References(HTMLParser):
    """The URL attributes and CSS ``url()``/``@import`` of a parsed page that are not
    ``data:`` URIs or in-page fragments."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            value = (value or "").strip()
            if name in _URL_ATTRS and value and not value.lower().startswith(("data:", "#")):
                self.found.append(f"<{tag} {name}={value!r}>")
            elif name == "style":
                self._css(value)

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False if tag == "style" else self._in_style

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self._css(data)

    def _css(self, text: str) -> None:
        self.found += [m.group(0) for m in _CSS_URL_RE.finditer(text)]
        self.found += [m.group(0) for m in _IMPORT_RE.finditer(text)]


def template_env() -> jinja2.Environment:
    """The Jinja2 environment of fairspark's report templates (autoescaping HTML).

    Audits render their section fragments with it, from templates shipped in
    ``fairspark/report/templates``.
    """
    env = jinja2.Environment(
        # PackageLoader also reads templates from a zipped wheel (spark-submit --py-files).
        loader=jinja2.PackageLoader("fairspark.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def external_references(html: str) -> list[str]:
    """Every element attribute that loads a URL, and every CSS ``url()``/``@import``, of
    the parsed page ``html`` that is not a ``data:`` URI or an in-page fragment (``#id``).

    A reading of the markup, not of its text: ``see href=x`` in a table cell is text and
    is not counted. An empty list means the page names nothing outside itself (its
    Content-Security-Policy would block such a load anyway).
    """
    parser = _References()
    parser.feed(html)
    parser.close()
    return parser.found


def _fmt_value(x: Any) -> str:
    """A metadata value: a number by the number rule (:func:`fmt_plain`), a mapping or
    list as JSON, missing as nothing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if isinstance(x, float):
        return fmt_plain(x)
    if isinstance(x, dict | list):
        return json.dumps(x, default=str, sort_keys=True)
    return str(x)


def _outcome(summary: RunSummary) -> dict[str, str]:
    code = summary.exit_code
    audits = summary.audits
    failed = summary.failed_audits
    limits = summary.limits or LimitsFacts()
    violated = limits.status == "violated"
    if failed:
        return {"kind": "failed",
                "text": f"{len(failed)} of {len(audits)} audit(s) failed: {', '.join(failed)} "
                        f"(exit code {code}). The others completed and are reported below."}
    if violated:
        off = limits.fail_on_violation is False
        gate = (", which fails the run" if code == 3
                else "; they would gate, but failing on a violation is off" if code == 0
                and limits.gating() and off
                else "; this run does not gate" if code == 0 else "")
        return {"kind": "failed" if code == 3 else "warn",
                "text": f"All {len(audits)} audit(s) completed; {limits.violated} of "
                        f"{limits.checks} fairness limit(s) violated{gate} "
                        f"(exit code {code})."}
    if code == 0:
        return {"kind": "ok", "text": f"All {len(audits)} audit(s) completed (exit code 0)."}
    return {"kind": "warn", "text": f"The run ended with exit code {code}."}


def _facts(summary: RunSummary) -> list[str]:
    """Two or three short lines: rows and groups (the details are at the end)."""
    rows = summary.rows
    inp = summary.input
    source = inp.table or inp.path or "the input"
    facts = []
    parts = []
    if rows.read is not None:
        read = f"{fmt_count(rows.read)} rows read from {source}"
        if inp.where:
            read += f" (filter: {inp.where})"
        parts.append(read)
    dropped = {k: v for k, v in (rows.dropped or {}).items() if v and k != "total"}
    if dropped:
        total = sum(int(n) for n in dropped.values())
        parts.append(f"{fmt_count(total)} dropped ("
                     + ", ".join(f"{reason}: {fmt_count(n)}" for reason, n in dropped.items())
                     + ")")
    if rows.audited is not None:
        audited = f"{fmt_count(rows.audited)} rows audited"
        if rows.unlabelled:
            audited += (f", {fmt_count(rows.unlabelled)} of them without a label yet "
                        "(they count for selection rate, statistical parity and disparate "
                        "impact only)")
        parts.append(audited)
    if parts:
        facts.append("; ".join(parts) + ("; rows are weighted." if rows.weighted else "."))
    if summary.window:
        facts.append(_window_fact(summary.window))
    groups = [f"{name} = {', '.join(map(str, a.privileged))}"
              for name, a in rows.attributes.items() if a.privileged]
    if groups:
        facts.append("Privileged groups: " + "; ".join(groups) + ".")
    return facts


def _window_fact(win: Mapping[str, Any]) -> str:
    """What a windowed run audited: the window, tonight's aggregation, each audit's rows."""
    parts = win.get("partitions") or []
    new = win.get("aggregated") or {}
    text = (f"Window: {win.get('days')} days of {win.get('column')}, {win.get('first')} to "
            f"{win.get('last')}: {len(parts)} partition(s), {len(new)} aggregated tonight, "
            f"{len(parts) - len(new)} from their stored states")
    if win.get("missing"):
        miss = win["missing"]
        text += (f"; no partition for {len(miss)} day(s): {', '.join(miss[:5])}"
                 + (" ..." if len(miss) > 5 else ""))
    text += ". The group metrics cover every row of the window"
    sample = win.get("sample") or {}
    on_sample = win.get("audits_on_sample") or []
    if on_sample:
        text += (f"; {', '.join(on_sample)} audited the window's merged hash-rank sample of "
                 f"{fmt_count(sample.get('rows') or 0)} rows")
    on_newest = win.get("audits_on_newest") or []
    if on_newest:
        text += (f"; {', '.join(on_newest)} audited the newest partition "
                 f"({win.get('column')}={win.get('newest')})")
    return text + "."


def _headlines(
    summary: RunSummary, rows: list[dict[str, Any]], specs: Mapping[str, AuditSpec]
) -> list[tuple[str, list[str]]]:
    out = []
    names = [*summary.audits, *(r.get("audit") for r in rows)]
    # limits first: a violated limit is the first thing a reader must see
    audits = sorted(dict.fromkeys(n for n in names if n), key=lambda n: n != "limits")
    for name in audits:
        info = summary.audits.get(name) or AuditEntry()
        if info.status == Status.FAILED and not any(
            r.get("audit") == name and r.get("status") != Status.FAILED for r in rows
        ):
            out.append((name, [f"The {name} audit failed: {info.detail or 'see the log'}."]))
            continue
        fn = _headline_fn(name, specs)
        if fn is None:
            continue
        try:
            lines = fn([r for r in rows if r.get("audit") == name], summary=summary)
        except Exception as err:  # noqa: BLE001
            log.warning("report: headlines of %s failed: %s", name, err)
            continue
        if lines:
            out.append((_title(name, specs), list(lines)))
    return out


def _audit_table(summary: RunSummary, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name, a in summary.audits.items():
        secs = a.seconds
        out.append({
            "name": name,
            "status": a.status or "unknown",
            "seconds": (f"{fmt_fixed(secs, 1, minus='-')} s" if isinstance(secs, int | float)
                        else ""),
            "n_rows": fmt_count(sum(1 for r in rows if r.get("audit") == name)),
            "detail": a.detail or "",
        })
    return out


def _metadata(summary: RunSummary) -> list[dict[str, Any]]:
    def items(d: Mapping[str, Any] | None, skip: Iterable[str] = ()) -> list[tuple[str, str]]:
        return [(str(k), _fmt_value(v)) for k, v in (d or {}).items()
                if k not in skip and v not in (None, "", {}, [])]

    run = [("run_date", summary.run_date), ("dataset", summary.dataset),
           ("config_hash", summary.config_hash), ("started_utc", summary.started_utc),
           ("exit_code", summary.exit_code), ("command", summary.command)]
    blocks = [
        {"title": "Input", "entries": items(summary.input.to_json())},
        {"title": "Rows", "entries": items(summary.rows.to_json(), skip=("attributes",))},
        {"title": "Run", "entries": [(k, _fmt_value(v)) for k, v in run if v not in (None, "")]
         + items(summary.spark) + [("seeds", _fmt_value(summary.seeds))]},
        {"title": "Versions", "entries": items(summary.versions)},
        {"title": "Stage timings (s)", "entries": items(summary.stage_timings)},
        {"title": "Audit parameters", "entries": [
            (n, _fmt_value(a.params)) for n, a in summary.audits.items()
        ]},
    ]
    return [b for b in blocks if b["entries"]]


def _anchor(title: str, i: int) -> str:
    return f"s{i}-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _outline(html: str, *, top: int = 2) -> str:
    """Headings of a section fragment renumbered so none jumps a level below ``top``.

    A section sits under an ``h<top>``; its own headings start at ``h<top+1>`` and go
    down at most one level at a time (an ``h4`` straight under the ``h2`` becomes an
    ``h3``), so the page outline has no gaps whichever template wrote the fragment.
    """
    stack: list[tuple[int, int]] = []  # (written level, new level) of enclosing headings
    opened: list[int] = []  # new levels of headings whose closing tag is still to come
    out, pos = [], 0
    for m in _HEADING_RE.finditer(html):
        closing, level = m.group(1) == "/", int(m.group(2))
        if closing:
            new = opened.pop() if opened else level
        else:
            while stack and stack[-1][0] >= level:
                stack.pop()
            new = min((stack[-1][1] if stack else top) + 1, 6)
            stack.append((level, new))
            opened.append(new)
        out.append(html[pos:m.start()])
        out.append(f"<{m.group(1)}h{new}")
        pos = m.end()
    out.append(html[pos:])
    return "".join(out)


def _audit_anchors(secs: list[dict[str, Any]], specs: Mapping[str, AuditSpec]
                   ) -> dict[str, str]:
    """Audit name -> the id of its first section (matched on the spec's title or order)."""
    out: dict[str, str] = {}
    for name, spec in specs.items():
        for s in secs:
            if s["title"] == spec.title or s["order"] == spec.order:
                out.setdefault(name, s["anchor"])
    for s in secs:
        if s["title"] == "Limits":
            out.setdefault("limits", s["anchor"])
    return out


def render_report_html(
    *, summary: RunSummary | Mapping[str, Any], rows: list[dict[str, Any]],
    sections: Iterable[Any], specs: Mapping[str, AuditSpec],
) -> str:
    """The HTML text of ``report.html``.

    Parameters
    ----------
    summary:
        The run's :class:`~fairspark.run_summary.RunSummary` (or a parsed
        ``summary.json``, read by :meth:`~fairspark.run_summary.RunSummary.from_json`).
    rows:
        The long-format result rows (``metrics.parquet`` as dicts).
    sections:
        :class:`~fairspark.audits.base.ReportSection` objects (``title``, ``html``,
        ``order``); their HTML is inserted as is (audits render it with
        :func:`template_env`, which escapes every value; the page's
        :data:`CONTENT_SECURITY_POLICY` blocks scripts and outside loads in any
        section).
    specs:
        Audit name -> spec, in run order (titles, headlines, decision lines).

    Returns
    -------
    str
        A complete, self-contained HTML page.
    """
    summary = as_run_summary(summary)
    env = template_env()
    css, _, _ = env.loader.get_source(env, "report.css.j2")  # type: ignore[union-attr]
    ordered = sorted(enumerate(sections), key=lambda t: (getattr(t[1], "order", 100), t[0]))
    secs = [
        {"title": s.title, "html": Markup(_outline(s.html)), "anchor": _anchor(s.title, i),
         "order": getattr(s, "order", 100)}
        for i, (_, s) in enumerate(ordered)
    ]
    level = summary.interval_level
    decision = decision_box(summary, rows, anchors=_audit_anchors(secs, specs), specs=specs)
    html = env.get_template("report.html.j2").render(
        decision=decision,
        audited=audited_facts(summary),
        audited_brief=audited_brief(summary),
        dataset=summary.dataset if summary.dataset is not None else "unnamed dataset",
        run_date=summary.run_date,
        config_hash=summary.config_hash or "",
        version=summary.versions.get("fairspark", __version__),
        schema_version=summary.versions.get("schema", SCHEMA_VERSION),
        css=Markup(css),
        csp=CONTENT_SECURITY_POLICY,
        outcome=_outcome(summary),
        facts=_facts(summary),
        headlines=_headlines(summary, rows, specs),
        audits=_audit_table(summary, rows),
        ci_pct=fmt_level(level),
        sections=secs,
        metadata=_metadata(summary),
    )
    return marks_to_html(html)


def render_report(
    *,
    summary: RunSummary | Mapping[str, Any],
    rows: list[dict[str, Any]],
    sections: Iterable[Any],
    path: str | Path,
    specs: Mapping[str, AuditSpec],
) -> None:
    """Write ``report.html`` to ``path`` (a local file; see :func:`render_report_html`)."""
    html = render_report_html(summary=summary, rows=rows, sections=sections, specs=specs)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".part")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(p)
