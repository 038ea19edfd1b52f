"""One number rule for every printed number (issue 59, item 4).

Every number a person reads goes through :func:`fairspark.numbers.format_number` or one
of its named forms; no module under ``fairspark/`` but ``fairspark/numbers.py`` formats
a number itself. An AST scan of every module finds the format specs of a number
(``:.3g``, ``:.4f``, ``:.1%``, ``:g``, ``:,``) in f-strings, ``format(x, spec)`` and
``"...".format(...)`` calls, and the ``%``-style ones (``%.2f``, ``%g``) in log lines
above DEBUG (a DEBUG line is an internal cost, not a line a user reads: it may keep them).
Integer specs (``:02d``, ``:+d``) and widths (``:>7``) are not numbers' rounding and
pass.
"""

from __future__ import annotations

import ast
import re
import string

import pytest
from conftest import ROOT

PACKAGE = ROOT / "fairspark"
RULE = PACKAGE / "numbers.py"

#: ``file (relative to fairspark/): reason`` for a format spec that must stay; every
#: entry must still match something (so the list cannot rot)
ALLOWED: dict[str, str] = {}

#: a format spec (``[[fill]align][sign][z][#][0][width][grouping][.precision][type]``)
_SPEC = re.compile(r"^(?:.?[<>=^])?[-+ ]?z?#?0?\d*(?P<group>[,_])?(?P<prec>\.\d+)?"
                   r"(?P<type>[bcdeEfFgGnosxX%])?$")
#: a %-style conversion of a float (``%.2f``, ``%7.2f``, ``%g``, ``%e``)
_PERCENT = re.compile(r"%[-+ 0#]*\d*(?:\.\d+)?[eEfFgG]")
_LOUD = {"info", "warning", "warn", "error", "exception", "critical", "log"}


def is_number_spec(spec: str) -> bool:
    """Whether ``spec`` rounds or groups a number (a float type, a precision, ``,``)."""
    m = _SPEC.match(spec)
    if m is None:  # not a plain spec: count it as one to look at
        return True
    return bool(m["group"] or m["prec"] or (m["type"] or "") in set("eEfFgGn%"))


def _spec_text(node: ast.JoinedStr) -> str:
    """A format spec's text, a nested ``{...}`` read as a width of 9."""
    return "".join(v.value if isinstance(v, ast.Constant) else "9" for v in node.values)


def _str_format_specs(text: str) -> list[str]:
    try:
        return [spec for _, name, spec, _ in string.Formatter().parse(text)
                if name is not None and spec]
    except ValueError:
        return []


def number_specs(source: str) -> list[tuple[int, str]]:
    """``(line, spec)`` of every format spec of a number in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            spec = _spec_text(node.format_spec)
            if is_number_spec(spec):
                found.append((node.lineno, spec))
        elif isinstance(node, ast.Call):
            func, args = node.func, node.args
            if (isinstance(func, ast.Name) and func.id == "format" and len(args) == 2
                    and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)
                    and is_number_spec(args[1].value)):
                found.append((node.lineno, args[1].value))
            elif (isinstance(func, ast.Attribute) and func.attr == "format"
                  and isinstance(func.value, ast.Constant)
                  and isinstance(func.value.value, str)):
                found += [(node.lineno, s) for s in _str_format_specs(func.value.value)
                          if is_number_spec(s)]
            elif (isinstance(func, ast.Attribute) and func.attr in _LOUD and args
                  and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)):
                found += [(node.lineno, m[0]) for m in _PERCENT.finditer(args[0].value)]
    return found


def test_the_scan_finds_each_kind_of_number_spec():
    src = '''
x = 1.5
log.info("took %.2f s", x)
log.debug("took %.2f s", x)
a = f"{x:.3g} {x:g} {x:,} {x:.1%} {x:+.4f} {x:.{2}f}"
b = format(x, ".6g") + "{:.2f}".format(x)
c = f"{3:02d} {3:+d} {'s':>7} {x}" + format(3, "d")
'''
    specs = [s for _, s in number_specs(src)]
    assert specs == ["%.2f", ".3g", "g", ",", ".1%", "+.4f", ".9f", ".6g", ".2f"]


@pytest.mark.parametrize(("spec", "number"), [
    (".3g", True), ("g", True), (",", True), (",.0f", True), (".1%", True), ("+.4g", True),
    ("e", True), (">8.2f", True), ("02d", False), ("+d", False), (">7", False), ("06d", False),
    ("s", False), ("x", False),
])
def test_a_number_spec_is_told_from_an_integer_or_a_width(spec, number):
    assert is_number_spec(spec) is number


def test_every_printed_number_goes_through_the_one_rule():
    """No module under fairspark/ but numbers.py formats a number itself."""
    bad, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == RULE:
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        hits = number_specs(path.read_text(encoding="utf-8"))
        if hits and rel in ALLOWED:
            used.add(rel)
            continue
        bad += [f"fairspark/{rel}:{line}: {spec!r}" for line, spec in hits]
    assert not bad, ("format these numbers with fairspark.numbers (fmt_number, fmt_plain, "
                     "fmt_fixed, fmt_setting, fmt_level, fmt_count, fmt_detail):\n"
                     + "\n".join(bad))
    assert used == set(ALLOWED), f"allowlisted but clean now: {set(ALLOWED) - used}"


def test_stored_text_keeps_pythons_own_format():
    """fmt_detail writes a number as Python's own format spec would (stored detail text
    in metrics.parquet and summary.json never changes with the display rule)."""
    from fairspark.numbers import fmt_detail

    values = [0.0123456, -0.5, 3, 0, 1e-7, -2.5e12, 123456789.0, 0.9999995, 12.5,
              float("inf"), float("-inf"), float("nan")]
    for x in values:
        assert fmt_detail(x) == format(x, ".3g"), x
        assert fmt_detail(x, 6) == format(x, "g"), x
        assert fmt_detail(x, 4, signed=True) == format(x, "+.4g"), x
        assert fmt_detail(x, decimals=4) == format(x, ".4f"), x
        assert fmt_detail(x, decimals=0) == format(x, ".0f"), x
