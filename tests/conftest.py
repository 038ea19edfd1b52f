"""One local[2] SparkSession for the whole test session (it takes ~8 s to start)."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from profiles import is_slow

from fairspark._threads import pin_threads

ROOT = Path(__file__).resolve().parents[1]
#: data shipped in the repository: UCI Adult (the demo's) and ProPublica COMPAS
ADULT_TEST = ROOT / "fairspark" / "data" / "adult.test.gz"
TEST_DATA = ROOT / "tests" / "data"
COMPAS_CSV = TEST_DATA / "compas-scores-two-years.csv.gz"

#: ``classic`` (the default) or ``connect``: which session kind this pytest process tests.
#: pyspark allows one kind per process (a Connect session switches pyspark's column
#: functions to Connect's), so ``scripts/test.sh`` runs the suite on a classic session,
#: then again the tests marked ``both_kinds`` with ``FAIRSPARK_TEST_SESSION=connect``.
SESSION_KIND = os.environ.get("FAIRSPARK_TEST_SESSION", "classic").strip().lower()
if SESSION_KIND not in {"classic", "connect"}:
    raise ValueError(f"FAIRSPARK_TEST_SESSION={SESSION_KIND!r}: expected classic or connect")
#: where the classic run records the rows that the Connect run must equal
KINDS_DIR = Path(os.environ.get("FAIRSPARK_KINDS_DIR", ROOT / ".pytest_kinds"))
#: the rows' column that says when a run ran (left out of the classic/Connect comparison)
_RUN_DATE = "run_date"

#: The one allowlist of what does not run on Connect: a test module (or module::test)
#: marked ``both_kinds`` runs on both session kinds; every other test runs on the classic
#: session only. The Connect run's summary prints this list. Kernel and pure-Python
#: tests have no session to vary; the entries here are Spark tests that cannot run on
#: Connect, each with why.
CLASSIC_ONLY: dict[str, str] = {
    "tests/test_fault_tolerance.py::test_injected_failures_and_killed_executors_do_not_change_results":
        "the injected task failures travel as Spark local properties (setLocalProperty), "
        "which a Connect client cannot set, and it kills executors of a local-cluster "
        "that spark-submit starts",
    "tests/test_hfm_cost.py::test_cost_model_counts_the_jobs_it_ran":
        "counts the jobs Spark ran through sparkContext's job group and status tracker; "
        "a Connect client has neither (its cost model reports jobs and stages as None)",
    "tests/test_jvm_death.py":
        "kills the driver JVM of a local run by a real OutOfMemoryError; on Connect the "
        "driver is the server's, which the client neither sizes nor owns",
}

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# one BLAS/OpenMP thread in this process and (through the environment) in the
# Python workers Spark starts from it: the suite shares two cores
pin_threads()


# ------------------------------------------------------------------ skips
#: The one allowlist of skips: reason (a regular expression searched in the skip's
#: message) -> why such a skip is acceptable. Under ``CI=true`` any other skip fails its
#: test; every run ends with a line of the tests run and the skips by reason.
ALLOWED_SKIPS: dict[str, str] = {
    r"Debian chromium \+ chromium-driver missing":
        "the report's browser tests drive chromium; scripts/test.sh installs it as root only",
    r"cannot mount a tmpfs here":
        "the full-disk and read-only output tests mount a tmpfs, which needs root",
    r"starts a local-cluster":
        "opt-in (two executor JVMs, ~90 s): set FAIRSPARK_LOCAL_CLUSTER=1 to run it",
}


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def skip_reason(report) -> str:
    """The message of a skipped report (``pytest.skip``/``skipif``/``importorskip``)."""
    longrepr = report.longrepr
    msg = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return msg.removeprefix("Skipped: ")


def allowed_skip(reason: str) -> str | None:
    """Why a skip with this reason is allowed, or None when ``ALLOWED_SKIPS`` lacks it."""
    for pattern, why in ALLOWED_SKIPS.items():
        if re.search(pattern, reason):
            return why
    return None


def _fail_unlisted_skip(report) -> None:
    if report.skipped and not hasattr(report, "wasxfail") and _under_ci():
        reason = skip_reason(report)
        if allowed_skip(reason) is None:
            report.outcome = "failed"
            report.longrepr = (f"skipped under CI=true, and the reason is not in "
                               f"tests/conftest.py ALLOWED_SKIPS: {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_unlisted_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_unlisted_skip(outcome.get_result())  # a module-level skip or importorskip


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "both_kinds: runs on a classic and on a Spark Connect session "
        "(the Connect run, FAIRSPARK_TEST_SESSION=connect, runs only these)")
    config.addinivalue_line(
        "markers", "slow: outside the fast profile (tests/profiles.py; "
        "scripts/test.sh --fast runs -m 'not slow')")


def pytest_collection_modifyitems(config, items):
    """Mark the fast profile's omissions ``slow``; on Connect keep only ``both_kinds``."""
    for it in items:
        if is_slow(it.nodeid):
            it.add_marker(pytest.mark.slow)
    if SESSION_KIND != "connect":
        return
    keep = [it for it in items if it.get_closest_marker("both_kinds") is not None]
    dropped = [it for it in items if it.get_closest_marker("both_kinds") is None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line: tests run (passed, failed) and skipped; then the skips by reason."""
    stats = terminalreporter.stats
    passed = [r for r in stats.get("passed", []) if r.when == "call"]
    failed = {r.nodeid for k in ("failed", "error") for r in stats.get(k, [])}
    skips = Counter(skip_reason(r) for r in stats.get("skipped", [])
                    if not hasattr(r, "wasxfail"))
    n_skip = sum(skips.values())
    terminalreporter.write_line(f"session kind: {SESSION_KIND}")
    if SESSION_KIND == "connect":
        terminalreporter.write_line(
            "on Connect: the tests marked both_kinds; classic-only Spark tests and why:")
        for name, why in CLASSIC_ONLY.items():
            terminalreporter.write_line(f"  {name} -- {why}")
    terminalreporter.write_line(
        f"fairspark tests: {len(passed) + len(failed)} run ({len(passed)} passed, "
        f"{len(failed)} failed or errors), {n_skip} skipped"
        + (" (CI=true: a skip not in ALLOWED_SKIPS fails)" if _under_ci() else ""))
    for reason, n in skips.most_common():
        why = allowed_skip(reason)
        terminalreporter.write_line(
            f"  skipped {n}: {reason} -- "
            + (f"allowlisted: {why}" if why else "NOT in tests/conftest.py ALLOWED_SKIPS"))


#: settings of the test session (both kinds): few shuffle partitions, no UI
TEST_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
}


@pytest.fixture(scope="session")
def spark():
    """The session of this test run: classic ``local[2]``, or a Spark Connect session to
    pyspark's own local server (``remote("local[2]")``) when the run is the Connect run
    (``FAIRSPARK_TEST_SESSION=connect``; pyspark allows one kind per process)."""
    if SESSION_KIND == "connect":
        import socket

        from pyspark.sql import SparkSession

        # pyspark's local server binds Connect's default port 15002, and its client
        # dials that port; where another server holds it (a second test run on this
        # machine), pyspark's test mode makes both take a free port instead
        with socket.socket() as probe:
            busy = probe.connect_ex(("127.0.0.1", 15002)) == 0
        if busy:
            os.environ["SPARK_TESTING"] = "1"

        builder = SparkSession.builder.remote("local[2]").appName("fairspark-tests-connect")
        # (the warehouse folder is a static setting: the local server's own is used)
        for k, v in TEST_CONF.items():
            builder = builder.config(k, v)
        session = builder.getOrCreate()
        yield session
        session.stop()
        return
    from fairspark.session import build_session

    # build_session adds the settings every fairspark session has (UTC, Arrow, one
    # BLAS thread per task, no console progress); these are the test-only ones
    session = build_session(
        master="local[2]",
        app_name="fairspark-tests",
        conf={**TEST_CONF,
              "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="fairspark-warehouse-")},
        log_level="ERROR",
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def session_kind() -> str:
    """``classic`` or ``connect``: the kind of this run's ``spark`` fixture."""
    return SESSION_KIND


@pytest.fixture
def same_on_both_kinds(request):
    """Record rows on the classic run; on the Connect run, assert they are the same.

    ``same_on_both_kinds(key, pdf)``: the classic run (which ``scripts/test.sh`` runs
    first) writes ``pdf`` to ``KINDS_DIR/<key>.parquet``; the Connect run reads it and
    asserts the frames equal (every string column exactly, every number to 1e-12
    relative and absolute; rows sorted by the string columns first). A Connect run
    without the classic record fails: the comparison is the point.
    """
    import pandas as pd

    def check(key: str, pdf: pd.DataFrame) -> None:
        path = KINDS_DIR / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', key)}.parquet"
        pdf = pdf.reset_index(drop=True)
        if SESSION_KIND == "classic":
            KINDS_DIR.mkdir(parents=True, exist_ok=True)
            pdf.to_parquet(path, index=False)
            return
        if not path.exists():
            pytest.fail(f"no classic record {path} for {key!r}: run the classic suite first "
                        "(scripts/test.sh does), then the Connect run")
        want = pd.read_parquet(path)
        assert sorted(want.columns) == sorted(pdf.columns), (list(want.columns),
                                                             list(pdf.columns))
        # The run's date is when each run ran, not a number of the data: the classic
        # record and the Connect run may fall either side of midnight (CI's did). Each
        # frame still carries one date on every row.
        for frame in (want, pdf):
            if _RUN_DATE in frame.columns:
                assert frame[_RUN_DATE].nunique(dropna=False) == 1, frame[_RUN_DATE].unique()
        want, pdf = want.drop(columns=[_RUN_DATE], errors="ignore"), pdf.drop(
            columns=[_RUN_DATE], errors="ignore")
        keys = [c for c in want.columns if want[c].dtype == object]
        want = want.sort_values(keys, kind="stable").reset_index(drop=True) if keys else want
        got = pdf[list(want.columns)]
        got = got.sort_values(keys, kind="stable").reset_index(drop=True) if keys else got
        pd.testing.assert_frame_equal(got, want, check_dtype=False, rtol=1e-12, atol=1e-12)

    return check


ADULT_COLS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
              "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
              "hours_per_week", "native_country", "income"]


