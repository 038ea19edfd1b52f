"""Log an audit run to MLflow (``output.mlflow``, issue 60).

One MLflow run per audit run, under one experiment, so that the MLflow UI charts the
numbers night by night: every metric is logged with the run date as its timestamp and
its step (days since 1970-01-01). What is logged:

- params: the dataset, the run date, the config hash, fairspark's version and the
  audited and baseline model URIs (with their resolved versions);
- metrics: ``fairness.gate`` (1 when a limit would gate, else 0) and every row of
  ``metrics.parquet`` that has a value (its value, and ``.lower``/``.upper`` for its
  interval ends), named ``audit/model/attribute/group/metric[/metric_b]`` and sanitised
  deterministically to MLflow's characters (:func:`metric_name`);
- tags: ``fairness.gate`` (``passed``, ``violated`` or ``failed``), the dataset, the run
  date, the exit code;
- artifacts: ``report.html``, ``summary.json`` and ``metrics.parquet`` byte for byte.

When the audited model came from the registry, its model version gets the tags
``fairness.gate``, ``fairness.run_date`` and ``fairness.mlflow_run_id``. Logging never
changes the exit code: a failure (a tracking server that cannot be reached) is one
warning line, and :func:`log_audit` returns it as a note for the status file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from fairspark.run_summary import RunSummary, as_run_summary

__all__ = ["gate_verdict", "log_audit", "metric_name", "metric_values"]

log = logging.getLogger("fairspark")

_BAD = re.compile(r"[^A-Za-z0-9_\-. /]")
_MAX_KEY = 250


def metric_name(parts: list[Any]) -> str:
    """The MLflow metric name of a row's identifying parts: the non-empty parts joined
    by ``/``, every character MLflow does not allow replaced by ``_`` (deterministic);
    a name over MLflow's 250 characters is cut and ends with a hash of the whole."""
    name = "/".join(_BAD.sub("_", str(p)) for p in parts if p not in (None, ""))
    if len(name) > _MAX_KEY:
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        name = f"{name[:_MAX_KEY - 13]}~{digest}".replace("~", "_")
    return name


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def metric_values(long_rows: list[Mapping[str, Any]]) -> dict[str, float]:
    """MLflow metric name -> value for every row with a finite value (and its finite
    interval ends as ``<name>.lower``/``<name>.upper``). Two rows that sanitise to one
    name get ``_2``, ``_3`` ... in the rows' order (the rows' order is deterministic)."""
    out: dict[str, float] = {}
    for r in long_rows:
        value = _finite(r.get("value"))
        if value is None:
            continue
        base = metric_name([r.get("audit"), r.get("model"), r.get("attribute"),
                            r.get("group"), r.get("metric"), r.get("metric_b")])
        name, n = base, 1
        while name in out:
            n += 1
            name = f"{base}_{n}"
        out[name] = value
        for end in ("lower", "upper"):
            v = _finite(r.get(end))
            if v is not None:
                out[f"{name}.{end}"] = v
    return out


def gate_verdict(summary: RunSummary | Mapping[str, Any]) -> str:
    """``failed`` (an audit failed), ``violated`` (a limit would gate) or ``passed``."""
    summary = as_run_summary(summary)
    if summary.failed_audits:
        return "failed"
    if summary.limits is not None and summary.limits.would_gate:
        return "violated"
    return "passed"


@contextlib.contextmanager
def _quick_failure() -> Iterator[None]:
    """An unreachable server fails fast (MLflow retries for minutes by default)."""
    keys = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
    before = {k: os.environ.get(k) for k in keys}
    for k, v in keys.items():
        os.environ.setdefault(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)


def _location(path: str | None) -> str | None:
    """A local artifact folder as an absolute ``file://`` URI (a relative one is relative
    to where the command runs, as a user reads it); a URI as it is."""
    if not path or "://" in path or path.startswith("file:"):
        return path
    from pathlib import Path

    return Path(path).resolve().as_uri()


def log_audit(settings: Any, *, summary: RunSummary | Mapping[str, Any],
              long_rows: list[Mapping[str, Any]], files: Mapping[str, str]) -> dict[str, Any]:
    """Log one audit run to MLflow; never raises.

    Parameters
    ----------
    settings:
        ``output.mlflow`` (:class:`~fairspark.config_model.MlflowOutputConfig`).
    summary, long_rows:
        The run's :class:`~fairspark.run_summary.RunSummary` (or a parsed
        ``summary.json``) and rows.
    files:
        Artifact name (``report.html``, ``summary.json``, ``metrics.parquet``) -> a
        local file or folder holding it.

    Returns
    -------
    dict
        ``{"logged": True, "run_id", "experiment_id", "tracking_uri"}``, or
        ``{"logged": False, "error": <one line>}`` (also logged as one warning).
    """
    try:
        with _quick_failure():
            return _log(settings, summary=as_run_summary(summary), long_rows=long_rows,
                        files=files)
    except Exception as err:  # noqa: BLE001 - logging never changes the run's outcome
        from fairspark.outputs import one_line

        line = f"the run could not be logged to MLflow: {one_line(err)}"
        log.warning("%s", line)
        return {"logged": False, "error": line}


