"""Every audit fairspark knows: adding an audit is its package and one line here.

The config builds ``audits.<name>`` sections from the specs, the runner runs them in
this order, and the report, the decision box, the trends, the previous-run read and
gating take everything they know about an audit from its spec.

An audit outside fairspark registers through the ``fairspark.audits`` entry-point
group (``<name> = package.spec:SPEC`` in its distribution's metadata); such specs
run after the built-in ones, in the entry points' name order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from fairspark.audits.spec import AuditSpec
from fairspark.correlation.spec import SPEC as _CORRELATION
from fairspark.group.spec import SPEC as _GROUP
from fairspark.hfm.spec import SPEC as _HFM
from fairspark.mdfa.spec import SPEC as _MDFA

__all__ = ["AUDIT_SPECS", "ENTRY_POINT_GROUP", "get_audit", "get_spec", "specs"]

#: the built-in audits, in run order
AUDIT_SPECS: tuple[AuditSpec, ...] = (_GROUP, _HFM, _MDFA, _CORRELATION)

#: the entry-point group through which another distribution registers an audit
ENTRY_POINT_GROUP = "fairspark.audits"


def _registered() -> list[AuditSpec]:
    """The specs registered through :data:`ENTRY_POINT_GROUP`, by entry-point name."""
    from importlib.metadata import entry_points

    out = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        spec = ep.load()
        if not isinstance(spec, AuditSpec):
            raise TypeError(f"entry point {ep.name} = {ep.value} of group "
                            f"{ENTRY_POINT_GROUP!r} is not an AuditSpec")
        out.append(spec)
    return out


@functools.cache
def specs() -> dict[str, AuditSpec]:
    """Audit name -> spec, in run order (the built-in ones, then the registered ones)."""
    out: dict[str, AuditSpec] = {}
    for spec in (*AUDIT_SPECS, *_registered()):
        if spec.name in out:
            raise ValueError(f"two audits are registered as {spec.name!r}")
        out[spec.name] = spec
    return out


def get_spec(name: str) -> AuditSpec:
    """The spec of audit ``name`` (``KeyError`` for an unknown name)."""
    return specs()[name]


def get_audit(name: str) -> Callable:
    """The entry point ``run(ctx, params)`` of audit ``name``."""
    return get_spec(name).run_fn()
