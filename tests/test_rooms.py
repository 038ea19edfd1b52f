"""The house's size and direction rules, read from the source (AST, no import).

- No file of ``fairspark/`` over 700 lines, no function over 80 lines (its decorators
  and docstring included) or with more than 8 parameters (``self``/``cls`` not counted).
- No module outside an audit's package and the registry names an audit: the built-in
  audits are found as the packages with a ``spec.py``; their names may not appear as a
  string constant elsewhere. ``group`` is also the name of the long rows' column, so a
  ``"group"`` counts only where it names the audit: compared with an expression that
  mentions ``audit``, or as a key looked up on an expression that mentions ``audits``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fairspark"
AUDITS = sorted(p.parent.name for p in PKG.glob("*/spec.py") if "\nSPEC = " in p.read_text())
#: a name that is also a column of the long rows
COLUMN_NAMES = {"group"}


def _files() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [*a.posonlyargs, *a.args]
    n = len(names) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return n - (1 if names and names[0].arg in ("self", "cls") else 0)


def test_the_scan_sees_the_audits():
    assert {"group", "hfm", "mdfa", "correlation"} <= set(AUDITS)


def test_no_file_over_700_lines_no_function_over_80_lines_or_8_parameters():
    long_files, long_fns, wide_fns = [], [], []
    for path in _files():
        text = path.read_text()
        rel = path.relative_to(PKG.parent)
        if text.count("\n") > 700:
            long_files.append(f"{rel} ({text.count(chr(10))} lines)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                # the docstring is documentation, not code to read: its Examples and
                # parameter lists do not count against the function's length
                doc = node.body[0] if node.body and isinstance(node.body[0], ast.Expr) \
                    and isinstance(node.body[0].value, ast.Constant) \
                    and isinstance(node.body[0].value.value, str) else None
                size = node.end_lineno - first + 1 - (
                    doc.end_lineno - doc.lineno + 1 if doc is not None else 0)
                if size > 80:
                    long_fns.append(f"{rel}:{node.lineno} {node.name} ({size} lines)")
                if _params(node) > 8:
                    wide_fns.append(f"{rel}:{node.lineno} {node.name} ({_params(node)})")
    assert not long_files, long_files
    assert not long_fns, long_fns
    assert not wide_fns, wide_fns


def _names_an_audit(const: ast.Constant, parent: ast.AST | None) -> bool:
    if const.value not in COLUMN_NAMES:
        return True
    if isinstance(parent, ast.Compare):
        return any("audit" in ast.unparse(x) for x in [parent.left, *parent.comparators]
                   if x is not const)
    if isinstance(parent, ast.Subscript):
        return "audits" in ast.unparse(parent.value)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute):
        return parent.func.attr == "get" and "audits" in ast.unparse(parent.func.value)
    return False


def test_no_module_outside_an_audits_package_and_the_registry_names_an_audit():
    found = []
    for path in _files():
        rel = path.relative_to(PKG)
        if rel.parts[0] in AUDITS or rel.as_posix() == "registry.py":
            continue
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and node.value in AUDITS
                    and _names_an_audit(node, parents.get(node))):
                found.append(f"fairspark/{rel}:{node.lineno} {node.value!r}")
    assert not found, found


def test_the_audit_name_rule_can_fail():
    """The rule itself, on code that names an audit in each way it looks for."""
    src = ('if r["audit"] == "group": pass\nx = summary["audits"]["group"]\n'
           'y = summary.get("audits").get("group")\nz = "hfm"\nok = row.get("group")\n')
    tree = ast.parse(src)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    hits = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and n.value in AUDITS and _names_an_audit(n, parents.get(n))]
    assert sorted(hits) == [1, 2, 3, 4]
