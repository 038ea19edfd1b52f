"""The import graph of ``fairspark/`` has no cycle.

Every ``import`` and ``from ... import`` of every module counts: at module level,
inside functions and under ``TYPE_CHECKING``, with relative imports resolved. An
import of ``a.b.c`` is an edge to ``a.b.c`` and, from a module outside ``a.b``, to
each enclosing package whose ``__init__`` imports something (importing the module
runs that ``__init__`` first). A module inside a package never re-runs the package's
``__init__``, so it has no edge to it. ``from a.b import c`` is an edge to ``a.b.c``
where that is a module, else to ``a.b``.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fairspark"


def _modules() -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under ``fairspark/``."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imported(name: str, path: Path, tree: ast.AST) -> list[tuple[str, list[str], int]]:
    """(module, names taken from it, line) of every import, relative ones resolved.

    ``import a.b.c`` gives ``("a.b.c", [], line)``; ``from a.b import c, d`` gives
    ``("a.b", ["c", "d"], line)``.
    """
    package = name if _is_package(path) else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def import_graph() -> dict[str, dict[str, str]]:
    """Module -> {imported module: where (``file:line``)}, fairspark modules only."""
    mods = _modules()
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in mods.items()}
    # packages whose __init__ imports something: importing a module below runs it
    importing = {m for m, p in mods.items() if _is_package(p) and _imported(m, p, trees[m])}
    graph: dict[str, dict[str, str]] = {m: {} for m in mods}
    for m, path in mods.items():
        for mod, names, line in _imported(m, path, trees[m]):
            # `from a.b import c`: the submodule a.b.c where there is one, else a.b
            targets = [f"{mod}.{n}" if f"{mod}.{n}" in mods else mod for n in names] or [mod]
            where = f"{path.relative_to(PKG.parent)}:{line}"
            for target in targets:
                if target not in mods:
                    continue
                parts = target.split(".")
                for i in range(1, len(parts)):
                    parent = ".".join(parts[:i])
                    inside = m == parent or m.startswith(parent + ".")
                    if parent in importing and not inside:
                        graph[m].setdefault(parent, where)
                if target != m:
                    graph[m].setdefault(target, where)
    return graph


def find_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle of the graph as ``[a, b, ..., a]``, or ``None`` (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path = [root]
        stack = [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def _reach(graph: dict[str, dict[str, str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for b in graph[todo.pop()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def _describe(graph: dict[str, dict[str, str]], cycle: list[str]) -> str:
    """The cycle edge by edge, and how many modules sit in its circle."""
    knot = {m for m in _reach(graph, cycle[0]) if cycle[0] in _reach(graph, m)}
    edges = "\n".join(f"  {a} -> {b}  ({graph[a][b]})" for a, b in itertools.pairwise(cycle))
    return f"{edges}\n({len(knot)} modules reach one another: {sorted(knot)})"


def test_walker_sees_every_kind_of_import():
    """The walker itself: a function-level and a TYPE_CHECKING import are edges."""
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n"
           "def f():\n    from .c import x\n    import fairspark.d.e\n")
    got = {(m, tuple(n)) for m, n, _ in _imported("fairspark.a", Path("a.py"), ast.parse(src))}
    assert {("fairspark", ("b",)), ("fairspark.c", ("x",)), ("fairspark.d.e", ())} <= got
    g = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:2"}, "c": {"a": "c.py:3"}, "d": {}}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ""}, "b": {}}) is None


def test_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 50 and sum(map(len, graph.values())) > 100
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle of fairspark/ modules:\n{_describe(graph, cycle)}"
