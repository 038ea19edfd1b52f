"""Spark side of the correlation audit: stratified capped sample, shipping, oracle tasks.

Design (METHODS §3 "design card")
---------------------------------
1. Spark draws one stratified sample of the labelled rows, strata = label x every
   attribute's privileged flag, proportional allocation capped at ``sample_rows``.
   Rows are ranked inside their stratum by a seeded ``xxhash64`` of the row key, so the
   sample does not depend on partitioning (``sampleBy`` would).
2. The sample (numpy arrays) is shipped to the executors once: a Spark broadcast when
   the session has a SparkContext, otherwise (Spark Connect) inside the task function's
   closure, which Spark serialises once per job, not per row. Python workers cache the
   decoded arrays and each round's split.
3. Every attempt (attribute, model, round, attempt) is one row of ``spark.range``; a
   ``mapInPandas`` with an explicit schema runs :func:`~._oracle.run_attempt` on it
   with BLAS/OpenMP pinned to one thread. Attempts run in waves: the first wave runs
   attempts ``0..N-1`` of every round, later waves only the next attempts of rounds that
   have fewer than N accepted models, up to the attempt cap. Each attempt's result
   depends on its ids only, so the kept set (the first N accepted by attempt number) is
   the same for any partitioning, executor count or task retry.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fairspark._shipping import Shipped as _Shipped
from fairspark.correlation._oracle import (
    CELLS,
    DEFAULT_METRICS,
    OracleData,
    RoundSplit,
    run_attempt,
    split_round,
)

__all__ = [
    "AttemptTable",
    "OracleSample",
    "draw_stratified_sample",
    "run_oracle_tasks",
    "select_rounds",
]


@dataclass
class OracleSample:
    """The capped stratified sample every training task reads.

    Attributes
    ----------
    x, y, w : features (n, d), labels (1.0 = favourable), weights.
    priv : (n, a) privileged flags, one column per attribute.
    attributes : attribute names, in column order of ``priv``.
    population_rows : labelled rows in the table (before the cap).
    """

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    priv: np.ndarray
    attributes: list[str]
    population_rows: int
    population_cells: dict[str, np.ndarray] = field(default_factory=dict)

    def for_attribute(self, i: int) -> OracleData:
        """The oracle's view of attribute ``i`` (binary privileged / unprivileged)."""
        return OracleData(x=self.x, y=self.y, priv=self.priv[:, i], w=self.w)


