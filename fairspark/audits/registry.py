"""Every audit fairspark knows: adding an audit is one line of :data:`AUDIT_SPECS`.

The config builds ``audits.<name>`` sections from the specs, the runner runs them in
this order, and the report takes titles, order and headlines from them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from fairspark.audits.spec import AuditSpec, load_target

__all__ = ["AUDIT_SPECS", "get_audit", "get_spec", "specs"]

#: the module:attribute of each audit's SPEC, in run order
AUDIT_SPECS: tuple[str, ...] = (
    "fairspark.group.spec:SPEC",
    "fairspark.hfm.spec:SPEC",
    "fairspark.mdfa.spec:SPEC",
    "fairspark.correlation.spec:SPEC",
)


@functools.cache
def specs() -> dict[str, AuditSpec]:
    """Audit name -> spec, in run order."""
    out: dict[str, AuditSpec] = {}
    for target in AUDIT_SPECS:
        spec = load_target(target)
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