@pytest.fixture(scope="session")
def adult_pdf():
    """UCI Adult test part (the bundled ``adult.test.gz``) with a rule-based decision
    (independent of fairspark)."""
    import numpy as np
    import pandas as pd

    df = pd.read_csv(ADULT_TEST, header=None, names=ADULT_COLS,
                     skipinitialspace=True, na_values="?", skiprows=1).dropna()
    df["income"] = df["income"].str.rstrip(".")
    df = df.reset_index(drop=True)
    df["row_id"] = np.arange(len(df)).astype(str)
    # a transparent "model": favourable decision for degree holders working long hours
    df["prediction"] = ((df["education_num"] >= 13) & (df["hours_per_week"] >= 40)).astype(int)
    return df


@pytest.fixture(scope="session")
def compas_pdf():
    """ProPublica COMPAS two-year table (``tests/data``) with the standard filter."""
    import pandas as pd

    df = pd.read_csv(COMPAS_CSV)
    df = df[(df.days_b_screening_arrest.between(-30, 30)) & (df.is_recid != -1)
            & (df.c_charge_degree != "O") & (df.score_text != "N/A")]
    keep = ["id", "sex", "age", "race", "juv_fel_count", "juv_misd_count", "priors_count",
            "c_charge_degree", "decile_score", "two_year_recid"]
    return df[keep].reset_index(drop=True)


