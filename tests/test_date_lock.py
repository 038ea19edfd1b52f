"""The date's (and the states') lock file has one holder, however two runs interleave.

Two runs of one date started together once both took the lock: Hadoop's local
``create(path, overwrite=false)`` checks that the file is absent and then opens it (both
runs "created" it), and a lock file read before its record was written was ``{}``,
judged stale and deleted by the other run. Each case here fixes one interleaving
instead of hoping a race shows it: a lock file without its record, a run judging a
stale lock while another is at the same step, and many takes at once.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from fairspark import outputs
from fairspark.outputs import OutputLocation, _holder, read_lock_record

DATE_LOCK = "run_date=2026-11-29.lock"


@pytest.fixture
def base(tmp_path) -> Path:
    (tmp_path / "_status").mkdir()
    return tmp_path


def _loc(spark, base: Path) -> OutputLocation:
    return OutputLocation(spark, str(base))


def test_a_lock_file_without_its_record_is_held_not_stale(spark, base):
    # what another run's lock looked like between its create and its write
    lock = base / "_status" / DATE_LOCK
    lock.write_text("")
    held = _loc(spark, base)._take(str(lock), _holder("me"), 6 * 3600)
    assert held is not None and "modified_unix" in held, held
    assert lock.read_text() == ""            # not deleted, not overwritten
    assert "without a readable record" in outputs._who(held)


def test_a_lock_file_without_its_record_is_stale_by_its_age(spark, base):
    lock = base / "_status" / DATE_LOCK
    lock.write_text("{")
    old = time.time() - 7 * 3600
    os.utime(lock, (old, old))
    assert _loc(spark, base)._take(str(lock), _holder("me"), 6 * 3600) is None
    assert json.loads(lock.read_text())["run_id"] == "me"


def test_the_lock_file_never_exists_without_its_record(spark, base, monkeypatch):
    # at the instant the lock file appears it already holds the whole record
    lock = base / "_status" / DATE_LOCK
    seen: list[str] = []
    real_link = os.link

    def link(src, dst, *a, **k):
        real_link(src, dst, *a, **k)
        seen.append(Path(dst).read_text())

    monkeypatch.setattr(outputs.os, "link", link)
    assert _loc(spark, base)._take(str(lock), _holder("me"), 6 * 3600) is None
    assert len(seen) == 1 and json.loads(seen[0])["run_id"] == "me", seen
    assert [p.name for p in (base / "_status").iterdir()] == [DATE_LOCK]  # no temp file


def test_a_stale_lock_is_judged_and_taken_by_one_run_at_a_time(spark, base, monkeypatch):
    """While one run judges a stale lock (and deletes and takes it), no other process
    can take the folder's guard: the other run's whole take waits for it."""
    import fcntl

    lock = base / "_status" / DATE_LOCK
    lock.write_text(json.dumps({"run_id": "dead", "host": socket.gethostname(),
                                "pid": 2**22 + 12345, "started_unix": time.time()}))
    guarded: list[bool] = []
    real_stale = outputs._stale

    def stale(held, after):
        fd = os.open(base / "_status", os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            guarded.append(False)
        except BlockingIOError:
            guarded.append(True)
        finally:
            os.close(fd)
        return real_stale(held, after)

    monkeypatch.setattr(outputs, "_stale", stale)
    assert _loc(spark, base)._take(str(lock), _holder("me"), 6 * 3600) is None
    assert guarded == [True], guarded
    assert json.loads(lock.read_text())["run_id"] == "me"
    # the release is guarded too, and removes only the holder's own lock
    _loc(spark, base)._release(str(lock), "someone else")
    assert lock.exists()
    _loc(spark, base)._release(str(lock), "me")
    assert not lock.exists()


def test_many_takes_at_once_have_one_winner(spark, base):
    """Threads with their own Py4J connections and their own descriptors of the
    ``_status`` folder (a ``flock`` is per descriptor, as between processes) take one
    lock at once, 60 times, half of them over a stale lock; one wins each time. (The
    code before the fix let two win in about 1 trial in 7.)"""
    lock = base / "_status" / DATE_LOCK
    locs = [_loc(spark, base) for _ in range(3)]
    doubles = []
    for trial in range(60):
        if trial % 2:
            lock.write_text(json.dumps({"run_id": "dead", "host": socket.gethostname(),
                                        "pid": 2**22 + 12345, "started_unix": time.time()}))
        start = threading.Barrier(len(locs))
        won: list[int] = []

        def take(i: int, start: threading.Barrier, won: list[int]) -> None:
            start.wait()
            if locs[i]._take(str(lock), _holder(f"run{i}"), 6 * 3600) is None:
                won.append(i)

        threads = [threading.Thread(target=take, args=(i, start, won))
                   for i in range(len(locs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        holder = read_lock_record(lock).get("run_id")
        if len(won) != 1 or holder != f"run{won[0]}":
            doubles.append((trial, won, holder))
        lock.unlink()
    assert doubles == []
