"""What the driver may hold and use, for :mod:`fairspark.hfm._spark.elimination`.

What the engine knows of the session's driver (:func:`driver_facts`, the one place that
asks whether the session is a Spark Connect one), the budget of the driver path
(:func:`driver_budget`, from ``spark.driver.maxResultSize``, the driver's heap and the
physical memory available), the log line of the path taken, a
collect that stays within ``spark.driver.maxResultSize`` (:func:`collect_within`), the points'
way to the driver on a local master without the JVM (:func:`arrow_via_files`), and the
driver's threads (:func:`driver_threads`, :func:`thread_map`).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame

from fairspark._memory import conf_bytes, driver_max_heap, max_result_bytes
from fairspark._threads import single_thread
from fairspark.numbers import format_number
from fairspark.session import is_connect

__all__ = ["DriverFacts", "arrow_via_files", "collect_within", "driver_budget", "driver_facts",
           "driver_threads", "local_master", "log_path_choice", "max_result_bytes", "thread_map"]

#: the engine's one logger (the passes log under the name of :mod:`.elimination`)
_LOG = logging.getLogger("fairspark.hfm._spark.elimination")


@dataclass(frozen=True)
class DriverFacts:
    """What the engine reads of the session's driver.

    Attributes
    ----------
    max_heap:
        The driver JVM's maximum heap in bytes (collected Arrow batches pass through it).
    local:
        Whether the tasks run on this machine (their files are readable here).
    parallelism:
        The session's default parallelism (the driver path's threads, at most the
        cores of this machine).
    """

    max_heap: float
    local: bool
    parallelism: int


def driver_facts(spark) -> DriverFacts:
    """The session's :class:`DriverFacts`: on a classic session from its JVM and
    SparkContext; on a Spark Connect session (no JVM, no SparkContext here; the driver
    is the server's) from its settings: the heap is ``spark.driver.memory`` (default
    1 GB, a little above what the JVM reports as its maximum heap), the tasks are taken
    to run elsewhere (the server may be remote, so no local files), and the parallelism
    is this machine's cores (the driver path's threads run here)."""
    if is_connect(spark):
        heap = conf_bytes(spark, "spark.driver.memory", "1g", unit="m")
        return DriverFacts(max_heap=heap if heap is not None else float(1 << 30),
                           local=False, parallelism=os.cpu_count() or 1)
    sc = spark.sparkContext
    return DriverFacts(max_heap=driver_max_heap(spark),
                       local=str(sc.master).startswith("local"),
                       parallelism=int(sc.defaultParallelism))


def _jvm_max_heap(spark) -> float:
    """The driver JVM's maximum heap (bytes; :func:`driver_facts`)."""
    return driver_facts(spark).max_heap


