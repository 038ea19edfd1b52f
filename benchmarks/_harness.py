"""The pieces every benchmark shares: the load average, Markdown tables, a local Spark
session, timing and repeats, the ``--fast`` profile and the tables they run on.

A benchmark imports it as ``from _harness import ...``: a script's own folder is the
first entry of ``sys.path``. Importing it also puts the repository root on ``sys.path``,
so that ``fairspark`` is importable from a checkout.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
#: the public data sets beside the checkout (``../shared/data``), for the real tables
SHARED = ROOT.parent / "shared" / "data"


# ------------------------------------------------------------------------ the machine
def load() -> str:
    """The 1-, 5- and 15-minute load averages, two decimals each (``"0.52 0.61 0.70"``)."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def load1() -> str:
    """The 1-minute load average alone, two decimals."""
    return f"{os.getloadavg()[0]:.2f}"


# ---------------------------------------------------------------------------- tables
def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table: ``header`` and one line per row (cells as ``str``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- Spark
def spark_session(*, app_name: str, master: str = "local[2]",
                  conf: dict[str, str] | None = None, log_level: str = "ERROR"):
    """A local SparkSession through fairspark's one builder (quiet log by default)."""
    from fairspark.session import build_session

    return build_session(master=master, app_name=app_name, conf=conf or {},
                         log_level=log_level)


# --------------------------------------------------------------------------- timing
def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float, float]:
    """Call ``fn``; return its result, the wall seconds and this process's CPU seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0, time.process_time() - c0


def best_of(fn: Callable[[], tuple], repeats: int) -> tuple:
    """The fastest of ``repeats`` calls of ``fn`` (which returns seconds first)."""
    runs = [fn() for _ in range(max(repeats, 1))]
    return min(runs, key=lambda r: r[0])


# ------------------------------------------------------------------- the fast profile
def parse_args(ap: argparse.ArgumentParser, argv: Sequence[str] | None,
               fast: dict[str, Any]) -> argparse.Namespace:
    """Parse ``argv`` with a ``--fast`` flag added: tiny sizes, one repeat, seconds.

    Under ``--fast`` the options named in ``fast`` take those values unless given on
    the command line (the profile replaces the defaults, not what the user asked for).
    """
    ap.add_argument("--fast", action="store_true",
                    help="the fast profile: tiny sizes, one repeat (a smoke run)")
    args = ap.parse_args(argv)
    if args.fast:
        ap.set_defaults(**fast)
        args = ap.parse_args(argv)
    return args


#: light settings of the four audits (``audit.key=value``, values as JSON): what the
#: fast profiles of the CLI benchmarks run, so that a smoke run takes seconds
LIGHT_SETS = [
    "mdfa.splits=2", "mdfa.sample_rows=400", "mdfa.epochs=2",
    'mdfa.auditor="logistic_regression"', "mdfa.worst_violation=false",
    'correlation.models=["logistic_regression"]', "correlation.n_samples=6",
    "correlation.rounds=2", "correlation.k=100",
]


def parse_sets(items: Iterable[str]) -> dict[str, dict]:
    """``audit.key=value`` overrides (value as JSON, else a string) per audit section."""
    import json

    out: dict[str, dict] = {}
    for item in items:
        name, _, value = item.partition("=")
        audit, _, key = name.partition(".")
        if not (audit and key and _):
            raise SystemExit(f"--set wants audit.key=value, got {item!r}")
        try:
            v = json.loads(value)
        except json.JSONDecodeError:
            v = value
        out.setdefault(audit, {})[key] = v
    return out


# ------------------------------------------------------------------ synthetic tables
#: the attribute views of the nightly design: sex, race and their intersection
VIEWS = ("sex", "race", "sex*race")
RACES = np.array(["White", "Black", "Asian", "Other"])


def draw_rows(rng: np.random.Generator, n: int, dim: int) -> dict[str, np.ndarray]:
    """``n`` rows of the nightly design: features, sex, race (as codes), label and
    prediction. The prediction depends on the features and (a little) on both groups;
    features 0 and 1 carry some group information."""
    X = rng.normal(size=(n, dim))
    female = rng.random(n) < 0.45
    race = rng.choice(4, size=n, p=[0.6, 0.2, 0.12, 0.08])
    X[:, 0] += 0.5 * female
    X[:, 1] += 0.3 * (race == 1)
    score = X[:, : min(5, dim)].mean(axis=1) - 0.15 * female - 0.1 * (race == 1)
    return {
        "X": X, "female": female, "race": race,
        "label": (score + rng.normal(0, 0.3, n) > 0).astype(int),
        "prediction": (score > 0).astype(int),
    }


def write_table(path: Path, rows: int, dim: int, seed: int = 0, chunk: int = 250_000) -> None:
    """The nightly design's scored table as Parquet parts of at most ``chunk`` rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i, s in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - s)
        r = draw_rows(rng, n, dim)
        cols = {f"f{j}": r["X"][:, j] for j in range(dim)}
        cols.update({
            "sex": np.where(r["female"], "Female", "Male"),
            "race": RACES[r["race"]],
            "label": r["label"],
            "prediction": r["prediction"],
            "row_id": [f"r{j:09d}" for j in range(s, s + n)],
        })
        pq.write_table(pa.table(cols), path / f"part-{i:05d}.parquet")


