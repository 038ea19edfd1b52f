"""Every audit stops at its time budget, tested
without measuring time.

Two paths stop an audit, and each is tested by counting, never by a clock:

- **The audit's own checks** (hfm's passes, mdfa's waves, correlation's waves call
  ``ctx.time_left()`` between steps). An injected clock replaces
  :meth:`AuditContext.time_left`: it answers "plenty left" for the first ``N`` checks of
  the budgeted audit and 0 from then on, while the real budget (an hour) never runs
  out, so only the audit's checks can stop it. The test counts the Spark jobs started
  before and after the clock ran out: work was under way when it did, and at most one
  step (one job) ran after it. An audit that ignores its budget runs to the end and is
  published ``ok``, which fails the test.
- **The runner's cancellation** (an audit with no check inside its Spark work: group,
  HFM's exact method): a budget of 0.1 ms, which no audit meets on 5,000 rows; the
  test counts the runner's ``cancelJobGroup`` calls on that audit's job group.

Each audit runs on 5,000 rows of the bundled UCI Adult test part (about 100 encoded
features).
"""

from __future__ import annotations

import json
import threading

import pytest
import yaml
from conftest import write_parquet

from fairspark import cli, runner
from fairspark.audits.base import AuditContext
from fairspark.status import Status

#: budget of the clock-driven cases: never reached, so only the injected clock stops them
HOUR = 3600.0

#: audit -> (settings, checks of ``time_left`` answered "time left" before the clock runs
#: out). hfm: the first check is before pass B, the second after it; mdfa: six checks
#: (gather the views, prepare the attribute, after the L2 grid's net, start the
#: attribute and its splits) come before its first wave of splits, the seventh follows
#: that wave (a tolerance that always asks for another wave, so that the check is
#: reached whatever the first wave's spread); correlation: two checks before its waves,
#: then two per wave (one Spark job each), so the fifth follows the second wave of 30
CLOCK_CASES = {
    "hfm": ({"method": "certified"}, 1),
    "mdfa": ({"splits_tolerance": 1e-9}, 6),
    "correlation": ({"rounds": 30, "n_samples": 1000}, 4),
}
#: audit -> settings of the cases the runner stops (no check inside their Spark work)
CANCEL_CASES = {"group": {}, "hfm": {"method": "exact"}}


@pytest.fixture(scope="module")
def adult_table(adult_pdf, tmp_path_factory):
    sample = adult_pdf.sample(n=5000, random_state=8).reset_index(drop=True)
    sample["income"] = (sample["income"] == ">50K").astype(int)
    return write_parquet(sample, tmp_path_factory.mktemp("budgets") / "in")


def _run(name, settings, budget, adult_table, tmp_path, capsys) -> dict:
    audits = {name: {**settings, "timeout_s": budget}}
    if name != "group":
        audits["group"] = {}  # runs first and completes: the others are published
    cfg = {
        "dataset": "adult-budget", "run_date": "2026-11-29", "input": {"path": adult_table},
        "columns": {"features": "all_others",
                    "sensitive": [{"column": "sex", "privileged": "Male"}],
                    "label": {"column": "income", "positive": 1},
                    "prediction": {"column": "prediction", "positive": 1},
                    "row_key": "row_id"},
        "audits": audits,
        "output": {"path": str(tmp_path / "out"), "report": False},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(tmp_path / "c.yaml"), "-q"], under_submit=True)
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Traceback" not in err
    s = json.loads((tmp_path / "out" / "run_date=2026-11-29" / "summary.json").read_text())
    info = s["audits"][name]
    assert info["status"] == Status.TIMED_OUT, info
    assert f"ran past its time budget of {budget:g} s" in info["detail"]
    if name != "group":
        assert s["audits"]["group"]["status"] == Status.OK
    assert s["exit_code"] == 4
    return s


class _Jobs:
    """The Spark jobs this application started: those of the job groups the runner set
    (``sc.setJobGroup``, one per audit) and those without a group (threads that do not
    inherit it)."""

    def __init__(self, spark, monkeypatch):
        self.sc = spark.sparkContext
        self.groups: list[str] = []
        self.cancelled: list[str] = []
        set_group, cancel = self.sc.setJobGroup, self.sc.cancelJobGroup

        def record_group(group, *args, **kwargs):
            self.groups.append(group)
            return set_group(group, *args, **kwargs)

        def record_cancel(group):
            self.cancelled.append(group)
            return cancel(group)

        monkeypatch.setattr(self.sc, "setJobGroup", record_group)
        monkeypatch.setattr(self.sc, "cancelJobGroup", record_cancel)

    def ids(self) -> set[int]:
        tracker = self.sc.statusTracker()
        out = set(tracker.getJobIdsForGroup(None))
        for g in self.groups:
            out |= set(tracker.getJobIdsForGroup(g))
        return out


class _Clock:
    """``AuditContext.time_left`` for a budgeted audit: an hour for the first ``n`` calls,
    then 0; it notes the Spark jobs known when it runs out."""

    def __init__(self, n: int, jobs: _Jobs):
        self.n, self.jobs = n, jobs
        self.checks = 0
        self.at_expiry: set[int] | None = None
        self.lock = threading.Lock()

    def time_left(self, ctx: AuditContext) -> float:
        if ctx.deadline is None:  # an audit without a budget (group, first)
            return float("inf")
        with self.lock:
            self.checks += 1
            if self.checks <= self.n:
                return HOUR  # finite, as a real budget's (correlation asks isfinite)
            if self.at_expiry is None:
                self.at_expiry = self.jobs.ids()
            return 0.0


@pytest.mark.parametrize("name", list(CLOCK_CASES))
def test_an_audit_stops_at_its_next_step_once_its_clock_runs_out(
        spark, adult_table, tmp_path, capsys, monkeypatch, name):
    settings, n = CLOCK_CASES[name]
    jobs = _Jobs(spark, monkeypatch)
    clock = _Clock(n, jobs)
    monkeypatch.setattr(AuditContext, "time_left", lambda self: clock.time_left(self))
    around: dict[str, set[int]] = {}
    original = runner._run_with_budget

    def counted(spec, ctx, params):
        if spec.name == name:
            around["start"] = jobs.ids()
        try:
            return original(spec, ctx, params)
        finally:
            if spec.name == name:
                around["end"] = jobs.ids()

    monkeypatch.setattr(runner, "_run_with_budget", counted)
    _run(name, settings, HOUR, adult_table, tmp_path, capsys)
    assert clock.at_expiry is not None, f"{name} made {clock.checks} checks, expected > {n}"
    before = clock.at_expiry - around["start"]
    after = around["end"] - clock.at_expiry
    print(f"{name}: {clock.checks} checks, {len(before)} Spark jobs before the clock ran "
          f"out, {len(after)} after")
    assert before, f"{name}: no Spark job ran before the clock ran out (expire later)"
    assert len(after) <= 1, (name, sorted(after))
    assert not jobs.cancelled, "the runner cancelled: its real budget ran out, not the clock"


@pytest.mark.parametrize("name", list(CANCEL_CASES))
def test_the_runner_cancels_an_audit_past_its_budget(spark, adult_table, tmp_path, capsys,
                                                     monkeypatch, name):
    jobs = _Jobs(spark, monkeypatch)
    _run(name, CANCEL_CASES[name], 0.0001, adult_table, tmp_path, capsys)
    mine = [g for g in jobs.groups if g.startswith(f"fairspark-{name}-")]
    assert len(mine) == 1, jobs.groups
    assert mine[0] in jobs.cancelled, (jobs.groups, jobs.cancelled)
