"""Spark side of the correlation audit: stratified capped sample, shipping, oracle tasks.

Design (after Anahideh et al., 2021)
------------------------------------
1. Spark draws one stratified sample of the labelled rows with the one sampler
   (:func:`fairspark.sampling.stratified_sample`): strata = label x every attribute's
   privileged flag, proportional (largest-remainder) allocation of ``sample_rows``,
   rows ranked inside their stratum by a seeded hash of the row key, so the sample
   does not depend on partitioning (``sampleBy`` would).
2. The sample (numpy arrays) is shipped to the executors once: a Spark broadcast when
   the session has a SparkContext, otherwise (Spark Connect) inside the task function's
   closure, which Spark serialises once per job, not per row. Python workers cache the
   decoded arrays and each round's split.
3. Rounds (attribute, model, round) are the unit of work: a task runs each of its
   rounds as the sequential loop does, attempt after attempt until ``N`` are accepted
   or the attempt cap is reached, so no attempt beyond the round's last needed one
   runs and there is no second job for rounds that fell short. The rounds are dealt
   round-robin to a fixed number of chunks (round ``g`` to chunk ``g mod C``), so
   every chunk gets the same mix of attributes and models. The chunks run through
   the one task fan-out (:func:`fairspark._fanout.fan_out`, shared with mdfa's
   splits): each chunk is one row (and one partition) of ``spark.range(C)``; a
   ``mapInPandas`` with an explicit schema runs :func:`~._oracle.run_attempt` with
   BLAS/OpenMP/torch pinned to one thread.
   ``C`` is 4 tasks per core by default (at most one per round). All rounds run in one
   wave (one Spark job); under a time budget they run in waves of ``C`` rounds, with
   a partial result after each. Each attempt's result depends on its ids only, so the
   kept set (the first N accepted by attempt number) is the same for any
   partitioning, executor count or task retry.

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairspark._fanout import chunk_ids, fan_out, n_chunks
from fairspark._shipping import Shipped
from fairspark.correlation._batched import batched_family, run_round_batched
from fairspark.correlation._oracle import (
    DEFAULT_METRICS,
    PHASES,
    AttemptStatus,
    OracleData,
    OracleModel,
    RoundSplit,
    run_attempt,
    split_round,
)
from fairspark.correlation._rounds import CPU_COLUMNS, select_rounds
from fairspark.correlation._sample import OracleSample, draw_stratified_sample
from fairspark.correlation.results import RoundSelection

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "AttemptTable",
    "OracleJob",
    "OracleSample",
    "RoundSelection",
    "WaveHooks",
    "chunk_ids",
    "draw_stratified_sample",
    "n_chunks",
    "run_attempt_ids",
    "run_oracle_tasks",
    "run_round_ids",
    "select_rounds",
]

# ---------------------------------------------------------------- the task side
# Per-Python-worker caches: decoded views and round splits, keyed by shipment token.
_DATA_CACHE: dict[tuple[str, int], OracleData] = {}
_SPLIT_CACHE: dict[tuple[str, int, int], RoundSplit] = {}


def _cached_split(
    shipped: Shipped, attr: int, round_id: int, seed: int, test_fraction: float
) -> tuple[OracleData, RoundSplit]:
    key = (shipped.token, attr)
    if key not in _DATA_CACHE:
        if len(_DATA_CACHE) > 16:
            _DATA_CACHE.clear()
        p = shipped.value
        _DATA_CACHE[key] = OracleData(x=p["x"], y=p["y"], priv=p["priv"][:, attr], w=p["w"])
    data = _DATA_CACHE[key]
    skey = (shipped.token, attr, round_id)
    if skey not in _SPLIT_CACHE:
        if len(_SPLIT_CACHE) > 256:
            _SPLIT_CACHE.clear()
        _SPLIT_CACHE[skey] = split_round(
            data, seed=seed, round_id=round_id, test_fraction=test_fraction
        )
    return data, _SPLIT_CACHE[skey]


@dataclass(frozen=True)
class _TaskSpec:
    models: tuple[str, ...]
    model_params: dict[str, dict[str, Any]]
    seeds: tuple[int, ...]
    metrics: tuple[str, ...]
    k: int
    min_accuracy: float
    test_fraction: float
    #: fit the rounds of the linear families together (``linear_fits: batched``)
    batched: bool = True


def _result_columns(metrics: Sequence[str]) -> list[str]:
    return [
        "attr",
        "model",
        "round",
        "attempt",
        "status",
        "reason",
        "accuracy",
        *CPU_COLUMNS,
        *[f"v{i}" for i in range(len(metrics))],
    ]


def _schema(metrics: Sequence[str]) -> str:
    return (
        "attr int, model string, round int, attempt int, status string, reason string, "
        "accuracy double, " + "".join(f"{c} double, " for c in CPU_COLUMNS)
        + ", ".join(f"v{i} double" for i in range(len(metrics)))
    )


def _attempt_row(shipped: Shipped, spec: _TaskSpec, attr: int, mi: int, rnd: int,
                 attempt: int) -> tuple:
    """One attempt of the oracle as a row of the result schema."""
    data, split = _cached_split(shipped, attr, rnd, spec.seeds[attr], spec.test_fraction)
    oracle = OracleModel(model=spec.models[mi], k=spec.k, min_accuracy=spec.min_accuracy,
                         metrics=spec.metrics, model_params=spec.model_params.get(spec.models[mi]))
    res = run_attempt(data, split, oracle, seed=spec.seeds[attr], round_id=rnd, attempt=attempt)
    return (attr, spec.models[mi], rnd, attempt, str(res.status), res.reason, res.accuracy,
            *res.cpu, *res.metrics.tolist())


def _batched_rows(shipped: Shipped, spec: _TaskSpec, attr: int, mi: int, rnd: int,
                  span: tuple[int, int, int]) -> list[tuple]:
    """A round of a linear family, its models fitted together (:mod:`._batched`)."""
    data, split = _cached_split(shipped, attr, rnd, spec.seeds[attr], spec.test_fraction)
    oracle = OracleModel(model=spec.models[mi], k=spec.k, min_accuracy=spec.min_accuracy,
                         metrics=spec.metrics, model_params=spec.model_params.get(spec.models[mi]))
    first, need, cap = span
    done = run_round_batched(data, split, oracle, seed=spec.seeds[attr], round_id=rnd,
                             first=first, need=need, cap=cap)
    return [(attr, spec.models[mi], rnd, a, str(r.status), r.reason, r.accuracy, *r.cpu,
             *r.metrics.tolist()) for a, r in done]


def _result_frame(rows: list[tuple], spec: _TaskSpec) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=_result_columns(spec.metrics)).astype(
        {"attr": "int32", "round": "int32", "attempt": "int32", "accuracy": "float64"}
    )


def run_attempt_ids(
    shipped: Shipped, spec: _TaskSpec, ranges: np.ndarray, ids: np.ndarray
) -> pd.DataFrame:
    """Run the attempts with global ids ``ids`` (rows of ``ranges`` laid end to end).

    ``ranges`` rows are ``(attr, model_index, round, first_attempt, count)``.
    """
    ends = np.cumsum(ranges[:, 4])
    starts = ends - ranges[:, 4]
    rows = []
    for gid in ids:
        j = int(np.searchsorted(ends, gid, side="right"))
        attr, mi, rnd, first, _ = (int(v) for v in ranges[j])
        rows.append(_attempt_row(shipped, spec, attr, mi, rnd, first + int(gid - starts[j])))
    return _result_frame(rows, spec)


def run_round_ids(
    shipped: Shipped, spec: _TaskSpec, rounds: np.ndarray, ids: np.ndarray
) -> pd.DataFrame:
    """Run the rounds ``rounds[ids]`` to completion, one attempt after another.

    ``rounds`` rows are ``(attr, model_index, round, first_attempt, need, cap)``: the
    round runs attempts ``first_attempt, first_attempt + 1, ...`` until ``need`` of
    them are accepted or attempt ``cap`` is reached, as a sequential loop does, so no
    attempt past the round's last needed one runs.
    """
    rows = []
    accepted_status = str(AttemptStatus.ACCEPTED)
    for j in ids:
        attr, mi, rnd, first, need, cap = (int(v) for v in rounds[int(j)])
        model = spec.models[mi]
        if spec.batched and batched_family(model, spec.model_params.get(model)):
            rows += _batched_rows(shipped, spec, attr, mi, rnd, (first, need, cap))
            continue
        accepted, attempt = 0, first
        while accepted < need and attempt < cap:
            row = _attempt_row(shipped, spec, attr, mi, rnd, attempt)
            accepted += row[4] == accepted_status
            rows.append(row)
            attempt += 1
    return _result_frame(rows, spec)


def _profile_row(spec: _TaskSpec, info: dict[str, Any]) -> pd.DataFrame:
    """A task's timings as one row of the result schema (``attr = -1``)."""
    import json

    row = (-1, "", -1, -1, "_profile", json.dumps(info), np.nan,
           *([np.nan] * (len(PHASES) + len(spec.metrics))))
    return pd.DataFrame([row], columns=_result_columns(spec.metrics)).astype(
        {"attr": "int32", "round": "int32", "attempt": "int32", "accuracy": "float64"}
    )


