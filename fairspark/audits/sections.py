"""Rendering an audit's report section from the template its package ships.

Every audit package keeps its section template(s) in ``<package>/templates/``
(package files, so they load from a zipped wheel too) and renders them with
:func:`render_template`.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2

__all__ = ["render_template", "section_env"]


@functools.cache
def section_env(package: str) -> jinja2.Environment:
    """The autoescaping Jinja2 environment over ``<package>/templates``."""
    return jinja2.Environment(
        # PackageLoader also reads templates from a zipped wheel (spark-submit --py-files).
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_template(package: str, name: str, /, **context: Any) -> str:
    """Render template ``name`` of ``package`` with ``context``."""
    return section_env(package).get_template(name).render(**context)
