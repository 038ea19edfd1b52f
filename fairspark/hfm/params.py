"""Config model of the ``hfm`` audit (Bian and Luo, 2024).

References
----------
.. [1] Y. Bian and Y. Luo, "Measuring Model-Induced Discrimination via Efficient
   Fairness Approximation", arXiv:2405.09251, 2024.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from pydantic import Field, field_validator

from fairspark._config_mlflow import is_model_uri
from fairspark._params import AdvancedParams, AuditParams
from fairspark.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.hfm.compute import CertifyOptions, DistanceOptions

__all__ = ["HFMAdvanced", "HFMParams", "dr_model_kind", "local_path"]

_KEY = "audits.hfm.dr_model"
_LOG = logging.getLogger(__name__)


def local_path(path: str) -> str | None:
    """The local filesystem path of ``path``, or ``None`` for a remote URI.

    A plain path or a ``file:`` URI is local; any other scheme (``hdfs://``,
    ``s3a://``, ``gs://``, ``abfss://``, ``dbfs:/`` ...) is remote. A one-letter scheme
    is a Windows drive, not a URI.
    """
    u = urlparse(path)
    if u.scheme in ("", "file") or len(u.scheme) == 1:
        return u.path if u.scheme == "file" else path
    return None


def dr_model_kind(path: str, *, kind: str = "auto") -> Literal["sklearn", "spark"]:
    """Which kind of model ``audits.hfm.dr_model`` names, checking what can be checked.

    ``auto``: a remote URI is a Spark ML ``PipelineModel`` (joblib reads local files
    only), decided without touching the store; a local directory is a Spark ML model,
    a local file a joblib file. Local paths must exist and have the expected shape (a
    file; a directory with a ``metadata/`` folder); remote ones are checked when the
    model is loaded.

    Raises
    ------
    ConfigError
        Naming ``audits.hfm.dr_model`` and the path, when a local path does not
        exist or has the wrong shape, or a scikit-learn model is given as a remote URI.
    """
    local = local_path(path)
    if local is None:
        if kind == "sklearn":
            raise ConfigError(
                f"config key '{_KEY}': {path!r} is a remote URI, but a scikit-learn model is "
                "read with joblib from a local file; copy it to a local path (shipped to the "
                "executors, e.g. with --files) or save the model as a Spark ML PipelineModel"
            )
        return "spark"
    if not os.path.exists(local):
        raise ConfigError(f"config key '{_KEY}': {path!r} does not exist "
                          f"(relative paths start at {os.getcwd()!r})")
    is_dir = os.path.isdir(local)
    if kind == "auto":
        kind = "spark" if is_dir else "sklearn"
    if kind == "sklearn" and is_dir:
        raise ConfigError(
            f"config key '{_KEY}': {path!r} is a directory, but 'audits.hfm.dr_model_kind' "
            "is 'sklearn' (a joblib file)")
    if kind == "spark":
        if not is_dir:
            raise ConfigError(
                f"config key '{_KEY}': {path!r} is a file, but a Spark ML PipelineModel is a "
                "directory (written by model.save(path))")
        if not os.path.isdir(os.path.join(local, "metadata")):
            raise ConfigError(
                f"config key '{_KEY}': {path!r} is a directory without a 'metadata/' folder, "
                "so it is not a saved Spark ML model (PipelineModel.save writes one); a "
                "scikit-learn model is a single joblib file")
    return kind  # type: ignore[return-value]


class HFMAdvanced(AdvancedParams):
    """Engine tuning of the HFM audit (``audits.hfm.advanced``): how fast it runs and
    how much memory it uses; the distances do not depend on these keys.

    Attributes
    ----------
    sample_rows:
        ``certified``: rows per group in the random sample that gives every row its
        upper bound (at least 64 per group). Changes how many rows are checked
        (``D_candidates``), not D.
    local_max_bytes:
        ``certified``: when the audited points fit this many bytes (``8 * (d + 2) + 64``
        per row, d features), they are brought to the driver once and searched there
        with the same passes, in one Spark job instead of about twenty; larger tables
        run the passes on Spark. On a local master (``local[...]``, ``local-cluster``)
        the points come through local Arrow files, past the JVM; elsewhere (and on a
        Spark Connect session) through a collect, also within half of
        ``spark.driver.maxResultSize``. Default (unset): sized from the driver's memory
        (an eighth of the physical memory available, and, for a collect, a quarter of
        its JVM heap; on Spark Connect, of ``spark.driver.memory``); 0 always uses
        Spark.
    num_partitions, rows_per_partition:
        Range partitions per projection (default ``ceil(n / rows_per_partition)``);
        results do not depend on them.
    """

    sample_rows: int = Field(1024, ge=16)
    local_max_bytes: int | None = Field(None, ge=0)
    num_partitions: int | None = Field(None, ge=1)
    rows_per_partition: int = Field(50_000, ge=100)


class HFMParams(AuditParams):
    """Parameters of the HFM audit; see ``docs/hfm.md``.

    Attributes
    ----------
    method:
        ``certified`` (default: the exact D by sample upper bounds and elimination, no
        projections), ``approx`` (the paper's ApproxDist, Alg. 1-2) or ``pointwise``
        (min per row across projections). ``exact`` is read as ``certified`` (the same
        exact D), with a warning.
    paper_value:
        ``certified``: also compute the paper's ApproxDist (and the pointwise bound)
        beside the exact value and report its error against the exact D (costs ``m1``
        sorts of the table per target).
    view:
        ``binary`` (privileged vs the rest) or ``any_other_value`` (nn to any row whose
        value differs).
    m1, m2:
        Projections and window per side (ApproxDist: ``approx``, ``pointwise``,
        ``paper_value``); ``m2`` defaults to ``ceil(2 log10 n)``.
    sampler:
        How projection vectors with ``sum |w_i| = 1`` are drawn.
    max_candidates:
        Optional cap on the rows ``certified`` checks per attribute and target; beyond
        it the result is ``not_certified`` with its interval. Default: no cap (only the
        time budget ``timeout_s`` stops the search early).
    min_rows:
        Labelled rows every group of an attribute needs; below it the attribute's rows
        are ``inconclusive`` (the values are still reported, the reason names the
        group).
    redact_columns:
        Feature columns whose raw values are never shown for witnesses.
    show_witness_values:
        Show raw feature values of witness rows in the report (opt-in; hidden by
        default, because witness rows are real people's records).
    histogram_bins:
        Bins of the per-row distance plot (0: no plot).
    dr_model:
        The model that discriminative risk calls: an MLflow model URI
        (``models:/name@alias``, ``models:/name/3``, ``runs:/<id>/model``; scored with
        ``mlflow.pyfunc.spark_udf`` on the executors, decided by the rule of
        ``columns.prediction`` when that names the same URI, else by the default rule:
        ``score >= 0.5`` or ``label == 1``), a Spark ML ``PipelineModel`` directory
        (``model.save(path)``, any Hadoop path: local, ``hdfs://``, ``s3a://`` ...;
        ``transform`` on the raw feature columns and the sensitive source columns in
        their input types) or a scikit-learn model saved with joblib (a local file that
        every executor can read; ``predict`` on a pandas frame of the same columns).
        ``None``: the model of ``columns.prediction`` when that is a registered model
        (``model_uri``: the same URI, threshold and output, so the flipped rows are
        decided as the audited decisions were), else DR is reported as not computed. A
        model URI that does not resolve, or a local path that does not exist or has the
        wrong shape, stops the run with exit code 2 before any Spark job; a model that
        cannot be loaded or applied gives a failed DR row with the reason.
    dr_model_kind:
        ``auto`` (default): a ``models:/`` or ``runs:/`` URI is an MLflow model (this
        key is then not read); another URI with a scheme other than ``file:`` is a Spark
        ML model (decided without reading the store), a local directory is a Spark ML model, a
        local file a joblib file; ``spark`` or ``sklearn`` say it explicitly.
    dr_ratio:
        Probability of flipping each sensitive attribute for DR.
    dr_level:
        Confidence level of the DR interval (Wilson).
    advanced:
        Engine tuning (:class:`HFMAdvanced`): speed and memory only, never the numbers.
    """

    method: Literal["certified", "approx", "pointwise"] = "certified"
    view: Literal["binary", "any_other_value"] = "binary"
    m1: int = Field(25, ge=1)
    m2: int | None = Field(None, ge=1)
    sampler: Literal["uniform_l1", "reference_sequential"] = "uniform_l1"
    paper_value: bool = False
    max_candidates: int | None = Field(None, ge=1)
    min_rows: int = Field(30, ge=1)
    redact_columns: list[str] = Field(default_factory=list)
    show_witness_values: bool = False
    histogram_bins: int = Field(40, ge=0, le=500)
    dr_model: str | None = None
    dr_model_kind: Literal["auto", "sklearn", "spark"] = "auto"
    dr_ratio: float = Field(0.5, gt=0, le=1)
    dr_level: float = Field(0.95, gt=0, lt=1)
    advanced: HFMAdvanced = Field(default_factory=HFMAdvanced)
    @field_validator("method", mode="before")
    @classmethod
    def _exact_is_certified(cls, value: object) -> object:
        """``exact`` (once a block nested loop) is an alias of ``certified``."""
        if value == "exact":
            _LOG.warning("config key 'audits.hfm.method': 'exact' is read as 'certified', "
                         "which computes the same exact D")
            return "certified"
        return value

    def hash_dump(self) -> dict[str, Any]:
        """:meth:`flat_dump` and ``exact_block_rows`` at its last default (it sized the
        blocks of the exact nested loop, removed with it), for the config hash."""
        return {**self.flat_dump(), "exact_block_rows": 20_000}

    def model_call(self) -> tuple[str, str | None] | None:
        """DR's registered model: ``dr_model`` when it is an MLflow URI; without a
        ``dr_model``, the model of ``columns.prediction`` (if it is registered)."""
        if self.dr_model is None:
            return _KEY, None
        return (_KEY, self.dr_model) if is_model_uri(self.dr_model) else None

    def distance_options(self, m2: int) -> DistanceOptions:
        """What :func:`~fairspark.hfm.compute.hfm_distances` computes, from these options
        and the window ``m2`` (``m2`` here or its default for the rows)."""
        from fairspark.hfm.compute import DistanceOptions

        return DistanceOptions(
            method=self.method, m2=m2, histogram_bins=self.histogram_bins,
            paper_value=self.paper_value, num_partitions=self.advanced.num_partitions,
            rows_per_partition=self.advanced.rows_per_partition,
        )

    def certify_options(self, *, seed: int,
                        time_left: Callable[[], float] | None = None) -> CertifyOptions:
        """How ``certified`` searches, from these options, the sample seed and the
        audit's time budget."""
        from fairspark.hfm.compute import CertifyOptions

        return CertifyOptions(seed=seed, sample_rows=self.advanced.sample_rows,
                              max_candidates=self.max_candidates,
                              local_max_bytes=self.advanced.local_max_bytes,
                              time_left=time_left)

    def check_files(self) -> None:
        """The audit contract's file check: ``dr_model`` (see :meth:`check_dr_model`)."""
        self.check_dr_model()

    def check_dr_model(self) -> None:
        """Check ``dr_model`` before the run (local paths only; see :func:`dr_model_kind`).

        Raises
        ------
        ConfigError
            When the model path is wrong; the message names ``audits.hfm.dr_model``.
        """
        if self.enabled and self.dr_model is not None and not is_model_uri(self.dr_model):
            dr_model_kind(self.dr_model, kind=self.dr_model_kind)
