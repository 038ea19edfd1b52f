"""What the driver's heap can hold, checked before a scan that could exhaust it.

On a classic session with a ``local[n]`` master, Spark's tasks run inside the driver
JVM: every task that reads a Parquet file holds the compressed column chunks of its
current row group on the heap (Parquet reads a row group's chunks whole) and the
decoded column vectors. A row group is never split between tasks. So a scan needs

    BASE_BYTES + tasks x (largest row group's chunk bytes over the columns read) x SCAN_FACTOR

of heap, where ``tasks`` is the number of tasks reading at once (the task slots, at
most the number of row groups). Measured on a 1 GB driver with two tasks (Parquet
files of 48 doubles in two row groups, group + HFM, ``jcmd GC.class_histogram``):
groups of 222 MiB were scanned and encoded (peak within the heap), groups of 298 MiB
killed the JVM in the preparation's scan (``OutOfMemoryError``). ``BASE_BYTES`` 200 MiB
(the session's own live heap and the collector's headroom) and ``SCAN_FACTOR`` 1.5
put the line between the two: 866 MiB needed for the first, 1,094 MiB for the second.
The encoding reads the same row groups and caches them ``DISK_ONLY``, which holds no
more once ``spark.serializer.objectStreamReset`` is 1 (``fairspark.session``).

:func:`read_check` compares that with the JVM's maximum heap before the preparation
reads the input (:func:`fairspark.runner._heap_preflight`). When all the task slots
cannot read at once but fewer can, the input is read in that many tasks (a
``coalesce``: slower, the same rows and numbers); when not even one task fits, the
run stops before any output (exit 2, naming ``spark.driver.memory``).

Only what is known is checked: a classic session whose tasks run in this JVM
(``local`` or ``local[n]``; a ``local-cluster`` or cluster master runs them in
executors with their own heaps), and an input of Parquet files this machine can read
(their footers only). Anything else returns ``None``: nothing to check here.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fairspark.numbers import format_number
from fairspark.session import is_connect

log = logging.getLogger("fairspark")

#: the driver's heap that is not the reading tasks' (measured, above)
BASE_BYTES = 200 * 2**20

#: heap a reading task holds per byte of its row group's column chunks (measured, above)
SCAN_FACTOR = 1.5

#: footers read at most (a table of more files is checked on these, the largest found)
MAX_FILES = 2_000


@dataclass(frozen=True)
class ReadCheck:
    """Whether a scan's row groups fit the driver's heap.

    Attributes
    ----------
    heap:
        The driver JVM's maximum heap (bytes).
    tasks:
        Tasks reading at once in the driver JVM (task slots, at most the row groups).
    row_group_bytes:
        The largest row group's compressed bytes over the columns read.
    per_task:
        Heap one reading task holds (``row_group_bytes * factor``).
    """

    heap: float
    tasks: int
    row_group_bytes: int
    per_task: float

    @property
    def need(self) -> float:
        """Heap the scan needs with :attr:`tasks` tasks reading at once."""
        return BASE_BYTES + self.tasks * self.per_task

    @property
    def tasks_that_fit(self) -> int:
        """How many tasks may read at once within the heap (0: not even one)."""
        room = int((self.heap - BASE_BYTES) // self.per_task) if self.per_task > 0 else self.tasks
        return max(0, min(self.tasks, room))

    def reason(self) -> str:
        """One sentence for a user: what does not fit and what to change."""
        return (f"the driver's heap ({_mib(self.heap)} MiB, spark.driver.memory) holds "
                f"{self.tasks_that_fit} of the {self.tasks} task(s) that would read the input "
                f"at once: each reads a Parquet row group of up to "
                f"{_mib(self.row_group_bytes)} MiB of column chunks, about "
                f"{_mib(self.need)} MiB in all; set spark.conf.spark.driver.memory to at "
                f"least {_gib_up(self.need)} or write the input with smaller row groups")


def _mib(n_bytes: float) -> str:
    """Bytes as whole MiB with thousands separators (``1,024``)."""
    return format_number(n_bytes / 2**20, decimals=0, grouped=True, minus="-")


def _gib_up(nbytes: float) -> str:
    """``nbytes`` rounded up to whole GiB, as a Spark memory string (``"2g"``)."""
    return f"{max(1, -(-int(nbytes) // 2**30))}g"


def driver_task_slots(spark) -> int:
    """Task slots inside the driver JVM: ``n`` for a classic ``local[n]`` session (the
    machine's cores for ``local[*]``), else 0 (Connect, ``local-cluster``, a cluster)."""
    if is_connect(spark):
        return 0
    master = str(spark.sparkContext.master)
    if master == "local":
        return 1
    if not master.startswith("local["):
        return 0
    inner = master[len("local["):].split(",")[0].rstrip("]")
    if inner == "*":
        return os.cpu_count() or 1
    try:
        return max(int(inner), 1)
    except ValueError:
        return 0


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def conf_bytes(spark, key: str, default: str, *, unit: str = "") -> float | None:
    """A size setting of the session in bytes (``unit``: of a bare number, ``m`` for
    ``spark.driver.memory``); ``None`` when it does not parse."""
    v = str(spark.conf.get(key, default)).strip().lower()
    m = re.fullmatch(r"(\d+)([kmgt]?)b?", v)
    if not m:
        return None
    return float(int(m.group(1)) * _UNITS[m.group(2) or unit])


def max_result_bytes(spark) -> float:
    """``spark.driver.maxResultSize`` in bytes (``inf`` for 0, no limit)."""
    n = conf_bytes(spark, "spark.driver.maxResultSize", "1g")
    if n is None:
        return 1 << 30
    return math.inf if n == 0 else n


def driver_max_heap(spark) -> float:
    """The driver JVM's maximum heap (bytes) on a classic session."""
    return float(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory())


def _parquet_files(path: str) -> list[Path]:
    """The data files under a local Parquet path (Spark's hidden names left out)."""
    p = Path(path[len("file:"):] if path.startswith("file:") else path)
    if p.is_file():
        return [p]
    out: list[Path] = []
    for root, dirs, files in os.walk(p):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        out += [Path(root) / f for f in sorted(files)
                if not f.startswith(("_", ".")) and not f.endswith(".crc")]
        if len(out) >= MAX_FILES:
            return out[:MAX_FILES]
    return out


def largest_row_group(path: str, columns: Iterable[str] | None, *,
                      exclude: Iterable[str] = ()) -> tuple[int, int] | None:
    """(bytes, row groups): the largest row group's compressed bytes over ``columns``
    (every column but ``exclude`` when ``None``) and the number of row groups, from the
    footers of the Parquet files under ``path``; ``None`` when the path is not local
    Parquet."""
    import pyarrow.parquet as pq

    if "://" in path and not path.startswith("file:"):
        return None
    files = _parquet_files(path)
    if not files:
        return None
    wanted = None if columns is None else set(columns)
    left_out = set(exclude)
    largest, groups = 0, 0
    for f in files:
        try:
            meta = pq.ParquetFile(f).metadata
        except Exception:  # noqa: BLE001 - not Parquet, or not readable here: not checked
            return None
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            top = [rg.column(c).path_in_schema.split(".")[0] for c in range(rg.num_columns)]
            size = sum(rg.column(c).total_compressed_size for c, name in enumerate(top)
                       if (name in wanted if wanted is not None else name not in left_out))
            largest, groups = max(largest, size), groups + 1
    return largest, groups


def read_check(spark, *, path: str, columns: Iterable[str] | None,
               exclude: Iterable[str] = (), factor: float | None = None) -> ReadCheck | None:
    """The heap a scan of ``columns`` (every column but ``exclude`` when ``None``) of
    the Parquet files at ``path`` needs in the driver JVM against what it has, with
    ``factor`` bytes of heap per byte of a row group's chunks (:data:`SCAN_FACTOR` when
    ``None``); ``None`` when the tasks run elsewhere or the files' footers cannot be read
    here."""
    slots = driver_task_slots(spark)
    if slots == 0:
        return None
    found = largest_row_group(path, columns, exclude=exclude)
    if found is None:
        return None
    size, groups = found
    factor = SCAN_FACTOR if factor is None else factor
    return ReadCheck(heap=driver_max_heap(spark), tasks=max(1, min(slots, groups)),
                     row_group_bytes=size, per_task=size * factor)
