"""Incremental nightlies: one mergeable state per daily partition, windows from states.

With ``window`` configured, a run audits the partitions of ``input.partition_column``
that fall in the window ending at the run date (``window.days`` days). Each
partition is aggregated once into a *state*, stored under
``<output.path>/_states/definition=<hash>/<column>=<value>/``:

- ``state.json``: the partition's one-aggregation groups (every input check's
  counters and the weighted confusion cells per combination of the sensitive views,
  :func:`fairspark.prepare.prepare`), its categorical values with their row counts,
  and the fingerprint of its files;
- ``sample.parquet``: its lowest-ranked rows under one seeded hash
  (:func:`fairspark.sampling.hash_bucket` of the row key), when an audit of the run
  audits a sample (the audits whose spec reads ``sample``; ``window.<audit>``
  chooses where the spec offers a choice, e.g. ``window.hfm: sample``).

Everything the group audit and its intervals need is additive, so the window's
groups are the concatenation of its partitions' groups, and its metrics and
intervals equal those of a from-scratch audit of the same rows. Hash-rank samples
merge exactly: the ``K`` lowest ranks of a union are among the ``K`` lowest of each
part; a partition that stored fewer rows than the window's sample needs from it is
re-read for exactly those rows (``summary.json`` ``window.sample.reread``).

A state is keyed by its partition value and by the hash of everything that defines
it (:func:`definition_hash`), never by the run date. It is written to a temporary
folder and renamed into place, ``state.json`` last, so a killed run leaves nothing
that is read. A partition whose files changed since its state was written (file
count, bytes or modification time), or that is named in ``window.restate``
(``--restate``), is aggregated again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairspark.errors import EmptyInputError, FairsparkInputError
from fairspark.nightly.states import STATE_FORMAT, StateStore, corrupt_sample

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from fairspark.audits.prepared import PreparedData
    from fairspark.config_model import Config
    from fairspark.outputs import OutputLocation

__all__ = ["STATE_FORMAT", "Partition", "PartitionListing", "StateStore", "WindowRun",
           "definition_hash", "list_partitions", "partition_date", "prepare_window",
           "window_sample_rows"]

log = logging.getLogger("fairspark")

#: salt of the window sample's ranking hash (independent of every audit's own draws)
SAMPLE_SALT = 30
#: a partition keeps about this many times its expected share of the window sample
SAMPLE_MARGIN = 2.0
#: ... plus this many rows
SAMPLE_EXTRA = 200
_RANK, _WKEY = "_fs_wrank", "_fs_wkey"


@dataclass(frozen=True)
class Partition:
    """One daily partition folder of the input: its value, path and file fingerprint."""

    value: str
    path: str
    fingerprint: dict[str, int]


def window_sample_rows(config: Config) -> int:
    """Rows of the window's merged sample (0: no enabled audit audits one).

    ``window.sample_rows``, else the most rows an audit of the sample audits in a
    rescan: mdfa's and correlation's ``sample_rows``, and with ``window.hfm: sample``
    HFM's ``max_rows`` (its cap; HFM's own ``sample_rows`` sizes the per-group sample
    of its bounds, not the rows it audits). HFM without ``max_rows`` adds nothing:
    it audits the whole merged sample (``check_window`` refuses it alone).
    """
    win = config.window
    if win is None:
        return 0
    enabled = config.audits.enabled()
    sizes = {n: int(getattr(enabled[n], config.audits.audit_spec(n).window_sample_param,
                            0) or 0) for n in readers_of(config, "sample")}
    if not sizes:
        return 0
    if win.sample_rows is not None:
        return int(win.sample_rows)
    return max(sizes.values())


def readers_of(config: Config, what: str) -> list[str]:
    """The enabled audits that read ``what`` (``cells``, ``sample``, ``newest``) under the
    config's window (:meth:`~fairspark.config.Config.window_read`), in run order."""
    return [n for n in config.audits.enabled() if config.window_read(n) == what]


