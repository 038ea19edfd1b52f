"""Docs stay current: every config key and every catalogue metric is documented."""

from __future__ import annotations

import typing
from pathlib import Path

from pydantic import BaseModel

from fairspark.config import AuditsConfig, Config
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
    # the audits section is read against the registered audits: its model is built apart
    for key in [*_keys(Config), *_keys(AuditsConfig, "audits.")]:
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
    proc = subprocess.run([sys.executable, str(root / "tools" / "gen_config_docs.py"),
                           "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _exit_table(text: str) -> dict[int, str]:
    """Exit code -> its row's text, from the Markdown table whose header is ``| exit |``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| exit |")), None)
    assert start is not None, "no exit-code table ('| exit | meaning |')"
    rows: dict[int, str] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for code in cells[0].split("/"):
            rows[int(code)] = " ".join(cells[1:])
    return rows


def _precedence(text: str) -> list[int]:
    import re

    m = re.search(r"[Pp]recedence[^0-9]*((?:\d\s*>\s*)+\d)", text)
    assert m, "no 'precedence a > b > ...' line"
    return [int(c) for c in re.split(r"\s*>\s*", m.group(1))]


def test_readme_and_operations_exit_codes_match_the_code():
    """The exit-code tables name, for each case, the code the code gives it.

    The README once put a failed write under 1 only, while an output location that
    cannot be written is found before any output and is exit 2.
    """
    import re
    import signal

    from fairspark._run_status import TerminatedBySignal, exit_code_for
    from fairspark.errors import (
        ConfigError,
        InputReadError,
        JavaVersionError,
        MissingColumnError,
        RunLockedError,
        StateCorruptError,
        WorkerPythonError,
    )
    from fairspark.outputs import OutputPathError, OutputWriteError
    from fairspark.status import ExitCode

    # a phrase of each table (both use it) -> an exception that case raises
    cases = {
        "unknown key": ConfigError("x"),
        "missing column": MissingColumnError("c", "a feature", ["d"]),
        "unreadable input file": InputReadError("x"),
        "output location that is a file or cannot be written": OutputPathError("x"),
        "locked by another run": RunLockedError("x"),
        "`java`": JavaVersionError("x"),
        "workers' Python": WorkerPythonError("x"),
        "corrupt window state": StateCorruptError("x"),
        "once the audits ran": OutputWriteError("x"),
        "unexpected crash": RuntimeError("x"),
        "SIGTERM": TerminatedBySignal(signal.SIGTERM),
        "SIGINT": TerminatedBySignal(signal.SIGINT),
    }
    # the docstring's precedence, by the enum's names
    names = re.search(r"precedence ``([A-Z_ >]+)``", ExitCode.__doc__).group(1).split(" > ")
    order = [int(ExitCode[n]) for n in names]
    for path in (DOCS.parent / "README.md", DOCS / "operations.md"):
        text = path.read_text()
        table = _exit_table(text)
        assert set(table) == {int(c) for c in ExitCode} | {130, 143}, (path.name, set(table))
        assert _precedence(text) == order, path.name
        for phrase, exc in cases.items():
            code = int(exit_code_for(exc))
            assert phrase in table[code], (path.name, phrase, code)
            others = [c for c, row in table.items() if phrase in row and row != table[code]]
            assert not others, (path.name, phrase, f"listed under {others}, the code gives {code}")