class _WaveWork:
    """A task's work in one wave: the rounds of its chunk (:func:`fairspark._fanout.fan_out`).

    Its timings: seconds to read the shipped sample (``ship_s``), to run the attempts
    into the result frame (``run_s``, and its CPU seconds ``run_cpu_s``), the rounds
    and attempts of the chunk.
    """

    def __init__(self, shipped: Shipped, spec: _TaskSpec, rounds: np.ndarray,
                 chunks: int) -> None:
        self.shipped, self.spec, self.rounds, self.chunks = shipped, spec, rounds, chunks

    def __call__(self, chunk: int) -> tuple[pd.DataFrame, dict[str, Any]]:
        import time

        ids = chunk_ids(len(self.rounds), self.chunks, chunk)
        t0 = time.perf_counter()
        _ = self.shipped.value  # the broadcast, read once per Python worker
        t1, c1 = time.perf_counter(), time.process_time()
        out = run_round_ids(self.shipped, self.spec, self.rounds, ids)
        t2, c2 = time.perf_counter(), time.process_time()
        return out, {"rounds": len(ids), "attempts": len(out), "ship_s": t1 - t0,
                     "run_s": t2 - t1, "run_cpu_s": c2 - c1}


# ---------------------------------------------------------------- the waves
@dataclass
class AttemptTable:
    """Every attempt run, as a pandas DataFrame (bounded by the config, not the table)."""

    attempts: pd.DataFrame
    metrics: list[str]
    waves: int
    shipped_as: str
    profile: list[dict[str, Any]] = field(default_factory=list)
    #: CPU seconds of every attempt's phases (``attr, model, round, attempt`` and
    #: :data:`~._rounds.CPU_COLUMNS`), measured inside the tasks; kept apart from
    #: ``attempts``, whose values depend on the attempts' ids only
    cpu: pd.DataFrame | None = None


