"""The cost model of the certified engine: what each pass cost, measured.

Every pass of :mod:`fairspark.hfm._spark.elimination` runs inside :meth:`CostLog.step`, which
records its wall-clock seconds, the Spark jobs it started and their stages (from
``SparkContext.statusTracker()``: the job ids of the current job group before and after
the step, no listener of our own), the rows and feature bytes it read, and the rows it left to the
next pass. A Spark Connect session exposes no status tracker to its client: there the
jobs and stages are not counted (``None``). :meth:`CostLog.as_dict` is what
``summary.json`` carries under ``cost`` and what the log prints.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from fairspark.session import is_connect

__all__ = ["CostLog"]

_LOG = logging.getLogger("fairspark.hfm._spark.elimination")


class CostLog:
    """Per pass: seconds, Spark jobs and stages, rows and bytes read, rows left.

    Parameters
    ----------
    spark : SparkSession or None
        The session whose status tracker counts the jobs (``None``: no job counts; a
        Spark Connect session: jobs and stages ``None``, it has no status tracker).
    """

    def __init__(self, spark) -> None:
        self._counted = spark is None or not is_connect(spark)
        self._sc = spark.sparkContext if spark is not None and self._counted else None
        self.engine: str | None = None
        #: the driver path's budget and what it was sized from (set when it was asked)
        self.budget: dict[str, Any] | None = None
        self.steps: list[dict[str, Any]] = []

    def _job_ids(self) -> set[int]:
        if self._sc is None:
            return set()
        # the tracker learns of a job from the listener bus, which may lag the action
        # that ran it by a moment: drain it first, so every job is counted in its step
        with contextlib.suppress(Exception):
            self._sc._jsc.sc().listenerBus().waitUntilEmpty()
        group = self._sc.getLocalProperty("spark.jobGroup.id")
        ids = self._sc._jsc.statusTracker().getJobIdsForGroup(group)
        # one call for the whole array (iterating a Java array costs a call per element)
        text = str(self._sc._jvm.java.util.Arrays.toString(ids)).strip("[]")
        return {int(v) for v in text.split(",") if v.strip()}

    def _stages(self, jobs: set[int]) -> int:
        tracker = self._sc.statusTracker()
        n = 0
        for j in jobs:
            info = tracker.getJobInfo(j)
            n += len(list(info.stageIds)) if info is not None else 0
        return n

    @contextlib.contextmanager
    def step(self, name: str, *, rows_read: int | None = None,
             bytes_read: float | None = None,
             spark_jobs: bool = True) -> Iterator[dict[str, Any]]:
        """Measure one pass; the caller may set ``rows_left`` (and more) on the yielded dict.

        Parameters
        ----------
        name : str
            What the pass is (``"A: sample bounds"``, ...).
        rows_read, bytes_read : optional
            Rows of the table the pass reads and their feature bytes.
        spark_jobs : bool
            ``False`` for a pass that runs no Spark job by construction (the driver
            path's numpy passes): its jobs are not looked up (0), which saves the
            tracker's round trips to the JVM.
        """
        before = self._job_ids() if spark_jobs else set()
        rec: dict[str, Any] = {"pass": name, "rows_read": rows_read,
                               "bytes_read": None if bytes_read is None else int(bytes_read)}
        t0 = time.perf_counter()
        try:
            yield rec
        finally:
            rec["seconds"] = round(time.perf_counter() - t0, 4)
            rec["jobs_ids"] = (self._job_ids() - before) if spark_jobs else set()
            self.steps.append(rec)

    def as_dict(self) -> dict[str, Any]:
        """The cost model: per pass and in all (JSON-ready)."""
        passes = []
        for s in self.steps:
            rec = {k: v for k, v in s.items() if k != "jobs_ids"}
            ids = s["jobs_ids"]
            rec["jobs"] = len(ids) if self._counted else None
            rec["stages"] = (self._stages(ids) if self._sc is not None else 0) \
                if self._counted else None
            passes.append(rec)
        return {
            "engine": self.engine,
            "driver_budget": self.budget,
            "jobs": sum(p["jobs"] for p in passes) if self._counted else None,
            "stages": sum(p["stages"] for p in passes) if self._counted else None,
            "seconds": round(sum(p["seconds"] for p in passes), 4),
            "passes": passes,
        }

    def log(self) -> dict[str, Any]:
        """:meth:`as_dict`, also written to the debug log, one line per pass (internal)."""
        out = self.as_dict()
        for p in out["passes"]:
            _LOG.debug("hfm cost: %-28s %7.2f s, %2s jobs, %2s stages, read %s rows (%s bytes),"
                      " left %s", p["pass"], p["seconds"], p["jobs"], p["stages"],
                      p.get("rows_read"), p.get("bytes_read"), p.get("rows_left"))
        _LOG.debug("hfm cost: %s engine, %s jobs, %s stages, %.2f s in all", out["engine"],
                  out["jobs"], out["stages"], out["seconds"])
        return out
