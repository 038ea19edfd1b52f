"""Every benchmark runs once with ``--fast`` (tiny sizes, one repeat), so none rots.

Each runs in its own process, as from a checkout (``PYTHONPATH`` the repository root),
and must exit 0 and print its table. The nightly benchmark's stage table is checked
further: one line per size, and the fit of the wall time through its two sizes against
the slope and intercept computed here by hand.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: benchmark -> (extra arguments, with {tmp} the test's scratch folder; a line its
#: table prints)
CASES: dict[str, tuple[list[str], str]] = {
    "bench_nightly": (["--tmp", "{tmp}"], r"^\| rows \| exit \| wall \(s\) \|"),
    "bench_adult_nightly": (["--tmp", "{tmp}"], r"^\| classic \| group_only \| 0 \|"),
    "bench_baseline": (["--workdir", "{tmp}"], r"^\| 20,000 \| [\d.]+ \| [\d.]+ \| [\d.]+x \|"),
    "bench_correlation": ([], r"^\[logistic_regression\] trial 0: \d+ trainings"),
    "bench_group": (["--workdir", "{tmp}"], r"^values agree"),
    "bench_hfm": ([], r"^\| uniform \| 500 \| 3 \| spark_certified \|"),
    "bench_hfm_1e7": (["--tmp", "{tmp}", "--spawn-probe", "10"],
                      r"^largest worker peak RSS: \d+ MB at n = 2,000"),
    "bench_hfm_cli_scale": (["--tmp", "{tmp}"], r"^exit code 0; wall"),
    "bench_hfm_user": (["--tmp", "{tmp}"], r"^\| default \| 0 \|"),
    "bench_mdfa_gather": (["--tmp", "{tmp}"], r'^ "one_pass_vs_per_view": \d'),
    "bench_mdfa_split": ([], r"^\| \*\*split total\*\* \|"),
    "bench_scoring": (["--tmp", "{tmp}"], r"^\| 20,000 \| [\d.]+ \| [\d.]+ \| [\d.]+x \|"),
    "bench_window": (["--work", "{tmp}"], r"^state of one partition"),
    "benchmark_mdfa": ([], r"^trial 0: 2 splits"),
    "measure_memory": ([], r"^\| group \| 2,000 \| 3 \|"),
}


def _run(name: str, tmp: Path) -> subprocess.CompletedProcess:
    args, _ = CASES[name]
    cmd = [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--fast",
           *[a.format(tmp=tmp) for a in args]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp,
                          timeout=600)


def test_every_benchmark_has_a_case():
    on_disk = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - {"_harness"}
    assert on_disk == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_benchmark_runs_fast(name, tmp_path):
    proc = _run(name, tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, (out[-3000:], proc.stderr[-3000:])
    assert re.search(CASES[name][1], out, flags=re.MULTILINE), out[-3000:]
    if name == "bench_nightly":
        _check_nightly_table(out)


def _check_nightly_table(out: str) -> None:
    """Both sizes ran every audit; the wall fit is the line through the two points."""
    lines = out.splitlines()
    header = next(ln for ln in lines if ln.startswith("| rows |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines
            if re.match(r"^\| [12],000 \|", ln)]
    assert [r[0] for r in rows] == ["1,000", "2,000"]
    statuses = [r[cols.index("audit statuses")] for r in rows]
    for st in statuses:
        assert all(f"{a}: ok" in st for a in ("group", "hfm", "mdfa", "correlation")), st
    walls = [float(r[cols.index("wall (s)")]) for r in rows]
    assert all(float(r[cols.index("peak RSS, process tree (GB)")]) > 0 for r in rows)
    # y = a + b x through (1000, w1), (2000, w2): b = (w2 - w1) / 1000, a = w1 - 1000 b
    b = (walls[1] - walls[0]) / 1000
    a = walls[0] - 1000 * b
    fit = next(ln for ln in lines if ln.startswith("| wall |"))
    cells = [c.strip() for c in fit.strip("|").split("|")]
    # the walls are printed to 0.1 s (an error of 0.05 each), the fit to one decimal
    assert float(cells[1]) == pytest.approx(a, abs=0.15 + 0.051)
    assert float(cells[2].split()[0]) == pytest.approx(b * 1e6, abs=100 + 0.051)