def definition_hash(config: Config) -> str:
    """The hash of everything that defines a partition's state.

    The columns and their roles, the partition column, the reader, the preparation
    settings, the seed, the window sample's size and whether the categorical values
    are counted (an audit encodes features); not the run date, the window's length,
    the outputs or the audits' other parameters.
    """
    enabled = config.audits.enabled()
    blob = {
        "format": STATE_FORMAT,
        # a baseline is refused under a window: its key stays out (states stay valid)
        "columns": config.columns.model_dump(mode="json", exclude={"baseline"}),
        "partition_column": config.input.partition_column,
        "reader": {"format": config.input.format, "options": config.input.options},
        "preparation": config.preparation.model_dump(mode="json",
                                                     exclude={"on_schema_change"}),
        "seed": config.seed,
        "sample_rows": window_sample_rows(config),
        "categories": any(config.audits.audit_spec(n).reads_features for n in enabled),
        "row_key_checked": bool(config.columns.row_key) and any(
            config.audits.audit_spec(n).joins_by_key for n in enabled),
    }
    text = json.dumps(blob, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: one entry of an input folder: (name, is a folder, its files' fingerprint on demand)
_Entry = tuple[str, bool, Callable[[], dict[str, int]]]


def _hadoop_entries(spark: SparkSession, base: str) -> list[_Entry] | None:
    """The entries under ``base`` through Hadoop's FileSystem (a classic session);
    ``None`` when ``base`` does not exist. A folder's fingerprint lists its files
    (recursively, hidden ``_``/``.`` names aside) only when asked."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    Path = jvm.org.apache.hadoop.fs.Path
    root = Path(base)
    fs = root.getFileSystem(conf)
    if not fs.exists(root):
        return None

    def files_of(folder: Any) -> Callable[[], dict[str, int]]:
        def fingerprint() -> dict[str, int]:
            files = size = modified = 0
            it = fs.listFiles(folder, True)
            while it.hasNext():
                f = it.next()
                if f.getPath().getName().startswith(("_", ".")):
                    continue
                files += 1
                size += int(f.getLen())
                modified = max(modified, int(f.getModificationTime()))
            return {"files": files, "bytes": size, "modified_ms": modified}
        return fingerprint

    return [(st.getPath().getName(), bool(st.isDirectory()), files_of(st.getPath()))
            for st in fs.listStatus(root)]


def _connect_entries(spark: SparkSession, base: str) -> list[_Entry] | None:
    """The entries under ``base`` as the Spark Connect server sees them (the session has
    no JVM gateway): Spark's ``binaryFile`` listing of the files below ``base``, never
    their content, aggregated per first-level entry on the server (one row per folder).

    Spark's listing skips hidden ``_``/``.`` files and folders, as the classic listing
    does; a folder without files is not seen. ``None`` when ``base`` does not exist.
    """
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    from fairspark.outputs import literal_path

    root = base.rstrip("/")
    try:
        files = (spark.read.format("binaryFile").option("recursiveFileLookup", "true")
                 .load(literal_path(root)).select("path", "length", "modificationTime"))
        # the path below base (the server qualifies paths: file:/..., s3a://...)
        name = F.regexp_extract(F.col("path"), r"^.*?" + re.escape(_unqualified(root))
                                + r"/(.*)$", 1)
        rows = (files.select(F.split(name, "/").alias("p"), "length", "modificationTime")
                .where(F.size("p") >= 1)
                .groupBy(F.col("p")[0].alias("entry"), (F.size("p") > 1).alias("is_dir"))
                .agg(F.count(F.lit(1)).alias("files"), F.sum("length").alias("bytes"),
                     F.max(F.unix_millis("modificationTime")).alias("modified_ms"))
                .collect())
    except AnalysisException as err:
        if getattr(err, "getCondition", lambda: None)() == "PATH_NOT_FOUND" or \
                "PATH_NOT_FOUND" in str(err):
            return None
        raise
    return [(r["entry"], bool(r["is_dir"]),
             (lambda r=r: {"files": int(r["files"]), "bytes": int(r["bytes"] or 0),
                           "modified_ms": int(r["modified_ms"] or 0)}))
            for r in rows if r["entry"]]


def _unqualified(path: str) -> str:
    """``path`` without its scheme and authority (as the server's qualified paths end)."""
    from urllib.parse import urlparse

    parsed = urlparse(path)
    return parsed.path if parsed.scheme else path


@dataclass(frozen=True)
class PartitionListing:
    """The partition folders of a window's input: those read, and those never read.

    Attributes
    ----------
    partitions:
        The ``<column>=YYYY-MM-DD`` folders (a real calendar date) in the listed date
        range, with their files' fingerprints, in date order.
    ignored:
        Every other entry under the input path (hidden ``_``/``.`` names aside): a
        backup copy ``day=2026-11-20.bak``, an impossible date ``day=2026-11-31``, a
        folder of another name. They are named in one warning and never read.
    """

    partitions: list[Partition]
    ignored: list[str]


def partition_date(name: str, column: str) -> dt.date | None:
    """The date of a partition folder named exactly ``<column>=YYYY-MM-DD`` (else ``None``).

    The date must be a real calendar day: ``day=2026-11-31`` and ``day=2026-11-20.bak``
    are no partitions.
    """
    m = re.fullmatch(re.escape(column) + r"=(\d{4}-\d{2}-\d{2})", name)
    if m is None:
        return None
    try:
        return dt.date.fromisoformat(m.group(1))
    except ValueError:
        return None


def list_partitions(spark: SparkSession, base: str, column: str, *,
                    first: dt.date | None = None,
                    last: dt.date | None = None) -> PartitionListing:
    """The ``<column>=YYYY-MM-DD`` folders under ``base``, with their files' fingerprints.

    Only the folders dated ``first..last`` (both included; ``None``: no bound) have
    their files listed: a table of many years lists only its window's files. Entries
    that are not such a folder (a real calendar date, nothing before or after it) are
    returned in :attr:`PartitionListing.ignored`, whatever their date.

    Raises
    ------
    FairsparkInputError
        When ``base`` does not exist or holds no ``<column>=YYYY-MM-DD`` folder.
    """
    from fairspark.session import is_connect

    entries = (_connect_entries(spark, base) if is_connect(spark)
               else _hadoop_entries(spark, base))
    if entries is None:
        raise FairsparkInputError(f"input {base!r} ('input.path') does not exist")
    out, ignored, dated = [], [], 0
    for name, is_dir, files_of in entries:
        if name.startswith(("_", ".")):
            continue  # _SUCCESS, _temporary, .hive-staging: never data (Spark skips them)
        day = partition_date(name, column) if is_dir else None
        if day is None:
            ignored.append(name)
            continue
        dated += 1
        if (first is not None and day < first) or (last is not None and day > last):
            continue
        out.append(Partition(value=day.isoformat(), path=f"{base.rstrip('/')}/{name}",
                             fingerprint=files_of()))
    if not dated:
        seen = ", ".join(sorted(ignored)[:5]) + (" ..." if len(ignored) > 5 else "")
        raise FairsparkInputError(
            f"input {base!r} has no partition folders '{column}=YYYY-MM-DD' "
            "('input.partition_column'): a window reads a folder partitioned by that "
            "column, one real date a day" + (f"; found {seen}" if ignored else ""))
    return PartitionListing(partitions=sorted(out, key=lambda p: p.value),
                            ignored=sorted(ignored))


@dataclass
class WindowRun:
    """A window prepared from states: what each audit audits, and what was done.

    Attributes
    ----------
    prepared:
        The window's rows, checks and cells merged from its partitions' states (the
        group audit reads its cells; its rows are read only by an audit that asks).
    for_audit:
        Audit name -> the prepared table it audits instead (the merged sample, or the
        newest partition for HFM).
    failed:
        Audit name -> why it cannot run on this window (its prepared table failed).
    info:
        ``summary.json`` ``window``.
    """

    prepared: PreparedData
    for_audit: dict[str, PreparedData] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def unpersist(self) -> None:
        """Release every cached frame."""
        self.prepared.unpersist()
        for p in self.for_audit.values():
            p.unpersist()


def _ranked(df: DataFrame, config: Config, seed: int) -> DataFrame:
    """The audited rows of ``df`` with the window sample's rank and the key it ties on.

    The key is the prepared row key (``columns.row_key``, else a hash of every input
    column), so a row ranks the same in its partition and in the whole window.
    """
    from pyspark.sql import functions as F

    from fairspark.columns import input_col
    from fairspark.prepare import _any_null, _plan_columns
    from fairspark.sampling import hash_bucket

    cols = config.columns
    key = (input_col(cols.row_key).cast("string") if cols.row_key else
           F.xxhash64(*[input_col(c) for c in df.columns]).cast("string"))
    plan = _plan_columns(df, config)
    keyed = df.where(~_any_null(plan)).select("*", key.alias(_WKEY))
    return keyed.select("*", hash_bucket(_WKEY, seed, SAMPLE_SALT).alias(_RANK))


def _aggregate(spark: SparkSession, config: Config, part: Partition, *, reader: Any,
               k: int, prepared: PreparedData | None) -> tuple[dict[str, Any], DataFrame | None]:
    """One partition's state (and its sample rows): one aggregation, one ranked take."""
    from fairspark.prepare import (
        ONE_PASS_MAX_GROUPS,
        _check_unique_keys,
        _one_pass_groups,
        _plan_columns,
        _sensitive_views,
        partition_extras,
    )

    t0 = time.perf_counter()
    df = reader(part.value)
    if prepared is not None and prepared.groups is not None:
        groups = prepared.groups
    else:
        plan = _plan_columns(df, config)
        groups = _one_pass_groups(df, plan, config, _sensitive_views(df, config, plan.types),
                                  max_groups=ONE_PASS_MAX_GROUPS)
        if groups is None:
            raise FairsparkInputError(
                f"partition {part.value!r} of {config.input.partition_column!r} has more than "
                f"{ONE_PASS_MAX_GROUPS} (view, label, decision) groups: a window needs the "
                "one-aggregation preparation (fewer sensitive values)")
        if plan.check_row_key and prepared is None:
            _check_unique_keys(df, config, rows=int(sum(r["n"] for r in groups)))
    cats, hashes = partition_extras(df, config=config, groups=groups)
    kept = int(sum(r["n"] for r in groups if r["_fs_keep"]))
    sample = None
    sample_info: dict[str, Any] = {"rows": 0, "complete": True, "threshold": None}
    if k > 0 and kept > 0:
        take = min(k, kept)
        ranked = _ranked(df, config, config.seed)
        top = ranked.orderBy(_RANK, _WKEY).limit(take)
        rows = top.collect()  # at most k rows, in rank order
        sample = spark.createDataFrame(rows, schema=top.schema)
        complete = take >= kept
        last = rows[-1]
        sample_info = {"rows": take, "complete": complete,
                       "threshold": None if complete else [int(last[_RANK]), str(last[_WKEY])]}
    state = {"format": STATE_FORMAT, "partition": part.value, "path": part.path,
             "fingerprint": part.fingerprint, "rows_kept": kept, "groups": groups,
             "categories": cats, "label_hashes": hashes, "sample": sample_info,
             "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "seconds": round(time.perf_counter() - t0, 3)}
    return state, sample


@dataclass
class _Listed:
    """The window's partitions found under the input, and its rows as one frame."""

    first: dt.date
    last: dt.date
    listing: PartitionListing
    missing: list[str]
    whole: DataFrame

    @property
    def parts(self) -> list[Partition]:
        return self.listing.partitions


def _list_window(spark: SparkSession, config: Config) -> _Listed:
    """List the window's partition folders and read them (only those folders).

    Raises
    ------
    FairsparkInputError
        (exit 2) when the window holds no partition or the partition column is missing.
    """
    win, inp = config.window, config.input
    assert win is not None and inp.path and inp.partition_column
    column = inp.partition_column
    run_date = config.effective_run_date()
    first = run_date - dt.timedelta(days=win.days - 1)
    listing = list_partitions(spark, inp.path, column, first=first, last=run_date)
    parts = listing.partitions
    have = {dt.date.fromisoformat(p.value) for p in parts}
    missing = [(first + dt.timedelta(days=i)).isoformat() for i in range(win.days)
               if first + dt.timedelta(days=i) not in have]
    if not parts:
        raise EmptyInputError(
            f"no partition of {column!r} under {inp.path!r} falls in the window "
            f"{first.isoformat()}..{run_date.isoformat()} ('window.days': {win.days})"
            + (f"; not partition folders '{column}=YYYY-MM-DD' (not read): "
               f"{', '.join(listing.ignored[:10])}" if listing.ignored else ""))
    from fairspark.io import read_input

    # only the window's folders: a stray folder beside them is never listed or read
    whole = read_input(spark, input_config=inp, partitions=[p.path for p in parts])
    if column not in whole.columns:
        from fairspark.errors import MissingColumnError

        raise MissingColumnError(column, "partition column ('input.partition_column')",
                                 whole.columns)
    return _Listed(first=first, last=run_date, listing=listing, missing=missing, whole=whole)


def _aggregate_unseen(spark: SparkSession, config: Config, listed: _Listed, *,
                      store: StateStore, reader: Callable[[str], DataFrame], k_part: int,
                      newest_prepared: PreparedData | None,
                      ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Every partition's state: reused where valid, else aggregated and written.

    Returns the states by partition value and why each aggregated one was.
    """
    column = config.input.partition_column
    restate = {str(v) for v in config.window.restate}  # type: ignore[union-attr]
    newest = listed.parts[-1]
    states: dict[str, dict[str, Any]] = {}
    why: dict[str, str] = {}
    for p in listed.parts:
        old = store.read(p.value)
        if p.value in restate:
            why[p.value] = "restated (window.restate)"
        elif old is None and p.value in store.unreadable:
            why[p.value] = store.unreadable[p.value]
        elif old is None:
            why[p.value] = "new"
        elif old.get("fingerprint") != p.fingerprint:
            why[p.value] = "its files changed since its state was written"
        if p.value not in why:
            states[p.value] = old  # type: ignore[assignment]
            continue
        log.info("window: aggregating %s=%s (%s)", column, p.value, why[p.value])
        state, sample = _aggregate(spark, config, p, reader=reader, k=k_part,
                                   prepared=newest_prepared if p is newest else None)
        store.write(p.value, state, sample)
        states[p.value] = state
    return states, why


def _merged_groups(states: dict[str, dict[str, Any]]) -> Any:
    """The window's groups, categorical counts and label hashes merged from its states."""
    from fairspark.prepare import MergedGroups

    groups = [g for v in states for g in states[v]["groups"]]
    cats: dict[str, dict[str, int]] = {}
    for st in states.values():
        for c, vals in st["categories"].items():
            acc = cats.setdefault(c, {})
            for v, n in vals.items():
                acc[v] = acc.get(v, 0) + int(n)
    hashes = [h for st in states.values() for h in (st.get("label_hashes") or [])]
    label_hashes = hashes if any(st.get("label_hashes") is not None
                                 for st in states.values()) else None
    return MergedGroups(groups, cats, label_hashes)


def _window_notes(config: Config, listed: _Listed, others: list[str]) -> list[str]:
    """The run's warnings about the window: folders not read, days missing, states of
    another definition."""
    column, win = config.input.partition_column, config.window
    assert win is not None
    notes, ignored, missing = [], listed.listing.ignored, listed.missing
    if ignored:
        n = len(ignored)
        notes.append(f"not read: {n} entr{'y' if n == 1 else 'ies'} under "
                     f"{config.input.path!r} that {'is' if n == 1 else 'are'} not a "
                     f"partition folder '{column}=YYYY-MM-DD' (a real calendar date): "
                     f"{', '.join(ignored[:10])}{' ...' if n > 10 else ''}")
    if missing:
        notes.append(f"the window {listed.first.isoformat()}..{listed.last.isoformat()} "
                     f"has no partition for {len(missing)} of its {win.days} days: "
                     f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
    if others:
        notes.append(f"states written under another definition ({', '.join(others[:3])}) "
                     "are not reused: the columns, seed, preparation or sample size changed "
                     "since; this run aggregated its partitions again")
    return notes


def _prepare_for(run: WindowRun, names: list[str], where: str,
                 make: Callable[[], PreparedData]) -> PreparedData | None:
    """Prepare the table that ``names`` audit (``where``, in words, for a failure);
    each audit fails alone with the reason when it cannot be prepared."""
    try:
        prepared = make()
    except FairsparkInputError as err:
        for n in names:
            run.failed[n] = f"{where}: {err}"
        return None
    for n in names:
        run.for_audit[n] = prepared
    return prepared


def prepare_window(spark: SparkSession, config: Config, *,
                   timings: dict[str, float]) -> WindowRun:
    """Aggregate the window's unseen partitions, merge every state, prepare the audits.

    The whole preparation holds the lock of the definition's states
    (:meth:`~fairspark.outputs.OutputLocation.states_lock`): a run of another date that
    shares them waits, so its clean-up never deletes this run's staging and the two never
    replace the same state at once.

    Raises
    ------
    FairsparkInputError
        (exit 2) when the window holds no partition, a partition is not a date, the
        merged window fails an input check, or another run held the states longer than
        ``output.states_wait_s``.
    """
    from fairspark.outputs import OutputLocation

    out = OutputLocation(spark, config.output.path)
    with out.states_lock(definition_hash(config), run_date=config.effective_run_date(),
                         stale_after_s=config.output.lock_stale_s,
                         wait_s=config.output.states_wait_s):
        return _prepare_window(spark, config, out, timings=timings)


def _prepare_window(spark: SparkSession, config: Config, out: OutputLocation, *,
                    timings: dict[str, float]) -> WindowRun:
    """:func:`prepare_window`'s work, run holding the states' lock."""
    from pyspark.sql import functions as F

    from fairspark.prepare import prepare

    config.check_window()  # the restated dates against the (pinned) run date's window
    column = config.input.partition_column
    t0 = time.perf_counter()
    listed = _list_window(spark, config)
    parts, whole = listed.parts, listed.whole

    def reader(value: str) -> DataFrame:
        # an expression of the partition column only: Spark prunes the other folders
        return whole.where(F.col(column).cast("string") == F.lit(value))

    store = StateStore(out, definition=definition_hash(config), column=column)
    for line in store.cleanup():
        log.warning("states: %s", line)
    others = store.other_definitions()
    timings["window: list"] = round(time.perf_counter() - t0, 3)
    k_total = window_sample_rows(config)
    k_part = min(k_total, math.ceil(SAMPLE_MARGIN * k_total / len(parts)) + SAMPLE_EXTRA) \
        if k_total else 0
    newest = parts[-1]
    on_newest, on_sample = readers_of(config, "newest"), readers_of(config, "sample")
    run = WindowRun(prepared=None)  # type: ignore[arg-type]
    newest_prepared = _prepare_for(
        run, on_newest, f"the newest partition {column}={newest.value}",
        lambda: prepare(reader(newest.value), config=config)) if on_newest else None
    t1 = time.perf_counter()
    states, why = _aggregate_unseen(spark, config, listed, store=store, reader=reader,
                                    k_part=k_part, newest_prepared=newest_prepared)
    timings["window: aggregate"] = round(time.perf_counter() - t1, 3)
    if config.output.table:
        t4 = time.perf_counter()
        publish_states_table(spark, table=f"{config.output.table}_states", store=store,
                             states=states)
        timings["window: states table"] = round(time.perf_counter() - t4, 3)
    t2 = time.perf_counter()
    window_df = whole.where(F.col(column).cast("string").isin([p.value for p in parts]))
    run.prepared = prepare(window_df, config=config, merged=_merged_groups(states))
    timings["window: merge"] = round(time.perf_counter() - t2, 3)
    sample_info: dict[str, Any] = {"rows": 0}
    if k_total:
        t3 = time.perf_counter()
        sample_df, sample_info = _merged_sample(spark, config, store, states, parts,
                                                reader=reader, k=k_total)
        _prepare_for(run, on_sample, "the window's merged sample",
                     lambda: prepare(sample_df, config=config))
        timings["window: sample"] = round(time.perf_counter() - t3, 3)
    for n in _window_notes(config, listed, others):
        log.warning("window: %s", n)
        run.prepared.warnings.append(n)
    run.info = {
        "column": column, "days": config.window.days, "first": listed.first.isoformat(),
        "last": listed.last.isoformat(), "partitions": [p.value for p in parts],
        "missing": listed.missing, "ignored": listed.listing.ignored, "aggregated": why,
        "reused": sorted(set(states) - set(why)),
        "definition": store.definition, "other_definitions": others,
        "states": store.root, "sample": sample_info,
        "audits_on_sample": sorted(on_sample),
        "audits_on_newest": sorted(on_newest),
        "newest": newest.value,
    }
    return run

def publish_states_table(spark: SparkSession, *, table: str, store: StateStore,
                         states: dict[str, dict[str, Any]]) -> None:
    """The window's states as rows of the metastore table ``table`` (with ``output.table``).

    One row per partition of the window: the definition hash, the partition, its kept
    rows, its sample's size and its folder, when it was written, the fingerprint and
    the groups (JSON). The table is Parquet, partitioned by ``definition``; each run
    replaces its definition's rows (:func:`~fairspark.nightly.warehouse.replace_partitions`),
    others are kept.
    """
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(n, t) for n, t in [
        ("partition", T.StringType()), ("rows_kept", T.LongType()),
        ("sample_rows", T.LongType()), ("folder", T.StringType()),
        ("written_utc", T.StringType()), ("fingerprint", T.StringType()),
        ("groups", T.StringType()), ("definition", T.StringType())]])
    rows = [(v, int(st["rows_kept"]), int(st["sample"]["rows"]), store.folder(v),
             st.get("written_utc"), json.dumps(st["fingerprint"], sort_keys=True),
             json.dumps(st["groups"], default=str), store.definition)
            for v, st in sorted(states.items())]
    from fairspark.nightly.warehouse import replace_partitions

    replace_partitions(spark.createDataFrame(rows, schema=schema).coalesce(1), table=table,
                       partition_by="definition")


def _merged_sample(spark: SparkSession, config: Config, store: StateStore,
                   states: dict[str, dict[str, Any]], parts: list[Partition], *,
                   reader: Any, k: int) -> tuple[DataFrame, dict[str, Any]]:
    """The ``k`` lowest-ranked rows of the window, from its partitions' stored samples.

    A partition that stored only its lowest rows up to a threshold below the merged
    sample's ``k``-th rank may hold rows the window needs: its rows up to that rank
    are read again (once; the ``k``-th rank can only fall).
    """
    from pyspark.sql import functions as F

    from fairspark.outputs import literal_path

    paths = [f"{store.folder(v)}/sample.parquet" for v, st in states.items()
             if st["sample"]["rows"]]
    if not paths:
        raise EmptyInputError("the window's partitions have no audited rows to sample")
    try:
        stored = spark.read.parquet(*[literal_path(p) for p in paths])
        rows = stored.orderBy(_RANK, _WKEY).limit(k).collect()
    except Exception as err:
        named = corrupt_sample(err, store, list(states))
        if named is None:
            raise
        raise named from None
    reread = []
    # the k-th rank of the stored rows; with fewer than k stored, every row may count
    kth = (int(rows[-1][_RANK]), str(rows[-1][_WKEY])) if len(rows) >= k else None
    short = [v for v, st in states.items() if not st["sample"]["complete"]
             and (kth is None or tuple(st["sample"]["threshold"]) < kth)]
    extra = None
    for v in short:
        thr = states[v]["sample"]["threshold"]
        part = _ranked(reader(v), config, config.seed)
        cond = (F.col(_RANK) > thr[0]) | ((F.col(_RANK) == thr[0]) & (F.col(_WKEY) > thr[1]))
        if kth is not None:
            cond = cond & ((F.col(_RANK) < kth[0]) | ((F.col(_RANK) == kth[0]) &
                                                      (F.col(_WKEY) <= kth[1])))
        # at most k rows of each partition can enter the sample
        part = part.where(cond).orderBy(_RANK, _WKEY).limit(k)
        extra = part if extra is None else extra.unionByName(part)
        reread.append(v)
    if extra is not None:
        rows = sorted([*rows, *extra.collect()],
                      key=lambda r: (int(r[_RANK]), str(r[_WKEY])))[:k]
    schema = stored.schema
    sample = spark.createDataFrame(rows, schema=schema).drop(_RANK, _WKEY)
    info = {"rows": len(rows), "rows_wanted": k, "partitions_reread": reread,
            "seed_salt": SAMPLE_SALT}
    return sample, info