def draw_stratified_sample(
    df,
    *,
    priv_cols: Sequence[str],
    attributes: Sequence[str],
    label_col: str = "_fs_label",
    features_col: str = "_fs_x",
    weight_col: str | None = "_fs_w",
    key_col: str | None = "_fs_key",
    max_rows: int,
    seed: int,
) -> OracleSample:
    """Draw the labelled rows' stratified sample with Spark and bring it to the driver.

    Parameters
    ----------
    df : Spark DataFrame with the prepared-table columns.
    priv_cols, attributes : privileged-flag columns and the attribute names.
    label_col, features_col, weight_col, key_col : column names; ``weight_col=None``
        means weight 1, ``key_col=None`` ranks rows by a hash of the used columns.
    max_rows : cap on the sample's rows (proportional allocation per stratum; every
        non-empty stratum keeps at least one row).
    seed : seed of the ranking hash.

    Returns
    -------
    OracleSample
        Rows ordered by (stratum, hash), independent of the table's partitioning.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    missing = [
        c
        for c in [label_col, features_col, *priv_cols, weight_col, key_col]
        if c and c not in df.columns
    ]
    if missing:
        from fairspark.errors import MissingColumnError

        raise MissingColumnError(missing[0], "correlation input", df.columns)
    w_expr = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    flags = [
        F.coalesce(F.col(c).cast("boolean"), F.lit(False)).alias(f"_p{i}")
        for i, c in enumerate(priv_cols)
    ]
    base_df = df.where(F.col(label_col).isNotNull()).select(
        F.col(label_col).cast("double").alias("_y"),
        F.col(features_col).alias("_x"),
        w_expr.alias("_w"),
        *flags,
        *([F.col(key_col).cast("string").alias("_k")] if key_col else []),
    )
    pcols = [f"_p{i}" for i in range(len(priv_cols))]
    stratum = F.concat_ws(
        "|",
        F.col("_y").cast("int").cast("string"),
        *[F.col(c).cast("int").cast("string") for c in pcols],
    )
    key_cols = ["_k"] if key_col else ["_y", "_x", "_w", *pcols]
    ranked_df = base_df.select(
        "*",
        stratum.alias("_stratum"),
        F.xxhash64(F.lit(int(seed)), *key_cols).alias("_h1"),
        F.xxhash64(F.lit(int(seed) + 1), "_y", "_x", "_w", *pcols).alias("_h2"),
    )
    counts = {
        r["_stratum"]: int(r["n"])
        for r in ranked_df.groupBy("_stratum").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    total = sum(counts.values())
    if total == 0:
        return OracleSample(
            x=np.empty((0, 0)),
            y=np.empty(0),
            w=np.empty(0),
            priv=np.empty((0, len(priv_cols)), bool),
            attributes=list(attributes),
            population_rows=0,
        )
    frac = min(1.0, max_rows / total)
    take = {s: max(1, math.floor(n * frac)) for s, n in counts.items()}
    take_map = F.create_map(*[x for s, t in sorted(take.items()) for x in (F.lit(s), F.lit(t))])
    win = Window.partitionBy("_stratum").orderBy("_h1", "_h2")

    def ranked_sample(prefilter: bool) -> pd.DataFrame:
        src_df = ranked_df
        if prefilter:
            # _h1 is uniform over the signed 64-bit range: keep the rows whose hash falls in
            # the lowest p_s of it (with a margin), so a stratum's window sorts about
            # take_s rows instead of the whole stratum. The smallest take_s hashes are the
            # same either way whenever at least take_s rows pass (checked below).
            thr = {}
            for st, n_s in counts.items():
                t_s = take[st]
                p_s = min(1.0, (t_s + 6 * math.sqrt(t_s) + 20) / n_s)
                thr[st] = min(2**63 - 1, math.floor(-(2**63) + p_s * 2.0**64))
            thr_map = F.create_map(
                *[x for st, v in sorted(thr.items()) for x in (F.lit(st), F.lit(v))]
            )
            src_df = ranked_df.where(F.col("_h1") <= F.element_at(thr_map, F.col("_stratum")))
        return (
            src_df.withColumn("_rn", F.row_number().over(win))
            .where(F.col("_rn") <= F.element_at(take_map, F.col("_stratum")))
            .select("_stratum", "_h1", "_h2", "_y", "_x", "_w", *pcols)
            .toPandas()
        )

    sample_pdf = ranked_sample(prefilter=True)
    got = sample_pdf.groupby("_stratum").size().to_dict()
    if any(got.get(st, 0) < t for st, t in take.items()):  # rare: too few passed the filter
        sample_pdf = ranked_sample(prefilter=False)
    sample_pdf = sample_pdf.sort_values(["_stratum", "_h1", "_h2"], kind="mergesort").reset_index(
        drop=True
    )
    n = len(sample_pdf)
    x = (
        np.vstack([np.asarray(v, dtype=np.float64) for v in sample_pdf["_x"]])
        if n
        else np.empty((0, 0))
    )
    priv = sample_pdf[pcols].to_numpy(dtype=bool) if pcols else np.empty((n, 0), bool)
    pop_cells: dict[str, np.ndarray] = {}
    for i, a in enumerate(attributes):
        cells = np.zeros(4, dtype=np.int64)
        for s, c in counts.items():
            parts = s.split("|")
            cells[2 * int(parts[1 + i]) + int(parts[0])] += c
        pop_cells[a] = cells
    return OracleSample(
        x=x,
        y=sample_pdf["_y"].to_numpy(np.float64),
        w=sample_pdf["_w"].to_numpy(np.float64),
        priv=priv,
        attributes=list(attributes),
        population_rows=total,
        population_cells=pop_cells,
    )


# Per-Python-worker caches: decoded views and round splits, keyed by shipment token.
_DATA_CACHE: dict[tuple[str, int], OracleData] = {}
_SPLIT_CACHE: dict[tuple[str, int, int], RoundSplit] = {}


def _cached_split(
    shipped: _Shipped, attr: int, round_id: int, seed: int, test_fraction: float
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


def _result_columns(metrics: Sequence[str]) -> list[str]:
    return [
        "attr",
        "model",
        "round",
        "attempt",
        "status",
        "reason",
        "accuracy",
        *[f"v{i}" for i in range(len(metrics))],
    ]


def run_attempt_ids(
    shipped: _Shipped, spec: _TaskSpec, ranges: np.ndarray, ids: np.ndarray
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
        attempt = first + int(gid - starts[j])
        data, split = _cached_split(shipped, attr, rnd, spec.seeds[attr], spec.test_fraction)
        res = run_attempt(
            data,
            split,
            model=spec.models[mi],
            seed=spec.seeds[attr],
            round_id=rnd,
            attempt=attempt,
            k=spec.k,
            min_accuracy=spec.min_accuracy,
            metrics=spec.metrics,
            model_params=spec.model_params.get(spec.models[mi]),
        )
        rows.append(
            (
                attr,
                spec.models[mi],
                rnd,
                attempt,
                res.status,
                res.reason,
                res.accuracy,
                *res.metrics.tolist(),
            )
        )
    return pd.DataFrame(rows, columns=_result_columns(spec.metrics)).astype(
        {"attr": "int32", "round": "int32", "attempt": "int32", "accuracy": "float64"}
    )


def _schema(metrics: Sequence[str]) -> str:
    return (
        "attr int, model string, round int, attempt int, status string, reason string, "
        "accuracy double, " + ", ".join(f"v{i} double" for i in range(len(metrics)))
    )


@dataclass
class AttemptTable:
    """Every attempt run, as a pandas DataFrame (bounded by the config, not the table)."""

    attempts: pd.DataFrame
    metrics: list[str]
    waves: int
    shipped_as: str


def _default_partitions(spark) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism) * 4)
    except Exception:  # noqa: BLE001 - no SparkContext (Spark Connect)
        return 8


def run_oracle_tasks(
    spark,
    sample: OracleSample,
    *,
    attributes: Sequence[int],
    models: Sequence[str],
    seeds: Sequence[int],
    n_samples: int,
    rounds: int,
    k: int,
    min_accuracy: float,
    attempt_cap: int,
    test_fraction: float = 0.3,
    metrics: Sequence[str] = DEFAULT_METRICS,
    model_params: Mapping[str, Mapping[str, Any]] | None = None,
    partitions: int | None = None,
    shipping: str = "auto",
) -> AttemptTable:
    """Run the N x L (x models x attributes) oracle calls as ``mapInPandas`` tasks.

    Parameters
    ----------
    spark : the session.
    sample : the shipped sample (:func:`draw_stratified_sample`).
    attributes : indices into ``sample.attributes`` to run.
    models, model_params : estimator families and hyperparameters.
    seeds : base seed of every attribute of ``sample`` (indexed like it).
    n_samples, rounds, k, min_accuracy, attempt_cap, test_fraction : METHODS §3.
    metrics : catalogue metrics returned per attempt.
    partitions : Spark partitions of each wave (default: 4 x default parallelism).
    shipping : ``auto`` (broadcast when the session has a SparkContext, else the task
        closure), ``broadcast`` or ``closure``.

    Returns
    -------
    AttemptTable
        One row per attempt run, sorted by (attr, model, round, attempt).
    """
    metrics = tuple(metrics)
    spec = _TaskSpec(
        models=tuple(models),
        model_params={m: dict(v) for m, v in (model_params or {}).items()},
        seeds=tuple(int(s) for s in seeds),
        metrics=metrics,
        k=int(k),
        min_accuracy=float(min_accuracy),
        test_fraction=float(test_fraction),
    )
    payload = {"x": sample.x, "y": sample.y, "w": sample.w, "priv": sample.priv}
    shipped = _Shipped(spark, payload, how=shipping)
    n_parts = partitions or _default_partitions(spark)
    schema = _schema(metrics)
    # state per (attr, model_index, round): next attempt number, accepted so far
    state = {
        (a, mi, r): [0, 0] for a in attributes for mi in range(len(models)) for r in range(rounds)
    }
    frames: list[pd.DataFrame] = []
    waves = 0
    try:
        while True:
            ranges = []
            for (a, mi, r), (nxt, acc) in state.items():
                need = n_samples - acc
                if need <= 0 or nxt >= attempt_cap:
                    continue
                if nxt == 0:
                    n_new = n_samples
                else:
                    # generous, so that a second wave nearly always completes the round:
                    # every wave is a Spark job with its own fixed cost
                    rate = max(acc / nxt, 0.02)
                    n_new = math.ceil(need / rate * 1.25 + 3 * math.sqrt(need / rate)) + 2
                n_new = min(n_new, attempt_cap - nxt)
                ranges.append((a, mi, r, nxt, n_new))
            if not ranges:
                break
            waves += 1
            ranges_arr = np.asarray(ranges, dtype=np.int64)
            total = int(ranges_arr[:, 4].sum())

            def task_fn(
                batches: Iterator[pd.DataFrame], _ranges=ranges_arr
            ) -> Iterator[pd.DataFrame]:
                from threadpoolctl import threadpool_limits

                from fairspark._testing import maybe_fail_first_attempt

                maybe_fail_first_attempt("correlation")
                with threadpool_limits(limits=1):
                    for b in batches:
                        yield run_attempt_ids(shipped, spec, _ranges, b["id"].to_numpy())

            wave_pdf = (
                spark.range(0, total, 1, numPartitions=max(1, min(n_parts, total)))
                .mapInPandas(task_fn, schema=schema)
                .toPandas()
            )
            frames.append(wave_pdf)
            for a, mi, r, nxt, n_new in ranges:
                st = state[(a, mi, r)]
                st[0] = nxt + n_new
            acc_counts = (
                wave_pdf[wave_pdf["status"] == "accepted"]
                .groupby(["attr", "model", "round"])
                .size()
            )
            for (a, mname, r), c in acc_counts.items():
                state[(int(a), list(models).index(mname), int(r))][1] += int(c)
    finally:
        shipped.release()
    cols = _result_columns(metrics)
    attempts = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    attempts = attempts.sort_values(
        ["attr", "model", "round", "attempt"], kind="mergesort"
    ).reset_index(drop=True)
    attempts = attempts.rename(columns={f"v{i}": m for i, m in enumerate(metrics)})
    return AttemptTable(
        attempts=attempts, metrics=list(metrics), waves=waves, shipped_as=shipped.how
    )


@dataclass
class RoundSelection:
    """The kept samples of one (attribute, model): first N accepted per complete round."""

    values: list[np.ndarray]
    round_ids: list[int]
    dropped: dict[int, str]
    attempts: int  #: attempts up to each round's N-th acceptance (all, for dropped rounds)
    accepted: int
    rejected_reasons: dict[str, int]
    accuracies: np.ndarray


def select_rounds(
    attempts: pd.DataFrame, *, metrics: Sequence[str], n_samples: int, rounds: int
) -> RoundSelection:
    """Keep the first ``n_samples`` accepted attempts (by attempt number) of each round.

    ``attempts`` holds the rows of one (attribute, model). A round with fewer accepted
    attempts (it hit the attempt cap) is dropped and its reason recorded.
    """
    metrics = list(metrics)
    values, ids, accs = [], [], []
    dropped: dict[int, str] = {}
    reasons: dict[str, int] = {}
    used_attempts = accepted = 0
    for r in range(rounds):
        rd = attempts[attempts["round"] == r].sort_values("attempt", kind="mergesort")
        ok = rd[rd["status"] == "accepted"]
        if len(ok) >= n_samples:
            # the round's attempts up to its N-th acceptance: what Algorithm 2 needed,
            # independent of how many attempts the waves ran beyond it
            rd = rd[rd["attempt"] <= ok["attempt"].iloc[n_samples - 1]]
        used_attempts += len(rd)
        accepted += int((rd["status"] == "accepted").sum())
        for why in rd.loc[rd["status"] != "accepted", "reason"]:
            key = "accuracy below min_accuracy" if str(why).startswith("accuracy") else str(why)
            reasons[key] = reasons.get(key, 0) + 1
        if len(ok) < n_samples:
            dropped[r] = (
                f"round {r}: {len(ok)} of {len(rd)} attempts accepted, fewer than "
                f"n_samples={n_samples} within the attempt cap"
            )
            continue
        kept = ok.iloc[:n_samples]
        values.append(kept[metrics].to_numpy(np.float64))
        accs.append(kept["accuracy"].to_numpy(np.float64))
        ids.append(r)
    return RoundSelection(
        values=values,
        round_ids=ids,
        dropped=dropped,
        attempts=used_attempts,
        accepted=accepted,
        rejected_reasons=reasons,
        accuracies=np.concatenate(accs) if accs else np.empty(0),
    )


__all__ += ["RoundSelection", "run_attempt_ids"]
_ = CELLS
