"""The one SparkSession builder: the CLI, the scripts and the tests start sessions here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_CONF", "build_session"]

#: settings every session fairspark starts gets (a caller's ``conf`` wins)
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # one BLAS/OpenMP thread per task: Spark already runs one task per core
    "spark.executorEnv.OMP_NUM_THREADS": "1",
    "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
    "spark.executorEnv.MKL_NUM_THREADS": "1",
}


def build_session(
    *,
    master: str | None = "local[2]",
    app_name: str = "fairspark",
    conf: Mapping[str, Any] | None = None,
    log_level: str = "WARN",
) -> SparkSession:
    """Start (or get) a SparkSession with fairspark's settings.

    Parameters
    ----------
    master:
        The Spark master; ``None`` keeps the one set by ``spark-submit`` (and then
        none of :data:`DEFAULT_CONF` is forced on the submitted session).
    app_name:
        The application name.
    conf:
        Extra settings; they override :data:`DEFAULT_CONF`.
    log_level:
        Spark's log level.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
        settings = {**DEFAULT_CONF, **{k: str(v) for k, v in (conf or {}).items()}}
    else:
        settings = {k: str(v) for k, v in (conf or {}).items()}
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
