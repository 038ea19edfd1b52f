"""Shipping a value to executors once: a broadcast, or the task closure where there is none.

Shared by the correlation and mdfa audits, whose pandas-UDF tasks all read one sample.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

__all__ = ["Shipped"]


class Shipped:
    """A value shipped to executors once: a broadcast, or the closure where there is none.

    Parameters
    ----------
    spark:
        The session (a Spark Connect session has no SparkContext, so no broadcast).
    value:
        What the tasks read (picklable; numpy arrays of a capped sample).
    how:
        ``auto`` (a broadcast on a classic session, the closure on Spark Connect),
        ``broadcast`` (an error on Spark Connect) or ``closure``.

    Attributes
    ----------
    token:
        A fresh id per shipment; Python workers key their caches by it.
    how:
        How the value travels: ``broadcast`` or ``closure``.
    """

    def __init__(self, spark: Any, value: Any, *, how: str = "auto") -> None:
        if how not in ("auto", "broadcast", "closure"):
            raise ValueError(f"shipping must be auto, broadcast or closure, got {how!r}")
        from fairspark.session import is_connect

        connect = is_connect(spark)
        if how == "broadcast" and connect:
            raise ValueError("shipping 'broadcast' needs a classic session: a Spark Connect "
                             "session has no broadcast variables (use 'auto' or 'closure')")
        self.token = uuid.uuid4().hex
        self._bc = None
        self._value = None
        self.how = "closure"
        if how != "closure" and not connect:
            self._bc = spark.sparkContext.broadcast(value)
            self.how = "broadcast"
        else:
            self._value = value

    @property
    def value(self) -> Any:
        """The shipped value (on an executor: read from the broadcast or the closure)."""
        return self._bc.value if self._bc is not None else self._value

    def release(self) -> None:
        """Drop the broadcast's executor copies (nothing to do for a closure)."""
        if self._bc is not None:
            with contextlib.suppress(Exception):
                self._bc.unpersist()

    def __getstate__(self) -> dict[str, Any]:
        return {"token": self.token, "_bc": self._bc, "_value": self._value, "how": self.how}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
