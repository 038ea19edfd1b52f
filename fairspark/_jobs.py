"""Which Spark jobs belong to what: the one place that tells a classic session from a Connect one.

An audit's jobs are cancelled at its time budget, the progress of a long job is
followed, and a signal cancels every running job. A classic session does this with
a job group (``SparkContext.setJobGroup``/``cancelJobGroup``) and the status tracker;
a Spark Connect session has no SparkContext, and does it with session tags
(``SparkSession.addTag``/``interruptTag``/``interruptAll``) and the progress messages
its server streams with every operation (``registerProgressHandler``).

pyspark 4.3's classic session has ``addTag`` and ``interruptTag`` too, but there a tag
added in one thread is not found by ``interruptTag`` called from another (the
watchdog's): the tag's job tag is kept per JVM thread. Measured: a job tagged in a
worker thread ran to its end while the main thread called ``interruptTag`` every
second for 60 s (``interruptTag`` returned no operation), where a Connect session
interrupted it within a second. So the classic route keeps job groups, chosen here by
:func:`fairspark.session.is_connect` and nowhere else.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from fairspark.session import is_connect

__all__ = ["cancel_all", "cancel_scope", "cancel_scope_if_active", "follow_scope",
           "in_scope", "scope_thread"]

log = logging.getLogger("fairspark")

_GROUP = "spark.jobGroup.id"


@contextlib.contextmanager
def in_scope(spark: Any, scope: str, description: str) -> Iterator[None]:
    """The Spark jobs this thread starts inside the block belong to ``scope``.

    Classic: the job group ``scope`` (interrupting its tasks when cancelled), cleared
    afterwards. Connect: the session tag ``scope`` of this thread, removed afterwards.
    """
    if is_connect(spark):
        spark.addTag(scope)
        try:
            yield
        finally:
            spark.removeTag(scope)
        return
    sc = spark.sparkContext
    sc.setJobGroup(scope, description, interruptOnCancel=True)
    try:
        yield
    finally:
        sc.setLocalProperty(_GROUP, None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def current_scope(spark: Any) -> str | None:
    """The classic job group of this thread (``None`` on Connect, or without one)."""
    if is_connect(spark):
        return None
    return spark.sparkContext.getLocalProperty(_GROUP)


def scope_thread(spark: Any, target: Callable[[], None]) -> threading.Thread:
    """A daemon thread running ``target`` that inherits this thread's Spark properties
    (``InheritableThread``; on Connect it needs the session). Not started."""
    from pyspark import InheritableThread

    return InheritableThread(target=target, daemon=True, session=spark)


def cancel_scope(spark: Any, scope: str) -> None:
    """Cancel the running jobs of ``scope`` (their tasks are interrupted)."""
    if is_connect(spark):
        spark.interruptTag(scope)
    else:
        spark.sparkContext.cancelJobGroup(scope)


def cancel_scope_if_active(spark: Any, scope: str) -> None:
    """Cancel ``scope`` again when it has running jobs (started after the first cancel)."""
    if is_connect(spark):
        spark.interruptTag(scope)  # interrupts the running operations only
        return
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    if set(tracker.getJobIdsForGroup(scope)) & set(tracker.getActiveJobsIds()):
        sc.cancelJobGroup(scope)


def cancel_all(spark: Any) -> list[str]:
    """Cancel every running job of the session; the jobs (classic: ids; Connect:
    operation ids) that were running."""
    if is_connect(spark):
        return [str(op) for op in spark.interruptAll()]
    sc = spark.sparkContext
    active = sorted(sc.statusTracker().getActiveJobsIds())
    if active:
        sc.cancelAllJobs()
    return [str(j) for j in active]


def tasks_still_running(spark: Any, jobs: list[str]) -> list[str]:
    """Of the cancelled ``jobs``, those with a task still running.

    A cancelled job ends before its killed tasks do (a task stops at its next
    interruption check). Classic: the jobs' stages' active tasks say when they have;
    Connect shows no tasks, only operations: :func:`cancel_all` says which still run.
    """
    if is_connect(spark):
        return []
    tracker = spark.sparkContext.statusTracker()
    busy = []
    for job in jobs:
        info = tracker.getJobInfo(int(job))
        for stage in (info.stageIds if info is not None else ()):
            st = tracker.getStageInfo(stage)
            if st is not None and st.numActiveTasks > 0:
                busy.append(job)
                break
    return busy


class _Followed:
    """Finished and total tasks of the jobs run inside a :func:`follow_scope` block."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.own: str | None = None
        self._lock = threading.Lock()
        self._ops: dict[str, tuple[int, int]] = {}
        if is_connect(spark):
            spark.registerProgressHandler(self._on_progress)
            return
        sc = spark.sparkContext
        self.tracker = sc.statusTracker()
        self.group = current_scope(spark)
        if self.group is None:
            import uuid

            self.own = self.group = f"fairspark-progress-{uuid.uuid4().hex[:8]}"
            sc.setJobGroup(self.group, "fairspark", interruptOnCancel=True)
        self.before = set(self.tracker.getJobIdsForGroup(self.group))

    def _on_progress(self, stages: Any, inflight_tasks: int, operation_id: Any,
                     done: bool) -> None:
        """Connect's progress handler: the latest stage counts of each operation."""
        stages = list(stages or ())
        with self._lock:
            self._ops[str(operation_id)] = (sum(int(s.num_completed_tasks) for s in stages),
                                            sum(int(s.num_tasks) for s in stages))

    def counts(self) -> tuple[int, int]:
        """(finished, total) tasks so far."""
        if is_connect(self.spark):
            with self._lock:
                return (sum(d for d, _ in self._ops.values()),
                        sum(t for _, t in self._ops.values()))
        done = total = 0
        for jid in self.tracker.getJobIdsForGroup(self.group):
            if jid in self.before:
                continue
            job = self.tracker.getJobInfo(jid)
            for sid in (job.stageIds if job is not None else []):
                st = self.tracker.getStageInfo(sid)
                if st is not None:
                    done += int(st.numCompletedTasks)
                    total += int(st.numTasks)
        return done, total

    def close(self) -> None:
        if is_connect(self.spark):
            with contextlib.suppress(Exception):  # the handler may be gone with the session
                self.spark.removeProgressHandler(self._on_progress)
        elif self.own is not None:
            sc = self.spark.sparkContext
            sc.setLocalProperty(_GROUP, None)  # type: ignore[arg-type]
            sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


@contextlib.contextmanager
def follow_scope(spark: Any) -> Iterator[Callable[[], tuple[int, int]]]:
    """Yields a function giving (finished, total) tasks of the jobs started in the block.

    Classic: the status tracker, for the jobs of this thread's job group (the block
    runs in a fresh group when the thread has none, cleared afterwards). Connect: the
    progress messages the server sends with each operation of the session (every
    operation in the block's time, its own and any other thread's; the server sends
    them every couple of seconds while an operation runs).
    """
    followed = _Followed(spark)
    try:
        yield followed.counts
    finally:
        followed.close()
