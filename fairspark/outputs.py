"""Writing a run's outputs and publishing them atomically.

A date's outputs are written under ``<output>/_tmp-run_date=<D>-<uuid>/``, then
published by renaming that folder to ``<output>/run_date=<D>/`` (a previous folder
for the same date is first moved aside and deleted only after the new one is in
place), and a ``_SUCCESS`` marker is written last. File-system work goes through
Hadoop's ``FileSystem`` so the same code publishes to a local disk, HDFS or an
object store.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from fairspark._testing import fault_point
from fairspark._values import nan_to_none
from fairspark.errors import FairsparkError, FairsparkInputError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from fairspark.audits.base import MetricRow

__all__ = ["OutputLocation", "OutputPathError", "OutputWriteError", "ROW_COLUMNS", "one_line",
           "read_lock_record", "rows_schema", "to_long_rows"]

log = logging.getLogger("fairspark")

ROW_COLUMNS: tuple[str, ...] = (
    "run_date", "dataset", "audit", "attribute", "group", "metric", "metric_b", "model",
    "value", "lower", "upper", "status", "detail", "params", "config_hash",
    "fairspark_version", "schema_version",
)


class OutputPathError(FairsparkInputError):
    """The output location cannot be written, found before any audit ran (exit 2)."""


class OutputWriteError(FairsparkError):
    """Writing or publishing the outputs failed (a full disk, a lost permission; exit 1)."""


#: a Java exception class at the start of a line of a Py4J error
_JAVA_EXC = re.compile(r"^(?:Caused by: )?((?:[a-z]\w*\.)+[A-Z]\w*(?:Exception|Error)):?\s*(.*)$")


def one_line(err: BaseException) -> str:
    """The cause of ``err`` in one line, without Java frames or Py4J's preamble.

    For an error raised in the JVM the innermost Java exception that has a message
    (``java.io.IOException: No space left on device``); otherwise ``Type: message``
    (first line).
    """
    from fairspark.errors import safe_text

    text = safe_text(err)
    java = [m for ln in text.splitlines()
            if (m := _JAVA_EXC.match(ln.strip().lstrip(": ").strip()))]
    if java:
        with_msg = [m for m in java if m.group(2)] or java
        name, msg = with_msg[-1].group(1), with_msg[-1].group(2)
        return f"{name}: {msg}"[:500] if msg else name
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(err).__name__}: {first}"[:500] if first else type(err).__name__


def rows_schema():
    """The Spark schema of ``metrics.parquet``."""
    from pyspark.sql import types as T

    s, d = T.StringType(), T.DoubleType()
    fields = {
        "run_date": T.DateType(), "value": d, "lower": d, "upper": d,
        "schema_version": T.IntegerType(),
    }
    return T.StructType([T.StructField(c, fields.get(c, s), True) for c in ROW_COLUMNS])


def to_long_rows(
    rows: list[MetricRow], *, run_date: dt.date, dataset: str, config_hash: str,
    version: str, schema_version: int,
) -> list[dict[str, Any]]:
    """Add the run columns to audit rows (NaN becomes null; +/-inf is kept)."""
    out = []
    for r in rows:
        d = asdict(r)
        d.update(run_date=run_date, dataset=dataset, config_hash=config_hash,
                 fairspark_version=version, schema_version=schema_version)
        for k in ("value", "lower", "upper"):
            d[k] = nan_to_none(d[k])
        out.append({c: d.get(c) for c in ROW_COLUMNS})
    return out


class OutputLocation:
    """The output folder of a run, accessed through Hadoop's FileSystem API."""

    def __init__(self, spark: SparkSession, base: str):
        self.spark = spark
        if not urlparse(base).scheme:
            base = os.path.abspath(base)
        self.base = base.rstrip("/")
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = self._Path(self.base).getFileSystem(conf)
        # no .crc side files next to the outputs on a local disk
        self._fs.setWriteChecksum(False)
        self._fs.setVerifyChecksum(False)

    # -- small FS helpers --------------------------------------------------------
    def path(self, *parts: str) -> str:
        """Join ``parts`` under the base folder."""
        return "/".join([self.base, *parts])

    def exists(self, path: str) -> bool:
        """Does ``path`` exist?"""
        return bool(self._fs.exists(self._Path(path)))

    def delete(self, path: str) -> None:
        """Delete ``path`` recursively (no error when it is missing)."""
        self._fs.delete(self._Path(path), True)

    def discard(self, path: str, *, tries: int = 5) -> None:
        """Delete ``path`` recursively and check that it is gone, retrying a few times.

        The cleanup of a run stopped during a write: a killed task of the cancelled
        job may still be removing its files, and a recursive delete that meets a file
        appearing or going away in the folder returns false without deleting it.
        """
        import time as _time

        from fairspark._signals import discard_after_stop

        discard_after_stop(path)
        for i in range(tries):
            self.delete(path)
            if not self.exists(path):
                return
            _time.sleep(0.2 * (i + 1))
        log.warning("could not delete %s; the next run of the date deletes it", path)

    def rename(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst``; raise when the file system refuses."""
        if not self._fs.rename(self._Path(src), self._Path(dst)):
            raise OSError(f"could not rename {src} to {dst}")

    def _local(self, path: str) -> Path | None:
        """``path`` on this machine's disk, or ``None`` for another file system."""
        parsed = urlparse(path)
        if parsed.scheme in ("", "file"):
            return Path(parsed.path if parsed.scheme else path)
        return None

    def write_text(self, path: str, text: str) -> None:
        """Write a UTF-8 text file (overwriting).

        A local path is written with plain file I/O (a temporary file renamed over the
        target), so that the status file is still written when the JVM has died; others
        through Hadoop's FileSystem API.
        """
        local = self._local(path)
        if local is not None:
            local.parent.mkdir(parents=True, exist_ok=True)
            tmp = local.with_name(f".{local.name}.{uuid.uuid4().hex[:8]}.tmp")
            try:
                tmp.write_text(text, encoding="utf-8")
                tmp.replace(local)
            finally:
                tmp.unlink(missing_ok=True)
            return
        stream = self._fs.create(self._Path(path), True)
        try:
            data = text.encode("utf-8")
            chunk = 1 << 20
            for i in range(0, len(data), chunk):
                stream.write(bytearray(data[i:i + chunk]))
        finally:
            stream.close()

    def read_text(self, path: str) -> str:
        """Read a small UTF-8 text file."""
        return "\n".join(
            r.value for r in self.spark.read.text(path, wholetext=True).collect()
        )

    def list_run_dates(self) -> list[str]:
        """The published run dates (folders ``run_date=D`` with a ``_SUCCESS`` marker)."""
        if not self.exists(self.base):
            return []
        out = []
        for st in self._fs.listStatus(self._Path(self.base)):
            name = st.getPath().getName()
            if st.isDirectory() and name.startswith("run_date="):
                if self.exists(self.path(name, "_SUCCESS")):
                    out.append(name.split("=", 1)[1])
        return sorted(out)

    def check_writable(self) -> None:
        """Raise :class:`OutputPathError` unless the run can write under the base folder.

        Checked before the input is read: the base is a folder (or can be created) and
        ``_status`` can be created in it. The message is one line naming the path and
        the cause, without Java frames.
        """
        status = self.path("_status")
        try:
            if self.exists(self.base) and not self._fs.getFileStatus(
                    self._Path(self.base)).isDirectory():
                raise OutputPathError(f"cannot write to the output location {self.base!r} "
                                      "('output.path'): it is a file, not a folder")
            if not self._fs.mkdirs(self._Path(status)):
                raise OutputPathError(f"cannot write to the output location {self.base!r} "
                                      f"('output.path'): could not create {status}")
            probe = self.path("_status", f"_probe-{uuid.uuid4().hex[:12]}")
            self.write_text(probe, "")
            self.delete(probe)
        except OutputPathError:
            raise
        except Exception as err:  # noqa: BLE001 - any refusal of the file system
            raise OutputPathError(f"cannot write to the output location {self.base!r} "
                                  f"('output.path'): {one_line(err)}") from None

    # -- the run's outputs ---------------------------------------------------------
    def staging(self, run_date: dt.date) -> str:
        """A fresh temporary folder for this run's outputs."""
        p = self.path(f"_tmp-run_date={run_date.isoformat()}-{uuid.uuid4().hex[:12]}")
        self._fs.mkdirs(self._Path(p))
        return p

    def write_metrics(self, folder: str, long_rows: list[dict[str, Any]]) -> None:
        """Write ``metrics.parquet`` (one file; result rows are few)."""
        fault_point("publish:metrics")
        df = self.spark.createDataFrame(
            [tuple(r[c] for c in ROW_COLUMNS) for r in long_rows], schema=rows_schema()
        )
        df.coalesce(1).write.mode("overwrite").parquet(f"{folder}/metrics.parquet")
        fault_point("publish:staging")

    def publish(self, staging: str, run_date: dt.date) -> str:
        """Move ``staging`` to ``run_date=D`` (replacing an earlier run).

        ``_SUCCESS`` is written into the staging folder first, so a ``run_date=D``
        folder never exists without it. The earlier run is renamed aside
        (``_old-run_date=D-*``) and deleted once the new one is in place; a run killed
        between the two renames leaves the aside copy, which the next run of the date
        puts back (:meth:`recover`).
        """
        final = self.path(f"run_date={run_date.isoformat()}")
        self.write_text(f"{staging}/_SUCCESS", "")
        old = None
        if self.exists(final):
            old = self.path(f"_old-run_date={run_date.isoformat()}-{uuid.uuid4().hex[:12]}")
            self.rename(final, old)
        try:
            fault_point("publish:between_renames")
            self.rename(staging, final)
        except BaseException:  # a failed rename or a signal: put the previous run back
            if old is not None:
                self.rename(old, final)
            raise
        if old is not None:
            self.delete(old)
        return final

    def _children(self, prefix: str) -> list[str]:
        if not self.exists(self.base):
            return []
        return sorted(self.path(st.getPath().getName())
                      for st in self._fs.listStatus(self._Path(self.base))
                      if st.getPath().getName().startswith(prefix))

    def recover(self, run_date: dt.date) -> list[str]:
        """Undo what a killed run of ``run_date`` left behind (call it holding the lock).

        A previous run renamed aside and not replaced is put back; staging folders and
        aside copies of the date that are no longer needed are deleted.

        Returns
        -------
        list[str]
            What was done, one line per action (for the log).
        """
        d = run_date.isoformat()
        final = self.path(f"run_date={d}")
        done = []
        aside = self._children(f"_old-run_date={d}-")
        if aside and not self.exists(f"{final}/_SUCCESS"):
            if self.exists(final):  # a half-moved folder without its marker
                self.delete(final)
            self.rename(aside[-1], final)
            done.append(f"restored the previous run of {d} from {aside[-1]}")
            aside = aside[:-1]
        for p in [*aside, *self._children(f"_tmp-run_date={d}-")]:
            self.delete(p)
            done.append(f"deleted the leftover {p}")
        return done

    @contextlib.contextmanager
    def lock(self, run_date: dt.date, *, run_id: str, stale_after_s: float) -> Iterator[None]:
        """Hold ``_status/run_date=D.lock`` while a run writes the date.

        The lock file appears atomically with its record (the run id, host, pid and
        start time; :meth:`_take` says how). Another run of the same date fails fast
        with :class:`~fairspark.errors.RunLockedError` (exit 2), unless the lock is
        stale: older than ``stale_after_s`` or left by a process that no longer exists
        on this host.
        """
        path = self.path("_status", f"run_date={run_date.isoformat()}.lock")
        me = _holder(run_id)
        held = self._take(path, me, stale_after_s)
        if held is not None:
            from fairspark.errors import RunLockedError

            raise RunLockedError(
                f"run date {run_date.isoformat()} is being written by another run "
                f"({_who(held)}); lock file {path}; it is taken over once that process is "
                f"gone or after {stale_after_s:g} s")
        try:
            fault_point("lock:acquired")
            yield
        finally:
            self._release(path, run_id)

    @contextlib.contextmanager
    def states_lock(self, definition: str, *, run_date: dt.date, stale_after_s: float,
                    wait_s: float) -> Iterator[None]:
        """Hold ``_status/states_definition=H.lock`` while a run reads and writes the
        window's states of definition ``H`` (``<output>/_states/definition=H``).

        Runs of different dates share a definition's states; while one of them cleans up,
        stages or publishes a state, or reads the stored samples, another waits for the
        lock (polling once a second, a warning in the log when it starts waiting), up to
        ``wait_s`` seconds, then fails with :class:`~fairspark.errors.StatesLockedError`
        (exit 2) naming the holder. A stale lock (as for :meth:`lock`) is taken over.
        """
        import time as _time

        path = self.path("_status", f"states_definition={definition}.lock")
        me = {**_holder(uuid.uuid4().hex), "run_date": run_date.isoformat()}
        deadline = _time.monotonic() + wait_s
        waited = False
        while (held := self._take(path, me, stale_after_s)) is not None:
            left = deadline - _time.monotonic()
            if left <= 0:
                from fairspark.errors import StatesLockedError

                raise StatesLockedError(
                    f"the window's states (definition {definition}) are being written by "
                    f"another run (run date {held.get('run_date')}, {_who(held)}); waited "
                    f"{wait_s:g} s ('output.states_wait_s'); lock file {path}; run again "
                    "once that run is past its window preparation")
            if not waited:
                log.warning("window: waiting for the states (definition %s): another run "
                            "(run date %s, %s) is writing them; lock file %s; waiting up to "
                            "%g s ('output.states_wait_s')", definition,
                            held.get("run_date"), _who(held), path, wait_s)
                waited = True
            _time.sleep(min(1.0, left))
        if waited:
            log.warning("window: took the states lock %s", path)
        try:
            fault_point("states:locked")
            yield
        finally:
            self._release(path, me["run_id"])

    def _take(self, path: str, me: dict[str, Any], stale_after_s: float
              ) -> dict[str, Any] | None:
        """Create the lock file ``path`` holding ``me``; ``None`` when taken, else the
        record of the live run that holds it (a stale lock is deleted and taken).

        Two runs that try at the same instant must not both win. Hadoop's local file
        system cannot promise that: its ``create(path, overwrite=false)`` checks that
        the file is absent and then opens it for writing, so two processes can both
        "create" it; and the file is empty until the record is written, which a run
        reading it in between took for a stale lock and deleted. Both runs then held
        the date. On a local disk the lock is therefore plain file I/O: the record is
        written to a temporary file and hard-linked to ``path`` (``link`` fails when
        ``path`` exists, and the file never exists without its record), and the whole
        check-and-take (and the release) runs under an exclusive ``flock`` of the
        ``_status`` folder, so that a stale lock is taken over by one run only. The
        kernel drops that ``flock`` when its process dies. Elsewhere (HDFS) the file
        system's create without overwrite is atomic.
        """
        local = self._local(path)
        with _folder_locked(local.parent if local is not None else None):
            if self._create_new(path, json.dumps(me)):
                return None
            held = self._lock_holder(path)
            if not _stale(held, stale_after_s):
                return held
            if local is not None:
                local.unlink(missing_ok=True)
            else:
                self.delete(path)
            if self._create_new(path, json.dumps(me)):
                return None
            return self._lock_holder(path)  # another run took the stale lock first

    def _release(self, path: str, run_id: str) -> None:
        local = self._local(path)
        with contextlib.suppress(Exception), _folder_locked(
                local.parent if local is not None else None):
            if self._lock_holder(path).get("run_id") == run_id:
                if local is not None:
                    local.unlink(missing_ok=True)
                else:
                    self.delete(path)

    def _create_new(self, path: str, text: str) -> bool:
        """Create ``path`` with ``text`` unless it exists; atomic, the text included, on a
        local disk (a hard link of a written temporary file), atomic where the file
        system's create without overwrite is elsewhere."""
        local = self._local(path)
        if local is not None:
            return _create_local(local, text)
        try:
            stream = self._fs.create(self._Path(path), False)
        except Exception as err:  # FileAlreadyExistsException arrives through py4j
            if "FileAlreadyExists" in str(err) or self.exists(path):
                return False
            raise  # an unwritable output location is a crash (exit 1), not a lock
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
        return True

    def _lock_holder(self, path: str) -> dict[str, Any]:
        """The record of the lock file ``path``: ``{}`` when it is gone; a record that
        cannot be read (empty, cut short) is ``{"modified_unix": ...}``, stale only by
        the file's age (:func:`_stale`)."""
        local = self._local(path)
        if local is not None:
            return read_lock_record(local)
        try:
            p = self._Path(path)
            modified = self._fs.getFileStatus(p).getModificationTime() / 1000.0
        except Exception:  # noqa: BLE001 - gone (released) or unreachable
            return {}
        try:
            stream = self._fs.open(p)
            try:
                data = bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
            finally:
                stream.close()
            return _record(data.decode("utf-8"), modified)
        except Exception:  # noqa: BLE001 - gone since: free
            return {}


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


def summary_json(summary: dict[str, Any]) -> str:
    """Serialise the summary (:func:`fairspark._values.json_text`: NaN -> null,
    infinities -> "inf"/"-inf", dates -> ISO strings)."""
    from fairspark._values import json_text

    return json_text(summary, indent=2, sort_keys=False)
