"""Earlier runs' results, read back from the output location (for trends and persistence)."""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.outputs import OutputLocation

__all__ = ["HEADLINE_METRICS", "load_history"]

log = logging.getLogger("fairspark")

#: audit -> metrics whose trend the report shows (group metrics in the binary view).
HEADLINE_METRICS: dict[str, tuple[str, ...]] = {
    "group": ("statistical_parity_difference", "disparate_impact", "tpr_difference",
              "average_odds_difference", "equalized_odds_difference"),
    "hfm": ("df", "D", "D_f", "DR"),
    "mdfa": ("gamma", "gamma_max", "delta"),
    "correlation": ("representative",),
}

_COLUMNS = ["run_date", "audit", "attribute", "group", "metric", "metric_b", "model", "value",
            "lower", "upper", "status", "config_hash", "fairspark_version"]


def load_history(
    out: OutputLocation, *, before: dt.date, max_runs: int, max_rows_per_run: int = 20_000,
) -> pd.DataFrame:
    """Headline and limit rows of the last ``max_runs`` published runs before ``before``.

    Only result rows are read (never the audited table), at most
    ``max_rows_per_run`` of them per run, so the driver receives a bounded frame.
    """
    from pyspark.sql import functions as F

    dates = [d for d in out.list_run_dates() if d < before.isoformat()][-max_runs:]
    if not dates or max_runs == 0:
        return pd.DataFrame(columns=_COLUMNS)
    cond = F.col("audit") == "limits"
    for audit, metrics in HEADLINE_METRICS.items():
        c = (F.col("audit") == audit) & F.col("metric").isin(list(metrics))
        if audit == "group":
            c = c & (F.col("group") == "unprivileged")
        cond = cond | c
    frames = []
    for d in dates:
        path = out.path(f"run_date={d}", "metrics.parquet")
        try:
            df = out.spark.read.parquet(path)
        except Exception as err:  # noqa: BLE001 - a damaged old run must not stop tonight's
            log.warning("history: cannot read %s: %s", path, str(err).splitlines()[0])
            continue
        cols = [c for c in _COLUMNS if c in df.columns]
        rows = df.where(cond).select(*cols).limit(max_rows_per_run).collect()
        frames.append(pd.DataFrame([r.asDict() for r in rows], columns=cols))
    if not frames:
        return pd.DataFrame(columns=_COLUMNS)
    hist = pd.concat(frames, ignore_index=True)
    hist["run_date"] = pd.to_datetime(hist["run_date"]).dt.date.astype(str)
    return hist
