"""The one SparkSession builder: the CLI, the scripts and the tests start sessions here."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "CONNECT_INSTALL",
    "DEFAULT_CONF",
    "LOCAL_CONF",
    "build_session",
    "check_connect_client",
    "check_python_workers",
    "check_remote",
    "is_connect",
    "workers_are_the_drivers",
    "redact_remote",
]

log = logging.getLogger("fairspark")

#: how a user gets the Spark Connect client's packages
CONNECT_INSTALL = "pip install 'fairspark[connect]'"

#: the Connect client's packages: (module imported, package installed)
_CONNECT_MODULES = (("grpc", "grpcio"), ("grpc_status", "grpcio-status"),
                    ("google.rpc", "googleapis-common-protos"), ("zstandard", "zstandard"))

#: the port a Spark Connect URL without one means (pyspark's default)
CONNECT_DEFAULT_PORT = 15002

#: settings every session fairspark starts gets (a caller's ``conf`` wins)
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # one BLAS/OpenMP thread per task: Spark already runs one task per core
    "spark.executorEnv.OMP_NUM_THREADS": "1",
    "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
    "spark.executorEnv.MKL_NUM_THREADS": "1",
    # Parquet 1.17 (Spark 4.3) reads a whole row group through Hadoop's vectored IO into
    # heap buffers it allocates per column chunk; two tasks reading a 904k x 48 table's
    # 200k-row groups filled a 1 GB driver's heap (OutOfMemoryError while encoding,
    # issue 57). The classic reader streams each chunk; it was no slower here
    # (prepare's scan 13.7 s against 16.3 s on that table).
    "spark.hadoop.parquet.hadoop.vectored.io.enabled": "false",
    # a DISK_ONLY cache block is written through Java serialization, whose stream keeps
    # every object it wrote (for back references) until it is reset, by default every
    # 100 objects: 100 cached batches of the encoded 904k x 48 table, about 500 MB for
    # two tasks, stayed live on the heap while encoding (jcmd GC.class_histogram: byte[]
    # grew to 723 MB, then OutOfMemoryError on a 1 GB driver, issue 57). Reset after
    # each object: a batch is garbage once it is on disk (live byte[] stayed at 230 MB).
    "spark.serializer.objectStreamReset": "1",
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


def process_context_class() -> Any:
    """pyspark's classic ``SparkContext`` class when this process imported it, else
    ``None``: its ``_gateway`` and ``_active_spark_context`` are the JVM this process
    started (a classic session's, or the local Connect server's that pyspark runs in
    this process). A process-level handle (the JVM's log level, its end), never a path
    for Spark work; with a remote Connect server both are ``None``.
    """
    return getattr(sys.modules.get("pyspark.core.context"), "SparkContext", None)


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


def workers_are_the_drivers(master: str, conf: Mapping[str, Any]) -> bool:
    """Whether a session started here with ``master`` and ``conf`` gives its Python
    workers this very interpreter and this fairspark, so that probing them
    (:func:`check_python_workers`) would prove nothing the driver has not.

    True for a ``local``/``local[n]`` master (a ``local-cluster`` one: its executors run
    in folders of their own, so not from the working directory) whose workers get
    :func:`_worker_python`'s interpreter, when that is ``sys.executable`` itself (neither
    ``spark.pyspark.python`` nor ``PYSPARK_PYTHON`` names another path), this fairspark
    is importable there without a ``sys.path`` edit of the driver
    (:func:`_workers_import_fairspark`) and pandas and pyarrow import here. Must be
    asked before :func:`build_session`, which sets ``PYSPARK_PYTHON``.
    """
    import importlib

    cluster = master.strip().startswith("local-cluster[")
    if not (_is_local(master) or cluster):
        return False
    named = conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    python = str(named) if named else _worker_python(master, conf)
    if not python or not sys.executable or (
            os.path.abspath(python) != os.path.abspath(sys.executable)):
        return False
    try:  # what the probe would import in a worker (fairspark itself is imported here)
        for module in ("pandas", "pyarrow"):
            importlib.import_module(module)
    except ImportError:
        return False
    return _workers_import_fairspark(from_cwd=not cluster)


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


def _workers_import_fairspark(*, from_cwd: bool = True) -> bool:
    """Whether a Python worker started here (``python -m`` in this directory, with this
    environment) finds this fairspark: from the working directory (unless ``from_cwd``
    is false: a Connect server runs a session's workers in the session's own artifact
    folder), ``PYTHONPATH``, site-packages or an editable install of this folder (its
    finder is loaded by every interpreter of the environment), not only through a
    ``sys.path`` edit of the driver."""
    import site
    from pathlib import Path

    here = Path(__file__).resolve().parents[1]
    paths = [*([Path.cwd()] if from_cwd else []),
             *(Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
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
    remote: str | None = None,
) -> SparkSession:
    """Start (or get) a SparkSession with fairspark's settings.

    Parameters
    ----------
    master:
        The Spark master; ``None`` keeps the one set by ``spark-submit`` (and then
        none of :data:`DEFAULT_CONF` is forced on the submitted session). A
        ``local``/``local[n]`` master also gets :data:`LOCAL_CONF`. Not read with
        ``remote``.
    app_name:
        The application name (a classic session's; a Connect server names its own).
    conf:
        Extra settings; they override :data:`DEFAULT_CONF`.
    log_level:
        Spark's log level (a classic session's: a Connect client has no
        ``setLogLevel``, the server's log is the server's).
    remote:
        A Spark Connect URL (``sc://host:port``, or pyspark's own local server
        ``local[n]``): the session is a Connect client session to it
        (``SparkSession.builder.remote``). Only runtime SQL settings can be set on a
        remote session: the settings of ``conf`` the server reports unmodifiable
        (static ones such as ``spark.driver.memory``, ``spark.executorEnv.*``) are not
        set and are named in a warning; :data:`DEFAULT_CONF`'s are set where allowed.
        pyspark's local server is started by this process with every setting, as a
        ``local[n]`` master's session would be (``master`` is then ``remote``).

    Notes
    -----
    A ``local``/``local-cluster`` master's Python workers run the driver's interpreter,
    unless ``conf`` (``spark.pyspark.python``) or ``PYSPARK_PYTHON`` names another; the
    choice is made by setting ``PYSPARK_PYTHON`` in this process, which PySpark reads
    when the session's context starts. A Connect server's workers are the server's.
    """
    from pyspark.sql import SparkSession

    local_server = remote is not None and _is_local(remote)
    if remote is not None and not local_server:
        return _remote_session(remote, conf or {})
    if local_server:  # started here, from these settings
        check_connect_client()
        master = remote
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.remote(master) if local_server else builder.master(master)
        local = (LOCAL_CONF if _is_local(master)
                 and _workers_import_fairspark(from_cwd=not local_server) else {})
        settings = {**DEFAULT_CONF, **local, **{k: str(v) for k, v in (conf or {}).items()}}
        python = _worker_python(master, conf or {})
        if python is not None:  # read by SparkContext when it starts, below
            os.environ["PYSPARK_PYTHON"] = python
    else:
        settings = {k: str(v) for k, v in (conf or {}).items()}
    for k, v in settings.items():
        builder = builder.config(k, v)
    with warnings.catch_warnings():
        # pyspark's local Connect server took every setting when it started; its client
        # then tries them again as session settings and warns of each static one
        warnings.filterwarnings("ignore", message="Failed to set", category=UserWarning)
        spark = builder.getOrCreate()
    if not is_connect(spark):  # (SPARK_REMOTE in the environment makes any session remote)
        spark.sparkContext.setLogLevel(log_level)
    return spark


def _remote_session(remote: str, conf: Mapping[str, Any]) -> SparkSession:
    """A Spark Connect session to ``remote`` with the settings the server lets a client set.

    pyspark's builder would set every ``.config`` option and drop the ones the server
    refuses without a word; here each setting is asked first (``isModifiable``), so a
    user's static setting that cannot take effect is named instead.
    """
    from pyspark.sql import SparkSession

    check_connect_client()
    spark = SparkSession.builder.remote(remote).getOrCreate()
    user = {k: str(v) for k, v in conf.items()}
    refused = []
    for key, value in {**DEFAULT_CONF, **user}.items():
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
        elif key in user:
            refused.append(key)
    if refused:
        log.warning("Spark Connect session at %s: not set, the server does not let a client "
                    "set them (static settings are the server's own; set them where the "
                    "server starts): %s", redact_remote(remote), ", ".join(sorted(refused)))
    return spark


def redact_remote(url: str) -> str:
    """``url`` without the values of its secret parameters (``token``), for logs and errors.

    Examples
    --------
    >>> redact_remote("sc://host:443/;token=abc;use_ssl=true")
    'sc://host:443/;token=***;use_ssl=true'
    """
    import re

    return re.sub(r"(;\s*token\s*=)[^;]*", r"\1***", url, flags=re.IGNORECASE)


def check_connect_client() -> None:
    """Fail, naming the install command, when the Spark Connect client's packages are missing.

    Raises
    ------
    fairspark.errors.ConfigError
        A package (grpcio, grpcio-status, googleapis-common-protos, zstandard) cannot be
        imported, or pyspark finds one too old (exit 2).
    """
    import importlib

    from fairspark.errors import ConfigError

    missing = []
    for module, package in _CONNECT_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    detail = f"missing {', '.join(missing)}" if missing else ""
    if not missing:
        from pyspark.sql.connect.utils import check_dependencies

        try:  # pyspark's own check: the minimum versions
            check_dependencies()
        except ImportError as err:
            detail = " ".join(str(err).split())[:300]
    if detail:
        raise ConfigError(
            f"config key 'spark.remote': a Spark Connect session needs the Connect client's "
            f"packages ({detail}); install them with: {CONNECT_INSTALL}")


def check_remote(url: str, *, timeout_s: float = 10.0) -> None:
    """Fail before any work when the Spark Connect server at ``url`` cannot be reached.

    A Connect client retries an unreachable server for minutes before its first call
    fails; one TCP connection to the server's host and port, with ``timeout_s``, says
    so at once. pyspark's own local server (``local[n]``) is started by the client and
    not probed. The client's packages are checked first (:func:`check_connect_client`).

    Raises
    ------
    fairspark.errors.ConfigError
        The packages are missing, the URL is not a Spark Connect URL, or nothing
        answers at its host and port (exit 2, naming ``spark.remote`` and the URL with
        its token redacted).
    """
    import socket

    from fairspark.errors import ConfigError

    check_connect_client()
    if _is_local(url):
        return
    host, port = remote_address(url)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(
            f"config key 'spark.remote': cannot reach the Spark Connect server at "
            f"{redact_remote(url)} ({host}:{port}: {reason}); start the server "
            "(sbin/start-connect-server.sh) or correct the URL") from None


def remote_address(url: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL ``sc://host[:port][/;param=value...]``.

    Raises
    ------
    ValueError
        ``url`` is not such a URL (another scheme, no host, a path, a bad port).

    Examples
    --------
    >>> remote_address("sc://localhost")
    ('localhost', 15002)
    >>> remote_address("sc://[::1]:15003/;token=x")
    ('::1', 15003)
    """
    from urllib.parse import urlparse

    if not url.startswith("sc://"):
        raise ValueError(f"{redact_remote(url)!r} is not a Spark Connect URL: expected "
                         "sc://host:port (or local[n] for pyspark's own local server)")
    parsed = urlparse("http://" + url[len("sc://"):])
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if not parsed.hostname or port == -1 or parsed.path not in ("", "/"):
        raise ValueError(f"{redact_remote(url)!r} is not a Spark Connect URL: expected "
                         "sc://host:port with an optional /;param=value list")
    return parsed.hostname, CONNECT_DEFAULT_PORT if port is None else port


