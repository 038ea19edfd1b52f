"""Regenerate the per-audit key tables of docs/config.md from the params models.

The tables sit between ``<!-- BEGIN GENERATED AUDIT KEYS -->`` and
``<!-- END GENERATED AUDIT KEYS -->``; descriptions come from each model's numpydoc
``Attributes`` section, so the docstring is the single source. ``--check`` exits 1
when the file is out of date (the test suite runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "config.md"
BEGIN, END = "<!-- BEGIN GENERATED AUDIT KEYS -->", "<!-- END GENERATED AUDIT KEYS -->"
sys.path.insert(0, str(ROOT))


def _attributes(doc: str) -> dict[str, str]:
    """name -> description from a numpydoc ``Attributes`` section."""
    m = re.search(r"Attributes\n\s*-+\n(.*?)(?:\n\s*\n\s*[A-Z][a-z]+\n\s*-+\n|\Z)", doc, re.S)
    if not m:
        return {}
    out: dict[str, str] = {}
    names: list[str] = []
    for line in m.group(1).splitlines():
        head = re.match(r"^    (\S[^:]*):\s*$", line)
        if head:
            names = [n.strip() for n in head.group(1).split(",")]
            for n in names:
                out[n] = ""
        elif line.strip() and names:
            for n in names:
                out[n] = (out[n] + " " + line.strip()).strip()
    return out


def _type(annotation) -> str:
    s = str(annotation).replace("typing.", "").replace("NoneType", "None")
    s = re.sub(r"<class '([^']+)'>", r"\1", s)
    return s.replace("|", "\\|")


def _default(field) -> str:
    if field.default_factory is not None:
        return f"`{field.default_factory()!r}`"
    if field.is_required():
        return "required"
    return f"`{field.default!r}`"


def _rows(model, prefix: str, skip: set[str]) -> list[str]:
    """One table row per field of ``model`` not in ``skip``, keys under ``prefix``."""
    docs = _attributes(model.__doc__ or "")
    out = []
    for key, field in model.model_fields.items():
        if key in skip:
            continue
        desc = docs.get(key, "").replace("|", "\\|")
        out.append(f"| `{prefix}.{key}` | {_type(field.annotation)} | {_default(field)} | "
                   f"{desc} |")
    return out


def render() -> str:
    from fairspark._params import AuditParams
    from fairspark.registry import specs

    common = {*AuditParams.model_fields, "advanced"}
    head = "| key | type | default | meaning |\n| --- | --- | --- | --- |"
    parts = []
    for name, spec in specs().items():
        if name == "group":  # documented by hand with the catalogue
            continue
        model = spec.params
        parts.append(f"### `audits.{name}`\n\nFrom `{model.__module__}.{model.__name__}`; "
                     f"method details in [{name}.md]({name}.md).\n\n{head}")
        parts += _rows(model, f"audits.{name}", common)
        advanced = model.advanced_model()
        if advanced is not None:
            intro = " ".join((advanced.__doc__ or "").split("\n\n")[0].split())
            parts.append(f"\n#### `audits.{name}.advanced` — engine tuning\n\n{intro} "
                         "Each key has a working default (sized from the data or the "
                         "session where that matters), so a config need not name any. A "
                         f"key written at its old place, `audits.{name}.<key>`, is read "
                         f"with a warning naming `audits.{name}.advanced.<key>`.\n\n{head}")
            parts += _rows(advanced, f"audits.{name}.advanced", set())
        parts.append("")
    return "\n".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = DOC.read_text()
    if BEGIN not in text:
        raise SystemExit(f"{DOC} has no {BEGIN} marker")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n\n{render()}\n{END}{tail}"
    if args.check:
        if new != text:
            print("docs/config.md is out of date: run python tools/gen_config_docs.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
