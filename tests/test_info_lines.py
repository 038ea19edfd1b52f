"""The CLI's INFO lines are of known kinds (issue 58, acceptance: "its log at INFO has no
line a user cannot act on; a test lists the INFO lines and fails on a new kind").

The demo takes minutes, so the same CLI runs here on a small table with every
registered audit at its small settings (``audit_settings.small_params``), a limit and
a baseline, as the demo does, and each ``fairspark INFO`` line on stderr must match one
kind of :data:`KINDS`. A new kind of line fails the test until a person decides that a
user acts on it (add it here, with why) or moves it to DEBUG.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml
from audit_settings import small_params
from conftest import write_parquet

from fairspark import cli
from fairspark.registry import specs

#: kind -> the pattern of its message (after "HH:MM:SS fairspark INFO "); each one a
#: user reads to act on (what the run is doing, where its time goes, what it wrote).
#: Internal costs (hfm's cost model, mdfa's CPU per split, correlation's CPU per round)
#: are DEBUG and must not appear.
KINDS: dict[str, str] = {
    # the driver heap the CLI chose, and the key that changes it
    "session": r"local session: spark\.driver\.memory=\S+ \(.*\)",
    # one line per stage with its wall time: progress, and where to set a budget
    "stage": r"stage +\S.*? +\d+\.\d+ s",
    # the stage table's total: its lines sum to the process's wall time
    "stage table": r"stage table: \d+\.\d+ s in all, the wall time since the process started",
    # rows read, dropped and unlabelled: a wrong filter or label shows here first
    "prepared": r"prepared \d+ of \d+ rows \(.*\); \d+ features",
    # (rows persisted) when several audits read them, else (computed by its one reader)
    "encoded": (r"features encoded: \d+ columns -> \d+ dimensions "
                r"\((rows persisted, encoded on each read|computed by the one audit that "
                r"reads them)\)"),
    # hfm's steps (its longest stage): which one to shrink (sample_rows, method)
    "hfm step": r"hfm step: \S.*? +\d+\.\d+ s",
    # mdfa's and correlation's progress while they run, and mdfa's split count
    "mdfa progress": r"mdfa \S+: \d+ of \d+ splits done, \d+s elapsed",
    "mdfa splits": r"mdfa \S+: \d+ splits, .*",
    "correlation progress": r"correlation: \d+ of \d+ rounds done \(.*\), \d+s elapsed",
    # the demo's own steps: what it trains and scores before the audit starts
    "demo": r"demo: \S.*",
    # where the outputs are, with the exit code
    "published": r"outputs published to \S+ \(exit code \d\)",
}


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    rng = np.random.default_rng(11)
    n = 300
    x1, x2 = rng.normal(size=n), rng.random(n)
    sex = rng.choice(["M", "F"], n, p=[0.6, 0.4])
    logit = 1.5 * x1 + x2 + 0.5 * (sex == "M")
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    pdf = pd.DataFrame({"id": np.arange(n).astype(str), "x1": x1, "x2": x2, "sex": sex,
                        "y": y, "p": (logit > 0.5).astype(int),
                        "p_old": (logit > 0.3).astype(int)})
    return write_parquet(pdf, tmp_path_factory.mktemp("info") / "in.parquet")


@pytest.fixture(scope="module")
def run(table, tmp_path_factory):
    """The CLI once, every audit at its small settings, a baseline and a limit:
    (exit code, stderr, the legend overlaps of every figure drawn for the report)."""
    import contextlib
    import io

    from fairspark.audits import figures

    tmp_path = tmp_path_factory.mktemp("info-run")
    cfg = {
        "dataset": "info_lines", "seed": 5, "input": {"path": table},
        "columns": {"features": ["x1", "x2"],
                    "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y", "positive": 1},
                    "prediction": {"column": "p", "positive": 1},
                    "baseline": {"column": "p_old", "positive": 1}, "row_key": "id"},
        "audits": {name: small_params(name) for name in specs()},
        "limits": {"rules": [{"no_worse_than_baseline": {
            "metric": "disparate_impact", "margin": 0.02}}]},
        "output": {"path": str(tmp_path / "out")},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    drawn: list[list[str] | None] = []
    real = figures.legends_outside

    def observed(fig) -> None:  # the real mover, then what a reader would see
        real(fig)
        drawn.append(figures.legend_overlaps(fig) if any(
            ax.get_legend() is not None for ax in fig.get_axes()) else None)

    err = io.StringIO()
    figures.legends_outside = observed
    try:
        with contextlib.redirect_stderr(err):
            code = cli.main(["audit", "--config", str(tmp_path / "c.yaml"), "--run-date",
                             "2026-12-06", "--no-fail-on-violation"], stop_session=False)
    finally:
        figures.legends_outside = real
    return code, err.getvalue(), drawn


def test_every_info_line_is_of_a_known_kind(run):
    code, err, _ = run
    assert code == 0, err[-3000:]
    info = [m[1] for m in re.finditer(r"^\d\d:\d\d:\d\d fairspark INFO (.*)$", err, re.M)]
    assert info, err[-3000:]  # the progress lines are there
    unknown = [line for line in info
               if not any(re.fullmatch(p, line) for p in KINDS.values())]
    assert not unknown, "INFO lines of no known kind:\n" + "\n".join(unknown)
    # the progress of every stage and the outputs' place are there
    seen = {k for k, p in KINDS.items() if any(re.fullmatch(p, line) for line in info)}
    assert {"stage", "prepared", "published", "mdfa progress", "correlation progress"} <= seen


def test_no_legend_of_the_report_covers_a_plotted_area(run):
    """Every figure of the report (group charts, HFM histograms, mdfa's box plot,
    the correlation graph), as it is rendered: no legend box overlaps any axes' plotted
    area, ticks or labels (matplotlib's window extents, the PNG's own boxes)."""
    code, err, drawn = run
    assert code == 0, err[-3000:]
    assert len(drawn) >= 4, f"only {len(drawn)} figures were drawn"
    with_legends = [fig for fig in drawn if fig is not None]
    assert len(with_legends) >= 2, f"{len(with_legends)} of {len(drawn)} figures have a legend"
    overlaps = [o for fig in with_legends for o in fig]
    assert not overlaps, overlaps
