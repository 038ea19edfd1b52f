"""Name -> audit entry point. Imported lazily so one broken method cannot break the rest."""

from __future__ import annotations

import importlib
from collections.abc import Callable

__all__ = ["AUDITS", "get_audit"]

#: audit name -> "module:function" taking (ctx: AuditContext, params) -> AuditOutcome
AUDITS: dict[str, str] = {
    "group": "fairspark.audits.group:run",
    "hfm": "fairspark.hfm.audit:run",
    "mdfa": "fairspark.mdfa.audit:run",
    "correlation": "fairspark.correlation.audit:run",
}


def get_audit(name: str) -> Callable:
    """Import and return the entry point of audit ``name``."""
    module, func = AUDITS[name].split(":")
    return getattr(importlib.import_module(module), func)