def _probe_worker(_: object) -> str:  # runs in a Python worker
    import pandas  # noqa: F401 - the pandas UDFs need it
    import pyarrow  # noqa: F401

    # importing a module of the package runs fairspark/__init__ (the whole check);
    # written as a submodule import so that this module has no import edge to the
    # package root (tests/test_layers.py: the outputs ask is_connect from here)
    from fairspark._version import __version__

    return __version__


def _probe_batches(batches: Any) -> Any:  # runs in a Python worker (mapInPandas)
    for batch in batches:
        yield batch.assign(version=[_probe_worker(None)] * len(batch))


def check_python_workers(spark: SparkSession, *, log_level: str = "WARN") -> None:
    """Fail early, naming the interpreter, when Spark's Python workers cannot run fairspark.

    One task of one row starts a Python worker and imports fairspark, pandas and pyarrow
    there, before any audit work (the worker daemon stays up for the run's own tasks).
    A classic session runs it as an RDD task, with Spark's own log off during that
    task, so that a failure reads as one message, and set back to ``log_level``
    afterwards. A Connect session (:func:`is_connect`) has no RDD and no log level to
    set: the task is a ``mapInPandas`` over ``spark.range(1)``, and the workers are
    the Connect server's.

    Raises
    ------
    fairspark.errors.WorkerPythonError
        The workers' interpreter cannot import them (exit 2).
    """
    from fairspark.errors import WorkerPythonError

    connect = is_connect(spark)
    if connect:
        python = spark.conf.get("spark.pyspark.python", None) or "the server's python3"
    else:
        python = spark.sparkContext.pythonExec or os.environ.get("PYSPARK_PYTHON") or "python3"
        spark.sparkContext.setLogLevel("OFF")
    try:
        if connect:
            spark.range(1).mapInPandas(_probe_batches, "id long, version string").collect()
        else:
            spark.sparkContext.parallelize([0], 1).map(_probe_worker).collect()
    except Exception as err:  # noqa: BLE001 - any failure to start or import is this error
        lines = [ln.strip() for ln in str(err).splitlines() if "Error" in ln]
        cause = next((ln for ln in lines if "ModuleNotFoundError" in ln or "ImportError" in ln),
                     lines[0] if lines else type(err).__name__)
        where = ("install fairspark and its requirements for the Connect server's Python "
                 "workers (or start the server with PYTHONPATH / "
                 "spark.executorEnv.PYTHONPATH naming it)" if connect else
                 "set spark.conf.spark.pyspark.python (or PYSPARK_PYTHON) to an interpreter "
                 "that has fairspark and its requirements installed")
        raise WorkerPythonError(
            f"Spark's Python workers ({python}) cannot run fairspark: {cause[:300]}; "
            f"{where}") from None
    finally:
        if not connect:
            spark.sparkContext.setLogLevel(log_level)