@dataclass
class _RoundState:
    """Progress of one (attribute, model, round) over the waves."""

    next_attempt: int = 0
    accepted: int = 0

    def done(self, *, n_samples: int, attempt_cap: int) -> bool:
        """Complete (``n_samples`` accepted) or at the attempt cap."""
        return self.accepted >= n_samples or self.next_attempt >= attempt_cap


@dataclass
class _Waves:
    """The rounds of every (attribute, model) and the attempts run so far."""

    models: tuple[str, ...]
    metrics: tuple[str, ...]
    n_samples: int
    attempt_cap: int
    rounds: dict[tuple[int, int, int], _RoundState]
    frames: list[pd.DataFrame] = field(default_factory=list)
    profile: list[dict[str, Any]] = field(default_factory=list)
    #: (attr, model_index) whose rounds are all planned (no further round will come)
    final: set[tuple[int, int]] = field(default_factory=set)
    #: the most rounds an (attr, model) not yet final may reach (the progress bound)
    max_rounds: int = 0

    def planned(self) -> dict[tuple[int, int], int]:
        """Round ids planned so far per (attr, model_index)."""
        out: dict[tuple[int, int], int] = {}
        for a, mi, _ in self.rounds:
            out[(a, mi)] = out.get((a, mi), 0) + 1
        return out

    def extend(self, targets: Mapping[tuple[int, int], int | None]) -> None:
        """Plan more rounds: ``(attr, model_index) -> rounds in all``, None = no more."""
        have = self.planned()
        for (a, mi), n in targets.items():
            if n is None:
                self.final.add((a, mi))
                continue
            for r in range(have.get((a, mi), 0), int(n)):
                self.rounds[(a, mi, r)] = _RoundState()

    def done_count(self) -> int:
        """Rounds finished (complete or at the attempt cap)."""
        return sum(st.done(n_samples=self.n_samples, attempt_cap=self.attempt_cap)
                   for st in self.rounds.values())

    def bound(self) -> int:
        """Rounds in all at most: the planned ones, and up to ``max_rounds`` where open."""
        return sum(n if key in self.final else max(n, self.max_rounds)
                   for key, n in self.planned().items())

    def plan(self, limit: int | None = None) -> np.ndarray:
        """Rows ``(attr, model_index, round, first_attempt, need, cap)`` of the next wave.

        The rounds not yet done, in (attribute, model, round) order, at most ``limit``.
        """
        rows = []
        for (a, mi, r), st in self.rounds.items():
            if not st.done(n_samples=self.n_samples, attempt_cap=self.attempt_cap):
                rows.append((a, mi, r, st.next_attempt, self.n_samples - st.accepted,
                             self.attempt_cap))
        return np.asarray(rows[:limit], dtype=np.int64).reshape(-1, 6)

    def record(self, rounds: np.ndarray, wave_pdf: pd.DataFrame) -> None:
        """Account for a finished wave: each of its rounds ran to completion or the cap."""
        self.frames.append(wave_pdf)
        ran = wave_pdf.groupby(["attr", "model", "round"]).size()
        accepted = (wave_pdf[wave_pdf["status"] == AttemptStatus.ACCEPTED]
                    .groupby(["attr", "model", "round"]).size())
        for a, mi, r, first, _, _ in rounds.tolist():
            key = (a, self.models[mi], r)
            st = self.rounds[(a, mi, r)]
            st.next_attempt = first + int(ran.get(key, 0))
            st.accepted += int(accepted.get(key, 0))
            if not st.done(n_samples=self.n_samples, attempt_cap=self.attempt_cap):
                raise RuntimeError(f"correlation: round {key} came back incomplete from its task")

    def table(self, shipped_as: str) -> AttemptTable:
        """The attempts so far, sorted by (attr, model, round, attempt)."""
        cols = _result_columns(self.metrics)
        attempts = (
            pd.concat(self.frames, ignore_index=True) if self.frames else pd.DataFrame(columns=cols)
        )
        attempts = (
            attempts.sort_values(["attr", "model", "round", "attempt"], kind="mergesort")
            .reset_index(drop=True)
            .rename(columns={f"v{i}": m for i, m in enumerate(self.metrics)})
        )
        # the timings apart: the attempts are a function of their ids, the seconds not
        cpu = attempts[["attr", "model", "round", "attempt", *CPU_COLUMNS]]
        return AttemptTable(
            attempts=attempts.drop(columns=list(CPU_COLUMNS)),
            cpu=cpu,
            metrics=list(self.metrics),
            waves=len(self.frames),
            shipped_as=shipped_as,
            profile=list(self.profile),
        )


