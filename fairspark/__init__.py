"""fairspark: fairness audits of ML classifiers on warehouse-scale Spark tables.

The public surface: load a config, prepare a table, run the audit job, audit a
DataFrame in a notebook (:func:`audit`), or call the metric core directly.
"""

from fairspark._version import SCHEMA_VERSION, __version__
from fairspark.config import Config, load_config, parse_config
from fairspark.errors import (
    AuditError,
    ColumnTypeError,
    ConfigError,
    EmptyInputError,
    FairsparkError,
    FairsparkInputError,
    InvalidValueError,
    MissingColumnError,
)
from fairspark.notebook import AuditResult, audit

__all__ = [
    "SCHEMA_VERSION",
    "AuditError",
    "AuditResult",
    "ColumnTypeError",
    "Config",
    "ConfigError",
    "EmptyInputError",
    "FairsparkError",
    "FairsparkInputError",
    "InvalidValueError",
    "MissingColumnError",
    "__version__",
    "audit",
    "load_config",
    "parse_config",
]