def write_uniform_table(path: Path, rows: int, dim: int, seed: int = 0,
                        chunk: int = 250_000) -> None:
    """Uniform features, a 30 % group, a label and a prediction that depend on both."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i, s in enumerate(range(0, rows, chunk)):
        n = min(chunk, rows - s)
        X = rng.random((n, dim))
        g = rng.random(n) < 0.3
        score = X[:, :3].mean(axis=1) + 0.1 * g
        cols = {f"f{j}": X[:, j] for j in range(dim)}
        cols.update({
            "sex": np.where(g, "F", "M"),
            "label": (score + rng.normal(0, 0.1, n) > 0.55).astype(int),
            "prediction": (score > 0.55).astype(int),
            "row_id": [f"r{j:09d}" for j in range(s, s + n)],
        })
        pq.write_table(pa.table(cols), path / f"part-{i:05d}.parquet")


# ---------------------------------------------------------------------- bundled Adult
ADULT_COLS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
              "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
              "hours_per_week", "native_country", "income"]


def read_adult(parts: Sequence[str] = ("data", "test")):
    """UCI Adult as bundled with fairspark (``fairspark/data/adult.<part>.gz``, the UCI
    files byte for byte), raw: "?" as missing, the test part's header line skipped."""
    import pandas as pd

    frames = []
    for part in parts:
        with gzip.open(ROOT / "fairspark" / "data" / f"adult.{part}.gz", "rt") as fh:
            frames.append(pd.read_csv(fh, header=None, names=ADULT_COLS,
                                      skipinitialspace=True, na_values="?",
                                      skiprows=1 if part == "test" else 0))
    return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------ the nightly's stage tables
def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``y = a + b x`` over the finite points; NaN with fewer than 2."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True) if np.isfinite(y)]
    if len(pts) < 2:
        return float("nan"), float("nan")
    b, a = np.polyfit(np.asarray([p[0] for p in pts], float),
                      np.asarray([p[1] for p in pts], float), 1)
    return float(a), float(b)


def stage_names(results: list[dict]) -> list[str]:
    """Every stage seen, in the order the runs report them."""
    names: list[str] = []
    for r in results:
        for k in r["stages"]:
            if k not in names:
                names.append(k)
    return names


def _num(v: float, nd: int) -> str:
    """``v`` with ``nd`` decimals, without a "-0.0" for a fit's rounding noise."""
    text = f"{v:.{nd}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def stage_markdown(results: list[dict], argv_line: str, cores: int | None) -> str:
    """The stage table of CLI runs at several sizes, their memory and the per-stage fit
    ``time = a + b x rows``, as Markdown (a negative slope is not extrapolated)."""
    names = stage_names(results)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"command: `{argv_line}`; {cores} CPUs; {stamp}",
             "",
             "| rows | exit | wall (s) | " + " | ".join(f"{k} (s)" for k in names)
             + " | peak RSS, process tree (GB) | largest process (GB) | audit statuses "
               "| load 1/5/15 before | after |",
             "|" + "---|" * (len(names) + 8)]
    for r in results:
        st = ", ".join(f"{a}: {v}" for a, v in r["statuses"].items())
        lines.append(f"| {r['rows']:,} | {r['rc']} | {r['wall']:.1f} | "
                     + " | ".join(f"{r['stages'].get(k, float('nan')):.1f}" for k in names)
                     + f" | {r['peak_sum'] / 1e9:.2f} | {r['peak_max'] / 1e9:.2f} | {st} "
                       f"| {r['load_before']} | {r['load']} |")
    for r in results:
        if r.get("executor_peaks"):
            lines.append(f"\n{r['rows']:,} rows: each executor's peak resident memory, its "
                         "JVM alone / with its Python workers: "
                         + ", ".join(f"{j / 1e9:.2f} / {t / 1e9:.2f} GB"
                                     for j, t in r["executor_peaks"]))
    lines += ["", "Fit per stage, time = a + b x rows (least squares over the sizes; "
              "a: the part that does not grow with the table, b: seconds per 1M rows):", "",
              "| stage | a (s) | b (s per 1M rows) | at 1M rows (s) | at 100M rows (s) |",
              "|---|---|---|---|---|"]
    xs = [r["rows"] for r in results]
    for k in [*names, "wall"]:
        ys = [r["wall"] if k == "wall" else r["stages"].get(k, float("nan")) for r in results]
        a, b = fit_line(xs, ys)
        if np.isfinite(b) and _num(b * 1e6, 1).startswith("-"):  # noise, not a cost
            lines.append(f"| {k} | {_num(a, 1)} | {_num(b * 1e6, 1)} (< 0: noise or load "
                         "between sizes, no extrapolation) | | |")
            continue
        lines.append(f"| {k} | {_num(a, 1)} | {_num(b * 1e6, 1)} | {_num(a + b * 1e6, 1)} "
                     f"| {_num(a + b * 1e8, 0)} |")
    return "\n".join(lines)
