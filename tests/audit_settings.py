"""Each audit's test settings: small sections that run in seconds (test-only, so they
live here and not in the audits' specs).

``SMALL``: small but real settings of an audit's config section with which a run on a
few hundred rows takes seconds (the contract tests, and the tests that run every
audit, run each audit with them). ``SHRINK``: settings laid over an example config's
section (``conf/``, the demo) so that the example runs in seconds on the demo data. An
audit not listed (a plugin) runs at its defaults.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SHRINK", "SMALL", "shrink_params", "small_params"]

SMALL: dict[str, dict[str, Any]] = {
    "group": {},
    "hfm": {"method": "certified"},
    "mdfa": {"splits": 2, "sample_rows": 400, "epochs": 2},
    "correlation": {"models": ["logistic_regression"], "n_samples": 40, "rounds": 2, "k": 60},
    "toy": {"ci_level": 0.9},  # tests/toy_audit, when a test registers it
}

SHRINK: dict[str, dict[str, Any]] = {
    "hfm": {"max_rows": 3000},
    "mdfa": {"splits": 2, "sample_rows": 2000, "epochs": 3},
    "correlation": {"n_samples": 40, "rounds": 2, "k": 80},
}


def small_params(audit: str) -> dict[str, Any]:
    """Audit ``audit``'s small settings (a copy; empty for an audit not listed)."""
    return {k: (list(v) if isinstance(v, list) else v)
            for k, v in SMALL.get(audit, {}).items()}


def shrink_params(audit: str) -> dict[str, Any]:
    """The settings that shrink audit ``audit``'s example section (a copy)."""
    return dict(SHRINK.get(audit, {}))
