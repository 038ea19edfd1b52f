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
from typing import TYPE_CHECKING, Any, TypedDict

from fairspark.config import Config, parse_config
from fairspark.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame
    from typing_extensions import Unpack

    from fairspark.run_summary import RunSummary

__all__ = ["AuditOptions", "AuditResult", "audit"]

#: the input and output locations of an in-memory run (never read or written)
IN_MEMORY = "<in-memory DataFrame>"


class AuditOptions(TypedDict, total=False):
    """The keyword options of :func:`audit`, each optional (documented there).

    A type checker checks ``audit``'s keywords against it; at run time :func:`audit`
    refuses a name that is not one of them (the values are checked by the config model,
    as for a config file).
    """

    sensitive: Mapping[str, Any] | Iterable[Mapping[str, Any]] | None
    label: str | Mapping[str, Any] | None
    prediction: str | Mapping[str, Any] | None
    score: Mapping[str, Any] | None
    baseline: str | Mapping[str, Any] | None
    row_key: str | None
    exclude: Iterable[str] | None
    features: Iterable[str] | str | None
    audits: Iterable[str] | Mapping[str, Any] | None
    config: Config | Mapping[str, Any] | None
    dataset: str
    limits: Mapping[str, Any] | None
    model: Mapping[str, Any] | None
    seed: int | None
    mlflow: Mapping[str, Any] | None


#: the options' names, in the order :func:`audit` documents them
_OPTIONS = tuple(AuditOptions.__annotations__)


