"""Base classes of the config models: unknown keys and wrong types are errors.

An audit's parameters (:class:`AuditParams`) are what a user decides: what is
measured and reported (metrics, views, levels, seeds, method choices, thresholds).
Engine tuning, which changes only how fast a run is or how much memory it uses, sits
in one ``advanced`` block per audit (an :class:`AdvancedParams` model, declared by the
audit as its ``advanced`` field). A tuning key written at its old place, beside the
user's keys, is still read: it moves into ``advanced`` with a warning that names both
keys.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

__all__ = ["AdvancedParams", "AuditParams", "StrictModel"]

log = logging.getLogger("fairspark")


class StrictModel(BaseModel):
    """A pydantic model that rejects unknown keys and does not coerce types loosely."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=False)


class AdvancedParams(StrictModel):
    """Engine tuning of an audit (its ``advanced`` block): how fast it runs and how much
    memory it uses, never what it measures. Every key has a default derived from the
    data or the session, so a config need not name any."""


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

    @classmethod
    def advanced_model(cls) -> type[AdvancedParams] | None:
        """The model of this audit's ``advanced`` block, or ``None`` when it has none."""
        field = cls.model_fields.get("advanced")
        return field.annotation if field is not None else None  # type: ignore[return-value]

    @classmethod
    def lift_advanced(cls, data: Any, *, section: str | None = None) -> Any:
        """``data`` with the tuning keys written at their old place moved into
        ``advanced``, each with a warning naming the old and the new key.

        Parameters
        ----------
        data:
            The section as read (a mapping; anything else is returned as it is).
        section:
            The section's dotted key (``audits.hfm``), for the warning; ``None``: the
            keys are named relative to the section.

        Raises
        ------
        ValueError
            When a key is given both at its old place and in ``advanced``.
        """
        adv = cls.advanced_model()
        if adv is None or not isinstance(data, dict):
            return data
        moved = [k for k in data if k in adv.model_fields and k not in cls.model_fields]
        if not moved:
            return data
        block = data.get("advanced")
        if isinstance(block, AdvancedParams):
            block = block.model_dump(exclude_unset=True)
        if block is not None and not isinstance(block, dict):
            return data  # the model says what is wrong with 'advanced'
        block = dict(block or {})
        prefix = f"{section}." if section else ""
        for k in moved:
            if k in block:
                raise ValueError(f"config key '{prefix}{k}' is given twice: at its old place "
                                 f"and as '{prefix}advanced.{k}'; keep '{prefix}advanced.{k}'")
            block[k] = data[k]
            log.warning("config key '%s%s' is engine tuning and has moved to '%sadvanced.%s'; "
                        "read as that key (move it there to silence this warning)",
                        prefix, k, prefix, k)
        return {**{k: v for k, v in data.items() if k not in moved}, "advanced": block}

    @model_validator(mode="before")
    @classmethod
    def _tuning_at_old_place(cls, data: Any) -> Any:
        """Parameters built in code with a tuning key at its old place (a config's
        sections are lifted before, naming their dotted keys, by
        :func:`fairspark.config.parse_config`)."""
        return cls.lift_advanced(data)

    def flat_dump(self) -> dict[str, Any]:
        """The parameters as JSON values, the ``advanced`` keys beside the others (the
        layout the config hash, ``summary.json`` and the rows' ``params`` have always
        had, so that runs before and after the ``advanced`` block compare)."""
        out = self.model_dump(mode="json")
        advanced = out.pop("advanced", None) or {}
        return {**out, **advanced}

    def hash_dump(self) -> dict[str, Any]:
        """What the config hash reads: :meth:`flat_dump`, plus any key an audit removed,
        at its last default, so that runs before and after the removal compare."""
        return self.flat_dump()

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
