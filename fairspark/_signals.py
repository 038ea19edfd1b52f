"""How SIGTERM and SIGINT end a run: jobs cancelled, then the run unwinds through its cleanup.

:func:`signals_end_the_run` installs the CLI's handlers. A signal stops the run with
:class:`~fairspark._run_status.TerminatedBySignal` (SIGTERM) or :class:`KeyboardInterrupt`
(SIGINT), raised in the driver's main thread, which then unwinds through the run's
cleanup (staging folder deleted, the earlier run of the date put back, lock released,
status ``"terminated"``) and exits 143 or 130.

Python runs a signal handler in the main thread between two bytecodes, which may be
in the middle of a call into the JVM: Py4J has sent a command and waits for its
answer on the thread's connection (a Parquet write, a collect). Raising there, or
sending another command on that connection (pyspark's own SIGINT handler cancels the
jobs so), leaves the answer unread: the next command on the connection reads the
previous one's answer, so the cleanup's file-system calls fail, the lock and the
staging folder stay and ``spark.stop()`` raises. So the handler

- cancels the running Spark jobs from a thread of its own (its own Py4J connection),
  and logs which (``cancelled the running Spark job 12``; on Spark Connect it
  interrupts the session's operations, :func:`fairspark._jobs.cancel_all`);
- raises at once when the main thread is in fairspark's own code, and otherwise
  (inside pyspark or Py4J) sets a trace on the frames that called into them, so that
  the stop is raised at the first line of fairspark's code that runs once that call
  has returned (most often with the cancelled job's error, which the stop replaces);
- before raising, waits (at most :data:`WAIT_S` seconds) until no Spark job runs and
  the cancelled jobs' killed tasks have ended, cancelling any job still started, and
  logs ``no Spark job is running``: the cleanup that follows never races a task still
  writing into the staging folder.

Spark's own log is quietened (``FATAL``) once a run is stopping, and pyspark's
warnings ignored: the cancelled jobs' errors would otherwise print Java stack traces
after the run's one line.
:func:`stop_signal` tells code that catches exceptions (an audit's isolation) that the
run is stopping, so that a cancelled job is not reported as an audit's failure.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import sysconfig
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from fairspark.numbers import fmt_setting

__all__ = ["WAIT_S", "discard_after_stop", "raise_if_stopping", "remove_leftovers",
           "signals_end_the_run", "stop_signal"]

log = logging.getLogger("fairspark")

#: how long the stop waits for the cancelled Spark jobs to end before the cleanup
WAIT_S = 20.0
#: the signal stopping the run (None: none yet) and whether the stop was raised
_STATE: dict[str, Any] = {"signum": None, "raised": False, "logged": set()}


def stop_signal() -> int | None:
    """The signal that is stopping the run, or ``None``."""
    return _STATE["signum"]


def discard_after_stop(path: str) -> None:
    """Note a local folder a stopped run deleted, for :func:`remove_leftovers`."""
    if _STATE["signum"] is not None:
        _STATE.setdefault("leftovers", []).append(path)


def remove_leftovers() -> None:
    """Once the session is stopped: delete again what a stopped run deleted.

    A task of a cancelled write may still run for a moment after its job has ended
    and recreate the (empty) staging folder after the cleanup deleted it; once the
    session is stopped nothing writes any more. Local folders only (plain file I/O);
    on another file system the next run of the date deletes a leftover.
    """
    import shutil
    from pathlib import Path
    from urllib.parse import urlparse

    for path in _STATE.pop("leftovers", []):
        parsed = urlparse(path)
        if parsed.scheme not in ("", "file"):
            continue
        local = Path(parsed.path)
        for _ in range(3):
            if not local.exists():
                time.sleep(0.3)
                if not local.exists():
                    break
            shutil.rmtree(local, ignore_errors=True)


class TerminatedBySignal(BaseException):
    """Raised in the driver's main thread when the run receives SIGTERM (or SIGINT).

    A ``BaseException``, like :class:`KeyboardInterrupt`, so that no ``except
    Exception`` of an audit swallows it: the run unwinds through the publish's and
    the lock's cleanup and exits with ``128 + signum`` (143 for SIGTERM, 130 for SIGINT).
    """

    def __init__(self, signum: int):
        import signal

        self.signum = int(signum)
        self.name = signal.Signals(signum).name
        super().__init__(f"terminated by {self.name}")


def raise_if_stopping() -> None:
    """In the main thread of a run that received SIGTERM/SIGINT: raise its stop."""
    signum = _STATE["signum"]
    if signum is not None and threading.current_thread() is threading.main_thread():
        _raise_stop(signum, _STATE.get("get_spark"))


def _stop_error(signum: int) -> BaseException:
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return TerminatedBySignal(signum)


def _library_dirs() -> tuple[tuple[str, ...], str]:
    import py4j
    import pyspark

    # a Spark Connect client waits in gRPC's code (imported only by a Connect session)
    mods = (py4j, pyspark, *[m for m in (sys.modules.get("grpc"),) if m is not None])
    libs = tuple(os.path.dirname(m.__file__) + os.sep for m in mods if m.__file__)
    return libs, sysconfig.get_paths()["stdlib"] + os.sep


def _callers_of_library(frame: FrameType | None) -> list[FrameType]:
    """The frames that called into pyspark/Py4J, when the main thread is inside them.

    Walks out from the frame the handler interrupted through the frames of pyspark,
    Py4J, gRPC (a Spark Connect client's calls) and the standard library (``socket``,
    ``contextlib``); when one of pyspark's, Py4J's or gRPC's is among them, the frames
    beyond (fairspark's, the caller's) are returned, innermost first. Empty: the main
    thread is in fairspark's own code.
    """
    libs, stdlib = _library_dirs()
    inside = False
    f = frame
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(libs):
            inside = True
        elif not name.startswith(stdlib):
            break
        f = f.f_back
    callers: list[FrameType] = []
    while inside and f is not None:
        callers.append(f)
        f = f.f_back
    return callers


def _raise_on_return(callers: list[FrameType], signum: int) -> None:
    """Raise the stop at the first line (or exception) of one of ``callers``."""
    def trace(frame: FrameType, event: str, _arg: Any):
        if _STATE["raised"]:
            sys.settrace(None)
            return None
        if event in ("line", "exception") and frame in callers:
            sys.settrace(None)
            for f in callers:
                f.f_trace = None
            _raise_stop(signum, _STATE.get("get_spark"))
        return trace

    for f in callers:
        f.f_trace = trace
        f.f_trace_lines = True
    _STATE["traced"] = True
    sys.settrace(lambda *_a: None)  # tracing on in this thread; new frames untraced


def _session(get_spark: Callable[[], Any] | None) -> Any:
    return get_spark() if get_spark is not None else None


def _cancel(spark: Any) -> list[str]:
    """Cancel every running Spark job; log the ones not logged yet. Returns those running."""
    from fairspark._jobs import cancel_all

    active = cancel_all(spark)
    new = [j for j in active if j not in _STATE["logged"]]
    if new:
        _STATE["logged"].update(new)
        log.warning("cancelled the running Spark %s %s",
                    _what(spark) + ("s" if len(new) > 1 else ""), ", ".join(new))
    return active


def _what(spark: Any) -> str:
    from fairspark.session import is_connect

    return "operation" if is_connect(spark) else "job"


def _running(spark: Any) -> list[str]:
    """Cancel the running jobs; the cancelled jobs that still have a task running.

    A cancelled job ends before its killed tasks do (a task stops at its next
    interruption check): on a classic session the stages' active tasks say when they
    have; a Connect session shows operations only (:func:`fairspark._jobs.cancel_all`).
    """
    from fairspark._jobs import tasks_still_running

    busy = set(_cancel(spark))
    busy.update(tasks_still_running(spark, sorted(_STATE["logged"])))
    return sorted(busy)


def _quieten(spark: Any) -> None:
    """Spark's log at ``FATAL`` while the jobs are cancelled: a classic session's, or the
    local Connect server's that this process started (pyspark runs it in this process's
    JVM, whose log is this run's stderr; a killed task's class loading logs a stack
    trace there). A remote Connect server's log is its own."""
    from fairspark.session import is_connect, process_context_class

    if is_connect(spark):
        local_server = getattr(process_context_class(), "_active_spark_context", None)
        if local_server is not None:
            with contextlib.suppress(Exception):
                local_server.setLogLevel("FATAL")
        return
    with contextlib.suppress(Exception):
        spark.sparkContext.setLogLevel("FATAL")


