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


def _architecture_paths(text: str) -> list[str]:
    """Every path under ``fairspark/`` that docs/architecture.md names.

    Full paths (``fairspark/prepare/_scan.py``) anywhere; in the file tree at the top, a
    bare file name (``elim.py``) or sub-folder (``_spark/``) on a package's lines is read
    inside that package (and inside the sub-folder the same line named before it).
    """
    import re

    paths = re.findall(r"(?<![\w.])fairspark/[\w./]*\w/?", text)
    tree = text.split("```", 2)[1] if "```" in text else ""
    package = sub = None
    for line in tree.splitlines():
        if line.startswith("fairspark/"):
            first = line.split()[0].rstrip(",")
            package = first.rstrip("/") if first.endswith("/") else first.rsplit("/", 1)[0]
            sub = None
        elif not line.startswith(" "):
            package = sub = None
        if package is None:
            continue
        body = line.split(None, 1)[1] if line.startswith("fairspark/") else line
        for token in re.findall(r"(?<![\w./])(_?\w+(?:\.py|/))(?=[\s:,)]|$)", body):
            if token.endswith("/"):
                sub = f"{package}/{token.rstrip('/')}"
                paths.append(sub + "/")
            else:
                inside = [f"{package}/{token}"] + ([f"{sub}/{token}"] if sub else [])
                paths.append(" or ".join(inside))
    return paths


def _dotted_names(text: str) -> list[str]:
    import re

    return sorted(set(re.findall(r"`(fairspark(?:\.\w+)+)", text)))


def _resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    obj = None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


#: the audit that "How to add an audit" builds (it is not in the tree)
EXAMPLE_AUDIT = "fairspark/calib"


def test_architecture_names_only_paths_that_exist():
    """docs/architecture.md is true to the tree: each file, folder and module it names
    under ``fairspark/`` exists (a moved module fails here until the page follows)."""
    root = DOCS.parent
    text = (DOCS / "architecture.md").read_text()
    paths = _architecture_paths(text)
    assert len(paths) > 40, paths  # the reader found the tree
    missing = [p for p in paths if not p.startswith(EXAMPLE_AUDIT)
               if not any((root / alt.rstrip("/")).exists() for alt in p.split(" or "))]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
    unresolved = [d for d in _dotted_names(text)
                  if not d.startswith(EXAMPLE_AUDIT.replace("/", ".")) and not _resolves(d)]
    assert not unresolved, (
        f"docs/architecture.md names modules or objects that do not exist: {unresolved}")


def _first_table(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return [rows[0], *rows[2:]]


def test_benchmarks_open_with_one_table_a_user_reads():
    """docs/benchmarks.md opens with one table of short cells, each row linked to the
    section that holds its command and figures."""
    import re

    text = (DOCS / "benchmarks.md").read_text()
    header, *rows = _first_table(text)
    assert header[:8] == ["workload", "rows", "audits", "master", "wall time",
                          "peak memory", "peer", "ratio"], header
    assert len(rows) >= 20
    long = [c for r in rows for c in r if len(c) > 60]
    assert not long, f"cells over 60 characters: {long}"
    refs = dict(re.findall(r"^\[([^\]]+)\]: #(\S+)$", text, re.M))
    slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
             for h in re.findall(r"^#{2,3} (.+)$", text, re.M)}
    for r in rows:
        assert len(r) == len(header), r
        ref = re.fullmatch(r"\[[^\]]+\]\[([^\]]+)\]", r[0])
        assert ref and refs.get(ref.group(1)) in slugs, r[0]
    for slug in set(refs.values()):
        section = text.split("\n## ")[1:]
        assert any(re.sub(r"[^\w\- ]", "", s.splitlines()[0].lower()).replace(" ", "-") == slug
                   and "```bash" in s for s in section), f"section {slug} has no command"


def test_code_cites_papers_not_an_absent_document():
    """Docstrings and comments cite the papers (docs/references.md), never 'METHODS §n',
    a document that is not in the repository."""
    import re

    package = DOCS.parent / "fairspark"
    hits = [f"{p.relative_to(DOCS.parent)}:{i}" for p in sorted(package.rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"METHODS(\.md)?\s*§", line)]
    assert not hits, hits
