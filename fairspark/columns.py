"""Names of the prepared table's columns: the one place they are declared.

See ``docs/architecture.md`` ("The prepared table") for what each holds.
"""

from __future__ import annotations

__all__ = ["KEY", "LABEL", "PRED", "WEIGHT", "X", "priv_col", "value_col"]

#: stable row key (string)
KEY = "_fs_key"
#: 1.0 favourable label, 0.0 unfavourable, null unknown
LABEL = "_fs_label"
#: 1.0 favourable decision, 0.0 otherwise
PRED = "_fs_pred"
#: row weight
WEIGHT = "_fs_w"
#: encoded non-sensitive features (array<double>)
X = "_fs_x"


def value_col(i: int | str) -> str:
    """The column holding the value of sensitive view ``i`` (``x<j>`` for intersections)."""
    return f"_fs_s_{i}"


def priv_col(i: int | str) -> str:
    """The column holding the privileged flag of sensitive view ``i``."""
    return f"_fs_p_{i}"
