"""The lock files of the output location: their records, who holds them, when they are stale.

:class:`~fairspark.outputs.OutputLocation` takes and releases the locks; what a lock
file holds, how a local one is created atomically and judged stale is here, in plain
file I/O (it works when the JVM has died, and before the Spark session starts:
:func:`check_not_locked`). Everything is importable from :mod:`fairspark.outputs` too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from fairspark.numbers import fmt_setting

__all__ = ["check_not_locked", "read_lock_record"]


def _locked(run_date: dt.date, held: dict[str, Any], path: str, stale_after_s: float
            ) -> Exception:
    from fairspark.errors import RunLockedError

    return RunLockedError(
        f"run date {run_date.isoformat()} is being written by another run "
        f"({_who(held)}); lock file {path}; it is taken over once that process is "
        f"gone or after {fmt_setting(stale_after_s)} s")


def check_not_locked(base: str, run_date: dt.date, *, stale_after_s: float) -> None:
    """Raise :class:`~fairspark.errors.RunLockedError` (exit 2) when a live run holds the
    lock of ``run_date`` in the local output folder ``base``; nothing for another
    file system (the run's own :meth:`OutputLocation.lock` decides there).

    Plain file I/O, before the Spark session starts: a second run of a locked date is
    refused at once, not after the session's start-up. The lock itself is still taken
    by :meth:`OutputLocation.lock` (this check takes nothing).
    """
    parsed = urlparse(base)
    if parsed.scheme not in ("", "file"):
        return
    folder = Path(parsed.path if parsed.scheme else os.path.abspath(base)) / "_status"
    lock = folder / f"run_date={run_date.isoformat()}.lock"
    held = read_lock_record(lock)
    if held and not _stale(held, stale_after_s):
        raise _locked(run_date, held, str(lock), stale_after_s)


@contextlib.contextmanager
def _folder_locked(folder: Path | None) -> Iterator[None]:
    """An exclusive ``flock`` of the local ``folder`` (no-op for ``None`` or where
    ``fcntl`` is missing): the lock files in it are checked, taken and released by one
    process at a time. Held for a few file operations; the kernel releases it when the
    process ends, however it ends."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        fcntl = None
    if folder is None or fcntl is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _create_local(path: Path, text: str) -> bool:
    """Create the local file ``path`` holding ``text`` unless it exists (atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: an exclusive create
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def _record(text: str, modified_unix: float) -> dict[str, Any]:
    try:
        held = json.loads(text)
    except ValueError:
        held = None
    if isinstance(held, dict) and held:
        return held
    return {"modified_unix": modified_unix}


def read_lock_record(path: Path) -> dict[str, Any]:
    """The record of the local lock file ``path`` (as :meth:`OutputLocation._lock_holder`),
    read with plain file I/O: works when the JVM has died."""
    try:
        modified = path.stat().st_mtime
        return _record(path.read_text(encoding="utf-8"), modified)
    except (OSError, UnicodeDecodeError):
        return {}


def _holder(run_id: str) -> dict[str, Any]:
    """What a lock file holds: the run id, host, pid and start time."""
    import socket
    import time as _time

    return {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(),
            "started_unix": _time.time()}


def _who(held: dict[str, Any]) -> str:
    if "run_id" not in held and "modified_unix" in held:
        return f"a lock file without a readable record, written {_utc(held['modified_unix'])}"
    return (f"run id {held.get('run_id')}, host {held.get('host')}, pid {held.get('pid')}, "
            f"since {_utc(held.get('started_unix'))}")


def _utc(ts: Any) -> str:
    import time as _time

    try:
        return _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime(float(ts)))
    except (TypeError, ValueError):
        return "an unknown time"


def _stale(held: dict[str, Any], stale_after_s: float) -> bool:
    """A lock is stale when it is too old, or its process is gone on this host.

    ``{}`` (no lock file) is stale. A record that could not be read (a lock file being
    written on a remote file system, or damaged) has only the file's modification time
    and is stale once that is older than ``stale_after_s``: it is never taken for a
    dead run's lock at once, which let two runs of one date both take the lock.
    """
    import socket
    import time as _time

    started = held.get("started_unix", held.get("modified_unix"))
    if not isinstance(started, int | float) or _time.time() - started > stale_after_s:
        return True
    if held.get("host") == socket.gethostname() and isinstance(held.get("pid"), int):
        try:
            os.kill(held["pid"], 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return False