def _available_memory() -> float:
    """Physical memory available to this process now (bytes; ``inf`` when unknown):
    Linux's ``MemAvailable`` (free memory plus the page cache and the slabs the kernel
    can reclaim), else the free pages. The free pages alone leave out the page cache,
    which a run that has just read or written its table fills: on the 10M-row nightly
    they were 0.7 GB of a 24 GB machine with 20 GB available, and a 3M-row table that
    fits the driver took the Spark path."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return math.inf


def local_master(spark) -> bool:
    """Whether the session's tasks run on this machine (``local[...]`` or
    ``local-cluster[...]``): then the points can reach the driver through local files.
    Never on a Spark Connect session (:func:`driver_facts`)."""
    return driver_facts(spark).local


def _temp_free() -> float:
    """Bytes free in the temporary folder (``inf`` when unknown)."""
    try:
        return float(shutil.disk_usage(tempfile.gettempdir()).free)
    except OSError:
        return math.inf


def driver_budget(spark, local_max_bytes: int | None = None, *,
                  via_files: bool = False) -> tuple[float, dict[str, float]]:
    """Bytes of points (``8 * (d + 2) + 64`` a row) the driver path may collect.

    An explicit ``local_max_bytes`` is used as given; ``None`` sizes the budget from the
    driver: an eighth of the physical memory available now (the working batch and
    the passes' temporaries hold about five copies of the points in Python), and, when
    the points come through Spark's collect, a quarter of the driver JVM's maximum heap
    (the collected Arrow batches pass through it; :func:`driver_facts`) and half of
    ``spark.driver.maxResultSize`` (the row estimate is above the Arrow bytes of a row,
    ``8 d + 45``, so the collect stays within the limit). ``via_files`` (a local
    master, :func:`arrow_via_files`): the points never pass through the JVM, so neither
    limit applies; half of the free space of the temporary folder does.

    Returns
    -------
    budget : float
        Bytes.
    sized_from : dict
        The figures the budget was taken from (for the cost model).
    """
    if via_files:
        parts = {"temp_free / 2": _temp_free() / 2}
    else:
        parts = {"max_result_size / 2": max_result_bytes(spark) / 2}
    if local_max_bytes is not None:
        parts["local_max_bytes"] = float(local_max_bytes)
    else:
        if not via_files:
            parts["jvm_heap / 4"] = _jvm_max_heap(spark) / 4
        parts["available_memory / 8"] = _available_memory() / 8
    budget = min(parts.values())
    return budget, {k: (v if math.isfinite(v) else None) for k, v in parts.items()}


def arrow_via_files(df: DataFrame) -> pa.Table:
    """``df.toArrow()`` on a local master without the driver JVM holding the rows.

    Every task writes its batches to an Arrow IPC file in a temporary folder of this
    machine and returns only the file's name; the driver maps the files. The JVM sees
    each batch only on its way to the task's Python worker, so the driver's heap (1 GB
    by default) bounds nothing here, and the transfer skips the driver's socket. A
    retried task writes a file of its own attempt; only the files of the attempts that
    succeeded are read. Rows come in partition order (the caller sorts them by key).
    """
    folder = tempfile.mkdtemp(prefix="fairspark-points-")

    def write(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.taskAttemptId() if ctx is not None else 0
        path = os.path.join(folder, f"part-{part:06d}-{attempt}.arrow")
        writer, rows = None, 0
        try:
            for b in it:
                if writer is None:
                    writer = pa.ipc.new_file(path, b.schema)
                writer.write_batch(b)
                rows += b.num_rows
        finally:
            if writer is not None:
                writer.close()
        if rows:
            yield pa.RecordBatch.from_pydict({"part": [part], "path": [path], "rows": [rows]})

    try:
        meta = sorted((int(r["part"]), r["path"]) for r in
                      df.mapInArrow(write, "part long, path string, rows long").collect())
        tables = [pa.ipc.open_file(pa.memory_map(path)).read_all() for _, path in meta]
        return pa.concat_tables(tables) if tables else pa.table({})
    finally:
        # a mapped file stays readable once unlinked (its pages live until unmapped)
        shutil.rmtree(folder, ignore_errors=True)


def log_path_choice(n_rows: int | None, row_bytes: float, budget: float,
                     sized_from: dict[str, float | None], *, via_files: bool = False) -> None:
    """One DEBUG line: the path the engine takes (driver or Spark) and why (an internal
    cost, not a line a user acts on; ``summary.json`` keeps the path)."""
    def mb(v: float | None) -> str:
        mib = None if v is None else format_number(v / 2**20, decimals=0, grouped=True)
        return "unknown" if mib is None else f"{mib} MB"

    parts = ", ".join(f"{k} = {mb(v)}" for k, v in sized_from.items())
    if n_rows is None:
        _LOG.debug("hfm: driver path if the points fit %s (min of %s)", mb(budget), parts)
        return
    need = n_rows * row_bytes
    where = ("Spark path" if need > budget
             else "driver path (points through local files)" if via_files else "driver path")
    _LOG.debug("hfm: %s: %d points need %s, the driver budget is %s (min of %s)",
              where, n_rows, mb(need), mb(budget), parts)


def collect_within(df: DataFrame, est_bytes: float) -> pd.DataFrame:
    """A small result on the driver, within ``spark.driver.maxResultSize``.

    Above a quarter of the limit the rows are spread over enough partitions (an explicit
    ``repartition``, which adaptive execution does not coalesce) that each holds about an
    eighth of the limit, and come one partition per job: however small
    ``spark.driver.maxResultSize`` is, no job returns more than it allows.
    """
    budget = max_result_bytes(df.sparkSession) / 4
    if est_bytes < budget:
        return df.toPandas()
    pages = df.repartition(max(1, math.ceil(2.0 * est_bytes / budget)))
    return pd.DataFrame.from_records([r.asDict() for r in pages.toLocalIterator()],
                                     columns=df.columns)


def driver_threads(spark) -> int:
    """Threads of the driver path's pass A: the session's parallelism (``local[2]``:
    2; :func:`driver_facts`), at most the driver's cores."""
    return max(1, min(driver_facts(spark).parallelism, os.cpu_count() or 1))


def thread_map(fn: Callable, items: list, threads: int) -> list:
    """``[fn(x) for x in items]``, on up to ``threads`` threads (numpy's kernels release
    the GIL; BLAS held to one thread each meanwhile). Same results in the same order."""
    if threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with single_thread(), ThreadPoolExecutor(max_workers=min(threads, len(items))) as ex:
        return list(ex.map(fn, items))
