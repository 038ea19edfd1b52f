"""Exceptions raised by fairspark.

Run-level problems (bad config, bad input) derive from :class:`FairsparkInputError`
and end a run with exit code 2 before any output is written. Audit-level problems
raise :class:`AuditError`; the runner records the audit as ``failed`` with the
message and the other audits go on (exit code 4).
"""

from __future__ import annotations

import re


class FairsparkError(Exception):
    """Base class of every error fairspark raises on purpose."""


class FairsparkInputError(FairsparkError, ValueError):
    """A run cannot start: the config or the input table is wrong (exit code 2)."""


class ConfigError(FairsparkInputError):
    """The YAML config is malformed, has an unknown key or a value of the wrong type."""


class MissingColumnError(FairsparkInputError):
    """A configured column is not in the input table."""

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
    text = str(err)
    if "OutOfMemoryError" not in text:
        return None
    return ("Spark ran out of memory (java.lang.OutOfMemoryError); raise "
            "spark.driver.memory for a local run (config key spark.conf, or --set "
            "'spark.conf.spark.driver.memory=16g') or spark.executor.memory on a cluster, "
            "or lower the audits' max_rows")


class TimeBudgetExhaustedError(AuditError):
    """An audit saw its time budget run out between steps (``ctx.time_left() <= 0``).

    Raised by the audit after it handed its best result so far to
    ``ctx.report_partial``; the runner publishes that partial result as ``timed_out``,
    exactly as when the runner itself stops the audit at the budget.
    """
