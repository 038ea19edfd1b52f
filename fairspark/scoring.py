"""Decisions scored by registered MLflow models, on the executors (issue 60).

``columns.prediction`` and ``columns.baseline`` may name a model instead of a column:
``{model_uri: "models:/credit@challenger", threshold: 0.5, output: ...}``. Before the
table is prepared, :func:`resolve_models` looks every URI up (the registry's alias or
version, the run, the model's signature) and turns each into a plain decision column
of the config; :meth:`ModelScoring.apply` then adds those columns to the audited table
with ``mlflow.pyfunc.spark_udf``, so both decisions come from the same rows in the same
scan. Everything that can be wrong with a model (a URI that does not resolve, an alias
that does not exist, an output that is neither a label nor a score, a threshold on a
label model) is a :class:`~fairspark.errors.ConfigError` naming the key and the URI,
raised before any Spark job runs.

A model is a *score* model when its output is a float (the decision is
``score >= threshold``, default 0.5) and a *label* model when it is an integer, boolean
or string (the decision is ``label in positive``, default ``[1]``). A model that
returns several columns needs ``output`` (the column to audit).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairspark.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

    from fairspark.config_model import Config, RegisteredModelConfig

__all__ = ["INSTALL", "ModelScoring", "ScoringModel", "require_mlflow",
           "resolve_models"]

#: how to install what a model URI or ``output.mlflow`` needs
INSTALL = "pip install 'fairspark[mlflow]'"

#: the column each decision is scored into, per config key
SCORED_COLUMNS = {"columns.prediction": "fairspark_prediction",
                  "columns.baseline": "fairspark_baseline"}

_LABEL_TYPES = {"boolean": "boolean", "integer": "int", "long": "long", "string": "string"}
_SCORE_TYPES = {"float": "double", "double": "double"}


def require_mlflow(config: Config) -> None:
    """Raise when the config needs MLflow (a model URI, ``output.mlflow``) and it is not
    installed: exit 2 before any work, naming the key and the install command."""
    keys = [f"{k}.model_uri" for k in config.columns.registered_models()]
    if getattr(config.output, "mlflow", None) is not None:
        keys.append("output.mlflow")
    keys += [key for key, uri in _model_calls(config).values() if uri is not None]
    if not keys:
        return
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise ConfigError(f"config key {keys[0]!r} needs MLflow, which is not installed: "
                          f"{INSTALL}") from None


def _model_calls(config: Config) -> dict[str, tuple[str, str | None]]:
    """Enabled audit -> the registered model it calls (``AuditParams.model_call``)."""
    return {name: call for name, p in config.audits.enabled().items()
            if (call := p.model_call()) is not None}


@contextlib.contextmanager
def tracking_uri(uri: str | None) -> Iterator[None]:
    """MLflow's tracking (and registry) URI set to ``uri`` inside the block (unchanged
    when ``None``), and put back after it."""
    import os

    import mlflow
    from mlflow.tracking._tracking_service import utils

    if uri is None:
        yield
        return
    # what was set, not what get_tracking_uri() resolves to: setting that back would pin
    # MLflow's default and hide a later MLFLOW_TRACKING_URI
    before = getattr(utils, "_tracking_uri", None)
    env = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before)
        if before is None and env is not None:
            os.environ["MLFLOW_TRACKING_URI"] = env


@dataclass
class ScoringModel:
    """One resolved model: what it is in the registry and how its output decides."""

    key: str
    uri: str
    #: the URI pinned to the version the alias pointed at when the run started
    resolved_uri: str
    column: str
    kind: str  # "score" or "label"
    result_type: str
    inputs: list[str]
    output: str | None
    threshold: float | None = None
    positive: list[Any] | None = None
    name: str | None = None
    version: str | None = None
    alias: str | None = None
    run_id: str | None = None
    #: the tracking (registry) URI the model was resolved with (None: MLflow's own)
    tracking_uri: str | None = None

    def predict_column(self, spark: SparkSession, inputs: dict[str, Column]
                       ) -> Callable[[dict[str, Column]], Column]:
        """A function of the model's input columns (name -> column; ``inputs`` gives
        the default for each) to its output column, scored by ``mlflow.pyfunc.spark_udf``
        on the executors. The model is fetched once, here (call it inside
        :func:`tracking_uri`)."""
        import mlflow.pyfunc

        from fairspark.session import is_connect

        if is_connect(spark):
            # on Connect, mlflow's UDF loads the model in each Python worker of the
            # server from the URI and the tracking URI it was made with, and those
            # workers do not run in this process's folder (pyspark's local server runs
            # them in the session's artifact folder): hand them absolute locations
            with _absolute_tracking_uri():
                udf = mlflow.pyfunc.spark_udf(spark, model_uri=worker_uri(self.resolved_uri),
                                              result_type=self.result_type,
                                              env_manager="local")
        else:
            udf = mlflow.pyfunc.spark_udf(spark, model_uri=self.resolved_uri,
                                          result_type=self.result_type, env_manager="local")

        def score(columns: dict[str, Column]) -> Column:
            col = udf(*[columns.get(c, inputs.get(c)) for c in self.inputs])
            if self.output is not None and self.result_type.startswith("struct"):
                col = col.getField(self.output)
            return col

        return score

    def decision(self, output: Column) -> Column:
        """The decision the model's output makes: ``score >= threshold`` or ``label in
        positive`` (as the preparation reads the scored column)."""
        from pyspark.sql import functions as F

        if self.kind == "score":
            return output.cast("double") >= F.lit(float(self.threshold))  # type: ignore[arg-type]
        return output.isin(list(self.positive or []))

    def describe(self) -> dict[str, Any]:
        """The model's facts for ``summary.json``, the rows' ``params`` and MLflow."""
        out = {"model_uri": self.uri, "name": self.name, "version": self.version,
               "alias": self.alias, "run_id": self.run_id, "output": self.output,
               "kind": self.kind, "column": self.column}
        if self.kind == "score":
            out["threshold"] = self.threshold
        else:
            out["positive"] = self.positive
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class ModelScoring:
    """The resolved models of a run; :meth:`apply` scores a table with them."""

    models: list[ScoringModel]
    tracking_uri: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def apply(self, spark: SparkSession, df: DataFrame) -> DataFrame:
        """``df`` with one decision column per model, scored by ``spark_udf`` on the
        executors (lazy: scored in the scan that prepares the table).

        Raises
        ------
        ConfigError
            A model input column missing from the table, or a scored column's name
            taken.
        """
        if not self.models:
            return df
        from pyspark.sql import functions as F

        have = set(df.columns)
        for m in self.models:
            missing = [c for c in m.inputs if c not in have]
            if missing:
                raise ConfigError(f"config key '{m.key}.model_uri' ({m.uri!r}): the model "
                                  f"reads columns the table does not have: {missing}")
            if m.column in have:
                raise ConfigError(f"config key '{m.key}.model_uri' ({m.uri!r}): the table "
                                  f"already has a column {m.column!r}, which fairspark "
                                  "scores the model into; rename it")
        with tracking_uri(self.tracking_uri):
            for m in self.models:
                score = m.predict_column(spark, {c: F.col(c) for c in m.inputs})
                df = df.withColumn(m.column, score({}))
        return df

    def annotate(self, long_rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Put the models' facts into every row's ``params``; return the entry of
        ``summary.json`` (``registered_models``; empty without a model)."""
        if not self.models:
            return {}
        models = {m.key.split(".", 1)[1]: m.describe() for m in self.models}
        for r in long_rows:
            try:
                params = json.loads(r["params"]) if r.get("params") else {}
            except ValueError:
                params = {"params": r["params"]}
            if not isinstance(params, dict):
                params = {"params": params}
            params["registered_models"] = models
            r["params"] = json.dumps(params, sort_keys=True, default=str)
        return {"registered_models": models}

    def audited(self) -> ScoringModel | None:
        """The audited decision's model (``columns.prediction``), if it is one."""
        return next((m for m in self.models if m.key == "columns.prediction"), None)


