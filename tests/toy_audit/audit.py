"""The toy audit's numbers: one aggregation of the prepared rows per attribute."""

from __future__ import annotations

import html
import math
from statistics import NormalDist
from typing import Any

from pyspark.sql import functions as F

from fairspark import columns as C
from fairspark.audits import AuditOutcome, MetricRow, ReportSection, Status, params_json


def run(ctx: Any, params: Any) -> AuditOutcome:
    """Per attribute: favourable-decision rate of the unprivileged less the privileged."""
    z = NormalDist().inv_cdf(0.5 + params.ci_level / 2)
    rows = []
    df = ctx.prepared.rows()
    for a in ctx.attributes(params):
        got = {bool(r["priv"]): (r["n"], r["k"]) for r in df.groupBy(
            F.col(a.priv_col).cast("boolean").alias("priv")).agg(
            F.count(F.lit(1)).alias("n"), F.sum(C.PRED).alias("k")).collect()}
        (n1, k1), (n0, k0) = got[True], got[False]
        p1, p0 = k1 / n1, k0 / n0
        gap = p0 - p1
        se = math.sqrt(p1 * (1 - p1) / n1 + p0 * (1 - p0) / n0)
        rows += [
            MetricRow(audit="toy", attribute=a.name, group="unprivileged", metric="toy_gap",
                      value=gap, lower=gap - z * se, upper=gap + z * se, status=Status.OK,
                      params=params_json(ci_level=params.ci_level)),
            MetricRow(audit="toy", attribute=a.name, group="privileged",
                      metric="toy_rate_privileged", value=p1, status=Status.OK),
        ]
    return AuditOutcome(rows=rows, summary={"attributes": len(rows) // 2}, result=rows)


def render(outcome: AuditOutcome, **_kw: Any) -> list[ReportSection]:
    cells = "".join(f"<li>{html.escape(r.attribute)}: {r.value:.3f}</li>"
                    for r in outcome.result if r.metric == "toy_gap")
    return [ReportSection(title="Toy gap", html=f"<ul>{cells}</ul>", order=50)]
