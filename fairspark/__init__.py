"""fairspark: fairness audits of ML classifiers on warehouse-scale Spark tables.

The public surface: load a config, prepare a table, run the audit job, or call the
metric core directly.
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

__all__ = [
    "SCHEMA_VERSION",
    "AuditError",
    "ColumnTypeError",
    "Config",
    "ConfigError",
    "EmptyInputError",
    "FairsparkError",
    "FairsparkInputError",
    "InvalidValueError",
    "MissingColumnError",
    "__version__",
    "load_config",
    "parse_config",
]
