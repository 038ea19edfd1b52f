"""Exceptions raised by fairspark.

Run-level problems (bad config, bad input) derive from :class:`FairsparkInputError`
and end a run with exit code 2 before any output is written. Audit-level problems
raise :class:`AuditError`; the runner records the audit as ``failed`` with the
message and the other audits go on (exit code 4).
"""

from __future__ import annotations

import re
from typing import Any


class FairsparkError(Exception):
    """Base class of every error fairspark raises on purpose.

    Examples
    --------
    >>> issubclass(AuditError, FairsparkError), issubclass(ConfigError, FairsparkError)
    (True, True)
    """


class FairsparkInputError(FairsparkError, ValueError):
    """A run cannot start: the config or the input table is wrong (exit code 2).

    Examples
    --------
    Every config and input error is one, and a ``ValueError``:

    >>> [issubclass(e, FairsparkInputError) and issubclass(e, ValueError) for e in (
    ...     ConfigError, MissingColumnError, ColumnTypeError, EmptyInputError,
    ...     InvalidValueError)]
    [True, True, True, True, True]
    """


class ConfigError(FairsparkInputError):
    """The YAML config is malformed, has an unknown key or a value of the wrong type."""


class MissingColumnError(FairsparkInputError):
    """A configured column is not in the input table.

    Examples
    --------
    >>> err = MissingColumnError("income", "a feature", ["age", "sex"])
    >>> print(err)
    column 'income' (configured as a feature) is not in the input table; available columns: age, sex
    >>> err.column, err.available
    ('income', ['age', 'sex'])
    """

    def __init__(self, column: str, role: str, available: list[str]):
        self.column = column
        self.role = role
        self.available = list(available)
        shown = ", ".join(self.available[:40]) + (" ..." if len(self.available) > 40 else "")
        renamed = [c for c in self.available if re.fullmatch(re.escape(column) + r"\d+", c)]
        hint = (f"; the CSV header names {column!r} more than once and Spark renamed the "
                f"copies to {', '.join(renamed)}: configure one of those names or rename the "
                "header" if len(renamed) >= 2 else "")
        super().__init__(
            f"column {column!r} (configured as {role}) is not in the input table{hint}; "
            f"available columns: {shown}"
        )


class ColumnTypeError(FairsparkInputError):
    """A configured column has a type that its role cannot use."""


class EmptyInputError(FairsparkInputError):
    """No rows are left to audit (after the `where` filter or after dropping nulls)."""


class InvalidValueError(FairsparkInputError):
    """A column holds values its role cannot use (NaN/inf features, unknown labels)."""


class JavaVersionError(FairsparkInputError):
    """`java` is missing or older than Spark 4 needs."""


class WorkerPythonError(FairsparkInputError):
    """Spark's Python workers cannot import fairspark (their interpreter lacks it)."""


class NotASparkDataFrameError(FairsparkInputError, TypeError):
    """The notebook API was given something other than a Spark DataFrame."""


class AuditError(FairsparkError):
    """An audit cannot run on this data; recorded as ``status=failed`` (exit code 4)."""


class RunLockedError(FairsparkInputError):
    """Another run is writing the same output date right now (exit 2, nothing written)."""


class StatesLockedError(FairsparkInputError):
    """Another run held the window's states (of this definition) for longer than this run
    waits for them, ``output.states_wait_s`` (exit 2, nothing written; this run's status
    records the failure)."""


class StateCorruptError(FairsparkInputError):
    """A window's stored state of a partition cannot be read (exit 2, nothing written).

    The message names the state's path and the ``--restate <date>`` that aggregates
    the partition again and replaces it.
    """


class InputReadError(FairsparkInputError):
    """The input table cannot be read: a corrupt or truncated file, a missing path."""


