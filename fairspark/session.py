"""The one SparkSession builder: the CLI, the scripts and the tests start sessions here."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_CONF", "LOCAL_CONF", "build_session", "check_python_workers", "is_connect"]

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
#: (working directory, ``PYTHONPATH``, site-packages or an editable install of this
#: folder): the Python worker daemon that imports numpy, pandas, pyarrow, scipy and
#: scikit-learn once, with one thread, before it forks the workers
#: (:mod:`fairspark._daemon`); a caller's ``conf`` wins
LOCAL_CONF: dict[str, str] = {
    "spark.python.daemon.module": "fairspark._daemon",
    # pyarrow's bundled jemalloc starts a background thread when loaded; a daemon that
    # forks must have none (Arrow's default pool is mimalloc, so little changes)
    "spark.executorEnv.JE_ARROW_MALLOC_CONF": "background_thread:false",
}


def is_connect(obj: object) -> bool:
    """Whether ``obj`` (a SparkSession, DataFrame or Column) belongs to a Spark Connect session.

    The one capability check of the package: a Connect session has no ``SparkContext``,
    RDD, accumulator, broadcast variable or JVM gateway (``_jvm``, ``_jsc``, ``_jdf``),
    so every path that would reach past the DataFrame API asks this first and takes
    its DataFrame-only route when it is true. It reads the object's class (pyspark's
    Connect classes live in ``pyspark.sql.connect``), so it needs no Connect client
    packages and never raises.

    Parameters
    ----------
    obj:
        A SparkSession, DataFrame or Column (classic or Connect).

    Returns
    -------
    bool
        True for a Connect object, False for a classic one.

    Examples
    --------
    >>> is_connect(object())
    False
    """
    return type(obj).__module__.startswith("pyspark.sql.connect")


def _is_local(master: str) -> bool:
    import re

    return re.fullmatch(r"local(\[[0-9*]+(,[0-9]+)?\])?", master.strip()) is not None


def _worker_python(master: str, conf: Mapping[str, Any]) -> str | None:
    """The interpreter Spark's Python workers get in a session started here, or ``None``.

    PySpark starts its workers with ``PYSPARK_PYTHON`` or else the first ``python3`` on
    ``PATH`` (outside ``spark-submit`` it does not read ``spark.pyspark.python``); a
    ``fairspark`` run from a virtual environment by its path (a cron line without the venv
    on ``PATH``) would get workers without pandas or fairspark. So the caller's
    ``spark.pyspark.python`` wins, then ``PYSPARK_PYTHON``, and a local or local-cluster
    master, whose workers run on this machine, gets the driver's ``sys.executable``.
    """
    if "spark.pyspark.python" in conf:
        return str(conf["spark.pyspark.python"])
    if os.environ.get("PYSPARK_PYTHON") or not master.strip().startswith("local"):
        return None
    return sys.executable or None


def _editable_root() -> str | None:
    """The project folder of an editable install of fairspark (``pip install -e``), from
    its ``direct_url.json`` (PEP 610), or ``None``."""
    import importlib.metadata as md
    import json
    from urllib.parse import unquote, urlparse

    try:
        info = json.loads(md.distribution("fairspark").read_text("direct_url.json") or "{}")
    except (md.PackageNotFoundError, ValueError, OSError):
        return None
    url = urlparse(info.get("url", ""))
    editable = bool(info.get("dir_info", {}).get("editable"))
    return unquote(url.path) if editable and url.scheme == "file" else None


def _workers_import_fairspark() -> bool:
    """Whether a Python worker started here (``python -m`` in this directory, with this
    environment) finds this fairspark: from the working directory, ``PYTHONPATH``,
    site-packages or an editable install of this folder (its finder is loaded by every
    interpreter of the environment), not only through a ``sys.path`` edit of the
    driver."""
    import site
    from pathlib import Path

    here = Path(__file__).resolve().parents[1]
    paths = [Path.cwd(), *(Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                           if p)]
    with __import__("contextlib").suppress(Exception):
        paths += [Path(p) for p in site.getsitepackages()]
    editable = _editable_root()
    if editable is not None:
        paths.append(Path(editable))
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

    Notes
    -----
    A ``local``/``local-cluster`` master's Python workers run the driver's interpreter,
    unless ``conf`` (``spark.pyspark.python``) or ``PYSPARK_PYTHON`` names another; the
    choice is made by setting ``PYSPARK_PYTHON`` in this process, which PySpark reads
    when the session's context starts.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
        local = LOCAL_CONF if _is_local(master) and _workers_import_fairspark() else {}
        settings = {**DEFAULT_CONF, **local, **{k: str(v) for k, v in (conf or {}).items()}}
        python = _worker_python(master, conf or {})
        if python is not None:  # read by SparkContext when it starts, below
            os.environ["PYSPARK_PYTHON"] = python
    else:
        settings = {k: str(v) for k, v in (conf or {}).items()}
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def _probe_worker(_: object) -> str:  # runs in a Python worker
    import pandas  # noqa: F401 - the pandas UDFs need it
    import pyarrow  # noqa: F401

    # importing a module of the package runs its __init__ (the whole import the probe
    # checks) without an import of the package's root here, which would put every
    # module that asks is_connect in an import cycle
    from fairspark._version import __version__

    return __version__


def check_python_workers(spark: SparkSession, *, log_level: str = "WARN") -> None:
    """Fail early, naming the interpreter, when Spark's Python workers cannot run fairspark.

    One task of one row starts a Python worker and imports fairspark, pandas and pyarrow
    there, before any audit work (the worker daemon stays up for the run's own tasks).
    Spark's own log is off during that task, so that a failure reads as one message, and
    set back to ``log_level`` afterwards.

    Raises
    ------
    fairspark.errors.WorkerPythonError
        The workers' interpreter cannot import them (exit 2).
    """
    from fairspark.errors import WorkerPythonError

    python = spark.sparkContext.pythonExec or os.environ.get("PYSPARK_PYTHON") or "python3"
    spark.sparkContext.setLogLevel("OFF")
    try:
        spark.sparkContext.parallelize([0], 1).map(_probe_worker).collect()
    except Exception as err:  # noqa: BLE001 - any failure to start or import is this error
        lines = [ln.strip() for ln in str(err).splitlines() if "Error" in ln]
        cause = next((ln for ln in lines if "ModuleNotFoundError" in ln or "ImportError" in ln),
                     lines[0] if lines else type(err).__name__)
        raise WorkerPythonError(
            f"Spark's Python workers ({python}) cannot run fairspark: {cause[:300]}; set "
            "spark.conf.spark.pyspark.python (or PYSPARK_PYTHON) to an interpreter that has "
            "fairspark and its requirements installed") from None
    finally:
        spark.sparkContext.setLogLevel(log_level)
