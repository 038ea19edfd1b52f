"""The ``columns`` section of the run configuration: which columns hold the sensitive
attributes, the label, the decisions and the features (``docs/config.md``).

Modules below the registry (preparation, its views) import these types from here;
:class:`fairspark.config_model.Config` holds a :class:`ColumnsConfig`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from fairspark._config_mlflow import RegisteredModelConfig
from fairspark._params import StrictModel

Scalar = str | int | float | bool

__all__ = ["ColumnsConfig", "LabelConfig", "PredictionConfig", "ScoreConfig",
           "SensitiveConfig"]

class SensitiveConfig(StrictModel):
    """One sensitive attribute and how its privileged group is defined."""

    column: str
    privileged: list[Scalar] | None = None
    privileged_expr: str | None = None
    name: str | None = None

    @field_validator("privileged", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str | int | float | bool) else v

    @model_validator(mode="after")
    def _one_definition(self) -> SensitiveConfig:
        if (self.privileged is None) == (self.privileged_expr is None):
            raise ValueError(
                f"sensitive attribute {self.column!r}: give exactly one of 'privileged' "
                "(value or list of values) or 'privileged_expr' (a SQL predicate)"
            )
        if self.privileged is not None and len(self.privileged) == 0:
            raise ValueError(f"sensitive attribute {self.column!r}: 'privileged' is empty")
        return self

    @property
    def attr(self) -> str:
        """The attribute's name in outputs (defaults to the column)."""
        return self.name or self.column


class _ColumnWithPositive(StrictModel):
    """A column and the value(s) that mean the positive outcome."""

    column: str
    positive: list[Scalar] = Field(default_factory=lambda: [1])

    @field_validator("positive", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str | int | float | bool) else v


class LabelConfig(_ColumnWithPositive):
    """The ground-truth label column and its positive value(s)."""


class PredictionConfig(_ColumnWithPositive):
    """The model's decision: a prediction column with its positive value(s)."""


class ScoreConfig(StrictModel):
    """The model's decision as a score: positive when ``score >= threshold``."""

    column: str
    threshold: float = 0.5


class ColumnsConfig(StrictModel):
    """Column roles of the scored table."""

    features: Literal["all_others"] | list[str] = "all_others"
    categorical: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    sensitive: list[SensitiveConfig]
    intersections: list[list[str]] = Field(default_factory=list)
    label: LabelConfig
    favourable: Literal["positive", "negative"] = "positive"
    #: a prediction ``{column, positive}``, or a registered model that fairspark
    #: scores the table with: ``{model_uri, threshold, output}``
    prediction: PredictionConfig | RegisteredModelConfig | None = None
    score: ScoreConfig | None = None
    weight: str | None = None
    row_key: str | None = None
    #: a second decision on the same rows (today's model), audited beside the first:
    #: a prediction ``{column, positive}``, a score ``{column, threshold}`` or a
    #: registered model ``{model_uri, threshold, output}``
    baseline: PredictionConfig | ScoreConfig | RegisteredModelConfig | None = None

    @model_validator(mode="after")
    def _check(self) -> ColumnsConfig:
        if (self.prediction is None) == (self.score is None):
            raise ValueError("give exactly one of 'columns.prediction' or 'columns.score'")
        if self.baseline is not None and self.baseline == (self.prediction or self.score):
            what = getattr(self.baseline, "column", None) or self.baseline.model_uri  # type: ignore[union-attr]
            raise ValueError(f"'columns.baseline' ({what!r}) is the audited "
                             "decision itself; name the baseline model's column (or, for a "
                             "score, another threshold)")
        if not self.sensitive:
            raise ValueError("'columns.sensitive' needs at least one attribute")
        names = [s.attr for s in self.sensitive]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"sensitive attribute names repeat: {sorted(dup)}")
        for combo in self.intersections:
            if len(combo) < 2:
                raise ValueError(f"intersection {combo} needs at least two attributes")
            unknown = [c for c in combo if c not in names]
            if unknown:
                raise ValueError(
                    f"intersection {combo} names {unknown}, which are not sensitive "
                    f"attributes (configured: {names})"
                )
        return self

    def attribute_names(self) -> list[str]:
        """The names of every audited view: each sensitive attribute, then intersections."""
        return [s.attr for s in self.sensitive] + ["*".join(c) for c in self.intersections]

    @property
    def decision_column(self) -> str:
        """The column that holds the prediction or the score."""
        return self.prediction.column if self.prediction else self.score.column  # type: ignore[union-attr]

    def registered_models(self) -> dict[str, RegisteredModelConfig]:
        """Config key -> the registered model it scores with (``columns.prediction``,
        ``columns.baseline``), before :func:`fairspark.scoring.resolve_models` turns them
        into columns."""
        return {f"columns.{k}": m for k in ("prediction", "baseline")
                if isinstance(m := getattr(self, k), RegisteredModelConfig)}
