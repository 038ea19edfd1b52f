"""The config's MLflow models (issue 60): a decision scored by a registered model
(``columns.prediction``/``columns.baseline``: ``{model_uri, threshold, output}``) and
``output.mlflow``. Re-exported by :mod:`fairspark.config_model`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from fairspark._params import StrictModel

Scalar = str | int | float | bool

__all__ = ["MlflowOutputConfig", "RegisteredModelConfig", "is_model_uri"]


def is_model_uri(path: str | None) -> bool:
    """Whether ``path`` (e.g. ``audits.hfm.dr_model``) is an MLflow model URI
    (``models:/...``, ``runs:/...``) rather than a saved model's path."""
    return path is not None and path.startswith(("models:/", "runs:/"))


class RegisteredModelConfig(StrictModel):
    """A decision that fairspark scores itself with an MLflow model, on the executors.

    ``model_uri`` is any MLflow model URI (``models:/name@alias``, ``models:/name/3``,
    ``runs:/<id>/model``); the model's ``output`` (a column of a multi-output model)
    is a score decided by ``threshold`` or a label whose ``positive`` values are
    favourable (see :mod:`fairspark.scoring`). Needs ``fairspark[mlflow]``.
    """

    model_uri: str = Field(min_length=1)
    #: a score model's decision: positive when ``score >= threshold`` (default 0.5);
    #: a label model takes none
    threshold: float | None = None
    #: the output column of a model that returns several
    output: str | None = None
    #: a label model's favourable value(s) (default ``1``)
    positive: list[Scalar] | None = None

    @field_validator("positive", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return [v] if isinstance(v, str | int | float | bool) else v

    @model_validator(mode="after")
    def _one_rule(self) -> RegisteredModelConfig:
        if self.threshold is not None and self.positive is not None:
            raise ValueError(f"model {self.model_uri!r}: give 'threshold' (a score model) or "
                             "'positive' (a label model), not both")
        return self


class MlflowOutputConfig(StrictModel):
    """Log each run to MLflow (``fairspark[mlflow]``): one MLflow run per audit run,
    its numbers as metrics stepped by the run date, its outputs as artifacts
    (:mod:`fairspark.tracking`). Logging never changes the exit code."""

    #: the tracking server or store (``http://...``, ``sqlite:///...``); default:
    #: MLflow's own (``MLFLOW_TRACKING_URI``)
    tracking_uri: str | None = None
    #: the experiment the nightly runs go under (created when missing); default: the dataset
    experiment: str | None = None
    #: the MLflow run's name; default: ``<dataset> <run date>``
    run_name: str | None = None
    #: where a new experiment keeps its runs' artifacts (default: the tracking store's)
    artifact_location: str | None = None
