"""Names of the prepared table's columns: the one place they are declared.

See ``docs/architecture.md`` ("The prepared table") for what each holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

__all__ = ["BASE", "KEY", "LABEL", "PRED", "PREPARED", "WEIGHT", "X", "TableColumns", "input_col",
           "priv_col", "quote", "value_col"]

#: stable row key (string)
KEY = "_fs_key"
#: 1.0 favourable label, 0.0 unfavourable, null unknown
LABEL = "_fs_label"
#: 1.0 favourable decision, 0.0 otherwise
PRED = "_fs_pred"
#: row weight
WEIGHT = "_fs_w"
#: the baseline decision (``columns.baseline``): 1.0 favourable, 0.0 otherwise
BASE = "_fs_base"
#: encoded non-sensitive features (array<double>)
X = "_fs_x"


@dataclass(frozen=True)
class TableColumns:
    """The columns a method reads from a table: the prepared table's by default.

    ``weight=None`` means weight 1.
    """

    label: str = LABEL
    features: str = X
    weight: str | None = WEIGHT
    key: str = KEY


#: the prepared table's label, features, weight and key columns
PREPARED = TableColumns()


def value_col(i: int | str) -> str:
    """The column holding the value of sensitive view ``i`` (``x<j>`` for intersections)."""
    return f"_fs_s_{i}"


def priv_col(i: int | str) -> str:
    """The column holding the privileged flag of sensitive view ``i``."""
    return f"_fs_p_{i}"


def quote(name: str) -> str:
    """``name`` as one quoted identifier: in backticks, a backtick in it doubled.

    Spark parses a column name given as a string: a dot separates struct fields and a
    lone backtick is a syntax error, so ``income.bracket`` or ``a`b`` must be quoted
    wherever an input column's name reaches Spark (``F.col``, ``select``,
    ``groupBy``). Spaces and non-ASCII letters need no quoting but do no harm quoted.

    Examples
    --------
    >>> quote("income.bracket")
    '`income.bracket`'
    >>> quote("a`b")
    '`a``b`'
    """
    return "`" + name.replace("`", "``") + "`"


def input_col(name: str) -> Column:
    """The column called exactly ``name`` (quoted: dots, spaces, backticks are literal).

    The resulting column keeps ``name`` as its name, so rows and pandas frames built
    from it are read back by the user's original name.
    """
    from pyspark.sql import functions as F

    return F.col(quote(name))
