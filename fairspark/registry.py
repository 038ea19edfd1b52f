"""Every audit fairspark knows: adding an audit is its package and one line here.

The registry sits above the audit packages and below everything that loops over
audits: the config builds its ``audits.<name>`` sections from :func:`specs`, the
runner runs them in this order and hands the same specs to preparation, the report,
the decision box, the trends, the previous-run read and gating. No module below this
one imports it; they receive the specs.

An audit outside fairspark registers through the ``fairspark.audits`` entry-point
group (``<name> = package.spec:SPEC`` in its distribution's metadata); such specs
run after the built-in ones, in the entry points' name order. The entry points are
read on the first :func:`specs` call (not when ``fairspark`` is imported), each one
on its own: one that cannot be loaded, or is no :class:`AuditSpec`, or reuses a
name, is listed by :func:`broken` with the reason, and the other audits run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from fairspark.audits.lines import use_least_decimals
from fairspark.audits.spec import AuditSpec
from fairspark.correlation.spec import SPEC as _CORRELATION
from fairspark.group.spec import SPEC as _GROUP
from fairspark.hfm.spec import SPEC as _HFM
from fairspark.mdfa.spec import SPEC as _MDFA

__all__ = ["AUDIT_SPECS", "ENTRY_POINT_GROUP", "BrokenPlugin", "broken", "get_audit",
           "get_spec", "specs"]

log = logging.getLogger("fairspark")

#: the built-in audits, in run order
AUDIT_SPECS: tuple[AuditSpec, ...] = (_GROUP, _HFM, _MDFA, _CORRELATION)

#: the entry-point group through which another distribution registers an audit
ENTRY_POINT_GROUP = "fairspark.audits"


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point of :data:`ENTRY_POINT_GROUP` that gives no usable audit.

    Attributes
    ----------
    name:
        The entry point's name (the audit name it registers).
    value:
        What it points at (``package.spec:SPEC``).
    reason:
        Why it is not used: the error its import raised, or what is wrong with it.
    """

    name: str
    value: str
    reason: str

    def message(self) -> str:
        """One sentence naming the plugin, what it points at and why it does not run."""
        return (f"audit plugin {self.name!r} (entry point {self.name} = {self.value} of "
                f"group {ENTRY_POINT_GROUP!r}) could not be loaded: {self.reason}")


def _load(ep: object, taken: set[str]) -> AuditSpec | BrokenPlugin:
    """One entry point's spec, or why it gives none (nothing it raises escapes)."""
    name, value = str(getattr(ep, "name", "?")), str(getattr(ep, "value", "?"))
    try:
        spec = ep.load()  # type: ignore[attr-defined]
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            raise
        return BrokenPlugin(name, value, f"{type(err).__name__}: {err}")
    if not isinstance(spec, AuditSpec):
        return BrokenPlugin(name, value, f"it is a {type(spec).__name__}, not an AuditSpec")
    if spec.name in taken:
        return BrokenPlugin(name, value, f"it registers the audit {spec.name!r}, which is "
                            "already registered")
    return spec


@functools.cache
def _loaded() -> tuple[dict[str, AuditSpec], tuple[BrokenPlugin, ...]]:
    """The specs by name (built-in, then registered) and the broken entry points.

    Also hands each audit's ``decimals`` to the one number printer
    (:func:`fairspark.audits.lines.use_least_decimals`), so that its rows print the
    same wherever they appear."""
    from importlib.metadata import entry_points

    out: dict[str, AuditSpec] = {}
    for spec in AUDIT_SPECS:
        if spec.name in out:
            raise ValueError(f"two built-in audits are registered as {spec.name!r}")
        out[spec.name] = spec
    bad: list[BrokenPlugin] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        got = _load(ep, set(out))
        if isinstance(got, BrokenPlugin):
            log.warning("%s", got.message())
            bad.append(got)
        else:
            out[got.name] = got
    use_least_decimals({name: spec.decimals for name, spec in out.items()})
    return out, tuple(bad)


def specs() -> dict[str, AuditSpec]:
    """Audit name -> spec, in run order (the built-in ones, then the registered ones)."""
    return _loaded()[0]


def broken() -> tuple[BrokenPlugin, ...]:
    """The entry points of :data:`ENTRY_POINT_GROUP` that could not be used, by name."""
    return _loaded()[1]


def get_spec(name: str) -> AuditSpec:
    """The spec of audit ``name`` (``KeyError`` for an unknown name)."""
    return specs()[name]


def get_audit(name: str) -> Callable:
    """The entry point ``run(ctx, params)`` of audit ``name``."""
    return get_spec(name).run_fn()
