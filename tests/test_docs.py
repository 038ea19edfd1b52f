"""Docs stay current: every config key and every catalogue metric is documented."""

from __future__ import annotations

import typing
from pathlib import Path

from pydantic import BaseModel

from fairspark.config import Config
from fairspark.metrics import BASELINES, CATALOGUE, RATES

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _models(annotation):
    for arg in typing.get_args(annotation) or (annotation,):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            yield arg
        else:
            yield from (m for a in typing.get_args(arg) for m in _models(a))


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, f in model.model_fields.items():
        key = f"{prefix}{name}"
        subs = list(_models(f.annotation))
        if subs:
            for m in subs:
                out += _keys(m, f"{key}." if typing.get_origin(f.annotation) is not list
                             else f"{key}[].")
        else:
            out.append(key)
    return out


def test_every_config_key_is_documented():
    text = "\n".join(p.read_text() for p in DOCS.glob("*.md"))
    missing = []
    for key in _keys(Config):
        short = key.split(".", 1)[1] if key.startswith("audits.") else key
        generic = ".".join(["audits.<name>", short.split(".", 1)[1]]) if key.startswith(
            "audits.") else None
        if (f"`{key}`" not in text and f"`{short}`" not in text
                and (generic is None or f"`{generic}`" not in text)):
            missing.append(key)
    assert not missing, f"config keys without documentation: {missing}"


def test_every_metric_has_its_formula_documented():
    text = (DOCS / "metrics.md").read_text()
    for name in [*CATALOGUE, *BASELINES, *RATES, "gei", "theil", "between_group_gei"]:
        assert f"`{name}`" in text, name


def test_generated_config_tables_are_current():
    import subprocess
    import sys

    root = DOCS.parent
    proc = subprocess.run([sys.executable, str(root / "scripts" / "gen_config_docs.py"),
                           "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
