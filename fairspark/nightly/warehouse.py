"""Optional warehouse output: the long-format rows appended to a metastore table."""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["append_to_table", "replace_partitions"]

log = logging.getLogger("fairspark")


def replace_partitions(df: DataFrame, *, table: str, partition_by: str) -> bool:
    """Write ``df`` into the Parquet metastore table ``table``, partitioned by
    ``partition_by``: created on first use (``True``), otherwise the partitions ``df``
    holds are replaced (dynamic partition overwrite; ``False``) and the others kept.

    The one way fairspark writes a metastore table (the run's rows, the window's states).
    """
    spark = df.sparkSession
    if not spark.catalog.tableExists(table):
        df.write.format("parquet").partitionBy(partition_by).saveAsTable(table)
        return True
    old = spark.conf.get("spark.sql.sources.partitionOverwriteMode")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        df.select(*spark.table(table).columns).write.insertInto(table, overwrite=True)
    finally:
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", old)
    return False


def append_to_table(spark: SparkSession, *, table: str, folder: str, run_date: dt.date) -> None:
    """Put the published ``metrics.parquet`` of ``run_date`` into ``table``.

    The table is Parquet, partitioned by ``run_date``; it is created on first use.
    Writing a date again replaces that date's partition only (dynamic partition
    overwrite, :func:`replace_partitions`), so reruns are idempotent and other dates are
    kept.
    """
    from pyspark.sql import functions as F

    df = spark.read.parquet(f"{folder}/metrics.parquet").where(
        F.col("run_date") == F.lit(run_date))
    if replace_partitions(df, table=table, partition_by="run_date"):
        log.info("created table %s with run_date=%s", table, run_date)
    else:
        log.info("replaced run_date=%s in table %s", run_date, table)
