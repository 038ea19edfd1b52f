"""Test hooks for fault-tolerance tests (inactive unless a test switches them on).

``FAIRSPARK_TEST_FAIL_FIRST_ATTEMPT=hfm,correlation`` in the environment of the
*driver* makes the entry point set the Spark local property
``fairspark.test.failFirstAttempt``; pandas-UDF tasks of the named stages then raise
on their first attempt in partition 0, and Spark retries them. Results must not
change: every task derives its randomness from its own ids, never from the attempt.

``FAIRSPARK_TEST_HOLD_S=<seconds>`` (with the switch above) makes the later attempts
of those partition-0 tasks wait that long when they start, so a test watching Spark's
status tracker sees a task of the stage running and can kill its executor while it
runs (the test proves the kill landed from the task's recorded end reason, not from
timing).

``FAIRSPARK_FAULT=<point>[,<point>...]`` makes the process stop itself at the named
points of publishing (:func:`fault_point`): by default it sends itself ``SIGKILL``,
a real kill of a real process that no ``finally`` or shutdown hook survives; with
``FAIRSPARK_FAULT_SLEEP_S=<seconds>`` it sleeps there instead (to widen a window a
test watches); with ``FAIRSPARK_FAULT_RELEASE_FILE=<path>`` as well, the sleep ends as
soon as that file exists, so a test can hold a run at a point for exactly as long as it
needs, without racing a fixed timer. The points:

``publish:staging``
    :meth:`~fairspark.outputs.OutputLocation.write_metrics` has written
    ``metrics.parquet`` into the staging folder; the summary, report and ``_SUCCESS``
    are not written yet.
``publish:between_renames``
    :meth:`~fairspark.outputs.OutputLocation.publish` has moved the previous run of the
    date aside and not yet renamed the staging folder into its place.
``lock:acquired``
    :meth:`~fairspark.outputs.OutputLocation.lock` has just created the lock file.
``states:locked``
    :meth:`~fairspark.outputs.OutputLocation.states_lock` has just taken the lock of
    the window's states; their clean-up, writes and reads follow.
``states:staged``
    :meth:`~fairspark.nightly.states.StateStore.write` has staged a partition's state
    (``_tmp-`` folder, ``state.json`` written) and not yet renamed it into place.

``FAIRSPARK_FAULT_SIGNAL=SIGTERM`` (or ``SIGINT``) with ``FAIRSPARK_FAULT=<point>``
signals the process *during real work* instead: at the point a thread starts that
waits until Spark's status tracker shows a job started after the point running, and
then sends the process that signal (``os.kill``, as a scheduler would), while the
driver is inside that job. The points that start real Spark work:

``input:read``
    before the input is read (the next job is the first scan of the input).
``states:write``
    before a window's partition state is written (its sample's Parquet write).
``publish:metrics``
    before ``metrics.parquet`` is written (its Parquet write).
``fan_out:mdfa`` / ``fan_out:correlation``
    before the tasks of mdfa's splits (correlation's rounds) are submitted.
``hfm:pass A``
    before HFM's pass A (bounds over the working table; its first pass on Spark with
    ``audits.hfm.advanced.local_max_bytes: 0``).

Before stopping, the process writes ``fairspark test hook: <action> at <point>`` to
stderr, so a test can tell where it stopped.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import TYPE_CHECKING

from fairspark.numbers import fmt_setting

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "FAIL_FIRST_ATTEMPT_PROPERTY",
    "HOLD_PROPERTY",
    "FAULT_POINTS",
    "arm_from_environment",
    "fault_point",
    "maybe_fail_first_attempt",
]

FAIL_FIRST_ATTEMPT_PROPERTY = "fairspark.test.failFirstAttempt"
HOLD_PROPERTY = "fairspark.test.holdSeconds"
_ENV = "FAIRSPARK_TEST_FAIL_FIRST_ATTEMPT"
_HOLD_ENV = "FAIRSPARK_TEST_HOLD_S"
_FAULT_ENV = "FAIRSPARK_FAULT"
_FAULT_SLEEP_ENV = "FAIRSPARK_FAULT_SLEEP_S"
_FAULT_RELEASE_ENV = "FAIRSPARK_FAULT_RELEASE_FILE"
#: the points :func:`fault_point` is called at (see the module docstring)
FAULT_POINTS = ("publish:staging", "publish:between_renames", "lock:acquired", "states:staged",
                "states:locked", "input:read", "states:write", "publish:metrics",
                "fan_out:mdfa", "fan_out:correlation", "hfm:pass A")
_FAULT_SIGNAL_ENV = "FAIRSPARK_FAULT_SIGNAL"


class InjectedTaskFailureError(RuntimeError):
    """Raised by the test hook; Spark retries the task."""


def arm_from_environment(spark: SparkSession) -> str | None:
    """Driver side: copy the environment switches into Spark local properties."""
    from fairspark.session import is_connect

    tags = os.environ.get(_ENV)
    if tags and is_connect(spark):
        # the hook travels as a local property, which a Connect client cannot set
        sys.stderr.write(f"fairspark test hook: {_ENV} needs a classic session; ignored\n")
        return None
    if tags:
        spark.sparkContext.setLocalProperty(FAIL_FIRST_ATTEMPT_PROPERTY, tags)
        hold = os.environ.get(_HOLD_ENV)
        if hold:
            spark.sparkContext.setLocalProperty(HOLD_PROPERTY, str(float(hold)))
    return tags


def maybe_fail_first_attempt(tag: str) -> None:
    """Task side: when ``tag`` is armed, in partition 0 raise on the first attempt and
    hold the later ones (when a hold is set)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return
    armed = tc.getLocalProperty(FAIL_FIRST_ATTEMPT_PROPERTY) or ""
    if tag not in armed.split(",") or tc.partitionId() != 0:
        return
    if tc.attemptNumber() == 0:
        raise InjectedTaskFailureError(
            f"test hook: injected failure of the first attempt of a {tag} task "
            f"(stage {tc.stageId()}, partition 0)")
    hold = float(tc.getLocalProperty(HOLD_PROPERTY) or 0.0)
    if hold > 0:
        time.sleep(hold)