def write_parquet(pdf, path, *, n_files: int = 1) -> str:
    """Write a pandas frame as a Parquet folder of ``n_files`` files (pyarrow, no Spark)."""
    import numpy as np

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(np.array_split(np.arange(len(pdf)), n_files)):
        pdf.iloc[part].to_parquet(path / f"part-{i:05d}.parquet", index=False,
                                  coerce_timestamps="us", allow_truncated_timestamps=True)
    return str(path)


def synthetic_scored(*, n: int, seed: int):
    """A small scored table: features x1, x2, city; sensitive sex; label y; decision p."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.random(n)
    sex = rng.choice(["M", "F"], n, p=[0.6, 0.4])
    city = rng.choice(["a", "b", "c"], n)
    logit = 1.5 * x1 + x2 + 0.5 * (sex == "M")
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return pd.DataFrame({"id": np.arange(n).astype(str), "x1": x1, "x2": x2, "city": city,
                         "sex": sex, "y": y, "p": (logit > 0.5).astype(int)})


def holm_adjusted(p):
    """Holm's step-down adjusted p-values, by hand (the tests' reference for the gating)."""
    import numpy as np

    p = np.asarray(p, dtype=float)
    order = np.argsort(p, kind="mergesort")
    m = len(p)
    adj = np.maximum.accumulate(np.minimum((m - np.arange(m)) * p[order], 1.0))
    out = np.empty(m)
    out[order] = adj
    return out


@pytest.fixture(autouse=True)
def _fairspark_logs_reach_caplog():
    """The CLI gives the ``fairspark`` logger its own stderr handler and stops it from
    propagating; a later test's ``caplog`` (on the root logger) would then see nothing.
    Every test starts with the logger propagating again."""
    import logging

    logging.getLogger("fairspark").propagate = True
    yield


def unmark(html: str) -> str:
    """A report page without the ``<span class="num" data-...>`` that name each number's
    row (their text kept), so text searches read the numbers as printed."""
    import re

    return re.sub(r'<span class="num"[^>]*>([^<]*)</span>', r"\1", html)


def printed_number(x: float, lower: float | None = None, upper: float | None = None, *,
                   value: float | None = None, signed: bool = False, least: int = 3) -> str:
    """``x``, one of a result row's numbers, as the report prints it (docs/report.md,
    "Numbers"): the row (``value``, default ``x``, in [``lower``, ``upper``]) gets
    ``least`` decimals, more while its rounded value would leave the rounded interval,
    the interval would print as one point or a value that is not 0 as 0; a real minus,
    ``+`` on differences (``signed``)."""
    import math

    v = x if value is None else value
    lo, hi = (v, v) if lower is None or upper is None or not (
        math.isfinite(lower) and math.isfinite(upper)) else (lower, upper)
    d = least
    while d < 12 and not (round(lo, d) <= round(v, d) <= round(hi, d)
                          and (round(lo, d) < round(hi, d) or lo == hi)
                          and (round(v, d) != 0 or v == 0 or round(lo, d) < 0 < round(hi, d))):
        d += 1
    return (f"{x:+.{d}f}" if signed else f"{x:.{d}f}").replace("-", "\u2212")
