"""Writing a run's outputs and publishing them atomically.

A date's outputs are written under ``<output>/_tmp-run_date=<D>-<uuid>/``, then
published by renaming that folder to ``<output>/run_date=<D>/`` (a previous folder
for the same date is first moved aside and deleted only after the new one is in
place), and a ``_SUCCESS`` marker is written last. File-system work goes through
Hadoop's ``FileSystem`` so the same code publishes to a local disk, HDFS or an
object store.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import uuid
from dataclasses import asdict
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from fairspark._values import nan_to_none

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from fairspark.audits.base import MetricRow

__all__ = ["OutputLocation", "ROW_COLUMNS", "rows_schema", "to_long_rows"]

log = logging.getLogger("fairspark")

ROW_COLUMNS: tuple[str, ...] = (
    "run_date", "dataset", "audit", "attribute", "group", "metric", "metric_b", "model",
    "value", "lower", "upper", "status", "detail", "params", "config_hash",
    "fairspark_version", "schema_version",
)


def rows_schema():
    """The Spark schema of ``metrics.parquet``."""
    from pyspark.sql import types as T

    s, d = T.StringType(), T.DoubleType()
    fields = {
        "run_date": T.DateType(), "value": d, "lower": d, "upper": d,
        "schema_version": T.IntegerType(),
    }
    return T.StructType([T.StructField(c, fields.get(c, s), True) for c in ROW_COLUMNS])


def to_long_rows(
    rows: list[MetricRow], *, run_date: dt.date, dataset: str, config_hash: str,
    version: str, schema_version: int,
) -> list[dict[str, Any]]:
    """Add the run columns to audit rows (NaN becomes null; +/-inf is kept)."""
    out = []
    for r in rows:
        d = asdict(r)
        d.update(run_date=run_date, dataset=dataset, config_hash=config_hash,
                 fairspark_version=version, schema_version=schema_version)
        for k in ("value", "lower", "upper"):
            d[k] = nan_to_none(d[k])
        out.append({c: d.get(c) for c in ROW_COLUMNS})
    return out


class OutputLocation:
    """The output folder of a run, accessed through Hadoop's FileSystem API."""

    def __init__(self, spark: SparkSession, base: str):
        self.spark = spark
        if not urlparse(base).scheme:
            base = os.path.abspath(base)
        self.base = base.rstrip("/")
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = self._Path(self.base).getFileSystem(conf)
        # no .crc side files next to the outputs on a local disk
        self._fs.setWriteChecksum(False)
        self._fs.setVerifyChecksum(False)

    # -- small FS helpers --------------------------------------------------------
    def path(self, *parts: str) -> str:
        """Join ``parts`` under the base folder."""
        return "/".join([self.base, *parts])

    def exists(self, path: str) -> bool:
        """Does ``path`` exist?"""
        return bool(self._fs.exists(self._Path(path)))

    def delete(self, path: str) -> None:
        """Delete ``path`` recursively (no error when it is missing)."""
        self._fs.delete(self._Path(path), True)

    def rename(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst``; raise when the file system refuses."""
        if not self._fs.rename(self._Path(src), self._Path(dst)):
            raise OSError(f"could not rename {src} to {dst}")

    def write_text(self, path: str, text: str) -> None:
        """Write a UTF-8 text file (overwriting)."""
        stream = self._fs.create(self._Path(path), True)
        try:
            data = text.encode("utf-8")
            chunk = 1 << 20
            for i in range(0, len(data), chunk):
                stream.write(bytearray(data[i:i + chunk]))
        finally:
            stream.close()

    def read_text(self, path: str) -> str:
        """Read a small UTF-8 text file."""
        return "\n".join(
            r.value for r in self.spark.read.text(path, wholetext=True).collect()
        )

    def list_run_dates(self) -> list[str]:
        """The published run dates (folders ``run_date=D`` with a ``_SUCCESS`` marker)."""
        if not self.exists(self.base):
            return []
        out = []
        for st in self._fs.listStatus(self._Path(self.base)):
            name = st.getPath().getName()
            if st.isDirectory() and name.startswith("run_date="):
                if self.exists(self.path(name, "_SUCCESS")):
                    out.append(name.split("=", 1)[1])
        return sorted(out)

    # -- the run's outputs ---------------------------------------------------------
    def staging(self, run_date: dt.date) -> str:
        """A fresh temporary folder for this run's outputs."""
        p = self.path(f"_tmp-run_date={run_date.isoformat()}-{uuid.uuid4().hex[:12]}")
        self._fs.mkdirs(self._Path(p))
        return p

    def write_metrics(self, folder: str, long_rows: list[dict[str, Any]]) -> None:
        """Write ``metrics.parquet`` (one file; result rows are few)."""
        df = self.spark.createDataFrame(
            [tuple(r[c] for c in ROW_COLUMNS) for r in long_rows], schema=rows_schema()
        )
        df.coalesce(1).write.mode("overwrite").parquet(f"{folder}/metrics.parquet")

    def publish(self, staging: str, run_date: dt.date) -> str:
        """Move ``staging`` to ``run_date=D`` (replacing an earlier run) and mark success."""
        final = self.path(f"run_date={run_date.isoformat()}")
        old = None
        if self.exists(final):
            old = self.path(f"_old-run_date={run_date.isoformat()}-{uuid.uuid4().hex[:12]}")
            self.rename(final, old)
        try:
            self.rename(staging, final)
        except Exception:
            if old is not None:  # put the previous outputs back
                self.rename(old, final)
            raise
        if old is not None:
            self.delete(old)
        self.write_text(self.path(f"run_date={run_date.isoformat()}", "_SUCCESS"), "")
        return final


def summary_json(summary: dict[str, Any]) -> str:
    """Serialise the summary (NaN -> null, dates -> ISO strings)."""

    def clean(x: Any) -> Any:
        if isinstance(x, float):
            if math.isnan(x):
                return None
            if math.isinf(x):
                return "inf" if x > 0 else "-inf"
            return x
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        if isinstance(x, dt.date):
            return x.isoformat()
        if hasattr(x, "item"):  # numpy scalar
            return clean(x.item())
        return x

    return json.dumps(clean(summary), indent=2, sort_keys=False)
