"""mdfa at a fifth of the cost: the L2 strength chosen once per view, the
interval's half-width predicted for more splits, splits in waves (``splits: auto``),
and progress a person can see."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fairspark.mdfa import MDFASample, make_synthetic, run_split, run_splits
from fairspark.mdfa.certify import choose_l2
from fairspark.mdfa.null import corrected_gamma, predicted_half_width
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.results import split_frame
from fairspark.progress import Progress, format_seconds

GRID = [1e-4, 1e-3, 1e-2]


def _sample(n: int = 700, seed: int = 2) -> MDFASample:
    d = make_synthetic(n=n, nu=0.6, mu=0.2, seed=seed)
    return MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                      desc_names=["x1", "x2"])


def test_l2_chosen_once_is_the_first_splits_grid_search_and_is_reused():
    smp = _sample()
    per_split = MDFAParams(auditor="logistic_regression", epochs=3, l2_grid=GRID,
                           l2_selection="per_split", worst_violation=False)
    once = choose_l2(smp, seed=101, params=per_split.model_copy(update={"l2_selection": "once"}))
    assert once.l2 in GRID
    ref0 = run_split(smp, split=0, seed=101, params=per_split)
    got0 = run_split(smp, split=0, seed=101, params=once)
    # the first split's net is the one its own grid search kept, bit for bit
    assert ref0.l2 == once.l2
    assert (got0.gamma_pos, got0.gamma_neg, got0.mmd) == (ref0.gamma_pos, ref0.gamma_neg,
                                                          ref0.mmd)
    # the other splits train that strength only; where their own search would have
    # picked it too, the result is the same
    same = 0
    for i, seed in enumerate((102, 103, 104, 105), start=1):
        ref = run_split(smp, split=i, seed=seed, params=per_split)
        got = run_split(smp, split=i, seed=seed, params=once)
        assert got.l2 == once.l2
        if ref.l2 == once.l2:
            same += 1
            assert (got.gamma_pos, got.mmd) == (ref.gamma_pos, ref.mmd)
    # a fixed l2, uniform balancing or a one-value grid is left alone
    assert choose_l2(smp, seed=1, params=once).l2 == once.l2
    assert choose_l2(smp, seed=1, params=per_split).l2 is None
    one = per_split.model_copy(update={"l2_selection": "once", "l2_grid": [1e-3]})
    assert choose_l2(smp, seed=1, params=one).l2 is None


def _table(n: int, k: int, seed: int = 0, b_sd: float = 0.002) -> pd.DataFrame:
    """A split table with gamma_max, its null values and draws i mod k."""
    rng = np.random.default_rng(seed)
    draw = np.arange(n) % k
    b = rng.normal(0.0, b_sd, k)  # a draw's own offset
    return pd.DataFrame({
        "split": np.arange(n), "null_draw": draw, "n_train": 700, "n_test": 300,
        "gamma_max": 0.02 + rng.normal(0.0, 0.004, n),
        "gamma_null_max": 0.006 + b[draw] + rng.normal(0.0, 0.004, n),
    })


def _by_hand(t: pd.DataFrame, n_new: int, k: int) -> tuple[float, float]:
    """The variance components written out again (by the formulas, not the module's):
    half-width ``t_nu sqrt(s_g^2 (1/n + rho) + (sigma_b^2 + sigma_w^2 / m) / K)``, nu the
    Welch-Satterthwaite degrees of freedom of the two terms."""
    g = t["gamma_max"].to_numpy(float)
    per_draw = t.groupby("null_draw")["gamma_null_max"]
    means, sizes = per_draw.mean().to_numpy(), per_draw.size().to_numpy(float)
    kk = len(means)
    if (sizes > 1).any():
        var_w = float(sum((v.to_numpy() - v.mean()).__pow__(2).sum() for _, v in per_draw)
                      / (sizes - 1).sum())
    else:
        var_w = float(g.var(ddof=1))
    m_now = kk / (1.0 / sizes).sum()
    var_b = max(0.0, means.var(ddof=1) - var_w / m_now)

    def hw(n: int) -> float:
        sz = np.bincount(np.arange(n) % k, minlength=k).astype(float)
        m = k / (1.0 / sz).sum()
        obs = g.var(ddof=1) * (1.0 / n + 300 / 700)
        ref = (var_b + var_w / m) / kk
        nu = (obs + ref) ** 2 / (obs**2 / (n - 1) + ref**2 / (kk - 1))
        return stats.t.ppf(0.975, nu) * math.sqrt(obs + ref)

    return hw(len(g)), hw(n_new)


@pytest.mark.parametrize("n,k", [(20, 20), (40, 20), (10, 10)])
def test_predicted_half_width_matches_the_components_by_hand(n, k):
    t = _table(n, k)
    now, later = predicted_half_width(t, n_splits=n + 20, k=k)
    want_now, want_later = _by_hand(t, n + 20, k)
    assert now == pytest.approx(want_now, rel=1e-12)
    assert later == pytest.approx(want_later, rel=1e-12)
    assert later < now
    # more splits never shrink the sampling term: the narrowing is bounded
    _, far = predicted_half_width(t, n_splits=10**5, k=k)
    sampling = stats.norm.ppf(0.975) * corrected_gamma(t).sd_sampling
    assert far > sampling
    # with one split per draw and sigma_b clearly above 0 the model's half-width is
    # the reported interval's
    t = _table(n, k, b_sd=0.02)
    c = corrected_gamma(t)
    now, _ = predicted_half_width(t, n_splits=n, k=k)
    if n == k:
        assert now == pytest.approx(c.upper - c.value, rel=1e-9)
    else:  # several splits per draw: the model smooths sd(T*_k); close, not equal
        assert now == pytest.approx(c.upper - c.value, rel=0.5)


def test_auto_splits_in_waves_equal_one_loop_and_stop_by_the_rule(spark, caplog):
    smp = _sample(n=600).with_null_model(seed=5)
    seeds = [1000 + i for i in range(6)]
    p = MDFAParams(auditor="logistic_regression", epochs=2, l2_grid=[1e-3], splits="auto",
                   splits_wave=3, splits_max=6, worst_violation=False, null_draws=20)
    assert p.null_k() == 3 and p.planned_splits() == 6
    ref = split_frame([run_split(smp, split=i, seed=s, params=p) for i, s in enumerate(seeds)])
    first = run_splits(spark, smp, seeds=seeds[:3], params=p)
    second = run_splits(spark, smp, seeds=seeds[3:], params=p, first=3)
    got = pd.concat([first, second], ignore_index=True)
    for col in ("split", "null_draw", "gamma_pos", "gamma_neg", "gamma_null_max"):
        np.testing.assert_array_equal(got[col].to_numpy(float), ref[col].to_numpy(float))
    # the stopping rule of the audit: a wave is added while it narrows by >= tolerance
    now, later = predicted_half_width(ref.iloc[:3], n_splits=6, k=3)
    assert later < now


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_progress_logs_at_most_every_interval_and_feeds_the_sink():
    seen: list[dict] = []
    p = Progress(what="mdfa race", unit="splits", total=20, sink=seen.append, every_s=3600)
    logger, handler = logging.getLogger("fairspark"), _Lines()
    level = logger.level
    logger.addHandler(handler)  # the CLI's tests may have stopped propagation to root
    logger.setLevel(logging.INFO)
    try:
        p.update(0, force=True)
        for k in range(1, 10):
            p.update(k)  # within the interval: not logged
        p.update(10, force=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    lines = [m for m in handler.lines if "mdfa race" in m]
    assert len(lines) == 2 and len(seen) == 2
    assert lines[-1].startswith("mdfa race: 10 of 20 splits done")
    assert "left" in lines[-1] and seen[-1]["done"] == 10 and seen[-1]["total"] == 20
    assert seen[-1]["remaining_s"] == pytest.approx(seen[-1]["elapsed_s"], abs=0.2)
    assert format_seconds(75.2) == "1m15s" and format_seconds(42) == "42s"
    assert format_seconds(3 * 3600 + 120) == "3h02m"


def _toy_context(spark, tmp_path, mdfa: dict):
    from conftest import write_parquet

    from fairspark.audits.base import AuditContext
    from fairspark.config import parse_config
    from fairspark.io import read_input
    from fairspark.prepare import prepare

    rng = np.random.default_rng(4)
    n = 900
    x1, x2 = rng.normal(size=n), rng.uniform(0, 10, n)
    grp = np.where(rng.random(n) < 0.4, "b", "a")
    pred = ((x1 + 0.5 * (grp == "b") + rng.normal(0, 0.5, n)) > 0).astype(int)
    pdf = pd.DataFrame({"id": np.arange(n).astype(str), "x1": x1, "x2": x2, "grp": grp,
                        "label": rng.integers(0, 2, n), "pred": pred})
    inp = write_parquet(pdf, tmp_path / "in")
    cfg = parse_config({
        "dataset": "mdfa_waves", "run_date": "2026-11-29", "seed": 3, "input": {"path": inp},
        "columns": {"features": ["x1", "x2"], "row_key": "id",
                    "sensitive": [{"column": "grp", "privileged": "a"}],
                    "label": {"column": "label", "positive": 1},
                    "prediction": {"column": "pred", "positive": 1}},
        "audits": {"group": None, "mdfa": mdfa},
        "output": {"path": str(tmp_path / "out"), "report": False},
    })
    prepared = prepare(read_input(spark, input_config=cfg.input), config=cfg)
    return AuditContext(spark=spark, prepared=prepared, config=cfg,
                        run_date=cfg.effective_run_date()), cfg.audits.mdfa


@pytest.mark.parametrize("tolerance", [0.999, 1e-6])
def test_auto_splits_stop_by_the_predicted_narrowing(spark, tmp_path, tolerance):
    from fairspark.mdfa import run

    ctx, params = _toy_context(spark, tmp_path, {
        "splits": "auto", "splits_wave": 3, "splits_max": 6, "splits_tolerance": tolerance,
        "auditor": "logistic_regression", "epochs": 2, "worst_violation": False,
        "min_rows": 50})
    seen: list[tuple[str, dict]] = []
    ctx.progress = lambda audit, state: seen.append((audit, state))
    res = run(ctx, params).result.attributes[0]
    first = res.splits.iloc[:3]
    now, later = predicted_half_width(first, n_splits=6, k=3)
    more = 1.0 - later / now >= tolerance
    assert len(res.splits) == (6 if more else 3)
    assert list(res.splits["split"]) == list(range(len(res.splits)))
    assert ("reached splits_max" in res.splits_stop) == more
    assert res.l2 == params.l2_grid[0] or res.l2 in params.l2_grid
    # progress: a first line, the last with every split done, all for mdfa
    assert seen and {a for a, _ in seen} == {"mdfa"}
    assert seen[-1][1]["done"] == len(res.splits) == seen[-1][1]["total"]


def test_running_status_carries_progress(spark, tmp_path):
    import json

    from fairspark.outputs import OutputLocation
    from fairspark.runner import write_status

    out = OutputLocation(spark, str(tmp_path / "out"))
    write_status(out, "2026-11-29", exit_code=None, run_id="r1",
                 progress={"audit": "mdfa", "done": 3, "total": 20})
    st = json.loads((tmp_path / "out" / "_status" / "run_date=2026-11-29.json").read_text())
    assert st["state"] == "running" and st["progress"] == {"audit": "mdfa", "done": 3,
                                                            "total": 20}