def _default_partitions(spark: SparkSession) -> int:
    """4 tasks per core: the context's default parallelism (classic), or
    ``spark.default.parallelism`` where a Connect session's config sets it (else 2)."""
    from fairspark.session import is_connect

    if not is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism) * 4)
    try:
        cores = int(spark.conf.get("spark.default.parallelism", "2") or 2)
    except ValueError:
        cores = 2
    return max(1, cores) * 4


@dataclass(frozen=True)
class OracleJob:
    """What :func:`run_oracle_tasks` runs: the N x L (x models x attributes) trainings.

    Attributes
    ----------
    attributes:
        Indices into the sample's attributes to run.
    models, model_params:
        Estimator families and their hyperparameters.
    seeds:
        Base seed of every attribute of the sample (indexed like it).
    n_samples, rounds, k, min_accuracy, attempt_cap, test_fraction:
        As in Anahideh et al., 2021 (``rounds``: the first wave's rounds with
        ``more_rounds``, else all).
    metrics:
        Catalogue metrics returned per attempt.
    partitions:
        Tasks (chunks of rounds) of each wave, at most one per round (default: 4 x
        default parallelism); the results do not depend on it.
    shipping:
        ``auto`` (broadcast when the session has a SparkContext, else the task
        closure), ``broadcast`` or ``closure``.
    rounds_per_wave:
        Rounds of each wave (``None``: every round in one wave, one Spark job; a time
        budget sets it so that partial results come in between).
    max_rounds:
        The most rounds an open (attribute, model) may reach (``rounds_max``), for the
        progress bound; default ``rounds``.
    linear_fits:
        ``batched`` (a round's logistic regressions fitted together, :mod:`._batched`)
        or ``per_model`` (one scikit-learn fit per attempt).
    profile:
        Record where the time goes: one dict per task (:class:`_WaveWork`,
        :func:`fairspark._fanout.fan_out`) and per wave (``wave``, ``tasks``,
        ``attempts``, driver-side ``submit`` and ``collected`` epoch seconds) in
        :attr:`AttemptTable.profile`.
    """

    attributes: Sequence[int]
    models: Sequence[str]
    seeds: Sequence[int]
    n_samples: int
    rounds: int
    k: int
    min_accuracy: float
    attempt_cap: int
    test_fraction: float = 0.3
    metrics: Sequence[str] = DEFAULT_METRICS
    model_params: Mapping[str, Mapping[str, Any]] | None = None
    partitions: int | None = None
    shipping: str = "auto"
    rounds_per_wave: int | None = None
    max_rounds: int | None = None
    profile: bool = False
    linear_fits: str = "batched"

    def spec(self) -> _TaskSpec:
        """What every task needs of the job."""
        return _TaskSpec(
            models=tuple(self.models),
            model_params={m: dict(v) for m, v in (self.model_params or {}).items()},
            seeds=tuple(int(s) for s in self.seeds),
            metrics=tuple(self.metrics),
            k=int(self.k),
            min_accuracy=float(self.min_accuracy),
            test_fraction=float(self.test_fraction),
            batched=self.linear_fits == "batched",
        )


