"""The typed set of statuses and exit codes, in one place.

Every long-format row carries a :class:`Status`; a limit check ends in a
:class:`Verdict`; a run ends with an :class:`ExitCode`. They are ``StrEnum`` /
``IntEnum`` members, so they compare equal to (and serialise as) the plain strings
and integers that ``metrics.parquet``, ``summary.json`` and the shell see.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum, StrEnum
from typing import Any

__all__ = ["ExitCode", "Status", "Verdict", "FAILED_STATUSES", "limit_row_counts",
           "verdict_counts"]


class Status(StrEnum):
    """The status of one result row (``metrics.parquet`` column ``status``).

    ``OK``
        The value was computed as specified.
    ``FAILED``
        It could not be computed on this data (``detail`` says why).
    ``INCONCLUSIVE``
        It was computed but the data cannot support it (too few rows, an interval
        that straddles the limit).
    ``NOT_COMPUTED``
        The quantity is undefined here (an empty denominator); ``value`` is null.
    ``NOT_CERTIFIED``
        An exact search stopped early; ``value`` is an upper bound with its interval.
    ``TIMED_OUT``
        The audit ran past its time budget; the row is its last partial result.
    """

    OK = "ok"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"
    NOT_COMPUTED = "not_computed"
    NOT_CERTIFIED = "not_certified"
    TIMED_OUT = "timed_out"


#: statuses of an audit (in ``summary.json``) that make the run exit with 4
FAILED_STATUSES: frozenset[str] = frozenset({Status.FAILED, Status.TIMED_OUT})


class Verdict(StrEnum):
    """The outcome of one limit check (``limits:`` in the config)."""

    PASSED = "passed"
    VIOLATED = "violated"
    INCONCLUSIVE = "inconclusive"


def verdict_counts(verdicts: Iterable[str]) -> dict[str, int]:
    """The one count of limit checks printed everywhere (``summary.json``'s ``limits``,
    the banner, the decision box, the Limits section, the CLI's closing lines):
    ``checks`` and the number ``violated``, ``inconclusive`` and ``passed``.

    Parameters
    ----------
    verdicts:
        The verdict of each gating check (a ``Check.verdict`` or a limits row's
        ``status``; pooled views are not gating checks and are left out by the caller).

    Returns
    -------
    dict of str to int
    """
    vs = [str(v) for v in verdicts]
    return {"checks": len(vs), "violated": vs.count(Verdict.VIOLATED),
            "inconclusive": vs.count(Verdict.INCONCLUSIVE),
            "passed": vs.count(Verdict.PASSED)}


def limit_row_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """:func:`verdict_counts` of the gating ``audit = limits`` rows of metrics.parquet
    (``params.role`` ``gate``, the default; a pooled view does not count)."""
    import json

    def role(r: Mapping[str, Any]) -> str:
        p = r.get("params")
        if isinstance(p, Mapping):
            return str(p.get("role", "gate"))
        try:
            return str((json.loads(p or "{}") or {}).get("role", "gate"))
        except (TypeError, ValueError):
            return "gate"

    return verdict_counts(r.get("status") for r in rows
                          if r.get("audit") == "limits" and role(r) == "gate")


class ExitCode(IntEnum):
    """Exit codes of a run; precedence ``INPUT > CRASH > AUDIT_FAILED > VIOLATION > OK``."""

    OK = 0
    CRASH = 1
    INPUT = 2
    VIOLATION = 3
    AUDIT_FAILED = 4

    @property
    def meaning(self) -> str:
        """A few words for the status file."""
        return {0: "ok", 1: "crash", 2: "bad config or input", 3: "limit violated",
                4: "audit failed"}[int(self)]