def fault_point(point: str) -> None:
    """Driver side: stop here when ``FAIRSPARK_FAULT`` names ``point`` (no-op otherwise).

    Parameters
    ----------
    point:
        One of :data:`FAULT_POINTS`.
    """
    armed = os.environ.get(_FAULT_ENV)
    if not armed or point not in armed.split(","):
        return
    if os.environ.get(_FAULT_SIGNAL_ENV):
        _signal_during_next_job(point, os.environ[_FAULT_SIGNAL_ENV])
        return
    sleep_s = os.environ.get(_FAULT_SLEEP_ENV)
    action = f"sleep {fmt_setting(float(sleep_s))} s" if sleep_s else "SIGKILL"
    sys.stderr.write(f"fairspark test hook: {action} at {point}\n")
    sys.stderr.flush()
    if sleep_s:
        release = os.environ.get(_FAULT_RELEASE_ENV)
        end = time.monotonic() + float(sleep_s)
        while time.monotonic() < end:
            if release and os.path.exists(release):
                return
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))
        return
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # pragma: no cover - the signal is delivered before this returns


def _signal_during_next_job(point: str, name: str) -> None:
    """Start a thread that signals this process while a Spark job started after
    ``point`` runs (``FAIRSPARK_FAULT_SIGNAL``); once per process."""
    import threading

    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None or _SIGNAL_SENT:
        return
    _SIGNAL_SENT.append(point)
    signum = int(getattr(signal, name))
    tracker = sc.statusTracker()
    before = set(tracker.getActiveJobsIds())  # jobs of other threads already running

    def watch() -> None:
        while True:
            new = sorted(set(tracker.getActiveJobsIds()) - before)
            if new:
                sys.stderr.write(f"fairspark test hook: {name} during Spark job "
                                 f"{', '.join(map(str, new))} after {point}\n")
                sys.stderr.flush()
                os.kill(os.getpid(), signum)
                return
            time.sleep(0.002)

    threading.Thread(target=watch, name="fairspark-test-signal", daemon=True).start()


#: the point a signal was armed at (``FAIRSPARK_FAULT_SIGNAL`` signals once per process)
_SIGNAL_SENT: list[str] = []
