"""The one chunked task fan-out: driver-side work dealt to Spark tasks (mdfa's splits,
the correlation audit's rounds).

A job of ``total`` independent units (splits, rounds) is dealt round-robin to
``chunks`` chunks (:func:`chunk_ids`: unit ``i`` to chunk ``i mod chunks``, so every
chunk gets the same mix of units), each chunk one row and one partition of
``spark.range(chunks)``; a ``mapInPandas`` with an explicit schema runs the audit's
``work(chunk)`` in a Python worker, under one BLAS/OpenMP/torch thread and the test
hook :func:`fairspark._testing.maybe_fail_first_attempt`, and the driver collects the
result frames (bounded by the config, not the table). A unit's result depends on its
own seed only, so any number of chunks gives the same numbers.

With a profile, every task also yields one row (built by the audit's ``profile_row``
from a dict of timings: the audit's own, plus ``chunk``, ``pid``, ``start``/``end``
epoch seconds, ``worker_tasks_before`` (0 = a fresh Python worker), ``os_threads`` and
``serialise_s``, the seconds Arrow took to take the frame).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import SparkSession

__all__ = ["chunk_ids", "fan_out", "n_chunks"]

#: per Python worker: the fan-out tasks it has run (0 = a fresh worker)
_WORKER_TASKS = [0]


def chunk_ids(total: int, chunks: int, chunk: int) -> np.ndarray:
    """The unit ids of chunk ``chunk`` of ``chunks``: ``chunk, chunk + chunks, ...``.

    Dealing the ids round-robin gives every chunk the same mix of units, so equal
    chunks cost about the same whatever the units' relative costs.
    """
    if not 0 <= chunk < chunks:
        raise ValueError(f"chunk must be in [0, {chunks}), got {chunk}")
    return np.arange(chunk, total, chunks, dtype=np.int64)


def n_chunks(total: int, partitions: int) -> int:
    """Chunks (tasks) for ``total`` units: ``partitions``, at most one per unit."""
    return max(1, min(int(partitions), int(total)))


def fan_out(
    spark: SparkSession,
    *,
    chunks: int,
    work: Callable[[int], tuple[pd.DataFrame, dict[str, Any]]],
    schema: str,
    tag: str,
    profile_row: Callable[[dict[str, Any]], pd.DataFrame] | None = None,
    on_tasks: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run ``work(chunk)`` for every chunk as one Spark task; the frames, collected.

    Parameters
    ----------
    spark:
        The session.
    chunks:
        Number of tasks.
    work:
        Run in the task: the result frame of one chunk (in ``schema``) and the audit's
        own timings (merged into the profile row). It must be picklable (it closes
        over the shipped payload, not over Spark objects).
    schema:
        The result frames' Spark schema (DDL).
    tag:
        The audit's name for the test hook ``maybe_fail_first_attempt``.
    profile_row:
        Builds a task's profile row (in ``schema``) from its timings; None: no profile.
    on_tasks:
        Called with (tasks finished, tasks) from a driver thread while the job runs
        (Spark's status tracker, every few seconds); None: not followed.

    Returns
    -------
    pandas.DataFrame
        Every task's frames (profile rows included), in no particular order.
    """
    from fairspark._testing import fault_point
    from fairspark.progress import follow_tasks

    task = _task(work, tag=tag, profile_row=profile_row)
    fault_point(f"fan_out:{tag}")
    with follow_tasks(spark, on_tasks):
        return (
            spark.range(0, chunks, 1, numPartitions=chunks)
            .mapInPandas(task, schema=schema)
            .toPandas()
        )


def _task(
    work: Callable[[int], tuple[pd.DataFrame, dict[str, Any]]],
    *,
    tag: str,
    profile_row: Callable[[dict[str, Any]], pd.DataFrame] | None,
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The ``mapInPandas`` function: a task runs the work of its chunks."""

    def task(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import os
        import time

        from fairspark import _fanout as this  # the worker's module, not a copy
        from fairspark._testing import maybe_fail_first_attempt
        from fairspark._threads import os_threads, single_thread

        t_start = time.time()
        maybe_fail_first_attempt(tag)
        served = this._WORKER_TASKS[0]
        this._WORKER_TASKS[0] += 1
        # BLAS/OpenMP/torch pools may already exist in a reused worker: limit them here
        with single_thread():
            for batch in batches:
                for c in batch["id"].to_numpy():
                    frame, info = work(int(c))
                    t_done = time.perf_counter()
                    yield frame  # Arrow serialisation happens before the generator resumes
                    if profile_row is not None:
                        yield profile_row({
                            **info, "chunk": int(c), "pid": os.getpid(),
                            "worker_tasks_before": served, "start": t_start,
                            "os_threads": os_threads(),
                            "serialise_s": time.perf_counter() - t_done, "end": time.time(),
                        })

    return task
