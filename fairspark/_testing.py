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
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "FAIL_FIRST_ATTEMPT_PROPERTY",
    "HOLD_PROPERTY",
    "arm_from_environment",
    "maybe_fail_first_attempt",
]

FAIL_FIRST_ATTEMPT_PROPERTY = "fairspark.test.failFirstAttempt"
HOLD_PROPERTY = "fairspark.test.holdSeconds"
_ENV = "FAIRSPARK_TEST_FAIL_FIRST_ATTEMPT"
_HOLD_ENV = "FAIRSPARK_TEST_HOLD_S"


class InjectedTaskFailureError(RuntimeError):
    """Raised by the test hook; Spark retries the task."""


def arm_from_environment(spark: SparkSession) -> str | None:
    """Driver side: copy the environment switches into Spark local properties."""
    tags = os.environ.get(_ENV)
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