class AuditResult:
    """What :func:`audit` found: long rows, summary, report sections, exit code.

    Attributes
    ----------
    rows:
        The long-format result rows (the columns of ``metrics.parquet``).
    run_summary:
        The run's :class:`~fairspark.run_summary.RunSummary`.
    summary:
        The content of ``summary.json`` (a dict, :meth:`RunSummary.to_json`).
    exit_code:
        What the CLI would have exited with (0, 3 a limit gates, 4 an audit failed).
    sections:
        The audits' report sections (``ReportSection``).
    comparison:
        With a ``baseline``: per attribute, group and metric (comparisons, each
        group's rates, GEI and Theil), the audited decision's value, the baseline's
        and their paired difference with its interval (the rows whose ``model`` is
        ``challenger_minus_baseline``); empty without one.

    Examples
    --------
    With a baseline decision ``b`` on the same rows, :attr:`comparison` holds the
    paired differences (challenger ``p`` minus baseline ``b``):

    >>> rows = [("f" if i % 2 else "m", float(i % 3 == 0), float(i % 5 < 2),
    ...          float(i % 5 < 2 or (i % 2 == 0 and i % 5 == 2)), float(i % 7))
    ...         for i in range(200)]
    >>> df = spark.createDataFrame(rows, "sex string, y double, p double, b double, x double")
    >>> result = audit(df, sensitive={"sex": "m"}, label="y", prediction="p",
    ...                baseline="b", audits=["group"], dataset="loans")
    >>> result  # doctest: +ELLIPSIS
    <AuditResult 'loans': ... rows, exit code 0 (group: ok)>
    >>> diff = result.comparison.set_index("metric").loc["statistical_parity_difference"]
    >>> [round(float(diff[k]), 6) for k in ("challenger", "baseline", "difference")]
    [0.0, -0.2, 0.2]
    """

    def __init__(self, *, rows: pd.DataFrame, run_summary: RunSummary, exit_code: int,
                 sections: list[Any], long_rows: list[dict[str, Any]],
                 specs: Mapping[str, Any]):
        self._specs = specs
        self.rows = rows
        self.run_summary = run_summary
        self.exit_code = exit_code
        self.sections = sections
        self._long_rows = long_rows
        #: ``output.mlflow`` given to :func:`audit` (the defaults of :meth:`log_to_mlflow`)
        self._mlflow: Any = None

    @property
    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json`` (a new dict each time)."""
        return self.run_summary.to_json()

    @property
    def comparison(self) -> pd.DataFrame:
        """The paired comparison with the baseline decision, one row per metric."""
        import json

        import pandas as pd

        from fairspark.metrics import DIFFERENCE_MODEL

        rows = self.rows
        if "model" not in rows:
            return pd.DataFrame()
        diff = rows[rows["model"] == DIFFERENCE_MODEL]
        out = []
        for r in diff.itertuples(index=False):
            p = json.loads(r.params or "{}")
            out.append({"attribute": r.attribute, "group": r.group, "metric": r.metric,
                        "challenger": p.get("challenger"), "baseline": p.get("baseline"),
                        "difference": r.value, "lower": r.lower, "upper": r.upper,
                        "worse": p.get("worse"), "status": r.status})
        return pd.DataFrame(out)

    def log_to_mlflow(self, *, tracking_uri: str | None = None, experiment: str | None = None,
                      run_name: str | None = None) -> dict[str, Any]:
        """Log this result to MLflow as one run (``output.mlflow``, :mod:`fairspark.tracking`).

        Params, metrics stepped by the run date, the ``fairness.gate`` tag, and
        ``report.html``, ``summary.json`` and ``metrics.parquet`` as artifacts; the
        registered audited model's version gets the verdict's tags. Never raises: a
        failure is one warning and the returned note.

        Parameters
        ----------
        tracking_uri, experiment, run_name:
            ``output.mlflow``'s keys (default: those given to :func:`audit`, else
            MLflow's tracking URI, ``fairspark <dataset>``, ``<dataset> <run date>``).

        Returns
        -------
        dict
            ``{"logged": True, "run_id", ...}`` or ``{"logged": False, "error"}``.
        """
        import tempfile
        from pathlib import Path

        from fairspark.config_model import MlflowOutputConfig
        from fairspark.tracking import log_audit

        given = self._mlflow.model_dump() if self._mlflow is not None else {}
        settings = MlflowOutputConfig(**{**given, **{k: v for k, v in (
            ("tracking_uri", tracking_uri), ("experiment", experiment),
            ("run_name", run_name)) if v is not None}})
        with tempfile.TemporaryDirectory(prefix="fairspark-mlflow-") as tmp:
            files = {"report.html": Path(tmp, "report.html"),
                     "summary.json": Path(tmp, "summary.json"),
                     "metrics.parquet": Path(tmp, "metrics.parquet")}
            files["report.html"].write_text(self.report_html(), encoding="utf-8")
            files["summary.json"].write_text(self.run_summary.to_text(), encoding="utf-8")
            self.rows.to_parquet(files["metrics.parquet"], index=False)
            return log_audit(settings, summary=self.run_summary, long_rows=self._long_rows,
                             files={k: str(v) for k, v in files.items()})

    def report_html(self) -> str:
        """The complete ``report.html`` page of this run (self-contained)."""
        from fairspark.report.render import render_report_html

        return render_report_html(summary=self.run_summary, rows=self._long_rows,
                                  sections=self.sections, specs=self._specs)

    def _repr_html_(self) -> str:
        # In an iframe: the report's page-wide CSS must not restyle the notebook. The
        # empty ``sandbox`` gives the page no scripts, no forms, no top navigation and
        # an origin of its own, so nothing in it can reach the notebook's page.
        page = _html.escape(self.report_html(), quote=True)
        title = _html.escape(str(self.run_summary.dataset), quote=True)
        return (f'<iframe title="fairspark report: {title}" sandbox="" '
                f'srcdoc="{page}" style="width:100%;height:900px;border:1px solid #dde3e8">'
                "</iframe>")

    def __repr__(self) -> str:
        audits = ", ".join(f"{n}: {a.status}" for n, a in self.run_summary.audits.items())
        return (f"<AuditResult {self.run_summary.dataset!r}: {len(self.rows)} rows, "
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
    from fairspark.registry import specs

    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {k: dict(v or {}) for k, v in spec.items()}
    names = list(spec)
    unknown = [n for n in names if n not in specs()]
    if unknown:
        raise ConfigError(f"audits: {unknown} are not audits (known: {list(specs())})")
    return {n: {"enabled": n in names} for n in specs()}


def _checked(options: Mapping[str, Any]) -> AuditOptions:
    """``options`` when every name is one of :class:`AuditOptions`' (a ConfigError
    naming the others and listing the known ones otherwise)."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ConfigError(f"fairspark.audit(): unknown keyword argument(s) {unknown} "
                          f"(known: {list(_OPTIONS)})")
    return options  # type: ignore[return-value]


