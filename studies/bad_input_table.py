"""Run the bad-input catalogue of docs/operations.md and write docs/bad_input.md.

The catalogue is the tables of the section "Bad inputs and faults" in
``docs/operations.md``: one row per case, with its expected exit code and the tests
that check it. This script resolves every test named there (``tests/x.py::name``,
``tests/x.py`` for a whole file, or a bare ``test_name`` looked up in ``tests/``),
runs them in one pytest session and writes one table row per case: the case, the
expected exit code, the tests and what happened to them (passed / failed / skipped
with the reason). Whole-file references are run too unless ``--no-files``.

    python studies/bad_input_table.py            # run and write docs/bad_input.md
    python studies/bad_input_table.py --no-files # leave out the whole-file references
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ROOT / "docs" / "operations.md"
OUT = ROOT / "docs" / "bad_input.md"
SECTION = "## Bad inputs and faults"

#: the file a bare test name of each catalogue table is first looked up in
DEFAULT_FILES = ["tests/test_exit_codes.py", "tests/test_bad_input_round2.py"]


@dataclass
class Case:
    table: int
    number: str
    case: str
    exit: str
    behaviour: str
    tests: list[str] = field(default_factory=list)  # pytest node ids or files
    unresolved: list[str] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _defined_in(name: str, preferred: str) -> str | None:
    """The test file that defines ``name`` (the table's default file first)."""
    files = [ROOT / preferred, *sorted((ROOT / "tests").glob("test_*.py"))]
    for f in files:
        if f.is_file() and re.search(rf"^def {re.escape(name)}\(", f.read_text(), re.M):
            return str(f.relative_to(ROOT))
    return None


def parse_catalogue(text: str) -> list[Case]:
    """The rows of every table in the section, with their tests resolved."""
    body = text[text.index(SECTION):]
    end = body.find("\n## ", len(SECTION))
    body = body[:end] if end > 0 else body
    cases: list[Case] = []
    table = -1
    in_table = False
    for line in body.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = _cells(line)
        if cells[0] == "#":
            table += 1
            in_table = True
            continue
        if not in_table or set(cells[0]) <= {"-", " "}:
            continue
        number, case, exit_, behaviour, _disk, tests = (cells + [""] * 6)[:6]
        row = Case(table=table, number=number, case=case, exit=exit_, behaviour=behaviour)
        for ref in re.findall(r"`([^`]+)`", tests):
            if ref.startswith("tests/"):
                row.tests.append(ref)
            elif re.fullmatch(r"test_\w+", ref):
                where = _defined_in(ref, DEFAULT_FILES[min(table, len(DEFAULT_FILES) - 1)])
                if where is None:
                    row.unresolved.append(ref)
                else:
                    row.tests.append(f"{where}::{ref}")
        cases.append(row)
    return cases


def run_tests(nodes: list[str]) -> dict[str, tuple[str, str]]:
    """pytest over ``nodes``; ``{nodeid-prefix: (outcome, message)}`` per test case."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--junitxml={xml}", *nodes]
        print("running:", " ".join(cmd[:6]), f"... ({len(nodes)} targets)", flush=True)
        subprocess.run(cmd, cwd=ROOT, check=False)
        results: dict[str, tuple[str, str]] = {}
        for tc in ET.parse(xml).getroot().iter("testcase"):
            path = tc.get("classname", "").replace(".", "/") + ".py"
            node = f"{path}::{tc.get('name')}"
            outcome, msg = "passed", ""
            for tag in ("failure", "error", "skipped"):
                el = tc.find(tag)
                if el is not None:
                    outcome = {"failure": "failed", "error": "error"}.get(tag, "skipped")
                    msg = (el.get("message") or "").splitlines()[0][:120] if el.get(
                        "message") else ""
                    break
            results[node] = (outcome, msg)
    return results


def outcome_of(row: Case, results: dict[str, tuple[str, str]], *, files: bool) -> str:
    """One cell: passed (n) / FAILED names / skipped (reason) / not run."""
    got = []
    for ref in row.tests:
        if "::" not in ref and not files:
            continue
        got += [(node, r) for node, r in results.items()
                if node == ref or node.startswith(ref + "[") or node.startswith(ref + "::")]
    if not got and row.tests:
        return "not run" + (" (whole-file references left out)" if not files else "")
    if not got:
        return "no test named"
    bad = [n.split("::")[-1] for n, (o, _) in got if o in ("failed", "error")]
    skipped = [(n.split("::")[-1], m) for n, (o, m) in got if o == "skipped"]
    passed = sum(o == "passed" for _, (o, _) in got)
    parts = []
    if bad:
        parts.append("**FAILED**: " + ", ".join(f"`{b}`" for b in bad))
    if passed:
        parts.append(f"passed ({passed} test{'s' if passed != 1 else ''})")
    if skipped:
        parts.append("skipped: " + "; ".join(f"`{n}` ({m})" for n, m in skipped))
    return "; ".join(parts)


def render(cases: list[Case], results: dict[str, tuple[str, str]], *, files: bool,
           commit: str) -> str:
    lines = [
        "# The bad-input catalogue, run",
        "",
        "Generated by `python studies/bad_input_table.py` from the catalogue in "
        "[operations.md](operations.md#bad-inputs-and-faults-what-happens-the-tests-follow-"
        "this-table) (the cases of its two sweeps, with their expected exit codes and "
        "messages there): every test named for a case was run in one pytest session and "
        "its outcome is below. Do not edit by hand; rerun the script.",
        "",
        f"Run on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC at commit `{commit}`.",
        "",
        "| sweep | # | case | expected exit | outcome | tests |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    sweep = {0: "first", 1: "second"}
    for row in cases:
        tests = ", ".join(f"`{t.split('::')[-1] if '::' in t else t}`" for t in row.tests)
        if row.unresolved:
            tests += (", " if tests else "") + "not found: " + ", ".join(
                f"`{u}`" for u in row.unresolved)
        lines.append(f"| {sweep.get(row.table, row.table)} | {row.number} | {row.case} | "
                     f"{row.exit} | {outcome_of(row, results, files=files)} | {tests} |")
    n_fail = sum(o in ("failed", "error") for o, _ in results.values())
    n_pass = sum(o == "passed" for o, _ in results.values())
    n_skip = sum(o == "skipped" for o, _ in results.values())
    lines += ["", f"In all: {n_pass} passed, {n_fail} failed, {n_skip} skipped "
              f"({len(results)} test cases).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-files", action="store_true",
                    help="leave out whole-file references (slow example and audit suites)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    cases = parse_catalogue(OPERATIONS.read_text())
    nodes = list(dict.fromkeys(t for c in cases for t in c.tests
                               if "::" in t or not args.no_files))
    results = run_tests(nodes)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=False).stdout.strip()
    args.out.write_text(render(cases, results, files=not args.no_files, commit=commit))
    print(f"wrote {args.out}")
    return 1 if any(o in ("failed", "error") for o, _ in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
