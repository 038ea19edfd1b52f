"""Command line: ``fairspark audit`` (and ``python jobs/audit.py`` / ``spark-submit``).

Both entry points run :func:`main`; the only difference is who creates the
SparkSession: under ``spark-submit`` the session already configured by
spark-submit is used; from the console script a local session is started with the
settings of ``config.spark``. With ``--remote sc://host:port`` (``spark.remote``) either
runs against a Spark Connect server instead (``docs/connect.md``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from fairspark._version import __version__

__all__ = ["main", "build_parser", "closing_lines", "config_overrides"]

log = logging.getLogger("fairspark")

#: Spark's log settings for the local sessions the CLI starts (a file of the package)
_LOG4J2 = Path(__file__).resolve().parent / "conf" / "log4j2.properties"

#: a config that did not parse has no ``output.lock_stale_s``: its default (6 h)
_LOCK_STALE_S = 21600.0


#: what ``fairspark audit --help`` says after the options
_AUDIT_EPILOG = """\
example:
  fairspark audit --config conf/adult_demo.yaml --run-date 2026-11-29
  fairspark audit                  # the bundled Adult demo (fairspark/conf/demo.yaml)
  spark-submit --master yarn jobs/audit.py --config my.yaml
  fairspark audit --config my.yaml --remote sc://host:15002   # on a Spark Connect server

outputs, under <output.path>/run_date=<YYYY-MM-DD>/ (published all at once):
  metrics.parquet   long-format rows: audit, attribute, group, metric, value, interval
  summary.json      the run: input, audits' statuses, limits, timings
  report.html       one self-contained page for people
  _SUCCESS          written last
  and <output.path>/_status/run_date=<D>.json: the exit code and progress of every run

exit codes:
  0  all audits completed, no limit gates
  2  bad config or input, found before any output (the message names the key/column)
  4  an audit could not run on this data or ran past its budget (the others published)
  3  a configured limit is violated (--no-fail-on-violation: exit 0 and report it)
  1  unexpected crash or a failed write (nothing new published)
  143/130  ended by SIGTERM/SIGINT

