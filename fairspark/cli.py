"""Command line: ``fairspark audit`` (and ``python jobs/audit.py`` / ``spark-submit``).

Both entry points run :func:`main`; the only difference is who creates the
SparkSession: under ``spark-submit`` the session already configured by
spark-submit is used; from the console script a local session is started with the
settings of ``config.spark``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from fairspark._version import __version__

__all__ = ["main", "build_parser", "config_overrides"]

log = logging.getLogger("fairspark")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser shared by the console script and the spark-submit job."""
    p = argparse.ArgumentParser(
        prog="fairspark",
        description="Fairness audits of a scored table on Spark.",
    )
    p.add_argument("--version", action="version", version=f"fairspark {__version__}")
    sub = p.add_subparsers(dest="command")
    a = sub.add_parser("audit", help="run the audits of a config (default: the Adult demo)")
    a.add_argument("--config", help="YAML config; without it the bundled Adult demo runs")
    a.add_argument("--run-date", help="run date YYYY-MM-DD (default: config or today)")
    a.add_argument("--output", help="output folder (overrides output.path)")
    a.add_argument("--input", dest="input_path", help="input path (overrides input.path)")
    a.add_argument("--where", help="row filter (overrides input.where)")
    a.add_argument("--master", help="Spark master for a local session (overrides spark.master)")
    a.add_argument("--seed", type=int, help="base seed (overrides seed)")
    a.add_argument("--no-report", action="store_true", help="do not write report.html")
    a.add_argument(
        "--no-fail-on-violation", action="store_true",
        help="report violated limits but exit 0 (leave gating to a downstream task)",
    )
    a.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="override any config key, e.g. --set audits.group.ci_level=0.9 (YAML value)",
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
        "seed": args.seed,
    }
    if args.no_report:
        ov["output.report"] = False
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
    from fairspark.session import build_session

    if under_submit:  # spark-submit already configured the session
        return build_session(master=None, app_name=config.spark.app_name)
    conf = dict(config.spark.conf)
    if "spark.driver.memory" not in conf and config.spark.master.startswith("local"):
        conf["spark.driver.memory"] = local_driver_memory()
        log.info("local session: spark.driver.memory=%s (half of this machine's memory; set "
                 "spark.conf.spark.driver.memory in the config to change it)",
                 conf["spark.driver.memory"])
    return build_session(master=config.spark.master, app_name=config.spark.app_name, conf=conf)


def _status_after_error(spark, config, code: int, message: str,
                        err: BaseException | None = None) -> None:
    """Best effort: leave ``_status/run_date=D.json`` so a scheduler sees the failure.

    A run refused by the date's lock (:class:`~fairspark.errors.RunLockedError`) leaves
    the status alone: it belongs to the run holding the lock, which is still writing
    the date and will record its own exit code.
    """
    from fairspark.errors import RunLockedError

    if spark is None or config is None or isinstance(err, RunLockedError):
        return
    try:
        from fairspark.outputs import OutputLocation
        from fairspark.runner import write_status

        write_status(OutputLocation(spark, config.output.path), config.effective_run_date(),
                     exit_code=code, error=message)
    except Exception as err:  # noqa: BLE001
        log.warning("could not write the status file: %s", err)


def _load(args: argparse.Namespace):
    """The config of the run (the bundled demo's without ``--config``) and whether it is it."""
    from fairspark.config import load_config

    overrides = config_overrides(args)
    if args.config:
        return load_config(args.config, overrides=overrides), False
    from fairspark.demo import demo_config

    return demo_config(overrides=overrides), True


def _start(config, *, under_submit: bool, demo: bool):
    """The session of the run (after the Java check), with the demo's input written."""
    from fairspark._java import check_java
    from fairspark._testing import arm_from_environment

    if not under_submit:
        check_java()
    spark = _session(config, under_submit=under_submit)
    arm_from_environment(spark)
    if demo:
        from fairspark.demo import prepare_demo_input

        prepare_demo_input(spark, config=config)
    return spark


def _print_result(result) -> None:
    from fairspark.status import FAILED_STATUSES, ExitCode

    print(f"fairspark: outputs in {result.output_dir}", flush=True)
    for name in ("metrics.parquet", "summary.json", "report.html"):
        print(f"  {result.output_dir}/{name}", flush=True)
    failed = {k: v.get("detail") for k, v in result.summary["audits"].items()
              if v.get("status") in FAILED_STATUSES}
    if failed:
        print(f"fairspark: some audits failed: {failed}", file=sys.stderr, flush=True)
    limits = result.summary.get("limits") or {}
    if limits.get("violated"):
        print(f"fairspark: {limits['violated']} limit(s) violated: {limits.get('detail', '')}"
              + ("" if result.exit_code == ExitCode.VIOLATION else " (not gating this run)"),
              file=sys.stderr, flush=True)


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
    from fairspark.errors import FairsparkInputError
    from fairspark.runner import exit_code_for
    from fairspark.status import ExitCode

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
    try:
        config, demo = _load(args)
        spark = _start(config, under_submit=under_submit, demo=demo)
        from fairspark.runner import run_audit_job

        result = run_audit_job(
            spark, config, fail_on_violation=False if args.no_fail_on_violation else None)
        _print_result(result)
        return result.exit_code
    except FairsparkInputError as err:
        log.error("%s", err)
        print(f"fairspark: error: {err}", file=sys.stderr, flush=True)
        _status_after_error(spark, config, exit_code_for(err), str(err), err)
        return int(exit_code_for(err))
    except Exception as err:
        from fairspark.errors import out_of_memory_hint

        hint = out_of_memory_hint(err)
        if hint:
            log.error("%s", hint)
            print(f"fairspark: error: {hint}", file=sys.stderr, flush=True)
        else:
            log.exception("unexpected error")
        _status_after_error(spark, config, exit_code_for(err), f"{type(err).__name__}: {err}")
        return int(exit_code_for(err))
    finally:
        if spark is not None and (not under_submit if stop_session is None else stop_session):
            spark.stop()


def console_main() -> None:  # pragma: no cover - thin wrapper
    sys.exit(main())


if __name__ == "__main__":  # ``python -m fairspark.cli audit ...``
    console_main()
