"""Test hooks for fault-tolerance tests (inactive unless a test switches them on).

``FAIRSPARK_TEST_FAIL_FIRST_ATTEMPT=hfm,correlation`` in the environment of the
*driver* makes the entry point set the Spark local property
``fairspark.test.failFirstAttempt``; pandas-UDF tasks of the named stages then raise
on their first attempt in partition 0, and Spark retries them. Results must not
change: every task derives its randomness from its own ids, never from the attempt.
"""

from __future__ import annotations

import os

__all__ = ["FAIL_FIRST_ATTEMPT_PROPERTY", "arm_from_environment", "maybe_fail_first_attempt"]

FAIL_FIRST_ATTEMPT_PROPERTY = "fairspark.test.failFirstAttempt"
_ENV = "FAIRSPARK_TEST_FAIL_FIRST_ATTEMPT"


class InjectedTaskFailureError(RuntimeError):
    """Raised by the test hook; Spark retries the task."""


def arm_from_environment(spark) -> str | None:
    """Driver side: copy the environment switch into a Spark local property."""
    tags = os.environ.get(_ENV)
    if tags:
        spark.sparkContext.setLocalProperty(FAIL_FIRST_ATTEMPT_PROPERTY, tags)
    return tags


def maybe_fail_first_attempt(tag: str) -> None:
    """Task side: raise on the first attempt of partition 0 when ``tag`` is armed."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return
    armed = tc.getLocalProperty(FAIL_FIRST_ATTEMPT_PROPERTY) or ""
    if tag in armed.split(",") and tc.partitionId() == 0 and tc.attemptNumber() == 0:
        raise InjectedTaskFailureError(
            f"test hook: injected failure of the first attempt of a {tag} task "
            f"(stage {tc.stageId()}, partition 0)")