#: Spark error classes (and Java exceptions) that mean the input files cannot be read
_READ_FAILURES = re.compile(
    r"\[(FAILED_READ_FILE[\w.]*|PATH_NOT_FOUND|UNABLE_TO_INFER_SCHEMA|CANNOT_READ_FILE_FOOTER)\]"
    r"|ParquetDecodingException|is not a Parquet file|CorruptedFileException"
    r"|ORC[\w.]*Exception: Malformed"
)


def input_read_error(err: BaseException, *, source: str) -> InputReadError | None:
    """An :class:`InputReadError` for a Spark error that says the input is unreadable.

    Returns ``None`` for any other error. The message keeps only the first line that
    names the cause (Spark's error class line), not the Java trace.
    """
    text = str(err)
    m = _READ_FAILURES.search(text)
    if not m:
        return None
    line = next((ln.strip() for ln in text.splitlines() if m.group(0) in ln), m.group(0))
    line = re.sub(r"^(?::\s*)?(org\.apache\.spark\.)?\w*Exception:\s*", "", line)
    return InputReadError(f"cannot read input {source}: {line[:400]}")


def out_of_memory_hint(err: BaseException) -> str | None:
    """One line naming the setting to raise when a Spark error is an out-of-memory error."""
    text = safe_text(err)
    if "OutOfMemoryError" not in text:
        return None
    return ("Spark ran out of memory (java.lang.OutOfMemoryError); raise "
            "spark.driver.memory for a local run (config key spark.conf, or --set "
            "'spark.conf.spark.driver.memory=16g') or spark.executor.memory on a cluster, "
            "or lower the audits' max_rows")


#: what Py4J and Spark say once the driver's JVM or its SparkContext is going away
_STOPPED_CONTEXT = ("Answer from Java side is empty", "SparkContext was shut down",
                    "Cannot call methods on a stopped SparkContext",
                    'SparkContext.dagScheduler()" is null')


def safe_text(err: BaseException) -> str:
    """``str(err)``, or its type's name when that fails (a Py4J error asks the JVM for
    its text, which raises once the JVM is gone)."""
    try:
        return str(err)
    except Exception:  # noqa: BLE001 - any failure to describe it
        return type(err).__name__


def jvm_gone(err: BaseException, spark: Any = None) -> bool:
    """Whether the Spark driver's JVM is no longer there, after ``err``.

    Py4J cannot reach a JVM that died (an ``OutOfMemoryError`` that Spark's uncaught
    exception handler turned into an exit, a ``kill -9``): every later call raises
    ``ConnectionRefusedError`` or ``Py4JNetworkError``. With ``spark``, the JVM is also
    asked directly (one call), since the error that ended the run may be the Java
    exception of a context that stopped while dying.
    """
    if spark is not None:
        try:  # a JVM still answering while it dies has already stopped its context
            if spark.sparkContext._jsc.sc().isStopped():
                return True
        except Exception:  # noqa: BLE001 - unreachable, whatever the exception
            return True
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        name = type(e).__name__
        if isinstance(e, ConnectionRefusedError) or name == "Py4JNetworkError" or (
                any(t in safe_text(e) for t in _STOPPED_CONTEXT)):
            return True
        e = e.__cause__ or e.__context__
    return False


def jvm_gone_message(driver_memory: str | None = None) -> str:
    """One line for a run whose JVM died: what most likely happened and what to raise."""
    now = f" (now {driver_memory})" if driver_memory else ""
    return ("the Spark driver's JVM died during the run, most often of "
            "java.lang.OutOfMemoryError: Java heap space (see the log above); nothing was "
            "published and an earlier run of the date is intact; raise "
            f"spark.conf.spark.driver.memory{now} or lower the audits' max_rows")


class TimeBudgetExhaustedError(AuditError):
    """An audit saw its time budget run out between steps (``ctx.time_left() <= 0``).

    Raised by the audit after it handed its best result so far to
    ``ctx.report_partial``; the runner publishes that partial result as ``timed_out``,
    exactly as when the runner itself stops the audit at the budget.
    """
