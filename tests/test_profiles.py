"""The fast profile (``tests/profiles.py``) names tests that exist and keeps its promises.

Static checks (no collection run): every entry of ``SLOW`` names a test file, a test
function defined in it and, for a parametrization, an id the file spells; every entry
says what covers its ground; and every test of ``KEEP`` (each audit end to end, the
CLI's exit codes, one ``spark-submit``) exists and is not left out of the profile.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from profiles import KEEP, SLOW, is_slow

ROOT = Path(__file__).resolve().parents[1]


def _resolves(entry: str) -> str | None:
    """Why ``entry`` (``file``, ``file::name`` or ``file::name[id]``) names nothing, or None."""
    path, _, rest = entry.partition("::")
    file = ROOT / path
    if not file.is_file():
        return f"no file {path}"
    if not rest:
        return None
    name, _, param = rest.partition("[")
    text = file.read_text(encoding="utf-8")
    if not re.search(rf"^def {re.escape(name)}\(", text, re.M):
        return f"no test {name} in {path}"
    # a parametrization's id: each of its values ("kind-path": two) spelled in the file
    missing = [v for v in param.rstrip("]").split("-") if v and v not in text]
    if missing:
        return f"no parametrization {param.rstrip(']')!r} in {path} ({missing})"
    return None


@pytest.mark.parametrize("entry", sorted(SLOW))
def test_every_left_out_test_exists_and_says_what_covers_it(entry):
    assert _resolves(entry) is None, _resolves(entry)
    assert SLOW[entry].strip(), f"{entry}: what covers its ground?"


def test_the_profile_keeps_every_audit_the_cli_and_a_spark_submit():
    for ground, entry in KEEP.items():
        assert _resolves(entry) is None, (ground, _resolves(entry))
        assert not is_slow(entry), f"{ground}: {entry} is left out of the fast profile"


def test_is_slow_matches_files_tests_and_parametrizations():
    file = next(e for e in SLOW if "::" not in e)
    test = next(e for e in SLOW if "::" in e and "[" not in e)
    assert is_slow(f"{file}::test_anything[x]")
    assert is_slow(f"{test}[any_id]") and is_slow(test)
    assert not is_slow("tests/test_exit_codes.py::test_ok_run_exit_0")
    for entry in (e for e in SLOW if "[" in e):
        other = entry.partition("[")[0] + "[some_other_id]"
        assert is_slow(entry) and not is_slow(other)
