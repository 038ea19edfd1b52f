"""Base class for every config model: unknown keys and wrong types are errors."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr


class StrictModel(BaseModel):
    """A pydantic model that rejects unknown keys and does not coerce types loosely."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=False)


class AuditParams(StrictModel):
    """Parameters every audit shares.

    Attributes
    ----------
    enabled:
        Run this audit (default true when its section is present).
    max_rows:
        Cap on the rows this audit reads from the prepared table (a seeded random
        sample is drawn when the table is larger); ``None`` means no cap.
    attributes:
        Sensitive attributes this audit looks at (at least one); ``None`` means all
        configured ones.
    timeout_s:
        Time budget in seconds; past it the audit ends as ``timed_out`` with what it
        had (its last partial result) and the run goes on. ``None``: no budget.
    """

    enabled: bool = True
    max_rows: int | None = Field(None, ge=1)
    attributes: list[str] | None = Field(None, min_length=1)
    timeout_s: float | None = Field(None, gt=0)

    def check_files(self) -> None:
        """Check the local files these params name; raise ``ConfigError`` naming the key.

        Called when a config file is loaded and again when a run starts, so a run
        built in code fails the same way (exit 2, nothing written). Nothing to check
        by default.
        """

    #: the registered MLflow model the audit calls, resolved before the run
    #: (:func:`fairspark.scoring.resolve_models`; a ``fairspark.scoring.ScoringModel``)
    _registered: Any = PrivateAttr(default=None)

    def model_call(self) -> tuple[str, str | None] | None:
        """The registered model this audit calls on rows of its own, if any:
        ``(config key, model URI)``, the URI ``None`` for the model of
        ``columns.prediction`` when that is a registered one. ``None`` (the default):
        the audit calls no model, or one that is not in a registry."""
        return None

    @property
    def registered_model(self) -> Any:
        """The resolved model of :meth:`model_call` (a
        ``fairspark.scoring.ScoringModel``), once the run's models are resolved; else
        None."""
        return self._registered

    def with_registered_model(self, model: Any) -> AuditParams:
        """A copy whose :attr:`registered_model` is ``model``."""
        out = self.model_copy()
        out._registered = model
        return out

    def context_columns(self) -> list[str]:
        """Input columns the prepared rows must carry for this audit (as they are):
        the inputs of its registered model."""
        model = self._registered
        return list(model.inputs) if model is not None else []
