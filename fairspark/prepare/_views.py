"""The sensitive views: each configured attribute and intersection as value and flag columns.

A view (:class:`_View`) is an attribute defined by its privileged values
(:func:`_values_view`) or by a predicate (:func:`_predicate_view`), or an
intersection of attributes (:func:`_intersection_views`); its observed values are
counted later, from the one aggregation's groups or by the staged flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fairspark.columns import input_col, priv_col, value_col
from fairspark.errors import ConfigError
from fairspark.prepare._columns import _isin, _literal, _role_columns

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from fairspark.config_columns import ColumnsConfig, SensitiveConfig
    from fairspark.config_model import Config


@dataclass(frozen=True)
class _View:
    """A sensitive view before its values are counted (see :class:`AttributeInfo`)."""

    name: str
    value_col: str
    priv_col: str
    kind: str
    privileged_values: list[str]
    source_columns: list[str]


def _predicate_view(df: DataFrame, i: int, s: SensitiveConfig) -> tuple[_View, Column, Column]:
    """An attribute defined by ``privileged_expr``: values ``privileged``/``unprivileged``."""
    from pyspark.sql import functions as F

    try:
        priv = F.expr(s.privileged_expr)
        df.select(priv).schema  # noqa: B018  (analyse now)
    except Exception as err:  # noqa: BLE001 - any analysis error is a config error
        raise ConfigError(
            f"config key 'columns.sensitive[{i}].privileged_expr': "
            f"{s.privileged_expr!r} is not a valid predicate: {str(err).splitlines()[0]}"
        ) from None
    priv = F.coalesce(priv.cast("boolean"), F.lit(False))
    value = F.when(priv, F.lit("privileged")).otherwise(F.lit("unprivileged"))
    view = _View(s.attr, value_col(i), priv_col(i), "predicate", ["privileged"], [s.column])
    return view, value, priv


def _values_view(i: int, s: SensitiveConfig, types: dict[str, str]) -> tuple[_View, Column, Column]:
    """An attribute defined by its privileged values."""

    tname = types[s.column]
    priv = _isin(s.column, tname, s.privileged, f"columns.sensitive[{i}].privileged")  # type: ignore[arg-type]
    value = input_col(s.column).cast("string")
    pvals = [str(_literal(v, tname)) for v in s.privileged]  # type: ignore[union-attr]
    if tname == "boolean":
        pvals = [str(v).lower() for v in pvals]
    view = _View(s.attr, value_col(i), priv_col(i), "values", pvals, [s.column])
    return view, value, priv


def _intersection_views(cols: ColumnsConfig) -> list[tuple[_View, Column, Column]]:
    """Each configured intersection: values joined by ``|``, privileged when all are.

    Their privileged values are only known once the values are counted
    (:func:`_attribute_info`).
    """
    from pyspark.sql import functions as F

    name_to_idx = {s.attr: i for i, s in enumerate(cols.sensitive)}
    out = []
    for j, combo in enumerate(cols.intersections):
        idx = [name_to_idx[a] for a in combo]
        value = F.concat_ws("|", *[F.col(value_col(i)) for i in idx])
        priv = F.lit(True)
        for i in idx:
            priv = priv & F.col(priv_col(i))
        src_cols = [cols.sensitive[i].column for i in idx]
        view = _View("*".join(combo), value_col(f"x{j}"), priv_col(f"x{j}"), "intersection",
                     [], src_cols)
        out.append((view, value, priv))
    return out


def _sensitive_views(df: DataFrame, config: Config,
                     types: dict[str, str]) -> list[tuple[_View, Column, Column]]:
    """Each configured attribute's view with its value and privileged-flag expressions."""
    return [_predicate_view(df, i, s) if s.privileged_expr is not None
            else _values_view(i, s, types) for i, s in enumerate(config.columns.sensitive)]


def _with_views(df: DataFrame, kept: DataFrame, config: Config,
                types: dict[str, str]) -> tuple[DataFrame, list[_View]]:
    """``kept`` with the role and sensitive-view columns; the views in output order."""
    cols = config.columns
    derived = _role_columns(df, config, types)
    views: list[_View] = []
    for view, value, priv in _sensitive_views(df, config, types):
        views.append(view)
        derived += [value.alias(view.value_col), priv.alias(view.priv_col)]
    with_roles = kept.select(*[input_col(c) for c in kept.columns], *derived)
    inter = _intersection_views(cols)
    if inter:
        with_roles = with_roles.select(
            "*", *[c for v, value, priv in inter
                   for c in (value.alias(v.value_col), priv.alias(v.priv_col))])
    return with_roles, views + [v for v, _, _ in inter]
