"""The kept rounds of one (attribute, model) and the CPU seconds every round cost.

:func:`select_rounds` keeps the first N accepted attempts of each round (Anahideh et al., 2021);
:func:`round_costs` sums the CPU seconds each attempt measured inside its task, per
phase (:data:`~._oracle.PHASES`), over the attempts of each round.

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fairspark.correlation._oracle import PHASES, AttemptStatus
from fairspark.correlation.results import RoundSelection
from fairspark.numbers import fmt_fixed

__all__ = ["CPU_COLUMNS", "cost_summary", "round_cost_line", "round_costs", "select_rounds"]

#: Attempt-table columns with the CPU seconds of each phase, in :data:`PHASES` order.
CPU_COLUMNS: tuple[str, ...] = tuple(f"cpu_{p}" for p in PHASES)


def round_costs(attempts: pd.DataFrame) -> pd.DataFrame:
    """CPU seconds per phase of every round run, summed over all its attempts.

    Parameters
    ----------
    attempts : attempt rows (``attr, model, round`` and :data:`CPU_COLUMNS`).

    Returns
    -------
    DataFrame
        One row per (attr, model, round): ``attempts`` run and one column per phase
        (``draw, fit, predict, metrics``) plus ``total``; every attempt counts, the
        ones past a round's N-th acceptance or past the stopping round included:
        they were paid for.
    """
    keys = ["attr", "model", "round"]
    if attempts.empty:
        return pd.DataFrame(columns=[*keys, "attempts", *PHASES, "total"])
    g = attempts.groupby(keys, sort=True)
    out = g[list(CPU_COLUMNS)].sum().rename(columns=dict(zip(CPU_COLUMNS, PHASES, strict=True)))
    out.insert(0, "attempts", g.size())
    out["total"] = out[list(PHASES)].sum(axis=1)
    return out.reset_index()


def round_cost_line(row: Any, *, attribute: str) -> str:
    """One DEBUG line: a round's attempts and CPU seconds per phase (internal cost;
    ``summary.json`` keeps it)."""
    phases = ", ".join(f"{p} {fmt_fixed(getattr(row, p), 2)}" for p in PHASES)
    return (f"correlation {attribute}/{row.model} round {int(row.round)}: "
            f"{int(row.attempts)} attempts, CPU s {fmt_fixed(row.total, 2)} ({phases})")


def cost_summary(costs: pd.DataFrame) -> dict[str, Any]:
    """The ``cost`` entry of one (attribute, model) in ``summary.json``.

    ``cpu_s`` sums every round run; ``cpu_s_per_round`` is its mean over the rounds
    run; ``cpu_s_by_round`` lists each round's total (round-id order).
    """
    n = len(costs)
    tot = {p: round(float(costs[p].sum()), 4) for p in (*PHASES, "total")}
    return {
        "rounds_run": n,
        "attempts": int(costs["attempts"].sum()) if n else 0,
        "cpu_s": tot,
        "cpu_s_per_round": {p: round(v / n, 4) for p, v in tot.items()} if n else None,
        "cpu_s_by_round": [round(float(v), 4) for v in costs["total"]],
        "measured": "time.process_time() inside the Spark tasks, per attempt and phase",
    }


def select_rounds(
    attempts: pd.DataFrame,
    *,
    metrics: Sequence[str],
    n_samples: int,
    rounds: int,
    attempt_cap: int | None = None,
) -> RoundSelection:
    """Keep the first ``n_samples`` accepted attempts (by attempt number) of each round.

    ``attempts`` holds the rows of one (attribute, model). A round with fewer accepted
    attempts is dropped, with its reason, once it has run ``attempt_cap`` attempts
    (always when ``attempt_cap`` is None); before that it is pending (a partial run).
    """
    metrics = list(metrics)
    values, ids, accs, pending = [], [], [], []
    dropped: dict[int, str] = {}
    reasons: dict[str, int] = {}
    used_attempts = accepted = 0
    for r in range(rounds):
        rd = attempts[attempts["round"] == r].sort_values("attempt", kind="mergesort")
        ok = rd[rd["status"] == AttemptStatus.ACCEPTED]
        if len(ok) >= n_samples:
            # the round's attempts up to its N-th acceptance: what Algorithm 2 needed,
            # independent of how many attempts the waves ran beyond it
            rd = rd[rd["attempt"] <= ok["attempt"].iloc[n_samples - 1]]
        used_attempts += len(rd)
        accepted += int((rd["status"] == AttemptStatus.ACCEPTED).sum())
        for why in rd.loc[rd["status"] != AttemptStatus.ACCEPTED, "reason"]:
            key = "accuracy below min_accuracy" if str(why).startswith("accuracy") else str(why)
            reasons[key] = reasons.get(key, 0) + 1
        if len(ok) >= n_samples:
            kept = ok.iloc[:n_samples]
            values.append(kept[metrics].to_numpy(np.float64))
            accs.append(kept["accuracy"].to_numpy(np.float64))
            ids.append(r)
        elif attempt_cap is not None and len(rd) < attempt_cap:
            pending.append(r)
        else:
            dropped[r] = (
                f"round {r}: {len(ok)} of {len(rd)} attempts accepted, fewer than "
                f"n_samples={n_samples} within the attempt cap"
            )
    return RoundSelection(
        values=values,
        round_ids=ids,
        dropped=dropped,
        attempts=used_attempts,
        accepted=accepted,
        rejected_reasons=reasons,
        accuracies=np.concatenate(accs) if accs else np.empty(0),
        pending=pending,
    )