def worker_uri(uri: str) -> str:
    """The URI a Spark Connect server's Python workers load the model of ``uri`` from.

    A ``models:/`` URI becomes the model version's artifact location, looked up here
    (the registry is read by the client only, once, not by every worker); a relative
    local path becomes absolute. Other URIs are unchanged.
    """
    if uri.startswith("models:/"):
        from mlflow.store.artifact.models_artifact_repo import ModelsArtifactRepository

        uri = ModelsArtifactRepository.get_underlying_uri(uri)
    return _absolute_local(uri)


def _absolute_local(uri: str) -> str:
    """``uri`` with a relative local path (``path``, ``file:path``, ``sqlite:///path``)
    made absolute against this process's folder; any other URI unchanged."""
    import os
    from urllib.parse import urlparse

    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + os.path.abspath(uri[len("sqlite:///"):])
    parsed = urlparse(uri)
    if uri in ("databricks", "databricks-uc"):  # MLflow's names, not paths
        return uri
    if parsed.scheme == "" or (parsed.scheme == "file" and not parsed.netloc):
        path = parsed.path if parsed.scheme else uri
        if not os.path.isabs(path):
            return Path(os.path.abspath(path)).as_uri() if parsed.scheme else \
                os.path.abspath(path)
    return uri


@contextlib.contextmanager
def _absolute_tracking_uri() -> Iterator[None]:
    """MLflow's tracking URI made absolute inside the block when it is a relative local
    one (what ``spark_udf`` hands the workers to load a ``runs:/`` model with)."""
    import mlflow

    current = mlflow.get_tracking_uri()
    absolute = _absolute_local(current)
    if absolute == current:
        yield
        return
    with tracking_uri(absolute):
        yield


