"""One local[2] SparkSession for the whole test session (it takes ~8 s to start)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from fairspark._threads import pin_threads

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# one BLAS/OpenMP thread in this process and (through the environment) in the
# Python workers Spark starts from it: the suite shares two cores
pin_threads()


@pytest.fixture(scope="session")
def spark():
    from fairspark.session import build_session

    # build_session adds the settings every fairspark session has (UTC, Arrow, one
    # BLAS thread per task, no console progress); these are the test-only ones
    session = build_session(
        master="local[2]",
        app_name="fairspark-tests",
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "2g",
            "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="fairspark-warehouse-"),
        },
        log_level="ERROR",
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The read-only datasets next to the project (``../shared/data``)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATA}")
    return SHARED_DATA


ADULT_COLS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
              "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
              "hours_per_week", "native_country", "income"]


@pytest.fixture(scope="session")
def adult_pdf(shared_data):
    """UCI Adult test part with a rule-based decision (independent of fairspark)."""
    import numpy as np
    import pandas as pd

    df = pd.read_csv(shared_data / "adult/uci/adult.test", header=None, names=ADULT_COLS,
                     skipinitialspace=True, na_values="?", skiprows=1).dropna()
    df["income"] = df["income"].str.rstrip(".")
    df = df.reset_index(drop=True)
    df["row_id"] = np.arange(len(df)).astype(str)
    # a transparent "model": favourable decision for degree holders working long hours
    df["prediction"] = ((df["education_num"] >= 13) & (df["hours_per_week"] >= 40)).astype(int)
    return df


@pytest.fixture(scope="session")
def compas_pdf(shared_data):
    """ProPublica COMPAS two-year table with the standard filter."""
    import pandas as pd

    df = pd.read_csv(shared_data / "compas/compas-scores-two-years.csv")
    df = df[(df.days_b_screening_arrest.between(-30, 30)) & (df.is_recid != -1)
            & (df.c_charge_degree != "O") & (df.score_text != "N/A")]
    keep = ["id", "sex", "age", "race", "juv_fel_count", "juv_misd_count", "priors_count",
            "c_charge_degree", "decile_score", "two_year_recid"]
    return df[keep].reset_index(drop=True)


def load_script(name: str):
    """Import ``scripts/<name>.py`` as a module (the scripts are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