def _log(settings: Any, *, summary: RunSummary, long_rows: list[Mapping[str, Any]],
         files: Mapping[str, str]) -> dict[str, Any]:
    import mlflow
    from mlflow.entities import Metric, Param, RunTag

    from fairspark.scoring import tracking_uri

    run_date = dt.date.fromisoformat(str(summary.run_date))
    stamp = int(dt.datetime(run_date.year, run_date.month, run_date.day,
                            tzinfo=dt.timezone.utc).timestamp() * 1000)
    step = (run_date - dt.date(1970, 1, 1)).days
    verdict = gate_verdict(summary)
    dataset = str(summary.dataset)
    models = summary.registered_models or {}
    with tracking_uri(settings.tracking_uri):
        client = mlflow.MlflowClient()
        exp_name = settings.experiment or f"fairspark {dataset}"
        exp = client.get_experiment_by_name(exp_name)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(
            exp_name, artifact_location=_location(getattr(settings, "artifact_location", None)))
        run = client.create_run(exp_id, start_time=stamp,
                                run_name=settings.run_name or f"{dataset} {run_date}")
        rid = run.info.run_id
        params = {"dataset": dataset, "run_date": run_date.isoformat(),
                  "config_hash": summary.config_hash,
                  "fairspark_version": summary.versions.get("fairspark")}
        for role, m in models.items():
            params[f"{role}_model_uri"] = m.get("model_uri")
            if m.get("version"):
                params[f"{role}_model_version"] = m.get("version")
        tags = {"fairness.gate": verdict, "fairness.dataset": dataset,
                "fairness.run_date": run_date.isoformat(),
                "fairness.exit_code": str(summary.exit_code)}
        values = {"fairness.gate": 1.0 if verdict == "violated" else 0.0,
                  **metric_values(long_rows)}
        metrics = [Metric(k, v, stamp, step) for k, v in values.items()]
        client.log_batch(rid, params=[Param(k, str(v)) for k, v in params.items()
                                      if v is not None],
                         tags=[RunTag(k, v) for k, v in tags.items()])
        for i in range(0, len(metrics), 1000):  # MLflow's limit per batch
            client.log_batch(rid, metrics=metrics[i:i + 1000])
        for name, path in files.items():
            if os.path.isdir(path):
                client.log_artifacts(rid, path, artifact_path=name)
            elif os.path.exists(path):
                client.log_artifact(rid, path)
        client.set_terminated(rid, "FINISHED")
        audited = models.get("prediction") or {}
        if audited.get("name") and audited.get("version"):
            for k, v in {"fairness.gate": verdict, "fairness.run_date": run_date.isoformat(),
                         "fairness.mlflow_run_id": rid,
                         "fairness.config_hash": str(summary.config_hash)}.items():
                client.set_model_version_tag(audited["name"], audited["version"], k, v)
        uri = mlflow.get_tracking_uri()
    log.info("logged to MLflow: run %s in experiment %r (%s)", rid, exp_name, uri)
    return {"logged": True, "run_id": rid, "experiment_id": exp_id, "tracking_uri": uri}


def log_published_run(out: Any, settings: Any, folder: str, *,
                      summary: RunSummary | Mapping[str, Any],
                      long_rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Log a published run folder: its three outputs are copied to a local temporary
    folder and logged from there; never raises.

    On a classic session the folder may be on any Hadoop file system (copied through
    Hadoop's FileSystem API); on a Spark Connect session it is a folder on the client's
    disk (:class:`~fairspark.outputs.OutputLocation` allows no other) and is copied
    with plain file I/O: a Connect client has no JVM gateway.
    """
    import shutil
    import tempfile
    from urllib.parse import urlparse

    from fairspark.session import is_connect

    client_side = is_connect(out.spark)
    with tempfile.TemporaryDirectory(prefix="fairspark-mlflow-") as tmp:
        files: dict[str, str] = {}
        try:
            for name in ("report.html", "summary.json", "metrics.parquet"):
                src = f"{folder}/{name}"
                if not out.exists(src):
                    continue
                dst = os.path.join(tmp, name)
                if client_side:
                    local = urlparse(src).path if urlparse(src).scheme == "file" else src
                    if os.path.isdir(local):
                        shutil.copytree(local, dst)
                    else:
                        shutil.copyfile(local, dst)
                else:
                    out._fs.copyToLocalFile(False, out._Path(src),
                                            out._Path(f"file://{dst}"), True)
                files[name] = dst
        except Exception as err:  # noqa: BLE001
            from fairspark.outputs import one_line

            line = f"the run could not be logged to MLflow: {one_line(err)}"
            log.warning("%s", line)
            return {"logged": False, "error": line}
        return log_audit(settings, summary=summary, long_rows=long_rows, files=files)