_MODELS_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<ver>[^/]+))/?$")


def _registry_facts(key: str, uri: str) -> dict[str, Any]:
    """Name, version, alias and run id of a ``models:/`` URI (the run's id for a
    ``runs:/`` URI), and the URI pinned to that version."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient()
    if uri.startswith("runs:/"):
        run_id = uri[len("runs:/"):].split("/", 1)[0]
        try:
            client.get_run(run_id)
        except MlflowException as err:
            raise _bad(key, uri, f"no such run ({_first_line(err)})") from None
        return {"run_id": run_id, "resolved_uri": uri}
    m = _MODELS_URI.match(uri)
    if not uri.startswith("models:/"):
        return {"resolved_uri": uri}
    if m is None:
        raise _bad(key, uri, "expected models:/<name>@<alias> or models:/<name>/<version>")
    name, alias, ver = m["name"], m["alias"], m["ver"]
    try:
        if alias is not None:
            mv = client.get_model_version_by_alias(name, alias)
        elif ver.isdigit():
            mv = client.get_model_version(name, ver)
        else:  # a legacy stage or 'latest'
            found = client.get_latest_versions(name, None if ver == "latest" else [ver])
            if not found:
                raise _bad(key, uri, f"registered model {name!r} has no version in {ver!r}")
            mv = max(found, key=lambda v: int(v.version))
    except MlflowException as err:
        what = (f"alias {alias!r} of registered model {name!r} does not exist" if alias
                else f"version {ver!r} of registered model {name!r} does not exist")
        try:
            client.get_registered_model(name)
        except MlflowException:
            what = f"registered model {name!r} does not exist"
        raise _bad(key, uri, f"{what} ({_first_line(err)})") from None
    return {"name": name, "version": str(mv.version), "alias": alias, "run_id": mv.run_id,
            "resolved_uri": f"models:/{name}/{mv.version}"}


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "message", None) or err).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


def _bad(key: str, uri: str, why: str) -> ConfigError:
    name = key if key.startswith("audits.") else f"{key}.model_uri"
    return ConfigError(f"config key '{name}' ({uri!r}): {why}")


def _output(key: str, uri: str, cfg: RegisteredModelConfig, signature: Any
            ) -> tuple[str, str, str | None]:
    """``(kind, result_type, output)`` of the model's output that decides."""
    if signature is None or signature.outputs is None:
        raise _bad(key, uri, "the model has no output signature, so fairspark cannot tell a "
                   "label from a score; log it with a signature (mlflow.models.infer_signature)")
    outs = signature.outputs
    if outs.is_tensor_spec():
        specs = outs.inputs
        shape = tuple(specs[0].shape) if specs else ()
        if len(specs) != 1 or len(shape) > 2 or (len(shape) == 2 and shape[1] != 1):
            raise _bad(key, uri, f"the model's output is a tensor of shape {shape}: neither "
                       "a label nor a score (one value per row)")
        kind = specs[0].type.kind
        name = {"b": "boolean", "i": "long", "u": "long", "U": "string", "O": "string",
                "f": "double"}.get(kind)
        if cfg.output is not None:
            raise _bad(key, uri, f"'{key}.output' ({cfg.output!r}) names a column, but the "
                       "model returns one unnamed value per row; leave 'output' out")
        if name is None:
            raise _bad(key, uri, f"the model's output type {specs[0].type} is neither a label "
                       "nor a score")
        return ("score" if name == "double" else "label"), name, None
    cols = list(outs.inputs)
    names = [c.name for c in cols]
    if cfg.output is not None:
        if cfg.output not in names:
            raise _bad(key, uri, f"'{key}.output' ({cfg.output!r}) is not an output of the "
                       f"model (outputs: {names})")
        chosen = cols[names.index(cfg.output)]
    elif len(cols) == 1:
        chosen = cols[0]
    else:
        raise _bad(key, uri, f"the model returns several outputs {names}: name the one to "
                   f"audit in '{key}.output'")
    tname = str(getattr(chosen.type, "name", chosen.type)).lower()
    if tname in _SCORE_TYPES:
        kind, rtype = "score", "double"
    elif tname in _LABEL_TYPES:
        kind, rtype = "label", _LABEL_TYPES[tname]
    else:
        raise _bad(key, uri, f"the model's output {chosen.name or ''!s} is of type {tname}: "
                   "neither a label (integer, boolean, string) nor a score (float)")
    if len(cols) > 1:
        fields = []
        for c in cols:
            t = str(getattr(c.type, "name", c.type)).lower()
            sql = _SCORE_TYPES.get(t) or _LABEL_TYPES.get(t)
            if sql is None:
                raise _bad(key, uri, f"the model's output {c.name!r} is of type {t}, which "
                           "Spark cannot receive beside the audited output")
            fields.append(f"`{c.name}` {sql}")
        return kind, f"struct<{', '.join(f.replace(' ', ': ', 1) for f in fields)}>", cfg.output
    return kind, rtype, cfg.output


