"""The window path: a window's groups merged from its partitions' states.

:func:`partition_extras` gives what a partition's state stores besides its one
aggregation's groups (category and label values); :class:`MergedGroups` holds every
partition's groups, merged, and is what :func:`fairspark.prepare.prepare` takes as
``merged=`` instead of aggregating (:mod:`fairspark.nightly.window`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairspark.columns import input_col
from fairspark.prepare._columns import _any_null, _missing, _plan_columns
from fairspark.prepare._scan import _KEEP, _label_values

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from fairspark.config_model import Config

__all__ = ["MergedGroups", "partition_extras"]


@dataclass(frozen=True)
class MergedGroups:
    """A window's one-aggregation groups, merged from its partitions' states.

    Attributes
    ----------
    groups:
        Every partition's groups, concatenated (counts add, extremes combine).
    categories:
        Categorical feature -> value -> kept rows, summed over the partitions (each
        partition keeps at most ``max_categories + 1`` values).
    label_hashes:
        64-bit hashes of the raw labels of the partitions whose groups hold two label
        values (``None``: none did).
    """

    groups: list[dict[str, Any]]
    categories: dict[str, dict[str, int]] = field(default_factory=dict)
    label_hashes: list[int] | None = None

    def distinct(self, label: str) -> Callable[[list[str]], dict[str, int]]:
        """Distinct values per column, exactly, from the merged states."""

        def count(columns: list[str]) -> dict[str, int]:
            out = {}
            for c in columns:
                if c == label:
                    single = {r["lo::label"] for r in self.groups if r[_KEEP] and
                              r["lo::label"] is not None and r["lo::label"] == r["hi::label"]}
                    out[c] = len(single | set(self.label_hashes or ()))
                else:
                    out[c] = len(self.categories.get(c, {}))
            return out

        return count


def partition_extras(df: DataFrame, *, config: Config,
                     groups: list[dict[str, Any]]) -> tuple[dict[str, dict[str, int]],
                                                             list[int] | None]:
    """What a partition's state needs besides its groups: category and label values.

    Returns
    -------
    (categories, label_hashes)
        Categorical feature -> value -> kept rows (at most ``max_categories + 1``
        values each; only when an enabled audit encodes features), and the raw label
        hashes when a group of ``groups`` holds two label values (else ``None``).
    """
    from pyspark.sql import functions as F

    plan = _plan_columns(df, config)
    keep = ~_any_null(plan)
    cats: dict[str, dict[str, int]] = {}
    if plan.categorical and plan.count_categories:
        cap = config.preparation.max_categories + 1
        pairs = F.explode(F.array(*[F.struct(F.lit(c).alias("c"),
                                             input_col(c).cast("string").alias("v"))
                                    for c in plan.categorical]))
        rows = (df.where(keep).select(pairs.alias("p")).groupBy("p.c", "p.v").count()
                .collect())
        for r in rows:
            cats.setdefault(r["c"], {})[r["v"]] = int(r["count"])
        cats = {c: dict(sorted(v.items(), key=lambda kv: -kv[1])[:cap]) for c, v in cats.items()}
    hashes = None
    if _label_values(groups) is None:
        label = config.columns.label.column
        ok = keep & ~_missing(label, plan.types)
        hashes = [int(r[0]) for r in df.where(ok).select(F.xxhash64(input_col(label)))
                  .distinct().limit(1001).collect()]
    return cats, hashes
