"""The one SparkSession builder: the CLI, the scripts and the tests start sessions here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_CONF", "LOCAL_CONF", "build_session"]

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

#: added for ``local``/``local[n]`` masters only, where the workers find this fairspark
#: (working directory, ``PYTHONPATH`` or site-packages): the Python worker daemon that
#: imports numpy, pandas, pyarrow, scipy and scikit-learn once, with one thread, before
#: it forks the workers (:mod:`fairspark._threads`); a caller's ``conf`` wins
LOCAL_CONF: dict[str, str] = {
    "spark.python.daemon.module": "fairspark._threads",
    # pyarrow's bundled jemalloc starts a background thread when loaded; a daemon that
    # forks must have none (Arrow's default pool is mimalloc, so little changes)
    "spark.executorEnv.JE_ARROW_MALLOC_CONF": "background_thread:false",
}


def _is_local(master: str) -> bool:
    import re

    return re.fullmatch(r"local(\[[0-9*]+(,[0-9]+)?\])?", master.strip()) is not None


def _workers_import_fairspark() -> bool:
    """Whether a Python worker started here (``python -m`` in this directory, with this
    environment) finds this fairspark: from the working directory, ``PYTHONPATH`` or
    site-packages, not only through a ``sys.path`` edit of the driver."""
    import os
    import site
    from pathlib import Path

    here = Path(__file__).resolve().parents[1]
    paths = [Path.cwd(), *(Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                           if p)]
    with __import__("contextlib").suppress(Exception):
        paths += [Path(p) for p in site.getsitepackages()]
    for p in paths:
        try:
            if p.resolve() == here:
                return True
        except OSError:  # pragma: no cover
            continue
    return False


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
        none of :data:`DEFAULT_CONF` is forced on the submitted session). A
        ``local``/``local[n]`` master also gets :data:`LOCAL_CONF`.
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
        local = LOCAL_CONF if _is_local(master) and _workers_import_fairspark() else {}
        settings = {**DEFAULT_CONF, **local, **{k: str(v) for k, v in (conf or {}).items()}}
    else:
        settings = {k: str(v) for k, v in (conf or {}).items()}
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
