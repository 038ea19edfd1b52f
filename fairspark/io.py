"""Reading the scored table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fairspark.errors import ConfigError, EmptyInputError, FairsparkInputError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from fairspark.config_model import InputConfig

__all__ = ["read_input"]


def read_input(spark: SparkSession, *, input_config: InputConfig,
               partitions: list[str] | None = None) -> DataFrame:
    """Read the input table and apply the optional ``where`` filter.

    Parameters
    ----------
    spark:
        The session to read with.
    input_config:
        ``config.input``: a path plus format (parquet, csv, orc, json) with reader
        options, or a metastore table name.
    partitions:
        Read only these folders under ``input.path`` (a window's partition folders),
        keeping ``input.path`` as the base of partition discovery, so the partition
        column is a column and no other folder is listed or read.

    Raises
    ------
    FairsparkInputError
        When the path or table does not exist or cannot be read.
    ConfigError
        When the ``where`` filter is not a valid SQL predicate over the table.
    """
    from pyspark.errors import AnalysisException

    src = input_config.table or input_config.path
    try:
        if input_config.table:
            df = spark.table(input_config.table)
        else:
            reader = spark.read.format(input_config.format)
            opts = {k: str(v).lower() if isinstance(v, bool) else str(v)
                    for k, v in input_config.options.items()}
            if input_config.format == "csv":
                opts.setdefault("header", "true")
                opts.setdefault("inferSchema", "true")
            if partitions is not None:
                opts["basePath"] = input_config.path
                df = reader.options(**opts).load(partitions)
            else:
                df = reader.options(**opts).load(input_config.path)
    except AnalysisException as err:
        first = _first_line(err)
        raise FairsparkInputError(
            f"cannot read input {src!r} (format {input_config.format!r}): {first}"
        ) from None
    if not df.columns:
        raise EmptyInputError(f"input {src!r} has no columns")
    if input_config.where:
        try:
            df = df.where(input_config.where)
            df.schema  # noqa: B018  (analyse now so a bad predicate fails here)
        except AnalysisException as err:
            first = _first_line(err)
            raise ConfigError(
                f"config key 'input.where': {input_config.where!r} is not a valid filter "
                f"on {src!r}: {first}"
            ) from None
        except Exception as err:  # noqa: BLE001 - a ParseException is no AnalysisException
            raise ConfigError(
                f"config key 'input.where': {input_config.where!r} is not a valid filter: "
                f"{_first_line(err)}"
            ) from None
    return df


def _first_line(err: BaseException) -> str:
    """The first non-empty line of an error (Spark's parse errors start with a newline)."""
    for line in str(err).splitlines():
        if line.strip():
            return line.strip()
    return type(err).__name__
