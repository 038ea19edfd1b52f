"""How a run ends: its status file, its exit code, the one line that says why.

:func:`write_status` writes ``<output>/_status/run_date=<D>.json`` (the exit code for
schedulers that lose it; :func:`status_record` its content), :func:`exit_code_for` and
:func:`describe_error` map what ended a run to its exit code and its line, and
:class:`TerminatedBySignal` is what a SIGTERM raises in the driver. Everything is
importable from :mod:`fairspark.runner` too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any

from fairspark._signals import TerminatedBySignal
from fairspark.errors import FairsparkInputError
from fairspark.outputs import OutputLocation, OutputWriteError, one_line
from fairspark.status import ExitCode

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.run_summary import RunSummary

log = logging.getLogger("fairspark")


#: ``config key '<dotted.key>'`` in an error message: the key a status file names
_KEY_RE = re.compile(r"config key '([^']+)'")


def status_record(run_date: Any, *, exit_code: int | None,
                  summary: RunSummary | None = None, error: str | None = None,
                  run_id: str | None = None, output: str | None = None,
                  state: str | None = None) -> dict[str, Any]:
    """The content of ``_status/run_date=<D>.json`` (see :func:`write_status`).

    ``key`` (and ``keys`` when several) are the config keys that ``error`` names.
    """
    known = exit_code is not None and exit_code in set(ExitCode)
    keys = list(dict.fromkeys(_KEY_RE.findall(error or "")))
    state = state or ("running" if exit_code is None else "finished")
    return {
        "run_date": str(run_date),
        "state": state,
        "run_id": run_id,
        "exit_code": None if exit_code is None else int(exit_code),
        "meaning": ("running" if exit_code is None
                    else ExitCode(exit_code).meaning if known else state),
        "failed_audits": ({k: summary.audits[k].detail for k in summary.failed_audits}
                          if summary is not None else {}),
        "limits": (summary.limits.to_json() if summary is not None
                   and summary.limits is not None else None),
        "error": error,
        "key": keys[0] if keys else None,
        **({"keys": keys} if len(keys) > 1 else {}),
        "output": output if exit_code in (0, 3, 4) else None,
        # output.mlflow: whether the run was logged (a failure is a note, never an exit code)
        **({"mlflow": summary.mlflow} if summary is not None and summary.mlflow else {}),
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_status(out: OutputLocation, run_date: Any, *, exit_code: int | None,
                 summary: RunSummary | None = None, error: str | None = None,
                 run_id: str | None = None, progress: dict[str, Any] | None = None,
                 state: str | None = None) -> None:
    """Write ``<output>/_status/run_date=<D>.json``: the exit code for schedulers that lose it.

    ``exit_code=None`` marks a run that has started (``"state": "running"``); every
    run that knows its output location writes that first and its exit code last
    (``"state": "finished"``, or ``"terminated"`` for a run stopped by a signal).
    While it runs, long stages rewrite it with ``progress`` (audit, stage, done of
    total, elapsed and remaining seconds) at least once a minute.
    """
    status = status_record(run_date, exit_code=exit_code, summary=summary, error=error,
                           run_id=run_id, output=out.path(f"run_date={run_date}"), state=state)
    if progress is not None:
        status["progress"] = progress
    try:
        out.write_text(out.path("_status", f"run_date={run_date}.json"),
                       json.dumps(status, indent=2, default=str))
    except Exception as err:  # noqa: BLE001
        log.warning("could not write the status file: %s", one_line(err))


def _record_end(out: OutputLocation, run_date: Any, run_id: str, err: BaseException) -> None:
    """Write the status of a run that ended on ``err`` (one line, with the run id)."""
    from fairspark.errors import jvm_gone, jvm_gone_message

    code = exit_code_for(err)
    state = "terminated" if isinstance(err, TerminatedBySignal | KeyboardInterrupt) else None
    signal = isinstance(err, TerminatedBySignal | KeyboardInterrupt)
    # a Connect session has no JVM gateway to ask (its driver is the server's)
    asked = None if out.client_side else out.spark
    message = (jvm_gone_message() if not signal and jvm_gone(err, asked)
               else describe_error(err))
    write_status(out, run_date, exit_code=code, run_id=run_id, error=message, state=state)
    with contextlib.suppress(Exception):
        err.fairspark_status_written = True  # type: ignore[attr-defined]


def describe_error(err: BaseException) -> str:
    """What ended a run, in one line for the status file and the console."""
    if isinstance(err, TerminatedBySignal):
        return f"terminated by {err.name}: the run stopped and cleaned up after itself"
    if isinstance(err, KeyboardInterrupt):
        return "interrupted (SIGINT): the run stopped and cleaned up after itself"
    if isinstance(err, FairsparkInputError | OutputWriteError):
        # one line, as the docs promise: a multi-line message (a config error lists
        # each key on a line of its own) is joined with "; " (after a colon, a space)
        text = ""
        for ln in (ln.strip() for ln in str(err).splitlines() if ln.strip()):
            text += (" " if not text or text.endswith(":") else "; ") + ln
        return text.strip()[:2000]
    from fairspark.errors import jvm_gone, jvm_gone_message

    if jvm_gone(err):
        return jvm_gone_message()
    return one_line(err)


def exit_code_for(exc: BaseException) -> int:
    """The exit code of an exception that ended a run.

    2 for bad config or input, ``128 + signum`` for a signal (143 SIGTERM, 130
    SIGINT), else 1.
    """
    if isinstance(exc, FairsparkInputError):
        return ExitCode.INPUT
    if isinstance(exc, TerminatedBySignal):
        return 128 + exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return 130
    return ExitCode.CRASH
