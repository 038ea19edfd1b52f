"""Progress a person can see: log lines at least once a minute, and the running status.

A stage that runs longer than a few seconds (mdfa's splits, correlation's rounds) makes
a :class:`Progress` and calls :meth:`Progress.update` with what is done of how many;
the update is logged when ``every_s`` seconds have passed since the last line (and at
the end), with the elapsed time and an estimate of the rest, and handed to the run's
progress sink (``AuditContext.progress``), which the runner writes into the running
``_status/run_date=<D>.json``. Inside one Spark job :func:`follow_tasks` polls the
finished tasks of the jobs the stage runs (Spark's status tracker for the stage's job
group on a classic session, the server's progress messages on Spark Connect) from a
driver thread, so a long job reports between its start and its end.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from fairspark.numbers import fmt_fixed

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["Progress", "follow_tasks", "format_seconds"]

log = logging.getLogger("fairspark")

#: seconds between two polls of the status tracker
POLL_S = 5.0


def format_seconds(s: float) -> str:
    """``75.2`` -> ``'1m15s'``; under a minute ``'42s'``."""
    s = max(0.0, float(s))
    if s < 60:
        return f"{fmt_fixed(s, 0)}s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


class Progress:
    """What a stage has done of how many, logged at least every ``every_s`` seconds.

    Parameters
    ----------
    what:
        The stage, as the log line starts (e.g. ``"mdfa race"``).
    unit:
        What is counted (``"splits"``, ``"rounds"``).
    total:
        How many there are (an upper bound when the stage may stop early; say so in
        ``note`` of :meth:`update`).
    sink:
        Called with the progress dict on every logged update (the run's running
        status), or None.
    every_s:
        Longest gap between two log lines while updates come in.
    """

    def __init__(self, *, what: str, unit: str, total: int,
                 sink: Callable[[dict[str, Any]], None] | None = None,
                 every_s: float = 30.0) -> None:
        self.what, self.unit, self.total = what, unit, int(total)
        self.sink, self.every_s = sink, float(every_s)
        self.start = time.monotonic()
        self._last_logged = -float("inf")
        self._lock = threading.Lock()
        self.done = 0

    def state(self, done: int, note: str | None = None) -> dict[str, Any]:
        """The progress dict: stage, unit, done, total, elapsed and estimated rest (s)."""
        elapsed = time.monotonic() - self.start
        rest = (elapsed / done * (self.total - done)) if 0 < done < self.total else None
        return {"stage": self.what, "unit": self.unit, "done": int(done),
                "total": self.total, "elapsed_s": round(elapsed, 1),
                "remaining_s": None if rest is None else round(rest, 1), "note": note}

    def line(self, state: dict[str, Any]) -> str:
        """The log line of a progress dict."""
        rest = state["remaining_s"]
        tail = "" if rest is None else f", about {format_seconds(rest)} left"
        note = f" ({state['note']})" if state.get("note") else ""
        return (f"{state['stage']}: {state['done']} of {state['total']} {self.unit} done"
                f"{note}, {format_seconds(state['elapsed_s'])} elapsed{tail}")

    def update(self, done: int, *, total: int | None = None, note: str | None = None,
               force: bool = False) -> None:
        """Record ``done``; log it (and hand it to the sink) when ``every_s`` has passed
        since the last line, or with ``force``."""
        with self._lock:
            if total is not None:
                self.total = int(total)
            self.done = int(done)
            now = time.monotonic()
            if not force and now - self._last_logged < self.every_s:
                return
            self._last_logged = now
            st = self.state(self.done, note)
        log.info("%s", self.line(st))
        if self.sink is not None:
            try:
                self.sink(st)
            except Exception as err:  # noqa: BLE001 - progress never fails a run
                log.debug("progress sink failed: %s", err)


@contextlib.contextmanager
def follow_tasks(spark: SparkSession,
                 on_tick: Callable[[int, int], None] | None) -> Iterator[None]:
    """Poll the finished tasks of the Spark jobs run inside the block.

    ``on_tick(done, total)`` is called from a daemon thread every :data:`POLL_S`
    seconds while the block runs and tasks are known. On a classic session the jobs
    are found through the block's job group (the runner gives every audit one; without
    one the block runs in a fresh one, restored afterwards) and Spark's status
    tracker; on Spark Connect from the progress messages the server sends with the
    session's operations (:func:`fairspark._jobs.follow_scope`). With ``on_tick`` None
    nothing is followed.
    """
    from fairspark._jobs import follow_scope

    if on_tick is None:
        yield
        return
    with follow_scope(spark) as counts:
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(POLL_S):
                try:
                    done, total = counts()
                    if total:
                        on_tick(done, total)
                except Exception as err:  # noqa: BLE001 - progress never fails a run
                    log.debug("progress poll failed: %s", err)

        thread = threading.Thread(target=poll, daemon=True, name="fairspark-progress")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(POLL_S + 1.0)
