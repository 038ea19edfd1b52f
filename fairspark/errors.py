"""Exceptions raised by fairspark.

Run-level problems (bad config, bad input) derive from :class:`FairsparkInputError`
and end a run with exit code 2 before any output is written. Audit-level problems
raise :class:`AuditError`; the runner records the audit as ``failed`` with the
message and the other audits go on (exit code 4).
"""

from __future__ import annotations


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
        super().__init__(
            f"column {column!r} (configured as {role}) is not in the input table; "
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


class AuditError(FairsparkError):
    """An audit cannot run on this data; recorded as ``status=failed`` (exit code 4)."""
