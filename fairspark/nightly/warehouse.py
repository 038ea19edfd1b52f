"""Optional warehouse output: the long-format rows put into a metastore table.

The table is written as part of the publish (:func:`fairspark.runner`): its name and
database are checked before any work (:func:`check_table`, exit 2 naming
``output.table``), and the date's rows are written from the staged
``metrics.parquet`` before the date's folder is renamed into place, so a failing
write publishes nothing (exit 1, one line in the date's status).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from typing import TYPE_CHECKING

from fairspark.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["append_to_table", "check_table", "replace_partitions", "table_parts"]

log = logging.getLogger("fairspark")

#: one part of a table name: an identifier, or a back-quoted name (`` `` `` doubles ``)
_PART = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_]+)"
_NAME = re.compile(rf"({_PART})(?:\.({_PART}))?(?:\.({_PART}))?")


def table_parts(table: str) -> list[str] | None:
    """The parts of ``[catalog.][database.]table`` unquoted; ``None`` when ``table`` is
    not such a name (blanks, a dot too many, an empty part)."""
    m = _NAME.fullmatch(table.strip()) if isinstance(table, str) else None
    if m is None:
        return None
    return [p[1:-1].replace("``", "`") if p.startswith("`") else p
            for p in m.groups() if p is not None]


def _quoted(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def check_table(spark: SparkSession, table: str) -> None:
    """Raise :class:`~fairspark.errors.ConfigError` (exit 2, naming ``output.table``)
    unless ``table`` is a table name Spark parses whose database exists.

    Checked before any work: a name that cannot be written is found before the audits
    run, not after the date is published.
    """
    parts = table_parts(table)
    if parts is None:
        raise ConfigError(
            f"config key 'output.table' is {table!r}: not a table name "
            "([catalog.][database.]table of letters, digits and '_', or a `quoted` part)")
    try:
        spark.catalog.tableExists(table)
    except Exception as err:  # noqa: BLE001 - a name the catalog cannot parse or look up
        from fairspark.outputs import one_line

        raise ConfigError(f"config key 'output.table' is {table!r}: the catalog refuses "
                          f"the name ({one_line(err)})") from None
    if len(parts) > 1:
        database = ".".join(_quoted(p) for p in parts[:-1])
        if not spark.catalog.databaseExists(database):
            raise ConfigError(
                f"config key 'output.table' is {table!r}: its database {database} does not "
                "exist (create it first, or name a table of an existing database)")


def replace_partitions(df: DataFrame, *, table: str, partition_by: str) -> bool:
    """Write ``df`` into the Parquet metastore table ``table``, partitioned by
    ``partition_by``: created on first use (``True``), otherwise the partitions ``df``
    holds are replaced (dynamic partition overwrite; ``False``) and the others kept.

    A table the catalog does not know whose folder exists (the default session's
    in-memory catalog forgets its tables when the session ends, the earlier runs'
    files stay in the warehouse folder) is declared again over that folder with its
    partitions, then written as a known one: a rerun replaces only its partitions.

    The one way fairspark writes a metastore table (the run's rows, the window's states).
    """
    spark = df.sparkSession
    if not spark.catalog.tableExists(table):
        from pyspark.errors import PySparkException

        try:
            df.write.format("parquet").partitionBy(partition_by).saveAsTable(table)
            return True
        except PySparkException as err:  # a SparkRuntimeException on both session kinds
            location = _existing_location(err)
            if location is None:
                raise
        log.warning("table %s: not in the catalog but its folder %s exists (an earlier "
                    "session's table); declaring it over that folder", table, location)
        _declare(spark, df, table=table, partition_by=partition_by, location=location)
    old = spark.conf.get("spark.sql.sources.partitionOverwriteMode")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        df.select(*spark.table(table).columns).write.insertInto(table, overwrite=True)
    finally:
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", old)
    return False


def _existing_location(err: Exception) -> str | None:
    """The folder named by a ``LOCATION_ALREADY_EXISTS`` error (else ``None``)."""
    condition = getattr(err, "getCondition", lambda: None)() or ""
    if condition != "LOCATION_ALREADY_EXISTS" and "LOCATION_ALREADY_EXISTS" not in str(err):
        return None
    params = getattr(err, "getMessageParameters", lambda: None)() or {}
    location = params.get("location")
    if not location:
        m = re.search(r"location '([^']+)'", str(err))
        location = m.group(1) if m else None
    return location.strip("'`") if location else None


def _declare(spark: SparkSession, df: DataFrame, *, table: str, partition_by: str,
             location: str) -> None:
    """``CREATE TABLE`` ``table`` over the existing ``location`` with ``df``'s columns
    (the partition column last), and its partition folders registered."""
    fields = [f for f in df.schema.fields if f.name != partition_by] + [
        df.schema[partition_by]]
    columns = ", ".join(f"{_quoted(f.name)} {f.dataType.simpleString()}" for f in fields)
    where = location.replace("\\", "\\\\").replace("'", "\\'")
    spark.sql(f"CREATE TABLE {table} ({columns}) USING parquet "
              f"PARTITIONED BY ({_quoted(partition_by)}) LOCATION '{where}'")
    spark.sql(f"ALTER TABLE {table} RECOVER PARTITIONS")


def append_to_table(spark: SparkSession, *, table: str, folder: str, run_date: dt.date) -> None:
    """Put the ``metrics.parquet`` of ``run_date`` under ``folder`` into ``table``.

    The table is Parquet, partitioned by ``run_date``; it is created on first use.
    Writing a date again replaces that date's partition only (dynamic partition
    overwrite, :func:`replace_partitions`), so reruns are idempotent and other dates are
    kept. ``folder`` is the run's staging folder: the write is part of the publish.
    """
    from pyspark.sql import functions as F

    from fairspark.outputs import literal_path

    df = spark.read.parquet(literal_path(f"{folder}/metrics.parquet")).where(
        F.col("run_date") == F.lit(run_date))
    if replace_partitions(df, table=table, partition_by="run_date"):
        log.info("created table %s with run_date=%s", table, run_date)
    else:
        log.info("replaced run_date=%s in table %s", run_date, table)