def _inputs(key: str, uri: str, signature: Any) -> list[str]:
    ins = signature.inputs if signature is not None else None
    if ins is None or ins.is_tensor_spec() or not ins.has_input_names():
        raise _bad(key, uri, "the model's input signature has no column names: fairspark "
                   "passes the table's columns by name; log the model with a named-column "
                   "signature")
    return list(ins.input_names())


def _resolve_one(key: str, cfg: RegisteredModelConfig) -> ScoringModel:
    import mlflow.models
    from mlflow.exceptions import MlflowException

    facts = _registry_facts(key, cfg.model_uri)
    try:
        info = mlflow.models.get_model_info(facts["resolved_uri"])
    except (MlflowException, OSError) as err:
        raise _bad(key, cfg.model_uri, f"the URI does not resolve to a model "
                   f"({_first_line(err)})") from None
    kind, rtype, output = _output(key, cfg.model_uri, cfg, info.signature)
    if kind == "label" and cfg.threshold is not None:
        raise _bad(key, cfg.model_uri, f"'{key}.threshold' is set but the model returns a "
                   "label, not a score; leave 'threshold' out (or give 'positive')")
    if kind == "score" and cfg.positive is not None:
        raise _bad(key, cfg.model_uri, f"'{key}.positive' is set but the model returns a "
                   "score; give 'threshold' instead")
    return ScoringModel(
        key=key, uri=cfg.model_uri, resolved_uri=facts["resolved_uri"],
        column=SCORED_COLUMNS.get(key, ""), kind=kind, result_type=rtype,
        inputs=_inputs(key, cfg.model_uri, info.signature), output=output,
        threshold=(0.5 if cfg.threshold is None else cfg.threshold) if kind == "score" else None,
        positive=(list(cfg.positive) if cfg.positive is not None else [1])
        if kind == "label" else None,
        name=facts.get("name"), version=facts.get("version"), alias=facts.get("alias"),
        run_id=facts.get("run_id") or info.run_id)


