"""The audit contract's one description of an audit: :class:`AuditSpec`.

Each audit package has a ``spec.py`` with one ``SPEC``; the config, the runner and the
report read everything they need about an audit from it (see
``fairspark.audits.registry``). A spec module imports only the params model, so a
broken method cannot stop the others from loading.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fairspark._params import AuditParams

__all__ = ["AuditSpec", "load_target"]


def load_target(target: str) -> Callable[..., Any]:
    """Import ``"package.module:function"`` and return the function."""
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


@dataclass(frozen=True)
class AuditSpec:
    """What the config, the runner and the report need to know about one audit.

    Attributes
    ----------
    name:
        The audit's name: its config section (``audits.<name>``) and the ``audit``
        column of its rows.
    params:
        Its pydantic params model (a subclass of ``AuditParams``).
    run:
        ``"module:function"``: ``run(ctx, params) -> AuditOutcome``. It computes
        numbers only; report sections come from ``render``.
    render:
        ``"module:function"``: ``render(outcome, *, ctx, params) -> list[ReportSection]``,
        called by the runner inside its own error isolation (a rendering error keeps
        the numbers and marks the section), or ``None`` for no section.
    headlines:
        ``"module:function"``: ``headlines(rows, *, summary) -> list[str]``, the
        verdicts in words at the top of the report, or ``None``.
    headline_metrics:
        The metric names a reader (and a limit) looks at first.
    metrics:
        Every metric name the audit's rows can carry (the ``metric`` column); a limit
        on any other name is a config error.
    title:
        The report title of the audit.
    order:
        Position of its sections in the report (smaller first).
    enabled_by_default:
        Whether a config without the section runs it.
    reads_features:
        Whether the audit reads the feature columns (then preparation counts the
        distinct values of categorical features for their ``max_categories`` check).
    joins_by_key:
        Whether the audit joins rows by ``columns.row_key`` (then preparation refuses
        a repeated key; rows sharing one would be merged).
    """

    name: str
    params: type[AuditParams]
    run: str
    title: str
    order: int
    render: str | None = None
    headlines: str | None = None
    headline_metrics: tuple[str, ...] = field(default_factory=tuple)
    metrics: tuple[str, ...] = field(default_factory=tuple)
    enabled_by_default: bool = False
    reads_features: bool = True
    joins_by_key: bool = False

    def run_fn(self) -> Callable[..., Any]:
        """The audit's entry point."""
        return load_target(self.run)

    def render_fn(self) -> Callable[..., Any] | None:
        """The section renderer, or ``None``."""
        return load_target(self.render) if self.render else None

    def headlines_fn(self) -> Callable[..., Any] | None:
        """The headline function, or ``None``."""
        return load_target(self.headlines) if self.headlines else None
