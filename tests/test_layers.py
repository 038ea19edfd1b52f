"""The import graph of ``fairspark/``: no cycle, layers that point down, no private reach.

Every ``import`` and ``from ... import`` of every module counts: at module level,
inside functions and under ``TYPE_CHECKING``, with relative imports resolved. An
import of ``a.b.c`` is an edge to ``a.b.c`` and, from a module outside ``a.b``, to
each enclosing package whose ``__init__`` imports something (importing the module
runs that ``__init__`` first). A module inside a package never re-runs the package's
``__init__``, so it has no edge to it. ``from a.b import c`` is an edge to ``a.b.c``
where that is a module, else to ``a.b``.

:data:`LAYERS` puts every module in one layer, bottom to top; a module imports only
from its own layer or a lower one. A module whose own name starts with ``_`` is
private to its parent package: no module outside that package imports it (the
package's ``__init__`` or a public module beside it names what others may use).
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fairspark"


#: bottom to top: (layer, the modules in it: a name stands for itself and every module
#: below it). A module belongs to the layer of its longest listed name.
LAYERS: list[tuple[str, list[str]]] = [
    # what knows nothing of fairness: errors and typed sets, the config model, the
    # session and its jobs, column names, reading the input, sampling, threads, MLflow
    # model scoring (an audit scores a registered model too), the shared constants, the
    # number rule and the typed run summary (every layer reads them)
    ("base", ["fairspark._version", "fairspark.errors", "fairspark.status", "fairspark._values",
              "fairspark.columns", "fairspark._params", "fairspark._config_mlflow",
              "fairspark.config_model", "fairspark.config_columns", "fairspark.session",
              "fairspark.io", "fairspark.constants", "fairspark.numbers",
              "fairspark.run_summary", "fairspark.sampling", "fairspark.scoring",
              "fairspark._threads",
              "fairspark._testing", "fairspark._jobs", "fairspark._signals",
              "fairspark._locks", "fairspark._memory", "fairspark._java",
              "fairspark._shipping", "fairspark._fanout", "fairspark.progress"]),
    # statistics and kernels: the normal quantile, intervals, p-value adjustment,
    # weighted confusion cells, the metric catalogue
    ("statistics", ["fairspark.stats", "fairspark.metrics"]),
    # the contract: AuditSpec, PreparedData, MetricRow, the figure and section toolkit
    ("contract", ["fairspark.audits"]),
    ("preparation", ["fairspark.prepare"]),
    ("audits", ["fairspark.group", "fairspark.hfm", "fairspark.mdfa", "fairspark.correlation"]),
    # every audit fairspark knows, the run configuration built from it, the run's
    # outputs, summary and MLflow tracking
    ("registry", ["fairspark.registry", "fairspark.config", "fairspark.outputs",
                  "fairspark.tracking", "fairspark._run_summary"]),
    ("nightly", ["fairspark.nightly"]),
    ("report", ["fairspark.report"]),
    # the entry points and what only they use
    ("runner", ["fairspark", "fairspark.runner", "fairspark.cli", "fairspark.notebook",
                "fairspark.demo", "fairspark.demo_registry", "fairspark._isolation",
                "fairspark._run_status", "fairspark._daemon"]),
]


def layer_of(module: str) -> int | None:
    """Index in :data:`LAYERS` of the longest listed name that ``module`` is or is below."""
    best, found = -1, None
    for i, (_, names) in enumerate(LAYERS):
        for n in names:
            if (module == n or module.startswith(n + ".")) and len(n) > best:
                best, found = len(n), i
    return found


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


def import_edges() -> list[tuple[str, str, str, bool]]:
    """Every import of one fairspark module by another: ``(importer, imported, where,
    named)``, where is ``file:line`` and named is False for an enclosing package whose
    ``__init__`` the import runs without naming it."""
    mods = _modules()
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in mods.items()}
    # packages whose __init__ imports something: importing a module below runs it
    importing = {m for m, p in mods.items() if _is_package(p) and _imported(m, p, trees[m])}
    edges = []
    for m, path in mods.items():
        for mod, names, line in _imported(m, path, trees[m]):
            # `from a.b import c`: the submodule a.b.c where there is one, else a.b
            targets = [f"{mod}.{n}" if f"{mod}.{n}" in mods else mod for n in names] or [mod]
            where = f"{path.relative_to(PKG.parent)}:{line}"
            for target in dict.fromkeys(targets):
                if target not in mods:
                    continue
                parts = target.split(".")
                for i in range(1, len(parts)):
                    parent = ".".join(parts[:i])
                    inside = m == parent or m.startswith(parent + ".")
                    if parent in importing and not inside:
                        edges.append((m, parent, where, False))
                if target != m:
                    edges.append((m, target, where, True))
    return edges


def import_graph() -> dict[str, dict[str, str]]:
    """Module -> {imported module: where (``file:line``)}, fairspark modules only."""
    graph: dict[str, dict[str, str]] = {m: {} for m in _modules()}
    for m, target, where, _ in import_edges():
        graph[m].setdefault(target, where)
    return graph


def upward_imports(edges: list[tuple[str, str, str, bool]]) -> list[str]:
    """``where: importer (layer) -> imported (layer)`` of every import of a higher layer."""
    out = []
    for m, target, where, _ in edges:
        a, b = layer_of(m), layer_of(target)
        if a is not None and b is not None and b > a:
            out.append(f"{where}: {m} ({LAYERS[a][0]}) -> {target} ({LAYERS[b][0]})")
    return out


def private_imports(edges: list[tuple[str, str, str, bool]]) -> list[str]:
    """``where: importer -> imported`` of every named import of a private module (own
    name starting with ``_``) from outside the package that holds it."""
    out = []
    for m, target, where, named in edges:
        parent, _, own = target.rpartition(".")
        if named and own.startswith("_") and not (m == parent or m.startswith(parent + ".")):
            out.append(f"{where}: {m} -> {target}")
    return out


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


def test_layer_table_places_every_module():
    """Every module has a layer: a new top-level module or package needs a row."""
    missing = sorted(m for m in _modules() if layer_of(m) is None)
    assert not missing, f"modules with no layer in LAYERS: {missing}"
    assert layer_of("fairspark.metrics.x") == 1 and layer_of("fairspark") == len(LAYERS) - 1
    got = upward_imports([("fairspark.group.a", "fairspark.nightly.b", "g.py:3", True),
                          ("fairspark.nightly.b", "fairspark.group.a", "n.py:4", True)])
    assert got == ["g.py:3: fairspark.group.a (audits) -> fairspark.nightly.b (nightly)"]
    got = private_imports([("fairspark.group.a", "fairspark.hfm._b", "g.py:5", True),
                           ("fairspark.hfm.c", "fairspark.hfm._b", "h.py:6", True),
                           ("fairspark.x", "fairspark._y", "x.py:7", True)])
    assert got == ["g.py:5: fairspark.group.a -> fairspark.hfm._b"]


def test_imports_point_down():
    """No module imports a module of a higher layer (in functions and under
    TYPE_CHECKING too)."""
    up = upward_imports(import_edges())
    assert not up, f"{len(up)} imports of a higher layer:\n" + "\n".join(up)


def test_no_private_module_of_another_package():
    """No module imports a private module (``_name``) of a package it is not in."""
    bad = private_imports(import_edges())
    assert not bad, (f"{len(bad)} imports of another package's private module:\n"
                     + "\n".join(bad))