def _canceller(spark: Any) -> None:
    """Thread: quieten Spark's log and cancel the jobs until the stop is raised."""
    end = time.monotonic() + 2 * WAIT_S
    _quieten(spark)
    while not _STATE["raised"] and time.monotonic() < end:
        try:
            _cancel(spark)
        except Exception as err:  # noqa: BLE001 - best effort: the JVM may be stopping
            log.debug("could not cancel the Spark jobs: %s", err)
            return
        time.sleep(0.1)


def _raise_stop(signum: int, get_spark: Callable[[], Any] | None) -> None:
    """Main thread, outside pyspark/Py4J: wait for the cancelled jobs, then raise."""
    _STATE["raised"] = True
    spark = _session(get_spark)
    if spark is not None:
        try:
            _quieten(spark)
            end = time.monotonic() + WAIT_S
            while _running(spark) and time.monotonic() < end:
                time.sleep(0.1)
            left = _running(spark)
            if left:
                log.warning("Spark %ss %s still run %s s after the cancel; cleaning up",
                            _what(spark), ", ".join(left), fmt_setting(WAIT_S))
            else:
                log.warning("no Spark job is running; cleaning up")
        except Exception as err:  # noqa: BLE001 - the JVM may be gone: stop anyway
            log.debug("could not wait for the Spark jobs: %s", err)
    raise _stop_error(signum)