docs: README.md, docs/config.md (every key), docs/operations.md (nightly runs, exit
codes), docs/report.md (reading the report), docs/connect.md (Spark Connect)
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser shared by the console script and the spark-submit job."""
    p = argparse.ArgumentParser(
        prog="fairspark",
        description="Fairness audits of a scored table on Spark: "
                    "`fairspark audit --config FILE` (see `fairspark audit --help`).",
    )
    p.add_argument("--version", action="version", version=f"fairspark {__version__}")
    sub = p.add_subparsers(dest="command")
    a = sub.add_parser(
        "audit", help="run the audits of a config (default: the Adult demo)",
        description="Audit a scored table (features, sensitive attributes, label, "
                    "prediction or score) for fairness: the group-metric catalogue with "
                    "intervals, HFM, mdfa and representative metrics, as the config's "
                    "`audits:` section says, and write the outputs of one run date.",
        epilog=_AUDIT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--config", help="YAML config; without it the bundled Adult demo runs")
    a.add_argument("--run-date", help="run date YYYY-MM-DD (default: config or today)")
    a.add_argument("--output", help="output folder (overrides output.path)")
    a.add_argument("--input", dest="input_path", help="input path (overrides input.path)")
    a.add_argument("--where", help="row filter (overrides input.where)")
    a.add_argument("--master", help="Spark master for a local session (overrides spark.master)")
    a.add_argument("--remote", metavar="URL",
                   help="run on a Spark Connect server, sc://host:port (overrides "
                        "spark.remote; needs pip install 'fairspark[connect]')")
    a.add_argument("--seed", type=int, help="base seed (overrides seed)")
    a.add_argument("--no-report", action="store_true", help="do not write report.html")
    a.add_argument("--baseline-column", metavar="COLUMN",
                   help="a second decision on the same rows (today's model) to compare the "
                        "audited one with (overrides columns.baseline.column)")
    a.add_argument(
        "--no-fail-on-violation", action="store_true",
        help="report violated limits but exit 0 (leave gating to a downstream task)",
    )
    a.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="override any config key, e.g. --set audits.group.ci_level=0.9 (YAML value)",
    )
    a.add_argument(
        "--restate", action="append", default=[], metavar="PARTITION",
        help="with 'window': aggregate this partition (YYYY-MM-DD) again even if its "
             "stored state looks valid (repeatable)",
    )
    a.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    return p


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Dotted-key overrides from the CLI flags."""
    import yaml

    from fairspark.errors import ConfigError

    ov: dict[str, Any] = {
        "run_date": args.run_date,
        "output.path": args.output,
        "input.path": args.input_path,
        "input.where": args.where,
        "spark.master": args.master,
        "spark.remote": getattr(args, "remote", None),
        "seed": args.seed,
    }
    if args.no_report:
        ov["output.report"] = False
    if getattr(args, "baseline_column", None):
        ov["columns.baseline.column"] = args.baseline_column
    if getattr(args, "restate", None):
        ov["window.restate"] = list(args.restate)
    for item in args.set:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            ov[k.strip()] = yaml.safe_load(v)
        except yaml.YAMLError:
            raise ConfigError(f"--set {item!r}: the value is not valid YAML") from None
    if args.run_date:
        try:
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", args.run_date):
                raise ValueError
            dt.date.fromisoformat(args.run_date)
        except ValueError:
            raise ConfigError(f"--run-date {args.run_date!r}: expected a date as YYYY-MM-DD "
                              "(e.g. 2026-11-29)") from None
    return ov


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is now (test runners swap it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _setup_logging(quiet: bool) -> None:
    # our own handler: under spark-submit the root logger may already be configured
    logger = logging.getLogger("fairspark")
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    if not any(getattr(h, "_fairspark", False) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(
            "%(asctime)s fairspark %(levelname)s %(message)s", datefmt="%H:%M:%S"))
        handler._fairspark = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
    logging.getLogger("py4j").setLevel(logging.WARNING)


#: a session setting that records who chose ``spark.driver.memory`` (``machine``: the CLI)
DRIVER_MEMORY_SOURCE = "spark.fairspark.driverMemorySource"


def local_driver_memory() -> str:
    """The driver heap of a local session: half of this machine's memory, 1-32 GiB.

    Spark's own default (1 GiB) is too small for a local run over a table of a few
    million rows (a 904k-row, 51-column file failed in preparation with it).
    """
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return "2g"
    return f"{min(max(total // 2 // 2**30, 1), 32)}g"


def _session(config, *, under_submit: bool):
    from fairspark._daemon import preload_modules
    from fairspark._threads import AUDITS_ENV, PRELOAD_ENV
    from fairspark.session import _is_local, build_session

    remote = config.spark.remote
    if remote is not None and not _is_local(remote):  # a server's: its static conf is its own
        return build_session(remote=remote, conf=config.spark.conf)
    # (pyspark's local Connect server starts here, with the settings of a local master)
    if under_submit and remote is None:  # spark-submit already configured the session
        return build_session(master=None, app_name=config.spark.app_name)
    conf = dict(config.spark.conf)
    # the worker daemon imports only what the enabled audits' Spark tasks need
    # (fairspark._daemon): an HFM run does not pay for torch in its first Python job
    audits = ",".join(config.audits.enabled())
    os.environ[AUDITS_ENV] = audits
    conf.setdefault(f"spark.executorEnv.{AUDITS_ENV}", audits)
    # and the modules themselves, so that the daemon does not load the registry first
    modules = ",".join(preload_modules())
    os.environ[PRELOAD_ENV] = modules
    conf.setdefault(f"spark.executorEnv.{PRELOAD_ENV}", modules)
    local = (remote or config.spark.master).startswith("local")
    if local:
        # Spark's own log at WARN less what a user cannot act on (the file says which)
        conf.setdefault("spark.driver.extraJavaOptions",
                        f"-Dlog4j2.configurationFile={_LOG4J2}")
    if "spark.driver.memory" not in conf and local:
        conf["spark.driver.memory"] = local_driver_memory()
        # read back by the runner for summary.json's "spark" section
        conf[DRIVER_MEMORY_SOURCE] = "machine"
        log.info("local session: spark.driver.memory=%s (half of this machine's memory; set "
                 "spark.conf.spark.driver.memory in the config to change it)",
                 conf["spark.driver.memory"])
    return build_session(master=config.spark.master, app_name=config.spark.app_name, conf=conf,
                         remote=remote)


def _status_after_error(spark, config, code: int, message: str,
                        err: BaseException | None = None, *,
                        args: argparse.Namespace | None = None,
                        under_submit: bool = False) -> None:
    """Best effort: leave ``_status/run_date=D.json`` so a scheduler sees the failure.

    A run refused by the date's lock (:class:`~fairspark.errors.RunLockedError`) leaves
    the status alone: it belongs to the run holding the lock, which is still writing
    the date and will record its own exit code; so does a run whose status the runner
    already wrote (with its run id). A config that could not be parsed still names
    its output path and run date (:func:`_output_target`): the status is written there,
    unless a live run holds that date's lock.
    """
    from fairspark.errors import RunLockedError
    from fairspark.outputs import OutputPathError

    if isinstance(err, RunLockedError | OutputPathError) or getattr(
            err, "fairspark_status_written", False):
        return  # (an OutputPathError: the location cannot hold a status file either)
    from fairspark._run_status import status_record

    try:
        if config is not None:
            base, run_date = config.output.path, config.effective_run_date().isoformat()
        else:
            target = _output_target(args)
            if target is None:
                return
            base, run_date = target
        record = status_record(run_date, exit_code=code, error=message,
                               state="terminated" if code in (130, 143) else None)
        text = json.dumps(record, indent=2, default=str)
        scheme = urlparse(base).scheme
        remote = config is not None and config.spark.remote is not None
        if scheme in ("", "file") and not remote:
            # plain file I/O: works when the JVM has died (an OutOfMemoryError in the
            # driver), which used to leave the status at "running" for ever
            _write_local_status(base, run_date, text)
            return
        from fairspark.outputs import OutputLocation, _stale

        if spark is None:
            if config is not None and config.spark.remote is not None:
                return  # the store is the Connect server's, which this run never reached
            spark = _session_for_status(under_submit=under_submit)
        out = OutputLocation(spark, base)
        lock = out.path("_status", f"run_date={run_date}.lock")
        if out.exists(lock) and not _stale(out._lock_holder(lock), _LOCK_STALE_S):
            return  # a live run is writing the date: the status is its own
        out.write_text(out.path("_status", f"run_date={run_date}.json"), text)
    except Exception as werr:  # noqa: BLE001
        from fairspark.outputs import one_line

        log.warning("could not write the status file: %s", one_line(werr))


def _output_target(args: argparse.Namespace | None) -> tuple[str, str] | None:
    """(output path, run date) of a config that did not parse, when both can be read."""
    import yaml

    if args is None or not args.config or getattr(args, "remote", None):
        return None  # (a Connect run's outputs are the server's: not written from here)
    try:
        raw = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        raw = None
    raw = raw if isinstance(raw, dict) else {}
    if isinstance(raw.get("spark"), dict) and raw["spark"].get("remote"):
        return None
    output = raw.get("output") if isinstance(raw.get("output"), dict) else {}
    base = args.output or output.get("path")
    # the date the run asked for, wherever it came from (the last --set wins); a date
    # that does not parse names no run: no status is filed under another date
    asked = [v.split("=", 1)[1].strip() for v in args.set
             if v.split("=", 1)[0].strip() == "run_date" and "=" in v]
    run_date = (args.run_date or (asked[-1] if asked else None) or raw.get("run_date")
                or dt.datetime.now(dt.timezone.utc).date())
    run_date = str(run_date).strip("'\"")
    if not isinstance(base, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", run_date):
        return None
    if not urlparse(base).scheme:
        base = os.path.abspath(base)
    return base.rstrip("/"), run_date


def _write_local_status(base: str, run_date: str, text: str) -> None:
    """The status file of a local output folder, written without Spark (a config error,
    or a run whose JVM died before its own status was written); a live run's lock is
    respected."""
    from fairspark.outputs import _stale, read_lock_record

    folder = Path(urlparse(base).path if base.startswith("file:") else base) / "_status"
    lock = folder / f"run_date={run_date}.lock"
    if lock.exists() and not _stale(read_lock_record(lock), _LOCK_STALE_S):
        return  # a live run is writing the date: the status is its own
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".run_date={run_date}.json.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(folder / f"run_date={run_date}.json")


def _session_for_status(*, under_submit: bool):
    """A session to reach a remote output location for a status file (config errors)."""
    from fairspark.session import build_session

    return build_session(master=None if under_submit else "local[1]",
                         app_name="fairspark-status")


def _load(args: argparse.Namespace):
    """The config of the run (the bundled demo's without ``--config``) and whether it is it."""
    from fairspark.config import load_config

    overrides = config_overrides(args)
    if args.config:
        return load_config(args.config, overrides=overrides), False
    from fairspark.demo import demo_config

    return demo_config(overrides=overrides), True


def _start(config, *, under_submit: bool, demo: bool, arm: Callable[[], None],
           timings: dict[str, float]):
    """The session of the run (after the Java check), with the demo's input written.

    ``arm`` installs the run's signal handlers again once the session is built
    (pyspark's SparkContext installs its own SIGINT handler). With ``spark.remote`` the
    Connect client's packages and the server are checked first (exit 2 naming the key,
    before any work or output), there is no local JVM to check, and the server's
    Python workers are probed; so are a local master's workers when they may run
    another interpreter or another fairspark than this process
    (:func:`~fairspark.session.workers_are_the_drivers`): a local master's workers that
    run this very interpreter need no Spark job to prove it.
    The session start (checks, session, worker probe) is a line of the run's stage
    table, and the demo's input another.
    """
    from fairspark._java import check_java
    from fairspark._run_summary import _stage
    from fairspark._testing import arm_from_environment
    from fairspark.session import (
        _is_local,
        check_python_workers,
        check_remote,
        is_connect,
        workers_are_the_drivers,
    )

    remote = config.spark.remote
    with _stage("session start", timings):
        if remote is not None:
            check_remote(remote)
        # a Connect client needs no Java, unless it starts pyspark's local server
        if (not under_submit and remote is None) or (remote is not None and _is_local(remote)):
            check_java()
        # the workers of a local master that run this interpreter and this fairspark
        # need no probe: the driver's own imports proved them (asked before the session
        # sets PYSPARK_PYTHON); a named interpreter, a Connect server's are probed
        probe = remote is not None or (
            not under_submit and config.spark.master.strip().startswith("local")
            and not workers_are_the_drivers(config.spark.master, config.spark.conf))
        spark = _session(config, under_submit=under_submit)
        arm()
        if probe:
            check_python_workers(spark)  # exit 2 naming the interpreter, before any work
    if not is_connect(spark):  # the test hooks are Spark local properties (classic)
        arm_from_environment(spark)
    if demo:
        from fairspark.demo import prepare_demo_input

        with _stage("demo input", timings):
            prepare_demo_input(spark, config=config)
    return spark


def closing_lines(result) -> list[str]:
    """The few lines a run ends with: exit code and what gates, the audits' statuses,
    the first gating finding, and the three output paths.

    The counts are ``summary.json``'s (``limits.checks``, ``violated``,
    ``inconclusive``, ``passed``), the same numbers the report prints.
    """
    from fairspark.run_summary import LimitsFacts
    from fairspark.status import FAILED_STATUSES, ExitCode

    summary = result.run_summary
    limits = summary.limits or LimitsFacts()
    code = int(result.exit_code)
    what = {0: "ok", 3: "a limit gates this run", 4: "an audit failed"}.get(code, "")
    first = f"fairspark: exit {code}" + (f" ({what})" if what else "")
    if limits.checks:
        first += (f"; limits: {limits.violated} of {limits.checks} checks "
                  f"violated, {limits.inconclusive} inconclusive, "
                  f"{limits.passed} passed")
    lines = [first]
    if limits.would_gate and code != ExitCode.VIOLATION:
        lines.append("  not gating: limits.fail_on_violation is off "
                     "(or --no-fail-on-violation)")
    lines += ["  audits: " + ", ".join(
        f"{n} {a.status}" + (f" ({a.detail})" if a.status in FAILED_STATUSES and a.detail
                             else "")
        for n, a in summary.audits.items())]
    found = [d.strip() for d in str(limits.extra.get("detail") or "").split("; ")
             if d.strip()]
    if found:
        more = f" (+{len(found) - 1} more: report.html, Limits)" if len(found) > 1 else ""
        lines.append(f"  first violated: {found[0][:200]}{more}")
    lines.append(f"  outputs: {result.output_dir}/")
    lines += [f"    {name}" for name in ("metrics.parquet", "summary.json", "report.html")]
    return lines


def _print_result(result) -> None:
    for line in closing_lines(result):
        print(line, flush=True)


def main(
    argv: Sequence[str] | None = None,
    *,
    under_submit: bool = False,
    stop_session: bool | None = None,
) -> int:
    """Parse arguments, run the audit job, and return the exit code.

    Exit codes (:class:`~fairspark.status.ExitCode`): 0 ok, 2 bad config or input
    (nothing written), 4 an audit failed (the others are published), 3 a limit gates,
    1 unexpected crash.
    """
    from fairspark._run_status import TerminatedBySignal, describe_error, exit_code_for
    from fairspark._signals import signals_end_the_run
    from fairspark.errors import FairsparkInputError
    from fairspark.status import ExitCode

    # the process's start (its interpreter, its imports) when it runs this command;
    # else (a call from Python) this call's
    entry = argv is None  # this process runs the command and ends with it
    started = time.perf_counter() - (_process_age_s() if entry else 0.0)
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("--") and argv[0] not in ("--version", "--help", "-h")):
        argv = ["audit", *argv]
    args = parser.parse_args(argv)
    if args.command != "audit":
        parser.print_help()
        return int(ExitCode.INPUT)
    _setup_logging(args.quiet)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    spark = config = None
    timings: dict[str, float] = {}
    status = {"args": args, "under_submit": under_submit}
    try:
        with signals_end_the_run(lambda: spark) as arm:
            config, demo = _load(args)
            # the run date is resolved once, here, and relative paths against the
            # folder the command runs in (not the JVM's, which may be another)
            config = config.pinned().with_local_paths_absolute()
            from fairspark.outputs import check_not_locked

            # a live run of the date: exit 2 now, not after the session's start-up
            check_not_locked(config.output.path, config.effective_run_date(),
                             stale_after_s=config.output.lock_stale_s)
            from fairspark._run_summary import record_stage

            # the interpreter, the imports, the config: what a bare session does not do
            record_stage("start-up", time.perf_counter() - started, timings)
            spark = _start(config, under_submit=under_submit, demo=demo, arm=arm,
                           timings=timings)
            from fairspark.runner import run_audit_job

            result = run_audit_job(
                spark, config, fail_on_violation=False if args.no_fail_on_violation else None,
                timings=timings, started=started)
            _print_result(result)
            return result.exit_code
    except FairsparkInputError as err:
        log.error("%s", err)  # one line on stderr (the log's handler), no Java frames
        _status_after_error(spark, config, exit_code_for(err), str(err), err, **status)
        return int(exit_code_for(err))
    except (TerminatedBySignal, KeyboardInterrupt) as err:
        msg = describe_error(err)
        log.error("%s", msg)
        _status_after_error(spark, config, exit_code_for(err), msg, err, **status)
        return int(exit_code_for(err))
    except Exception as err:  # noqa: BLE001 - any crash: logged by _crash_message
        message = _crash_message(err, spark, config)
        _status_after_error(spark, config, exit_code_for(err), message, err, **status)
        return int(exit_code_for(err))
    finally:
        _end(spark, timings, started,
             stop=spark is not None and (not under_submit if stop_session is None
                                         else stop_session), exiting=entry)


def _end(spark, timings: dict[str, float], started: float, *, stop: bool,
         exiting: bool) -> None:
    """Stop the session (``stop``) and close the log's stage table: the time between
    the stages (``other``) and the session's stop (``shutdown``, with the exit of the
    JVM this process started when the process ends with the command: ``exiting``), so
    that its lines sum to the process's wall time (``summary.json``'s, written
    earlier, to the time until its write). A run that published nothing (no ``write``
    line) ends on its error line instead."""
    from fairspark._run_summary import OTHER_STAGE, record_stage, time_between_stages
    from fairspark.numbers import fmt_fixed

    published = "write" in timings
    if published:
        record_stage(OTHER_STAGE, time_between_stages(timings, started), timings)
    if stop:
        t0 = time.perf_counter()
        _stop(spark)
        from fairspark._signals import remove_leftovers

        remove_leftovers()
        if exiting:
            _end_jvm()
        if published:
            record_stage("shutdown", time.perf_counter() - t0, timings)
    if published:
        log.info("stage table: %s s in all, the wall time since the process started",
                 fmt_fixed(time.perf_counter() - started, 2))


def _end_jvm() -> None:
    """End the JVM this process started (a local session's or pyspark's local Connect
    server's; not spark-submit's, not a remote server's) and wait for it: it would end
    when this process does, after it, its shutdown hooks on no line of the stage table
    (a caller that reads the process's output waits for them)."""
    from fairspark.session import process_context_class

    gateway = getattr(process_context_class(), "_gateway", None)
    proc = getattr(gateway, "proc", None)
    if proc is None or proc.stdin is None:
        return
    try:
        gateway.shutdown()
        proc.stdin.close()  # the JVM's signal to end (PythonGatewayServer)
        proc.wait(timeout=60)
    except Exception as err:  # noqa: BLE001 - the process ends anyway
        log.warning("the JVM did not end cleanly: %s", err)


def _process_age_s() -> float:
    """Seconds since this process started (Linux's ``/proc``: the interpreter's own
    start-up and imports before any code of fairspark ran), 0 where unknown."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # starttime, field 22
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(uptime - ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):  # not Linux
        return 0.0


def _crash_message(err: Exception, spark, config) -> str:
    """Log an unexpected error (one line where its cause is known: a driver JVM that
    died, an out-of-memory error, a failed write; else the traceback) and return the
    status file's line for it."""
    from fairspark._run_status import describe_error
    from fairspark.errors import jvm_gone, jvm_gone_message, out_of_memory_hint
    from fairspark.outputs import OutputWriteError
    from fairspark.session import is_connect

    # a Connect client has no JVM of its own to ask after
    local_jvm = None if spark is None or is_connect(spark) else spark
    hint = (jvm_gone(err, local_jvm) and jvm_gone_message(
        config.spark.conf.get("spark.driver.memory") if config is not None else None)
        ) or out_of_memory_hint(err)
    if hint or isinstance(err, OutputWriteError):  # one line, no Java frames
        log.error("%s", hint or err)
    else:
        log.exception("unexpected error")
    return hint or describe_error(err)


def _stop(spark) -> None:
    """``spark.stop()``; a JVM that is already gone (it died of an out-of-memory error,
    say) is said in one line instead of a Py4J traceback after the run's own message."""
    try:
        spark.stop()
    except Exception as err:  # noqa: BLE001 - the JVM is gone: nothing left to stop
        from fairspark.outputs import one_line

        log.warning("the Spark session could not be stopped (its JVM is gone?): %s",
                    one_line(err))


def console_main() -> None:  # pragma: no cover - thin wrapper
    sys.exit(main())


if __name__ == "__main__":  # ``python -m fairspark.cli audit ...``
    console_main()