def resolve_models(config: Config) -> tuple[Config, ModelScoring]:
    """Look every model URI of ``config`` up and return the config with plain decision
    columns in their place, and the scoring that adds those columns (one without models,
    which changes nothing, when the config names none). Runs no Spark job.

    Raises
    ------
    ConfigError
        Naming the key and the URI: MLflow missing, a URI or alias that does not
        resolve, an output that is neither a label nor a score, a threshold on a label
        model, a model with a ``window``.
    """
    from fairspark.config_columns import PredictionConfig, ScoreConfig
    from fairspark.config_model import ModelConfig

    wanted = config.columns.registered_models()
    if not wanted:
        return _with_audit_models(config, None, None), ModelScoring([])
    require_mlflow(config)
    if config.window is not None:
        key = next(iter(wanted))
        raise ConfigError(f"config key '{key}.model_uri' is not supported with 'window' yet: "
                          "the partitions' stored states hold decisions already scored")
    mcfg = getattr(config.output, "mlflow", None)
    uri = mcfg.tracking_uri if mcfg is not None else None
    with tracking_uri(uri):
        models = [_resolve_one(key, cfg) for key, cfg in wanted.items()]
    for m in models:
        m.tracking_uri = uri
    config = _with_audit_models(config, next((m for m in models if m.key == "columns.prediction"),
                                         None), uri)
    update: dict[str, Any] = {}
    for m in models:
        plain = (ScoreConfig(column=m.column, threshold=m.threshold) if m.kind == "score"
                 else PredictionConfig(column=m.column, positive=m.positive))
        if m.key == "columns.baseline":
            update["baseline"] = plain
        elif m.kind == "score":
            update.update(prediction=None, score=plain)
        else:
            update["prediction"] = plain
    columns = config.columns.model_copy(update=update)
    new = {"columns": columns}
    audited = next((m for m in models if m.key == "columns.prediction"), None)
    if audited is not None and audited.name is not None:
        described = config.model or ModelConfig()
        new["model"] = described.model_copy(update={
            "name": described.name or audited.name,
            "version": described.version or (audited.version + (f" (@{audited.alias})"
                                                                if audited.alias else "")),
            "description": described.description or
            f"{audited.uri}, MLflow run {audited.run_id}"})
    return config.model_copy(update=new), ModelScoring(models, tracking_uri=uri)


def _with_audit_models(config: Config, audited: ScoringModel | None,
                       uri: str | None) -> Config:
    """The config whose enabled audits that call a registered model (HFM's
    discriminative risk) carry it resolved: the URI of their key (looked up now, with
    the rule of ``columns.prediction`` when it names the same URI, else the default
    rule), or, for a call without a URI, the audited decision's model with its
    threshold (or positive labels) and output. Unchanged otherwise.

    Raises
    ------
    ConfigError
        Naming the audit's key and the URI when it does not resolve.
    """
    from fairspark.config_model import RegisteredModelConfig

    if uri is None and getattr(config.output, "mlflow", None) is not None:
        uri = config.output.mlflow.tracking_uri  # type: ignore[union-attr]
    pred = config.columns.registered_models().get("columns.prediction")
    update = {}
    for name, (key, model_uri) in _model_calls(config).items():
        model = audited
        if model_uri is not None:
            require_mlflow(config)
            cfg = (pred if pred is not None and pred.model_uri == model_uri
                   else RegisteredModelConfig(model_uri=model_uri))
            with tracking_uri(uri):
                model = _resolve_one(key, cfg)
            model.tracking_uri = uri
        if model is not None:
            update[name] = getattr(config.audits, name).with_registered_model(model)
    if not update:
        return config
    return config.model_copy(update={"audits": config.audits.model_copy(update=update)})