@dataclass(frozen=True)
class WaveHooks:
    """What the caller hears between and inside the waves of :func:`run_oracle_tasks`.

    Attributes
    ----------
    on_wave:
        Called with the attempts so far after every wave but the last (a time budget's
        partial result); an exception it raises ends the run.
    more_rounds:
        With ``rounds: auto``: called with the attempts so far whenever every planned
        round is finished; returns, per ``(attribute, model_index)`` still open, the
        round ids to have run in all (more rounds in the next wave) or None (no more).
        None: the job's ``rounds`` are all.
    on_progress:
        Called with ``(rounds done, rounds at most, note)`` after every wave and, from
        a driver thread, every few seconds inside a wave (finished tasks of its Spark
        job, counted in rounds); rate-limiting is the caller's.
    on_rounds:
        Called with every wave's attempt rows (each of its rounds complete) as soon as
        the wave is back, before ``more_rounds`` and ``on_wave``: the per-round cost log.
    """

    on_wave: Callable[[AttemptTable], None] | None = None
    on_rounds: Callable[[pd.DataFrame], None] | None = None
    more_rounds: Callable[[AttemptTable], Mapping[tuple[int, int], int | None]] | None = None
    on_progress: Callable[[int, int, str], None] | None = None


def run_oracle_tasks(
    spark: SparkSession, sample: OracleSample, job: OracleJob, hooks: WaveHooks | None = None
) -> AttemptTable:
    """Run the N x L (x models x attributes) oracle calls as ``mapInPandas`` tasks.

    Parameters
    ----------
    spark:
        The session.
    sample:
        The shipped sample (:func:`draw_stratified_sample`).
    job:
        What to run (:class:`OracleJob`).
    hooks:
        Partial results, more rounds and progress (:class:`WaveHooks`); None: none.

    Returns
    -------
    AttemptTable
        One row per attempt run, sorted by (attr, model, round, attempt).
    """
    hooks = hooks or WaveHooks()
    spec = job.spec()
    keys = [(a, mi, r) for a in job.attributes for mi in range(len(spec.models))
            for r in range(job.rounds)]
    waves = _Waves(
        models=spec.models,
        metrics=spec.metrics,
        n_samples=job.n_samples,
        attempt_cap=job.attempt_cap,
        rounds={key: _RoundState() for key in keys},
        max_rounds=int(job.max_rounds or job.rounds),
    )
    if hooks.more_rounds is None:
        waves.final = {(a, mi) for a, mi, _ in keys}
    payload = {"x": sample.x, "y": sample.y, "w": sample.w, "priv": sample.priv}
    shipped = Shipped(spark, payload, how=job.shipping)
    parts = job.partitions or _default_partitions(spark)
    try:
        _run_waves(spark, shipped, spec, waves, job=job, parts=parts, hooks=hooks)
    finally:
        shipped.release()
    return waves.table(shipped.how)


