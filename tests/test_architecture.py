"""The package's structure: its import graph has no cycle, function-level imports included.

The graph is read from the source (every ``import`` statement anywhere in a module, not
only at its top), so an import hidden inside a function counts like any other. Imports
under ``if TYPE_CHECKING:`` are left out: they never run. An edge goes to the module
named (``from ccpo_lab.a import b`` goes to ``ccpo_lab.a.b`` when that is a module, else to
the package ``ccpo_lab.a``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ccpo_lab"

TOLERATED: tuple[str, ...] = ()
"""Packages whose internal cycles would be tolerated (none: keep it empty)."""


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, node: ast.ImportFrom | ast.Import, here: str, is_pkg: bool) -> str:
    if isinstance(node, ast.ImportFrom) and node.level:
        base = here.split(".") if is_pkg else here.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, name] if name else base)
    return name


def import_graph() -> dict[str, set[str]]:
    """``module -> modules of ccpo_lab it imports``."""
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_pkg = path.name == "__init__.py"
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [_resolve(a.name, node, mod, is_pkg) for a in node.names]
            else:
                base = _resolve(node.module or "", node, mod, is_pkg)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for t in targets:
                while t and t not in mods:  # ``import a.b.c`` of a name inside a module
                    t = t.rpartition(".")[0]
                if t.startswith("ccpo_lab") and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _tolerated(cycle: list[str]) -> bool:
    return any(all(m.startswith(p) for m in cycle) for p in TOLERATED)


def test_the_graph_reads_function_level_imports() -> None:
    graph = import_graph()
    # a function-level import (the trainer-side run files import the run directory inside
    # their functions: that code keeps its imports lazy)
    assert "ccpo_lab.runs.layout" in graph["ccpo_lab.backends.verl.agent.io"]
    # ... and an import under TYPE_CHECKING is not an edge
    assert "ccpo_lab.launch.status" not in graph["ccpo_lab.launch.base"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back() -> None:
    found = cycles(import_graph())
    bad = [c for c in found if not _tolerated(c)]
    assert not bad, "import cycles: " + "; ".join(" <-> ".join(c) for c in bad)


MAX_LINES = 60
"""Functions longer than this say why in their docstring (``... on purpose ...``)."""
LONG_TOLERATED: tuple[str, ...] = ()
"""Packages exempt from the length rule (none: keep it empty)."""


def test_long_functions_say_why() -> None:
    long = []
    for mod, path in modules().items():
        if mod.startswith(LONG_TOLERATED):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                doc = ast.get_docstring(node) or ""
                if n > MAX_LINES and "on purpose" not in " ".join(doc.split()):
                    long.append(f"{mod}.{node.name} ({n} lines)")
    assert not long, "functions over 60 lines without a reason in their docstring: " + \
        ", ".join(long)


LAZY: tuple[str, ...] = ("mlflow", "wandb")
"""Packages imported only inside functions: a command that does not track pays nothing
for them (``--help``, ``status``, a run whose sweep has W&B off)."""


def _import_time_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is imported: at the top level, in class
    bodies and in top-level ``if``/``try`` blocks, not in functions nor under
    ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def test_tracking_libraries_are_imported_inside_functions_only() -> None:
    found = []
    for mod, path in modules().items():
        for node in _import_time_imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            found += [f"{mod}: {n}" for n in names if n.split(".")[0] in LAZY]
    assert not found, "imported when the module is imported: " + ", ".join(found)


def test_the_lazy_import_check_sees_a_top_level_import() -> None:
    tree = ast.parse("import os\nimport wandb\ndef f():\n    import mlflow\n")
    assert sorted(a.name for n in _import_time_imports(tree) for a in n.names) == ["os", "wandb"]


LAYERS: tuple[tuple[str, ...], ...] = (
    ("ccpo_lab", "errors", "placement", "textout", "fitted", "atomic",
     "signals"),
    ("stats", "estimators"),
    ("config",),
    ("runs",),
    ("launch",),
    ("backends",),
    ("evaluation",),
    ("report", "tracking", "adaptive", "publish"),
    ("cli",),
)
"""The package stack, bottom first: a package imports only from its own layer or below.
The pure parts (``stats``, ``estimators``) import nothing but errors and each other;
``config`` holds the schemas (it validates estimator parameters, and names backends and
launchers by strings resolved on use)."""



def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module``'s top-level package."""
    parts = module.split(".")
    package = parts[1] if len(parts) > 1 else parts[0]
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"{module}: package {package!r} is in no layer of LAYERS")


def upward_edges(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, imported)`` pairs where the imported module sits in a higher layer."""
    return sorted((m, t) for m, ts in graph.items() for t in ts if layer_of(t) > layer_of(m))


def _source(module: str) -> str:
    """The file of ``module``, relative to the repository."""
    return str(modules()[module].relative_to(PACKAGE.parent))


def test_every_package_is_in_a_layer() -> None:
    for mod in modules():
        layer_of(mod)


def test_the_layer_check_catches_an_upward_edge() -> None:
    planted = {"ccpo_lab.config.schema": {"ccpo_lab.backends.verl.settings"},
               "ccpo_lab.cli.main": {"ccpo_lab.config.schema"}}
    assert upward_edges(planted) == [("ccpo_lab.config.schema",
                                      "ccpo_lab.backends.verl.settings")]


def test_imports_go_down_the_package_stack() -> None:
    bad = upward_edges(import_graph())
    assert not bad, "imports up the package stack (LAYERS): " + "; ".join(
        f"{_source(m)} imports {t}" for m, t in bad)
