"""Config model of the ``hfm`` audit (METHODS §1)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fairspark._params import AuditParams


class HFMParams(AuditParams):
    """Parameters of the HFM audit; see ``docs/hfm.md``.

    Attributes
    ----------
    method:
        ``certified`` (default: exact D at near-approximate cost), ``exact`` (block
        nested loop, also gives the exact averaged variant), ``approx`` (the paper's
        ApproxDist, Alg. 1-2) or ``pointwise`` (min per row across projections).
    view:
        ``binary`` (privileged vs the rest) or ``any_other_value`` (nn to any row whose
        value differs).
    m1, m2:
        Projections and window per side; ``m2`` defaults to ``ceil(2 log10 n)``.
    sampler:
        How projection vectors with ``sum |w_i| = 1`` are drawn.
    max_candidates:
        Certification cap on exact nearest-neighbour searches per attribute and
        target; beyond it the result is ``not_certified`` with its interval.
    num_partitions, rows_per_partition:
        Range partitions per projection (default ``ceil(n / rows_per_partition)``);
        results do not depend on them.
    exact_block_rows:
        Rows per block of the ``exact`` block nested loop (memory per task).
    redact_columns:
        Feature columns whose raw values are never shown for witnesses.
    show_witness_values:
        Show raw feature values of witness rows in the report.
    histogram_bins:
        Bins of the per-row distance plot (0: no plot).
    dr_model:
        Path of a scikit-learn model saved with joblib (``predict`` on a pandas frame of
        the raw feature and sensitive columns) for discriminative risk; ``None``: DR is
        reported as not computed.
    dr_ratio:
        Probability of flipping each sensitive attribute for DR.
    dr_level:
        Confidence level of the DR interval (Wilson).
    """

    method: Literal["exact", "approx", "pointwise", "certified"] = "certified"
    view: Literal["binary", "any_other_value"] = "binary"
    m1: int = Field(25, ge=1)
    m2: int | None = Field(None, ge=1)
    sampler: Literal["uniform_l1", "reference_sequential"] = "uniform_l1"
    max_candidates: int = Field(20_000, ge=1)
    num_partitions: int | None = Field(None, ge=1)
    rows_per_partition: int = Field(50_000, ge=100)
    exact_block_rows: int = Field(20_000, ge=10)
    redact_columns: list[str] = Field(default_factory=list)
    show_witness_values: bool = True
    histogram_bins: int = Field(40, ge=0, le=500)
    dr_model: str | None = None
    dr_ratio: float = Field(0.5, gt=0, le=1)
    dr_level: float = Field(0.95, gt=0, lt=1)
