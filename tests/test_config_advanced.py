"""Engine tuning sits in one ``advanced`` block per audit, apart from the keys a user
decides; a tuning key at its old place is still read, with a warning naming both keys."""

from __future__ import annotations

import copy
import logging

import pytest
import yaml
from test_config import MINIMAL  # the smallest valid config, shared

from fairspark import cli
from fairspark.config import parse_config
from fairspark.errors import ConfigError
from fairspark.registry import specs

#: the keys that only change how fast an audit runs or how much memory it uses
TUNING = {
    "group": set(),
    "hfm": {"sample_rows", "local_max_bytes", "num_partitions", "rows_per_partition"},
    "mdfa": {"partitions"},
    "correlation": {"max_attempts_per_round", "partitions", "shipping", "linear_fits"},
}


def _config(audits: dict) -> dict:
    d = copy.deepcopy(MINIMAL)
    d["audits"] = copy.deepcopy(audits)
    return d


def test_each_audit_keeps_its_tuning_keys_in_its_advanced_block_only():
    for name, keys in TUNING.items():
        params = specs()[name].params
        advanced = params.advanced_model()
        got = set(advanced.model_fields) if advanced is not None else set()
        assert got == keys, name
        assert not got & set(params.model_fields), name  # never at both places


def test_a_tuning_key_at_its_old_place_is_read_there_with_a_warning(caplog):
    old = _config({"hfm": {"method": "certified", "rows_per_partition": 500},
                   "correlation": {"shipping": "closure"}})
    with caplog.at_level(logging.WARNING, logger="fairspark"):
        cfg = parse_config(old, overrides={"audits.mdfa.partitions": 3})
    assert cfg.audits.hfm.advanced.rows_per_partition == 500
    assert cfg.audits.hfm.advanced.local_max_bytes is None  # the others keep their default
    assert cfg.audits.correlation.advanced.shipping == "closure"
    assert cfg.audits.mdfa.advanced.partitions == 3
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for old_key, new_key in (("audits.hfm.rows_per_partition",
                              "audits.hfm.advanced.rows_per_partition"),
                             ("audits.correlation.shipping",
                              "audits.correlation.advanced.shipping"),
                             ("audits.mdfa.partitions", "audits.mdfa.advanced.partitions")):
        assert sum(f"'{old_key}'" in m and f"'{new_key}'" in m for m in said) == 1, said
    # the new place reads the same, without a warning
    caplog.clear()
    new = _config({"hfm": {"method": "certified", "advanced": {"rows_per_partition": 500}},
                   "correlation": {"advanced": {"shipping": "closure"}},
                   "mdfa": {"advanced": {"partitions": 3}}})
    with caplog.at_level(logging.WARNING, logger="fairspark"):
        same = parse_config(new)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert same.audits.model_dump() == cfg.audits.model_dump()


def test_a_tuning_key_at_both_places_is_refused_naming_the_new_one():
    both = _config({"hfm": {"local_max_bytes": 0, "advanced": {"local_max_bytes": 10}}})
    with pytest.raises(ConfigError, match=r"'audits\.hfm\.local_max_bytes' is given twice.*"
                                          r"keep 'audits\.hfm\.advanced\.local_max_bytes'"):
        parse_config(both)


@pytest.mark.parametrize("section", [{"advanced": {"local_max_bytes": -1}},
                                     {"local_max_bytes": -1}], ids=["new_place", "old_place"])
def test_a_bad_tuning_value_names_its_key(section):
    with pytest.raises(ConfigError, match=r"config key 'audits\.hfm\.advanced\.local_max_bytes'"):
        parse_config(_config({"hfm": section}))


def test_an_unknown_tuning_key_and_a_block_where_there_is_nothing_to_tune_are_refused():
    with pytest.raises(ConfigError, match=r"'audits\.hfm\.advanced\.blocks': unknown key"):
        parse_config(_config({"hfm": {"advanced": {"blocks": 3}}}))
    with pytest.raises(ConfigError, match=r"'audits\.group\.advanced': unknown key"):
        parse_config(_config({"group": {"advanced": {}}}))
    # a key a user decides is not tuning: it stays where it was
    with pytest.raises(ConfigError, match=r"'audits\.hfm\.advanced\.method': unknown key"):
        parse_config(_config({"hfm": {"advanced": {"method": "exact"}}}))


def test_the_config_hash_is_the_one_runs_had_before_the_advanced_block():
    """Runs before and after the block stay comparable (their trends join): the hashes
    below were computed by fairspark before the block existed (commit f6bfbb1), from
    the same configs with the tuning keys beside the others."""
    plain = _config({"hfm": {}, "mdfa": {}, "correlation": {}})
    tuned_old = _config({"hfm": {"rows_per_partition": 500, "local_max_bytes": 0},
                         "mdfa": {"partitions": 2},
                         "correlation": {"partitions": 3, "shipping": "closure",
                                         "max_attempts_per_round": 5000}})
    tuned_new = _config({"hfm": {"advanced": {"rows_per_partition": 500, "local_max_bytes": 0}},
                         "mdfa": {"advanced": {"partitions": 2}},
                         "correlation": {"advanced": {"partitions": 3, "shipping": "closure",
                                                      "max_attempts_per_round": 5000}}})
    assert parse_config(plain).config_hash() == "4cfb17466e25ec17"
    assert parse_config(tuned_old).config_hash() == "6a637758ec522b50"
    assert parse_config(tuned_new).config_hash() == "6a637758ec522b50"


def test_params_are_listed_flat_in_the_summary_and_rows():
    """``flat_dump``: the layout ``summary.json`` and the rows' ``params`` have always had."""
    cfg = parse_config(_config({"hfm": {"advanced": {"rows_per_partition": 500}}}))
    flat = cfg.audits.hfm.flat_dump()
    assert "advanced" not in flat
    assert flat["rows_per_partition"] == 500 and flat["method"] == "certified"
    assert set(flat) == (set(type(cfg.audits.hfm).model_fields) - {"advanced"}) | TUNING["hfm"]


def test_a_bad_tuning_key_exits_2_naming_it(tmp_path, capsys):
    cfg = _config({"hfm": {"advanced": {"rows_per_partition": "big"}}})
    cfg["output"]["path"] = str(tmp_path / "out")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code = cli.main(["audit", "--config", str(path), "--run-date", "2026-11-20", "-q"],
                    stop_session=False)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "config key 'audits.hfm.advanced.rows_per_partition'" in err
    assert not (tmp_path / "out" / "run_date=2026-11-20").exists()
