"""The notebook API: audit a Spark DataFrame in memory and show the report inline.

:func:`audit` runs the same steps as ``fairspark audit`` (prepare once, every enabled
audit in isolation with its own error handling and time budget, redaction, limits, the
summary and the report), but on a DataFrame the caller holds and without writing
anything: the result keeps the long rows as a pandas frame, the summary as a dict and
shows ``report.html`` inline in Jupyter.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fairspark.config import Config, parse_config

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

__all__ = ["AuditResult", "audit"]

#: the input and output locations of an in-memory run (never read or written)
IN_MEMORY = "<in-memory DataFrame>"


class AuditResult:
    """What :func:`audit` found: long rows, summary, report sections, exit code.

    Attributes
    ----------
    rows:
        The long-format result rows (the columns of ``metrics.parquet``).
    summary:
        The run summary (the content of ``summary.json``).
    exit_code:
        What the CLI would have exited with (0, 3 a limit gates, 4 an audit failed).
    sections:
        The audits' report sections (``ReportSection``).
    """

    def __init__(self, *, rows: pd.DataFrame, summary: dict[str, Any], exit_code: int,
                 sections: list[Any], long_rows: list[dict[str, Any]]):
        self.rows = rows
        self.summary = summary
        self.exit_code = exit_code
        self.sections = sections
        self._long_rows = long_rows

    def report_html(self) -> str:
        """The complete ``report.html`` page of this run (self-contained)."""
        from fairspark.report.render import render_report_html

        return render_report_html(summary=self.summary, rows=self._long_rows,
                                  sections=self.sections)

    def _repr_html_(self) -> str:
        # In an iframe: the report's page-wide CSS must not restyle the notebook.
        page = _html.escape(self.report_html(), quote=True)
        return (f'<iframe title="fairspark report: {_html.escape(self.summary["dataset"])}" '
                f'srcdoc="{page}" style="width:100%;height:900px;border:1px solid #dde3e8">'
                "</iframe>")

    def __repr__(self) -> str:
        audits = ", ".join(f"{n}: {(a or {}).get('status')}"
                           for n, a in (self.summary.get("audits") or {}).items())
        return (f"<AuditResult {self.summary.get('dataset')!r}: {len(self.rows)} rows, "
                f"exit code {self.exit_code} ({audits})>")


def _column(spec: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    return {"column": spec} if isinstance(spec, str) else dict(spec)


def _sensitive(spec: Mapping[str, Any] | Iterable[Any]) -> list[dict[str, Any]]:
    """``{"sex": "Male"}`` or ``[{"column": "sex", "privileged": "Male"}, ...]``."""
    if isinstance(spec, Mapping):
        return [{"column": c, "privileged": p} for c, p in spec.items()]
    return [dict(s) for s in spec]


def _audits(spec: Iterable[str] | Mapping[str, Any] | None) -> dict[str, Any]:
    """A list of audit names runs exactly those; a mapping is ``audits:`` as in YAML."""
    from fairspark.audits.registry import specs

    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {k: dict(v or {}) for k, v in spec.items()}
    names = list(spec)
    unknown = [n for n in names if n not in specs()]
    if unknown:
        from fairspark.errors import ConfigError

        raise ConfigError(f"audits: {unknown} are not audits (known: {list(specs())})")
    return {n: {"enabled": n in names} for n in specs()}


def _config(*, config: Config | Mapping[str, Any] | None, dataset: str,
            sensitive: Any, label: Any, prediction: Any, score: Any, audits: Any,
            limits: Any, model: Any, seed: int | None, row_key: str | None = None,
            exclude: Iterable[str] | None = None,
            features: Iterable[str] | str | None = None) -> Config:
    if isinstance(config, Config):
        data = config.model_dump(mode="json", exclude_none=True)
    else:
        data = dict(config or {})
    data.setdefault("dataset", dataset)
    where = (data.get("input") or {}).get("where")
    data["input"] = {"path": IN_MEMORY, **({"where": where} if where else {})}
    data["output"] = {"path": IN_MEMORY, "report": False}
    cols = dict(data.get("columns") or {})
    if sensitive is not None:
        cols["sensitive"] = _sensitive(sensitive)
    if label is not None:
        cols["label"] = _column(label)
    if prediction is not None:
        cols["prediction"], cols["score"] = _column(prediction), None
    if score is not None:
        cols["score"], cols["prediction"] = _column(score), None
    if row_key is not None:
        cols["row_key"] = row_key
    if exclude is not None:
        cols["exclude"] = list(exclude)
    if features is not None:
        cols["features"] = features if isinstance(features, str) else list(features)
    data["columns"] = {k: v for k, v in cols.items() if v is not None}
    if audits is not None:
        data["audits"] = _audits(audits)
    if limits is not None:
        data["limits"] = dict(limits)
    if model is not None:
        data["model"] = dict(model)
    if seed is not None:
        data["seed"] = seed
    return parse_config(data)


def audit(
    df: DataFrame,
    *,
    sensitive: Mapping[str, Any] | Iterable[Mapping[str, Any]] | None = None,
    label: str | Mapping[str, Any] | None = None,
    prediction: str | Mapping[str, Any] | None = None,
    score: Mapping[str, Any] | None = None,
    row_key: str | None = None,
    exclude: Iterable[str] | None = None,
    features: Iterable[str] | str | None = None,
    audits: Iterable[str] | Mapping[str, Any] | None = None,
    config: Config | Mapping[str, Any] | None = None,
    dataset: str = "notebook",
    limits: Mapping[str, Any] | None = None,
    model: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> AuditResult:
    """Audit a scored Spark DataFrame in memory; nothing is written.

    Over 60 lines only by this docstring; the body is about 20 lines.

    Parameters
    ----------
    df:
        The scored table (one row per decision).
    sensitive:
        ``{"column": privileged value(s)}`` or a list of ``columns.sensitive`` entries
        (``{"column": "age", "privileged_expr": "age >= 25"}``).
    label, prediction:
        A column name (positive value ``1``) or ``{"column": ..., "positive": [...]}``.
    score:
        Instead of ``prediction``: ``{"column": ..., "threshold": 0.5}``. A column
        configured as the score is never a feature.
    row_key, exclude, features:
        ``columns.row_key`` (the column that names a row: HFM's witness pairs, DR),
        ``columns.exclude`` (never features, e.g. a model score column beside the
        configured prediction) and ``columns.features`` (default ``all_others``).
    audits:
        Audit names to run (``["group", "hfm"]``: exactly these), or the ``audits:``
        mapping of a config. Default: the config's audits (``group`` alone).
    config:
        A :class:`~fairspark.config.Config` or its dict; the keyword arguments above
        override its keys. ``input.where`` filters ``df``; the rest of ``input`` and
        ``output`` are ignored.
    dataset, limits, model, seed:
        The config keys of the same names.

    Returns
    -------
    AuditResult
        ``.rows`` (pandas, the long rows of ``metrics.parquet``), ``.summary``
        (``summary.json``), ``.exit_code``; shown in Jupyter as the report.

    Raises
    ------
    fairspark.errors.FairsparkInputError
        A config or input error (a missing column, a wrong type, an empty table), as
        exit code 2 of the CLI.
    """
    import pandas as pd

    from fairspark.runner import compute_run

    cfg = _config(config=config, dataset=dataset, sensitive=sensitive, label=label,
                  prediction=prediction, score=score, audits=audits, limits=limits,
                  model=model, seed=seed, row_key=row_key, exclude=exclude,
                  features=features)
    if cfg.input.where:
        df = df.where(cfg.input.where)
    run = compute_run(df.sparkSession, cfg, df=df)
    summary, long_rows = run.summary, run.long_rows
    summary["input"] = {**summary["input"], "path": None, "format": None,
                        "source": "Spark DataFrame (notebook)"}
    summary["command"] = "fairspark.audit()"
    return AuditResult(rows=pd.DataFrame(long_rows), summary=summary,
                       exit_code=int(run.exit_code), sections=list(run.sections),
                       long_rows=long_rows)