def _run_waves(
    spark: SparkSession,
    shipped: Shipped,
    spec: _TaskSpec,
    waves: _Waves,
    *,
    job: OracleJob,
    parts: int,
    hooks: WaveHooks,
) -> None:
    """Run waves of rounds until every round is complete or at the attempt cap, and
    ``hooks.more_rounds`` (if given) asks for no further round."""
    import time

    on_progress = hooks.on_progress
    ranges = waves.plan(job.rounds_per_wave)
    while len(ranges):
        chunks = n_chunks(len(ranges), parts)
        t_submit = time.time()
        wave_pdf = fan_out(
            spark, chunks=chunks, work=_WaveWork(shipped, spec, ranges, chunks),
            schema=_schema(spec.metrics), tag="correlation",
            profile_row=functools.partial(_profile_row, spec) if job.profile else None,
            on_tasks=_following(waves, len(ranges), on_progress),
        )
        if job.profile:
            import json

            is_prof = wave_pdf["attr"] == -1
            tasks = [json.loads(r) for r in wave_pdf.loc[is_prof, "reason"]]
            waves.profile.append({"wave": len(waves.frames), "tasks": tasks, "chunks": chunks,
                                  "rounds": len(ranges),
                                  "attempts": int((wave_pdf["attr"] >= 0).sum()),
                                  "submit": t_submit,
                                  "collected": time.time()})
            wave_pdf = wave_pdf[~is_prof].reset_index(drop=True)
        waves.record(ranges, wave_pdf)
        if hooks.on_rounds is not None:
            hooks.on_rounds(wave_pdf)
        ranges = waves.plan(job.rounds_per_wave)
        if not len(ranges) and hooks.more_rounds is not None:
            waves.extend(hooks.more_rounds(waves.table(shipped.how)))
            ranges = waves.plan(job.rounds_per_wave)
        if on_progress is not None:
            on_progress(waves.done_count(), waves.bound(), f"wave {len(waves.frames)} done")
        if len(ranges) and hooks.on_wave is not None:
            hooks.on_wave(waves.table(shipped.how))


def _following(
    waves: _Waves, wave_rounds: int, on_progress: Callable[[int, int, str], None] | None,
) -> Callable[[int, int], None] | None:
    """Inside a wave's Spark job: its finished tasks, in rounds, to ``on_progress``."""
    if on_progress is None:
        return None
    before, bound, wave = waves.done_count(), waves.bound(), len(waves.frames) + 1

    def tick(done_tasks: int, total_tasks: int) -> None:
        ran = int(wave_rounds * done_tasks / max(total_tasks, 1))
        on_progress(before + ran, bound,
                    f"wave {wave}: {done_tasks} of {total_tasks} tasks finished")

    return tick
