"""Shipping a value to executors once: a broadcast, or the task closure where there is none.

Shared by the correlation and mdfa audits, whose pandas-UDF tasks all read one sample.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

__all__ = ["Shipped"]


class Shipped:
    """A value shipped to executors once: a broadcast, or the closure where there is none."""

    def __init__(self, spark, value: Any, *, how: str = "auto"):
        if how not in ("auto", "broadcast", "closure"):
            raise ValueError(f"shipping must be auto, broadcast or closure, got {how!r}")
        self.token = uuid.uuid4().hex
        self._bc = None
        self._value = None
        self.how = "closure"
        if how != "closure":
            try:
                self._bc = spark.sparkContext.broadcast(value)
                self.how = "broadcast"
            except Exception:
                if how == "broadcast":
                    raise
        if self._bc is None:
            self._value = value

    @property
    def value(self) -> Any:
        return self._bc.value if self._bc is not None else self._value

    def release(self) -> None:
        if self._bc is not None:
            with contextlib.suppress(Exception):
                self._bc.unpersist()

    def __getstate__(self) -> dict:
        return {"token": self.token, "_bc": self._bc, "_value": self._value, "how": self.how}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
