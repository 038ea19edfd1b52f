"""Every second of a run on a line (issue 56): the log's stage table sums to the wall
time of the ``fairspark audit`` process, measured here around the subprocess, and
``summary.json``'s lines to the time until it was written.

One real run (a fresh interpreter and JVM, as a user's); the stage lines are read from
its log, not from fairspark's own total.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import write_parquet

from fairspark.session import workers_are_the_drivers

ROOT = Path(__file__).resolve().parents[1]

#: a stage line of the log: "HH:MM:SS fairspark INFO stage NAME   1.23 s"
LINE = re.compile(r" fairspark INFO stage (\S.*?)\s+(\d+\.\d+) s$")


def _top_level(lines: list[tuple[str, float]]) -> dict[str, float]:
    """The stage table's own lines: a name ``a: b`` is a part of stage ``a``."""
    return {name: s for name, s in lines if ": " not in name}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("stages")
    rng = np.random.default_rng(11)
    n = 400
    pdf = pd.DataFrame({"x": rng.normal(size=n), "sex": rng.choice(["M", "F"], n),
                        "y": rng.integers(0, 2, n), "p": rng.integers(0, 2, n)})
    cfg = {
        "dataset": "stages", "run_date": "2026-12-03",
        "input": {"path": write_parquet(pdf, base / "in")},
        "columns": {"features": ["x"], "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1}},
        "audits": {"group": {}},
        "output": {"path": str(base / "out"), "report": True},
        "spark": {"master": "local[1]"},
    }
    (base / "c.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fairspark.cli", "audit", "--config",
                           str(base / "c.yaml")], cwd=base, env=env, capture_output=True,
                          text=True, timeout=600)
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [(m.group(1), float(m.group(2))) for m in map(LINE.search, proc.stderr.splitlines())
             if m]
    summary = json.loads((base / "out" / "run_date=2026-12-03" / "summary.json").read_text())
    return wall, lines, summary["stage_timings"]


def test_the_log_stage_lines_sum_to_the_wall_time_of_the_process(run):
    wall, lines, _ = run
    table = _top_level(lines)
    for name in ("start-up", "session start", "read", "prepare", "audit group",
                 "limits and report", "write", "other", "shutdown"):
        assert name in table, (name, lines)
    assert len(table) == len([n for n, _ in lines if ": " not in n]), "a stage logged twice"
    total = sum(table.values())
    # the lines cannot hold more than the process took (no second counted twice; the
    # log rounds each line to 10 ms, /proc the process's start to a clock tick) ...
    assert total <= wall + 0.1, (total, wall, lines)
    # ... and leave out only the exec of the interpreter and its exit after the last
    # line (the JVM has ended by then: "shutdown" waits for it)
    assert wall - total <= max(1.5, 0.05 * wall), (total, wall, lines)
    # the named stages hold the run: the time between them is small
    assert table["other"] <= max(1.5, 0.1 * wall), lines


def test_summary_json_lines_sum_to_the_time_until_it_is_written(run):
    wall, lines, timings = run
    table = _top_level(lines)
    # summary.json is written during the write: it has the write's parts, not its line
    assert "write" not in timings and "shutdown" not in timings
    assert {"write: metrics", "write: report", "other"} <= set(timings)
    shown = sum(v for k, v in timings.items() if ": " not in k or k.startswith("write: "))
    before_write = sum(s for name, s in table.items()
                       if name not in ("write", "other", "shutdown"))
    # every line before the write is the log's, to the rounding of the log's 2 decimals
    for name, s in table.items():
        if name not in ("write", "other", "shutdown"):
            assert timings[name] == pytest.approx(s, abs=0.006), name
    # what is left is the write so far and the time between the stages so far: no more
    # than the log's whole write and "other"
    assert before_write <= shown <= before_write + table["write"] + table["other"] + 0.05
    assert shown <= wall


def test_the_probe_is_left_out_only_for_this_interpreter_and_this_fairspark(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the workers find this fairspark
    assert workers_are_the_drivers("local[2]", {})
    assert workers_are_the_drivers("local-cluster[2,1,1024]", {})
    assert workers_are_the_drivers("local[2]", {"spark.pyspark.python": sys.executable})
    # another interpreter, a master whose workers are elsewhere: probed
    assert not workers_are_the_drivers("local[2]", {"spark.pyspark.python": "/usr/bin/python3"}
                                       ) or os.path.abspath("/usr/bin/python3") == sys.executable
    assert not workers_are_the_drivers("yarn", {})
    assert not workers_are_the_drivers("spark://host:7077", {})
    monkeypatch.setenv("PYSPARK_PYTHON", "python3")
    assert not workers_are_the_drivers("local[2]", {})
