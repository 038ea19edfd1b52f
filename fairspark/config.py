"""The run configuration: one typed, validated object parsed once at the entry point.

Every key is documented in ``docs/config.md``. Unknown keys and values of the wrong
type raise :class:`~fairspark.errors.ConfigError` with the dotted key in the message.
The section models live in :mod:`fairspark.config_model` (they know no audit); this
module reads a config against the registered audits (``fairspark.registry``), on the
first :func:`parse_config` call, never when it is imported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from fairspark.config_model import (
    AuditSections,
    ColumnsConfig,
    Config,
    InputConfig,
    LimitRule,
    LimitsConfig,
    ModelConfig,
    OutputConfig,
    PreparationConfig,
    SparkConfig,
    WindowConfig,
    audits_model,
)
from fairspark.errors import ConfigError

__all__ = [
    "AuditSections",
    "ColumnsConfig",
    "Config",
    "InputConfig",
    "LimitRule",
    "LimitsConfig",
    "ModelConfig",
    "OutputConfig",
    "PreparationConfig",
    "SparkConfig",
    "WindowConfig",
    "load_config",
    "parse_config",
]


def registered_audits() -> tuple[Mapping[str, Any], tuple[str, ...]]:
    """The registry's specs and the names of the audit plugins that could not be loaded."""
    from fairspark import registry

    return registry.specs(), tuple(b.name for b in registry.broken())


def __getattr__(name: str) -> Any:
    """``AuditsConfig``: the ``audits`` section's model of the registered audits, built
    on first use (reading the registry, and so the installed plugins, only then)."""
    if name == "AuditsConfig":
        return audits_model(*registered_audits())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _format_validation_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "<top level>"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        got = e.get("input")
        # (a Connect URL may carry a token: its message shows it redacted)
        quiet = e["type"] in ("missing", "extra_forbidden") or key == "spark.remote"
        shown = "" if quiet else f" (got {got!r})"
        lines.append(f"config key '{key}': {msg}{shown}")
    return "invalid config:\n  " + "\n  ".join(lines)


def _set_dotted(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = d
    for p in parts[:-1]:
        nxt = cur.get(p)
        if nxt is None:
            nxt = cur[p] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"override '{dotted}': '{p}' is not a section")
        cur = nxt
    cur[parts[-1]] = value


def _lift_tuning(data: dict[str, Any], specs: Mapping[str, Any]) -> None:
    """Move each audit's tuning keys written at their old place into its ``advanced``
    block, in place, with a warning naming both keys
    (:meth:`~fairspark._params.AuditParams.lift_advanced`).

    Raises
    ------
    ConfigError
        When a key is given both at its old place and in ``advanced``.
    """
    audits = data.get("audits")
    if not isinstance(audits, dict):
        return
    for name, spec in specs.items():
        if isinstance(audits.get(name), dict):
            try:
                audits[name] = spec.params.lift_advanced(audits[name], section=f"audits.{name}")
            except ValueError as err:
                raise ConfigError(f"invalid config: {err}") from None


def parse_config(raw: Any, *, overrides: dict[str, Any] | None = None,
                 specs: Mapping[str, Any] | None = None) -> Config:
    """Validate a config mapping (already parsed from YAML).

    Parameters
    ----------
    raw:
        The mapping read from YAML.
    overrides:
        Dotted keys to set before validation, e.g. ``{"output.path": "/tmp/x"}``;
        the CLI flags use this.
    specs:
        Audit name -> ``AuditSpec`` whose sections the config may have; ``None``: the
        registered audits (``fairspark.registry``), the broken plugins' sections
        accepted unread.

    Raises
    ------
    ConfigError
        When the mapping is not a valid config; the message names each bad key.

    Examples
    --------
    >>> raw = {"dataset": "loans", "input": {"path": "scored.parquet"},
    ...        "columns": {"sensitive": [{"column": "sex", "privileged": "m"}],
    ...                    "label": {"column": "y"}, "prediction": {"column": "p"}},
    ...        "output": {"path": "out/loans"}}
    >>> cfg = parse_config(raw, overrides={"seed": 7})
    >>> cfg.dataset, cfg.seed, cfg.input.format, list(cfg.audits.present())
    ('loans', 7, 'parquet', ['group'])

    A misspelt key is named in the error, with every other bad key:

    >>> parse_config({"dataset": "loans", "input": {"path": "x"}, "colums": {}})
    Traceback (most recent call last):
      ...
    fairspark.errors.ConfigError: invalid config:
      config key 'columns': Field required
      config key 'output': Field required
      config key 'colums': unknown key
    """
    if not isinstance(raw, dict):
        raise ConfigError(
            f"invalid config: the top level must be a mapping of keys, got {type(raw).__name__}"
        )
    data = json.loads(json.dumps(raw, default=str))  # deep copy, dates -> strings
    overrides = dict(overrides or {})
    restate = overrides.pop("window.restate", None)
    for k, v in overrides.items():
        if v is not None:
            _set_dotted(data, k, v)
    if restate is not None:
        if not isinstance(data.get("window"), dict):
            # setting it would create a 30-day window out of a plain audit
            shown = ", ".join(str(v) for v in restate) if isinstance(restate, list) else restate
            raise ConfigError(
                f"--restate {shown} (config key 'window.restate') needs 'window' in the "
                "config: only a rolling window of daily partitions stores states to "
                "aggregate again; this config audits its input as a whole (add "
                "'window: {days: N}' with 'input.partition_column', or drop --restate)")
        _set_dotted(data, "window.restate", restate)
    context = {"specs": specs} if specs is not None else dict(
        zip(("specs", "broken"), registered_audits(), strict=True))
    _lift_tuning(data, context["specs"])
    try:
        config = Config.model_validate(data, context=context)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err)) from None
    config.check_attributes()
    config.check_limits()
    config.check_window()
    return config


def load_config(path: str | Path, *, overrides: dict[str, Any] | None = None) -> Config:
    """Read and validate a YAML config file.

    Unlike :func:`parse_config`, this also checks the local files the config names
    (``audits.hfm.dr_model``), so a run started from a YAML file fails before any
    output; :func:`parse_config` stays free of file access (the demo writes its model
    after parsing its config).

    Raises
    ------
    ConfigError
        When the file is missing, is not valid YAML, is not a valid config, or names a
        local model that does not exist.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "loans.yaml").write_text('''
    ... dataset: loans
    ... input: {path: scored.parquet}
    ... columns:
    ...   sensitive: [{column: sex, privileged: m}]
    ...   label: {column: y}
    ...   prediction: {column: p}
    ... output: {path: out/loans}
    ... ''')
    >>> load_config(folder / "loans.yaml").columns.sensitive[0].column
    'sex'
    >>> load_config(folder / "missing.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    fairspark.errors.ConfigError: config file '.../missing.yaml' does not exist
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"config file {str(p)!r} is not valid YAML{where}: {problem}") from None
    config = parse_config(raw, overrides=overrides)
    for params in config.audits.present().values():
        params.check_files()
    return config
