"""Result types of the correlation audit (Anahideh et al., 2021).

They live apart from ``audit.py`` (which computes them) and ``report.py`` (which draws
them), so neither imports the other.

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fairspark.correlation._cluster import Clustering
from fairspark.correlation._estimate import CorrelationEstimate, RoundsDecision
from fairspark.correlation.params import CorrelationParams
from fairspark.numbers import fmt_detail
from fairspark.status import Status

__all__ = ["ORDER", "CorrelationResult", "ModelResult", "RoundSelection", "rounds_text"]

#: the position of the audit's report section (``SPEC.order``)
ORDER = 40


@dataclass
class RoundSelection:
    """The kept samples of one (attribute, model): first N accepted per complete round.

    Attributes
    ----------
    values : one (N, m) array of metric vectors per kept round.
    round_ids : the kept rounds, in order.
    dropped : round -> why it was dropped (it hit the attempt cap below N accepted).
    attempts : attempts up to each kept round's N-th acceptance (all, for other rounds).
    accepted : accepted attempts among them.
    rejected_reasons : reason -> count of the attempts not accepted.
    accuracies : test-set accuracy of every kept model.
    pending : rounds still running (a partial result handed out between waves).
    """

    values: list[np.ndarray]
    round_ids: list[int]
    dropped: dict[int, str]
    attempts: int
    accepted: int
    rejected_reasons: dict[str, int]
    accuracies: np.ndarray
    pending: list[int] = field(default_factory=list)

    @property
    def acceptance_rate(self) -> float | None:
        """``accepted / attempts`` (``None`` before any attempt)."""
        return self.accepted / self.attempts if self.attempts else None


@dataclass
class ModelResult:
    """Everything computed for one (attribute, model family)."""

    attribute: str
    model: str
    status: Status
    detail: str | None = None
    selection: RoundSelection | None = None
    estimate: CorrelationEstimate | None = None
    clustering: Clustering | None = None
    clustered_metrics: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    tau_detail: str | None = None
    #: the rounds used, the standard error they reached and why they stopped
    rounds: RoundsDecision | None = None
    #: round ids run (>= ``rounds.rounds``: a wave may end past the stopping round)
    rounds_run: int = 0
    #: the matrix's Monte-Carlo SE after each kept round (:func:`matrix_se_path`)
    se_path: list[float] = field(default_factory=list)
    #: CPU seconds per phase of the rounds run (:func:`._rounds.cost_summary`)
    cost: dict | None = None
    #: the representatives after each kept round (``rounds: auto`` with stable_rounds)
    reps_path: list[tuple[str, ...] | None] = field(default_factory=list)


@dataclass
class CorrelationResult:
    """Result of :func:`~fairspark.correlation.audit.correlation_audit`.

    Attributes
    ----------
    params : the audit parameters.
    metrics : the correlated catalogue metrics, in matrix order.
    failed_attributes : attribute -> why it could not be audited (an empty cell).
    models : one :class:`ModelResult` per (attribute, model family).
    sample_rows, population_rows : rows of the stratified sample / labelled rows.
    sample_cells : attribute -> sample rows per group x label cell (``CELLS`` order).
    waves : Spark jobs of oracle tasks run.
    shipped_as : how the sample reached the tasks (``broadcast``, ``closure``, ``none``).
    partial : True for a result handed out between waves (rounds still running).
    """

    params: CorrelationParams
    metrics: list[str]
    failed_attributes: dict[str, str]
    models: list[ModelResult]
    sample_rows: int
    population_rows: int
    sample_cells: dict[str, list[int]]
    waves: int
    shipped_as: str
    partial: bool = False

    @property
    def failed(self) -> bool:
        """Whether an attribute or a model family failed."""
        return bool(self.failed_attributes) or any(r.status == Status.FAILED for r in self.models)


_STOPPED = {
    "target_se": "the standard error reached target_se",
    "stable": "the representatives were unchanged over the last stable_rounds kept rounds",
    "rounds_max": "rounds_max reached before target_se",
    "no_round": "no round reached n_samples accepted models",
    "undefined": "no metric pair has a correlation defined in two rounds",
    "fixed": "an integer 'rounds' runs exactly that many",
    "running": "still running",
}


def rounds_text(d: RoundsDecision, params: CorrelationParams, rounds_run: int) -> str:
    """The rounds used, the standard error reached and why the rounds stopped.

    Parameters
    ----------
    d : the (attribute, model)'s rounds decision.
    params : the audit parameters (the rule's settings).
    rounds_run : round ids run, including any past the stopping round.

    Returns
    -------
    str
        One sentence, the ``monte_carlo_se`` row's detail and the report's line.
    """
    used = f"{d.kept} complete rounds used (round ids 0..{d.rounds - 1})"
    if params.auto_rounds:
        stable = (f", stable_rounds={params.stable_rounds}" if params.stable_rounds else "")
        rule = (f"rounds: auto (target_se={fmt_detail(params.target_se, 6)}{stable}, rounds_min="
                f"{params.rounds_min}, rounds_max={params.rounds_max})")
    else:
        rule = f"rounds: {params.rounds}"
    se = fmt_detail(d.se, decimals=4) if math.isfinite(d.se) else "undefined"
    why = _STOPPED[d.reason]
    if d.reason == "stable":
        why = (f"the representatives were unchanged over the last {params.stable_rounds} "
               f"kept rounds; the standard error is {se}")
    above = not d.se <= params.target_se and d.reason not in ("no_round", "undefined")
    if above:  # said wherever the SE misses the target, whatever stopped the rounds
        why += (f"; the SE is above target_se={fmt_detail(params.target_se, 6)}: r* and its "
                "intervals are only as precise as this SE says (more rounds or n_samples "
                "narrow it)")
    text = f"{rule}: {used}; Monte-Carlo SE {se}; stopped: {why}"
    if rounds_run > d.rounds:
        text += f"; {rounds_run - d.rounds} later rounds run in the last wave and not used"
    return text