@contextlib.contextmanager
def signals_end_the_run(get_spark: Callable[[], Any]) -> Iterator[Callable[[], None]]:
    """SIGTERM and SIGINT stop the run (the module docstring says how).

    Yields a function that installs the handlers again: call it once the session is
    built (pyspark's SparkContext installs its own SIGINT handler, which cancels the
    jobs on the main thread's Py4J connection). A second signal during the cleanup is
    logged and ignored. Only in the main thread (Python allows handlers nowhere else);
    the previous handlers are restored afterwards.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    _STATE.update(signum=None, raised=False, logged=set(), get_spark=get_spark, traced=False,
                  leftovers=[])

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if _STATE["raised"]:
            log.warning("received %s again while stopping; still cleaning up", name)
            return
        if _STATE["signum"] is None:
            _STATE["signum"] = signum
            log.warning("received %s: stopping the run", name)
            # pyspark warns with the cancelled job's Java stack (toPandas' Arrow path)
            warnings.filterwarnings("ignore", category=UserWarning, module="pyspark")
            spark = _session(get_spark)
            if spark is not None:
                threading.Thread(target=_canceller, args=(spark,), daemon=True,
                                 name="fairspark-cancel").start()
        callers = _callers_of_library(frame)
        if callers:  # inside a call into pyspark/Py4J: raise once it has returned
            _raise_on_return(callers, _STATE["signum"])
            return
        _raise_stop(_STATE["signum"], get_spark)

    sigs = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, handler) for s in sigs}

    def arm() -> None:
        for s in sigs:
            signal.signal(s, handler)

    try:
        yield arm
    finally:
        if _STATE.get("traced"):  # only a trace of ours (never a coverage tool's)
            sys.settrace(None)
        for s, h in previous.items():
            signal.signal(s, h)
        _STATE.update(signum=None, raised=False, get_spark=None, traced=False)
