"""The audit contract, tested once over every registered audit.

Shared behaviour lives in the config, the runner and the context, not in the
audits: one rule for unknown attribute names, rendering isolated from the numbers,
redaction, time budgets and one typed set of statuses.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from audit_settings import small_params
from conftest import write_parquet

from fairspark import cli
from fairspark.audits.spec import AuditSpec
from fairspark.config import AuditsConfig, parse_config
from fairspark.errors import ConfigError
from fairspark.registry import AUDIT_SPECS, specs
from fairspark.status import Status, Verdict

ROOT = Path(__file__).resolve().parents[1]
NAMES = list(specs())

#: values of the redacted column: none may appear in any output
SECRETS = ["zq-secret-alpha", "zq-secret-beta", "zq-secret-gamma"]


def _small(name: str) -> dict:
    """The audit's small but real settings, so that a run of all takes seconds."""
    return small_params(name)


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    rng = np.random.default_rng(7)
    n = 600
    x1, x2 = rng.normal(size=n), rng.random(n)
    sex = rng.choice(["M", "F"], n, p=[0.6, 0.4])
    secret = rng.choice(SECRETS, n)
    logit = 1.5 * x1 + x2 + 0.5 * (sex == "M")
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    pdf = pd.DataFrame({"id": np.arange(n).astype(str), "x1": x1, "x2": x2, "secret": secret,
                        "sex": sex, "y": y, "p": (logit > 0.5).astype(int)})
    return write_parquet(pdf, tmp_path_factory.mktemp("contract") / "in.parquet")


def _config(tmp_path: Path, inp: str, audits: dict, **extra) -> dict:
    return {
        "dataset": "contract",
        "seed": 5,
        "input": {"path": inp},
        "columns": {
            "sensitive": [{"column": "sex", "privileged": "M"}],
            "categorical": ["secret"],
            "label": {"column": "y", "positive": 1},
            "prediction": {"column": "p", "positive": 1},
            "row_key": "id",
        },
        "audits": audits,
        "redact_columns": ["secret"],
        "output": {"path": str(tmp_path / "out")},
        **extra,
    }


def _run(tmp_path: Path, cfg: dict, run_date: str = "2026-11-20") -> tuple[int, Path]:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(path), "--run-date", run_date, "-q"],
                    stop_session=False)
    return code, tmp_path / "out" / f"run_date={run_date}"


def test_registry_drives_the_config_sections():
    assert [s.name for s in AUDIT_SPECS] == NAMES[:len(AUDIT_SPECS)]
    assert list(AuditsConfig.model_fields) == NAMES
    for name, spec in specs().items():
        assert isinstance(spec, AuditSpec) and spec.name == name
        assert AuditsConfig.model_fields[name].annotation == (spec.params | None)
    default = AuditsConfig()
    assert list(default.enabled()) == [n for n, s in specs().items() if s.enabled_by_default]


def test_building_a_spec_writes_no_module_global_and_holds_no_test_settings():
    """A spec is a description: building one changes nothing elsewhere (the registry
    hands the loaded audits' decimals to the number printer), and the settings the
    tests run an audit with live in the tests (``tests/audit_settings.py``)."""
    import dataclasses

    from fairspark._params import AuditParams
    from fairspark.audits import lines

    specs()
    before = dict(lines.LEAST_DECIMALS)
    assert before == {n: s.decimals for n, s in specs().items()}
    assert before["mdfa"] == 4  # its gammas are hundredths
    AuditSpec(name="mdfa", params=AuditParams, run=lambda ctx, params: None, title="probe",
              order=1, decimals=9)
    assert lines.LEAST_DECIMALS == before
    assert lines.row_text({"audit": "mdfa", "metric": "gamma", "value": 0.12345}) == "0.1235"
    fields = {f.name for f in dataclasses.fields(AuditSpec)}
    assert not fields & {"small_params", "shrink_params"}


def test_every_audit_section_is_documented():
    text = (ROOT / "docs" / "config.md").read_text()
    for name in NAMES:
        assert f"`audits.{name}" in text, name


@pytest.mark.parametrize("name", NAMES)
def test_unknown_attribute_is_a_config_error_for_every_audit(name):
    raw = _config(Path("/tmp"), "/tmp/in.parquet", {name: {"attributes": ["sex", "sx"]}})
    with pytest.raises(ConfigError, match=rf"'audits\.{name}\.attributes': 'sx' is not a "
                                          r"sensitive attribute"):
        parse_config(raw)
    # the same names are fine when they exist
    parse_config(_config(Path("/tmp"), "/tmp/in.parquet", {name: {"attributes": ["sex"]}}))


