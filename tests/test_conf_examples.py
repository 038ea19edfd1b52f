"""Every example config in ``conf/`` runs end to end on the data it names.

The examples point at data shipped in the repository (COMPAS in ``tests/data``) or
at the demo's scored table; the test writes the demo table into a temporary folder,
sends every output there and shrinks the expensive knobs (each audit's
``audit_settings.SHRINK``: mdfa splits, correlation rounds, HFM rows) with ``--set``, as a
user would for a first try. Columns, data paths, keys and values stay as shipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from audit_settings import shrink_params

from fairspark import cli
from fairspark.registry import specs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "conf").glob("*.yaml"))


@pytest.fixture(scope="module")
def demo_input(spark, tmp_path_factory) -> str:
    from fairspark.demo import demo_config, prepare_demo_input

    out = tmp_path_factory.mktemp("demo-input")
    config = demo_config(overrides={"output.path": str(out)})
    return prepare_demo_input(spark, config=config)


def test_every_example_is_tested():
    names = {p.name for p in EXAMPLES}
    assert {"adult_demo.yaml", "compas_group.yaml", "hfm_example.yaml", "mdfa_example.yaml",
            "correlation_example.yaml", "champion_challenger.yaml"} <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_config_runs(spark, demo_input, tmp_path, monkeypatch, example):
    monkeypatch.chdir(ROOT)  # the examples name paths relative to the repository root
    raw = yaml.safe_load(example.read_text())
    args = ["audit", "--config", str(example), "--run-date", "2026-11-20", "-q",
            "--output", str(tmp_path / "out"), "--no-fail-on-violation"]
    if "out/demo/_input" in raw["input"].get("path", ""):
        args += ["--input", demo_input]
        hfm = (raw.get("audits") or {}).get("hfm") or {}
        if hfm.get("dr_model"):
            args += ["--set", f"audits.hfm.dr_model={Path(demo_input).parent / 'adult_model'}"]
    if "model_uri" in json.dumps(raw["columns"]):  # registered models: a registry in tmp
        from fairspark.demo_registry import register_adult_models

        store = f"sqlite:///{tmp_path}/mlflow.db"
        register_adult_models(tracking_uri=store,
                              artifact_location=(tmp_path / "models").as_uri())
        args += ["--set", f"output.mlflow.tracking_uri={store}",
                 "--set", f"output.mlflow.artifact_location={tmp_path / 'audits'}"]
    for audit in specs():  # each audit's own settings for a quick example
        if (raw.get("audits") or {}).get(audit) is not None:
            args += [f"--set=audits.{audit}.{k}={v}" for k, v in shrink_params(audit).items()]
    code = cli.main(args, under_submit=True)
    out = tmp_path / "out" / "run_date=2026-11-20"
    assert code == 0, (example.name, code)
    summary = json.loads((out / "summary.json").read_text())
    for name, info in summary["audits"].items():
        assert info["status"] == "ok", (example.name, name, info.get("detail"))