def _config(options: AuditOptions) -> Config:
    """The run's config: ``options["config"]`` with the other options over its keys."""
    config = options.get("config")
    if isinstance(config, Config):
        data = config.model_dump(mode="json", exclude_none=True)
    else:
        data = dict(config or {})
    data.setdefault("dataset", options.get("dataset", "notebook"))
    where = (data.get("input") or {}).get("where")
    data["input"] = {"path": IN_MEMORY, **({"where": where} if where else {})}
    logged = options.get("mlflow") or (data.get("output") or {}).get("mlflow")
    data["output"] = {"path": IN_MEMORY, "report": False,
                      **({"mlflow": dict(logged)} if logged else {})}
    data["columns"] = _columns(dict(data.get("columns") or {}), options)
    if options.get("audits") is not None:
        data["audits"] = _audits(options["audits"])
    for key in ("limits", "model"):
        if options.get(key) is not None:
            data[key] = dict(options[key])
    if options.get("seed") is not None:
        data["seed"] = options["seed"]
    return parse_config(data)


def _columns(cols: dict[str, Any], options: AuditOptions) -> dict[str, Any]:
    """``columns:`` of the config with the column options over its keys."""
    if options.get("sensitive") is not None:
        cols["sensitive"] = _sensitive(options["sensitive"])
    if options.get("label") is not None:
        cols["label"] = _column(options["label"])
    if options.get("prediction") is not None:
        cols["prediction"], cols["score"] = _column(options["prediction"]), None
    if options.get("score") is not None:
        cols["score"], cols["prediction"] = _column(options["score"]), None
    if options.get("baseline") is not None:
        cols["baseline"] = _column(options["baseline"])
    if options.get("row_key") is not None:
        cols["row_key"] = options["row_key"]
    if options.get("exclude") is not None:
        cols["exclude"] = list(options["exclude"])
    features = options.get("features")
    if features is not None:
        cols["features"] = features if isinstance(features, str) else list(features)
    return {k: v for k, v in cols.items() if v is not None}


def _check_spark_frame(df: object) -> None:
    """Refuse anything but a Spark DataFrame, in one line that says how to convert it."""
    from pyspark.sql import DataFrame as SparkDataFrame

    if isinstance(df, SparkDataFrame):
        return
    from fairspark.errors import NotASparkDataFrameError

    kind = f"{type(df).__module__}.{type(df).__qualname__}"
    raise NotASparkDataFrameError(
        f"fairspark.audit() needs a pyspark.sql.DataFrame, got {kind}; convert it first, "
        "e.g. fairspark.audit(spark.createDataFrame(pdf), ...) for a pandas DataFrame")


