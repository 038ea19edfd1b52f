"""Optional warehouse output: the long-format rows appended to a metastore table."""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["append_to_table"]

log = logging.getLogger("fairspark")


def append_to_table(spark: SparkSession, *, table: str, folder: str, run_date: dt.date) -> None:
    """Put the published ``metrics.parquet`` of ``run_date`` into ``table``.

    The table is Parquet, partitioned by ``run_date``; it is created on first use.
    Writing a date again replaces that date's partition only (dynamic partition
    overwrite), so reruns are idempotent and other dates are kept.
    """
    from pyspark.sql import functions as F

    df = spark.read.parquet(f"{folder}/metrics.parquet").where(
        F.col("run_date") == F.lit(run_date))
    if not spark.catalog.tableExists(table):
        df.write.format("parquet").partitionBy("run_date").saveAsTable(table)
        log.info("created table %s with run_date=%s", table, run_date)
        return
    cols = spark.table(table).columns
    old = spark.conf.get("spark.sql.sources.partitionOverwriteMode")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        df.select(*cols).write.insertInto(table, overwrite=True)
    finally:
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", old)
    log.info("replaced run_date=%s in table %s", run_date, table)
