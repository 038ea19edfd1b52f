"""Config parsing: one typed object; unknown keys and wrong types name the key."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from fairspark.config import load_config, parse_config
from fairspark.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]

MINIMAL = {
    "dataset": "t",
    "input": {"path": "x.parquet"},
    "columns": {
        "sensitive": [{"column": "sex", "privileged": "Male"}],
        "label": {"column": "y"},
        "prediction": {"column": "p"},
    },
    "output": {"path": "out"},
}


def _with(**changes):
    import copy

    d = copy.deepcopy(MINIMAL)
    for dotted, v in changes.items():
        cur = d
        parts = dotted.split("__")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = v
    return d


def test_minimal_config_gets_defaults():
    c = parse_config(MINIMAL)
    assert c.columns.features == "all_others"
    assert c.columns.sensitive[0].privileged == ["Male"]
    assert c.columns.label.positive == [1]
    assert c.audits.group is not None and c.audits.group.ci_level == 0.95
    assert list(c.audits.enabled()) == ["group"]
    assert c.input.format == "parquet"


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match=r"config key 'columns.lable': unknown key"):
        parse_config(_with(columns__lable={"column": "y"}))
    with pytest.raises(ConfigError, match=r"'audits.group.confidence'"):
        parse_config(_with(audits__group={"confidence": 0.9}))


def test_wrong_type_is_named_with_value():
    with pytest.raises(ConfigError, match=r"config key 'audits.group.ci_level'.*got 'high'"):
        parse_config(_with(audits__group={"ci_level": "high"}))
    with pytest.raises(ConfigError, match=r"'audits.group.min_group_size'"):
        parse_config(_with(audits__group={"min_group_size": [3]}))
    with pytest.raises(ConfigError, match=r"'run_date'"):
        parse_config(_with(run_date="yesterday"))


def test_exactly_one_decision_and_one_source():
    d = _with(columns__score={"column": "s", "threshold": 0.3})
    with pytest.raises(ConfigError, match="exactly one of 'columns.prediction' or 'columns.score'"):
        parse_config(d)
    with pytest.raises(ConfigError, match="exactly one of 'input.path' or 'input.table'"):
        parse_config(_with(input={"table": "db.t", "path": "x"}))


def test_intersections_must_name_attributes():
    with pytest.raises(ConfigError, match=r"\['sex', 'race'\].*\['race'\]"):
        parse_config(_with(columns__intersections=[["sex", "race"]]))


def test_overrides_apply_before_validation():
    c = parse_config(MINIMAL, overrides={"run_date": "2026-01-02", "output.path": "/tmp/o",
                                          "audits.group.ci_level": 0.9})
    assert c.run_date == dt.date(2026, 1, 2)
    assert c.output.path == "/tmp/o"
    assert c.audits.group.ci_level == 0.9


def test_config_hash_ignores_run_date_and_output_only():
    a = parse_config(MINIMAL)
    b = parse_config(MINIMAL, overrides={"run_date": "2026-01-02", "output.path": "/elsewhere"})
    c = parse_config(MINIMAL, overrides={"audits.group.ci_level": 0.9})
    assert a.config_hash() == b.config_hash()
    assert a.config_hash() != c.config_hash()


def test_malformed_yaml_names_the_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("dataset: x\ninput:\n  path: [unclosed\n")
    with pytest.raises(ConfigError, match=r"not valid YAML at line \d+"):
        load_config(p)


def test_top_level_must_be_mapping(tmp_path):
    p = tmp_path / "list.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(p)


def test_missing_file():
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("/nonexistent/fairspark.yaml")


@pytest.mark.parametrize("path", [p for p in sorted((ROOT / "conf").glob("*.yaml"))
                                  if "spark_defaults" not in p.name],  # not audit configs
                         ids=lambda p: p.name)
def test_every_example_config_parses(path):
    yaml.safe_load(path.read_text())
    c = load_config(path)
    assert c.dataset


def test_misspelled_limit_metric_is_a_config_error_with_the_closest_name():
    raw = _with(limits={"rules": [{"metric": "statistical_parity_diference", "abs_max": 0.1}]})
    with pytest.raises(ConfigError, match=r"'limits.rules\[0\].metric': "
                       r"'statistical_parity_diference' is not a metric of the enabled audits; "
                       r"did you mean 'statistical_parity_difference'"):
        parse_config(raw)


def test_limit_on_a_metric_of_an_audit_that_does_not_run_is_a_config_error():
    raw = _with(limits={"rules": [{"metric": "gamma", "max": 0.01}]})
    with pytest.raises(ConfigError, match=r"'gamma' is not a metric of the enabled audits"):
        parse_config(raw)
    raw["audits"] = {"group": {}, "mdfa": {}}
    assert parse_config(raw).limits.rules[0].metric == "gamma"
    raw["limits"]["rules"][0]["audit"] = "hfm"
    with pytest.raises(ConfigError, match=r"'limits.rules\[0\].audit': 'hfm' is not an enabled"):
        parse_config(raw)


def test_limit_on_an_unknown_attribute_is_a_config_error():
    raw = _with(limits={"rules": [{"metric": "disparate_impact", "min": 0.8,
                                   "attribute": "gender"}]})
    with pytest.raises(ConfigError, match=r"'limits.rules\[0\].attribute': 'gender' is not a "
                                          r"sensitive attribute"):
        parse_config(raw)


@pytest.mark.parametrize("bad", ["20261129", "2026-11-29T00:00", "29.11.2026", 20261129])
def test_run_date_must_be_yyyy_mm_dd(bad):
    with pytest.raises(ConfigError, match=r"'run_date'.*YYYY-MM-DD"):
        parse_config(_with(run_date=bad))
    assert parse_config(_with(run_date="2026-11-29")).run_date == dt.date(2026, 11, 29)


@pytest.mark.parametrize("bad", ["20261129", "2026-13-01"])
def test_cli_run_date_flag_must_be_yyyy_mm_dd(bad):
    from fairspark.cli import build_parser, config_overrides

    args = build_parser().parse_args(["audit", "--run-date", bad])
    with pytest.raises(ConfigError, match=r"--run-date .*expected a date as YYYY-MM-DD"):
        config_overrides(args)


def test_relative_local_paths_are_made_absolute_against_the_working_folder():
    """The CLI resolves relative paths where the command runs, not in the JVM's folder
    (a reused session's JVM may have started elsewhere)."""
    cfg = parse_config({**MINIMAL, "input": {"path": "data/in.parquet"},
                        "output": {"path": "out/x"},
                        "audits": {"hfm": {"dr_model": "models/m.joblib"}}})
    got = cfg.with_local_paths_absolute("/srv/run")
    assert got.input.path == "/srv/run/data/in.parquet"
    assert got.output.path == "/srv/run/out/x"
    assert got.audits.hfm.dr_model == "/srv/run/models/m.joblib"
    assert got.config_hash() == parse_config({
        **MINIMAL, "input": {"path": "/elsewhere/in.parquet"}, "output": {"path": "/o"},
        "audits": {"hfm": {"dr_model": "/srv/run/models/m.joblib"}}}).config_hash()
    # absolute paths and URIs are left alone
    keep = parse_config({**MINIMAL, "input": {"path": "s3a://bucket/t"},
                         "output": {"path": "/abs/out"}})
    assert keep.with_local_paths_absolute("/srv/run") is keep