def test_unknown_attribute_exits_2_before_any_output(spark, table, tmp_path, capsys):
    code, out = _run(tmp_path, _config(tmp_path, table, {"group": {"attributes": ["sx"]}}))
    assert code == 2
    assert "'audits.group.attributes': 'sx'" in capsys.readouterr().err
    assert not out.exists()


def _audit_rows(out: Path) -> pd.DataFrame:
    m = pd.read_parquet(out / "metrics.parquet")
    return m.sort_values(["audit", "attribute", "group", "metric", "model"],
                         na_position="first").reset_index(drop=True)


@pytest.fixture(scope="module")
def normal_run(spark, table, tmp_path_factory):
    """All four audits at small settings, rendered normally."""
    tmp = tmp_path_factory.mktemp("normal")
    code, out = _run(tmp, _config(tmp, table, {n: _small(n) for n in NAMES}))
    return code, out


def test_statuses_are_one_typed_set(normal_run):
    code, out = normal_run
    assert code == 0
    m = pd.read_parquet(out / "metrics.parquet")
    assert set(m.audit) == set(NAMES)
    allowed = {s.value for s in Status} | {v.value for v in Verdict}
    assert set(m.status) <= allowed
    s = json.loads((out / "summary.json").read_text())
    assert {a["status"] for a in s["audits"].values()} <= {x.value for x in Status}


def test_redacted_values_appear_in_no_output(normal_run):
    _, out = normal_run
    for name in ("metrics.parquet", "summary.json", "report.html"):
        files = [out / name] if (out / name).is_file() else sorted((out / name).rglob("*"))
        blob = b"".join(p.read_bytes() for p in files if p.is_file())
        for secret in SECRETS:
            assert secret.encode() not in blob, (name, secret)


def test_rendering_error_keeps_the_numbers_of_every_audit(spark, table, tmp_path, normal_run,
                                                          monkeypatch):
    def boom(outcome, **_kw):
        raise RuntimeError("a plotting bug")

    monkeypatch.setattr(AuditSpec, "render_fn", lambda self: boom)
    code, out = _run(tmp_path, _config(tmp_path, table, {n: _small(n) for n in NAMES}))
    assert code == 0
    s = json.loads((out / "summary.json").read_text())
    html = (out / "report.html").read_text()
    for name in NAMES:
        assert s["audits"][name]["status"] == Status.OK, name
        assert "a plotting bug" in s["audits"][name]["report_error"], name
    assert html.count("could not be rendered (RuntimeError: a plotting bug)") == len(NAMES)
    # the numbers are those of the run whose sections rendered
    pd.testing.assert_frame_equal(
        _audit_rows(out).drop(columns=["run_date"]),
        _audit_rows(normal_run[1]).drop(columns=["run_date"]),
    )


@pytest.mark.parametrize("name", NAMES)
def test_trend_and_headline_metrics_are_ones_the_audit_emits(normal_run, name):
    """Every metric an audit's spec trends or ranks first is one its rows carry.

    The emitted names come from the run itself (``metrics.parquet``), in the rows the
    trends read (``view_group``); a metric the audit emits only with an optional input
    (its summary's ``optional_metrics``, e.g. HFM's DR without a model) is allowed.
    """
    _, out = normal_run
    spec = specs()[name]
    m = pd.read_parquet(out / "metrics.parquet")
    mine = m[m.audit == name]
    if spec.view_group is not None:
        mine = mine[mine.group == spec.view_group]
    emitted = set(mine.metric)
    s = json.loads((out / "summary.json").read_text())
    optional = set(s["audits"][name].get("optional_metrics") or ())
    for metric in (*spec.trend_metrics, *spec.headline_metrics):
        assert metric in emitted or metric in optional, (name, metric, sorted(emitted))
        assert metric in spec.metrics, (name, metric)


@pytest.mark.parametrize("name", NAMES)
def test_time_budget_is_kept_by_every_audit(spark, table, tmp_path, name):
    # the group audit reads preparation's cells and runs no Spark job, a few ms that can
    # end before the runner's wait wakes (the GIL's switch interval is 5 ms): its own
    # check between attributes keeps a budget of 1 microsecond whatever the scheduling
    budget = 1e-6 if name == "group" else 0.05
    audits = {"group": {}, name: {**_small(name), "timeout_s": budget}}
    code, out = _run(tmp_path, _config(tmp_path, table, audits))
    assert code == 4
    s = json.loads((out / "summary.json").read_text())
    assert s["audits"][name]["status"] == Status.TIMED_OUT
    assert f"time budget of {budget:g} s" in s["audits"][name]["detail"]
    if name != "group":
        assert s["audits"]["group"]["status"] == Status.OK
    m = pd.read_parquet(out / "metrics.parquet")
    assert set(m[m.audit == name].status) == {Status.TIMED_OUT}
