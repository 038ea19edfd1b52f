"""The audit contract: everything an audit, built in or a plugin, imports from fairspark.

An audit is a package with a ``spec.py`` holding one :class:`AuditSpec` (``SPEC``),
registered in ``fairspark.registry`` (a built-in audit) or through the
``fairspark.audits`` entry-point group of its own distribution (a plugin:
``<name> = package.spec:SPEC``). This face holds what such a package needs:

- the spec and its parameters: :class:`AuditSpec`, :class:`AuditParams`;
- what ``run(ctx, params)`` receives and returns: :class:`AuditContext`,
  :class:`AuditOutcome`, :class:`MetricRow`, :class:`ReportSection`, :class:`Status`,
  :func:`params_json` (a row's ``params`` column), :func:`derive_seed`;
- the decision box's lines: :class:`DecisionInput`, :class:`DecisionLine` and the one
  number formatter :func:`fmt_number` (with :func:`num`, a row's number or ``None``);
- what the preparation hands every audit: :class:`PreparedData`, :class:`AttributeInfo`,
  :class:`InputStats` (:mod:`fairspark.audits.prepared`);
- the toolkit of a report section, imported on first use (matplotlib and Jinja2 are
  heavy): :mod:`fairspark.audits.figures` (figures as ``data:`` URIs) and
  :mod:`fairspark.audits.sections` (:func:`~fairspark.audits.sections.render_template`,
  an audit package's section template).

Nothing here imports the preparation, the registry, the config loader, the runner or
the report: the contract sits below every audit, and they above it
(``tests/test_layers.py``).
"""

from fairspark._params import AuditParams
from fairspark._values import params_json
from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow, ReportSection
from fairspark.audits.lines import DecisionLine, fmt_number, num
from fairspark.audits.prepared import AttributeInfo, InputStats, PreparedData
from fairspark.audits.spec import AuditSpec, DecisionInput
from fairspark.sampling import derive_seed
from fairspark.status import Status

__all__ = [
    "AttributeInfo",
    "AuditContext",
    "AuditOutcome",
    "AuditParams",
    "AuditSpec",
    "DecisionInput",
    "DecisionLine",
    "InputStats",
    "MetricRow",
    "PreparedData",
    "ReportSection",
    "Status",
    "derive_seed",
    "fmt_number",
    "num",
    "params_json",
]