def audit(df: DataFrame, **options: Unpack[AuditOptions]) -> AuditResult:
    """Audit a scored Spark DataFrame in memory; nothing is written.

    Parameters
    ----------
    df:
        The scored table (one row per decision).
    **options:
        Keyword options, all optional (:class:`AuditOptions`), below. A name that is
        not one of them is a :class:`~fairspark.errors.ConfigError` that names it and
        lists the known ones.

    Other Parameters
    ----------------
    sensitive:
        ``{"column": privileged value(s)}`` or a list of ``columns.sensitive`` entries
        (``{"column": "age", "privileged_expr": "age >= 25"}``).
    label, prediction:
        A column name (positive value ``1``) or ``{"column": ..., "positive": [...]}``.
    score:
        Instead of ``prediction``: ``{"column": ..., "threshold": 0.5}``. A column
        configured as the score is never a feature.
    baseline:
        A second decision on the same rows (today's model), compared with the audited
        one: a column name (positive value ``1``), ``{"column": ..., "positive":
        [...]}`` or ``{"column": ..., "threshold": ...}`` (``columns.baseline``). The
        group audit then adds the baseline's rows and the paired differences
        (:attr:`AuditResult.comparison`), and the report's decision box says first
        whether the audited decision is fairer, less fair or no different beyond noise.
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
    mlflow:
        ``output.mlflow`` (``{"tracking_uri", "experiment", "run_name"}``): log the
        result to MLflow as one run (:meth:`AuditResult.log_to_mlflow`); a failure is
        a warning and ``summary["mlflow"]``, never an error. ``prediction`` and
        ``baseline`` may also be registered models (``{"model_uri": ...}``).
    dataset, limits, model, seed:
        The config keys of the same names (``dataset`` defaults to ``"notebook"``).

    Returns
    -------
    AuditResult
        ``.rows`` (pandas, the long rows of ``metrics.parquet``), ``.summary``
        (``summary.json``), ``.exit_code``; shown in Jupyter as the report.

    Raises
    ------
    fairspark.errors.FairsparkInputError
        A config or input error (a missing column, a wrong type, an empty table, an
        unknown keyword), as exit code 2 of the CLI.
    fairspark.errors.NotASparkDataFrameError
        ``df`` is not a ``pyspark.sql.DataFrame`` (a pandas or polars frame, say).

    Examples
    --------
    A scored table of 200 rows in which men (``m``, the privileged value) are
    selected at 0.6 and women at 0.4:

    >>> rows = [("f" if i % 2 else "m", float(i % 3 == 0),
    ...          float(i % 5 < 2 or (i % 2 == 0 and i % 5 == 2)), float(i % 7))
    ...         for i in range(200)]
    >>> df = spark.createDataFrame(rows, "sex string, y double, p double, x double")
    >>> result = audit(df, sensitive={"sex": "m"}, label="y", prediction="p",
    ...                audits=["group"], dataset="loans")
    >>> result.exit_code, result.summary["audits"]["group"]["status"] == "ok"
    (0, True)
    >>> spd = result.rows.query("metric == 'statistical_parity_difference'").iloc[0]
    >>> spd.attribute, spd.group, round(float(spd.value), 6)
    ('sex', 'unprivileged', -0.2)
    >>> bool(spd.lower < spd.value < spd.upper)  # its 95% interval
    True

    A pandas frame is refused with the conversion to use:

    >>> import pandas as pd
    >>> audit(pd.DataFrame({"p": [1.0]}), prediction="p")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    fairspark.errors.NotASparkDataFrameError: fairspark.audit() needs a pyspark.sql.DataFrame, ...
    """
    import pandas as pd

    from fairspark.runner import compute_run

    _check_spark_frame(df)
    cfg = _config(_checked(options))
    if cfg.input.where:
        df = df.where(cfg.input.where)
    run = compute_run(df.sparkSession, cfg, df=df)
    summary, long_rows = run.run_summary, run.long_rows
    summary.input.path = summary.input.format = None
    summary.input.source = "Spark DataFrame (notebook)"
    summary.command = "fairspark.audit()"
    result = AuditResult(rows=pd.DataFrame(long_rows), run_summary=summary,
                         exit_code=int(run.exit_code), sections=list(run.sections),
                         long_rows=long_rows, specs=cfg.audits.audit_specs())
    return _logged(result, cfg)


def _logged(result: AuditResult, cfg: Config) -> AuditResult:
    """``result``, logged to MLflow as the CLI logs a run when ``output.mlflow`` is set
    (``summary.mlflow`` says how it went; never changes the result)."""
    if cfg.output.mlflow is not None:
        result._mlflow = cfg.output.mlflow
        result.run_summary.mlflow = result.log_to_mlflow()
    return result
