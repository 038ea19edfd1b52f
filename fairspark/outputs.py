"""Writing a run's outputs and publishing them atomically.

A date's outputs are written under ``<output>/_tmp-run_date=<D>-<uuid>/``, then
published by renaming that folder to ``<output>/run_date=<D>/`` (a previous folder
for the same date is first moved aside and deleted only after the new one is in
place), and a ``_SUCCESS`` marker is written last. On a classic session the
file-system work goes through Hadoop's ``FileSystem`` so the same code publishes to a
local disk, HDFS or an object store. A Spark Connect session has no JVM gateway: the
client does the file operations itself (plain file I/O) on an output folder it can
reach, a local path or a ``file:`` URI that the server writes where the client sees it
(checked by :meth:`OutputLocation.check_writable` before any work); any other output
location is refused (exit 2) with ``output.table`` named as the way on such a session.

Paths are literal: a path is never read as a glob (:func:`literal_path` escapes what
Spark's readers would expand).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from fairspark._locks import (  # noqa: F401 - the lock helpers, importable from here
    _create_local,
    _folder_locked,
    _holder,
    _locked,
    _record,
    _stale,
    _utc,
    _who,
    check_not_locked,
    read_lock_record,
)
from fairspark._testing import fault_point
from fairspark._values import nan_to_none
from fairspark.errors import FairsparkError, FairsparkInputError
from fairspark.numbers import fmt_setting

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from fairspark.audits.base import MetricRow

__all__ = ["OutputLocation", "OutputPathError", "OutputWriteError", "ROW_COLUMNS",
           "check_no_overlap", "check_not_locked", "literal_path", "one_line",
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


#: the characters Hadoop's glob patterns (and so Spark's readers) give a meaning to
_GLOB_CHARS = re.compile(r"([\\\[\]{}*?])")


def literal_path(path: str) -> str:
    """``path`` with Hadoop's glob characters escaped, for Spark's readers.

    ``spark.read.parquet(p)`` expands ``p`` as a glob pattern when it holds ``[``,
    ``{``, ``*``, ``?`` or ``\\``: an output folder named ``runs[ab]`` would read
    ``runsa``/``runsb``, or nothing. Escaped, the pattern matches the path itself.
    """
    return _GLOB_CHARS.sub(r"\\\1", path)


def _parts(path: str) -> tuple[str, str, tuple[str, ...]]:
    """(scheme, authority, normalised path segments) of a path or URI; a path without
    a scheme is a local one, made absolute."""
    parsed = urlparse(path)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file"):
        local = parsed.path if scheme else path
        return "file", "", tuple(p for p in os.path.normpath(os.path.abspath(local)).split("/")
                                 if p)
    segs = [p for p in parsed.path.split("/") if p and p != "."]
    return scheme, parsed.netloc.lower(), tuple(segs)


def _working_folder(name: str) -> bool:
    """A hidden folder of the output location that no run writes or deletes (the demo's
    ``_input``): an input there neither receives outputs nor is touched by a rerun."""
    ours = ("_status", "_states", "_tmp-", "_old-")
    return name.startswith(("_", ".")) and not name.startswith(ours)


def check_no_overlap(output: str, inputs: dict[str, str]) -> None:
    """Raise :class:`OutputPathError` when the output folder is an input path, lies
    inside one, or holds one.

    A run writes ``run_date=D/`` and ``_status/`` under its output folder: inside the
    input they become part of the next night's table (and an input inside the output
    is deleted by a rerun). Checked before any work. An input in a hidden folder of the
    output that no run writes (``<output>/_input/``, where the demo keeps its scored
    table) is allowed: nothing of a run lands there.

    Parameters
    ----------
    output:
        ``output.path``.
    inputs:
        Config key -> path of every path the run reads (``input.path``, ...).
    """
    out = _parts(output)
    for key, path in inputs.items():
        if not path:
            continue
        inp = _parts(path)
        if out[:2] != inp[:2]:
            continue
        o, i = out[2], inp[2]
        how = ("is" if o == i else "is inside" if o[:len(i)] == i
               else "contains" if i[:len(o)] == o and not _working_folder(i[len(o)])
               else None)
        if how is not None:
            raise OutputPathError(
                f"the output location {output!r} ('output.path') {how} the input "
                f"{path!r} ('{key}'): the outputs would land in the table the next run "
                "reads (or a rerun would delete the input); choose an output folder "
                "outside the input")


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
    """The output folder of a run.

    On a classic session it is reached through Hadoop's FileSystem API (any store
    Hadoop reaches); on a Spark Connect session through plain file I/O by the client
    (a local path or ``file:`` URI only: anything else raises
    :class:`OutputPathError`, exit 2, naming ``output.path`` and ``output.table``).
    """

    def __init__(self, spark: SparkSession, base: str):
        from fairspark.session import is_connect

        self.spark = spark
        if not urlparse(base).scheme:
            base = os.path.abspath(base)
        self.base = base.rstrip("/")
        #: the client does the file operations (a Connect session: no JVM gateway)
        self.client_side = is_connect(spark)
        if self.client_side:
            if self._local(self.base) is None:
                raise OutputPathError(
                    f"the output location {self.base!r} ('output.path') cannot be reached "
                    "from this Spark Connect client: on a Connect session the client "
                    "publishes the outputs itself (renames, locks, the status file) and "
                    "reaches only a local path or a file: URI that the server writes where "
                    "the client sees it; write the rows to a metastore table with "
                    "'output.table' and point 'output.path' at a folder this machine "
                    "shares with the server (docs/operations.md, 'Outputs on each session "
                    "kind')")
            self._jvm = self._Path = self._fs = None
            return
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
        if self.client_side:
            return self._client(path).exists()
        return bool(self._fs.exists(self._Path(path)))

    def is_dir(self, path: str) -> bool:
        """Is ``path`` a folder?"""
        if self.client_side:
            return self._client(path).is_dir()
        p = self._Path(path)
        return bool(self._fs.exists(p) and self._fs.getFileStatus(p).isDirectory())

    def mkdirs(self, path: str) -> bool:
        """Create the folder ``path`` and its parents; whether it is a folder now."""
        if self.client_side:
            self._client(path).mkdir(parents=True, exist_ok=True)
            return True
        return bool(self._fs.mkdirs(self._Path(path)))

    def entries(self, folder: str) -> list[tuple[str, bool]]:
        """(name, is a folder) of what ``folder`` holds, sorted by name; ``[]`` when
        it does not exist. Names are listed, never matched as a pattern."""
        if not self.exists(folder):
            return []
        if self.client_side:
            with os.scandir(self._client(folder)) as it:
                return sorted((e.name, e.is_dir()) for e in it)
        return sorted((st.getPath().getName(), bool(st.isDirectory()))
                      for st in self._fs.listStatus(self._Path(folder)))

    def delete(self, path: str) -> None:
        """Delete ``path`` recursively (no error when it is missing)."""
        if self.client_side:
            local = self._client(path)
            if local.is_dir() and not local.is_symlink():
                shutil.rmtree(local, ignore_errors=True)
            else:
                local.unlink(missing_ok=True)
            return
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
        if self.client_side:
            dst_local = self._client(dst)
            if dst_local.exists():  # as Hadoop's rename: never onto an existing path
                raise OSError(f"could not rename {src} to {dst}: it exists")
            os.rename(self._client(src), dst_local)
            return
        if not self._fs.rename(self._Path(src), self._Path(dst)):
            raise OSError(f"could not rename {src} to {dst}")

    def _local(self, path: str) -> Path | None:
        """``path`` on this machine's disk, or ``None`` for another file system."""
        parsed = urlparse(path)
        if parsed.scheme in ("", "file"):
            return Path(parsed.path if parsed.scheme else path)
        return None

    def _client(self, path: str) -> Path:
        """``path`` on the client's disk (a Connect session's output location is local)."""
        local = self._local(path)
        if local is None:  # pragma: no cover - refused in __init__
            raise OutputPathError(f"{path!r} is not a local path ('output.path')")
        return local

    def read_parquet(self, path: str) -> Any:
        """``spark.read.parquet`` of ``path`` read literally (never as a glob)."""
        return self.spark.read.parquet(literal_path(path))

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
        """Read a small UTF-8 text file (the file itself: never a glob)."""
        local = self._local(path)
        if local is not None:
            return local.read_text(encoding="utf-8")
        stream = self._fs.open(self._Path(path))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
                         ).decode("utf-8")
        finally:
            stream.close()

    def list_run_dates(self) -> list[str]:
        """The published run dates (folders ``run_date=D`` with a ``_SUCCESS`` marker)."""
        return sorted(name.split("=", 1)[1] for name, is_dir in self.entries(self.base)
                      if is_dir and name.startswith("run_date=")
                      and self.exists(self.path(name, "_SUCCESS")))

    def check_writable(self) -> None:
        """Raise :class:`OutputPathError` unless the run can write under the base folder.

        Checked before the input is read: the base is a folder (or can be created) and
        ``_status`` can be created in it. The message is one line naming the path and
        the cause, without Java frames.
        """
        status = self.path("_status")
        try:
            if self.exists(self.base) and not self.is_dir(self.base):
                raise OutputPathError(f"cannot write to the output location {self.base!r} "
                                      "('output.path'): it is a file, not a folder")
            if not self.mkdirs(status):
                raise OutputPathError(f"cannot write to the output location {self.base!r} "
                                      f"('output.path'): could not create {status}")
            probe = self.path("_status", f"_probe-{uuid.uuid4().hex[:12]}")
            self.write_text(probe, "")
            self.delete(probe)
            if self.client_side:
                self._check_server_writes_here()
        except OutputPathError:
            raise
        except Exception as err:  # noqa: BLE001 - any refusal of the file system
            raise OutputPathError(f"cannot write to the output location {self.base!r} "
                                  f"('output.path'): {one_line(err)}") from None

    def _check_server_writes_here(self) -> None:
        """On a Connect session: the server writes a marker under ``_status`` and the
        client must see it (then deletes it); else :class:`OutputPathError` (exit 2).

        The server writes the Parquet outputs and the client renames them into place:
        a server on another machine writes to its own disk, where the client's rename
        would find nothing after all the work.
        """
        token = uuid.uuid4().hex
        probe = self.path("_status", f"_probe-server-{token[:12]}")
        try:
            self.spark.createDataFrame([(token,)], "value string").coalesce(1) \
                .write.mode("overwrite").text(probe)
            folder = self._client(probe)
            seen = folder.is_dir() and any(
                token in f.read_text(encoding="utf-8", errors="replace")
                for f in folder.iterdir() if f.is_file() and not f.name.startswith((".", "_")))
        finally:
            self.delete(probe)
        if not seen:
            raise OutputPathError(
                f"the output location {self.base!r} ('output.path') is not shared by this "
                "Spark Connect client and its server: a marker the server wrote there is "
                "not on this machine (the server runs elsewhere), so the outputs could not "
                "be published all or nothing; write the rows to a metastore table with "
                "'output.table' and point 'output.path' at a folder both machines share "
                "(docs/operations.md, 'Outputs on each session kind')")

    # -- the run's outputs ---------------------------------------------------------
    def staging(self, run_date: dt.date) -> str:
        """A fresh temporary folder for this run's outputs."""
        p = self.path(f"_tmp-run_date={run_date.isoformat()}-{uuid.uuid4().hex[:12]}")
        self.mkdirs(p)
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
        return sorted(self.path(name) for name, _ in self.entries(self.base)
                      if name.startswith(prefix))

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
            raise _locked(run_date, held, path, stale_after_s)
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
                    f"{fmt_setting(wait_s)} s ('output.states_wait_s'); lock file {path}; run "
                    "again once that run is past its window preparation")
            if not waited:
                log.warning("window: waiting for the states (definition %s): another run "
                            "(run date %s, %s) is writing them; lock file %s; waiting up to "
                            "%s s ('output.states_wait_s')", definition,
                            held.get("run_date"), _who(held), path, fmt_setting(wait_s))
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
            return _record(self.read_text(path), modified)
        except Exception:  # noqa: BLE001 - gone since: free
            return {}


