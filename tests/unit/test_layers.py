"""Imports point one way: down the layer order, or sideways within one package, and never in a cycle.

    shared  <  fixtures, protocols, probe  <  server, core  <  lab  <  cli  (<  workbench.__main__)

Every module of workbench/, protocols/ (workbench.protocols) and fixtures/ (workbench.fixtures) is
parsed, not imported, so an import inside a function or under TYPE_CHECKING counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"workbench": ("workbench",), "protocols": ("workbench", "protocols"), "fixtures": ("workbench", "fixtures")}
# workbench/__init__.py (the version) runs before any subpackage is imported: it sits below everything,
# so any module may read it and it may import nothing of workbench.
LAYER = {
    "": -1,
    "shared": 0,
    "fixtures": 1,
    "protocols": 1,
    "probe": 1,
    "server": 2,
    "core": 2,
    "lab": 3,
    "cli": 4,
    "__main__": 5,
}


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, prefix in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join((*prefix, *parts))] = path
    return mods


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The workbench modules `name` imports (a package's __init__ for `from pkg import name`)."""
    deps = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                package = name.split(".") if _is_package(path) else name.split(".")[:-1]
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base for alias in node.names]
        else:
            continue
        for target in targets:
            # `import workbench.core.runner` names the module; an attribute of it falls back to its module
            while target and target not in mods and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in mods and target != name:
                deps.add(target)
    return deps


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_package_has_a_layer() -> None:
    unknown = sorted({_package(m) for m in _graph()} - LAYER.keys())
    assert not unknown, f"packages with no place in the layer order (add them to LAYER): {unknown}"


def test_no_import_goes_up_the_layers() -> None:
    upward = []
    for module, deps in sorted(_graph().items()):
        for dep in sorted(deps):
            a, b = _package(module), _package(dep)
            if a != b and LAYER.get(b, -1) >= LAYER.get(a, -1):
                upward.append(f"{module} -> {dep}  ({a or 'workbench'}:{LAYER.get(a)} -> {b}:{LAYER.get(b)})")
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_graph_sees_imports() -> None:
    # Guards the checks above against passing on an empty graph (a wrong ROOT, a parser that finds nothing).
    graph = _graph()
    assert len(graph) > 50
    assert any(d.startswith("workbench.core.") for d in graph["workbench.cli.app"])
    assert any(d.startswith("workbench.shared.") for d in graph["workbench.protocols.base"])


def test_no_module_imports_the_old_top_level_names() -> None:
    # protocols and fixtures install only as workbench.protocols / workbench.fixtures; `fixtures` alone is
    # PyPI's unrelated package, `protocols` would import only from a work tree.
    stale = []
    for module, path in sorted(_modules().items()):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            stale += [f"{module}: {n}" for n in names if n.split(".")[0] in ("protocols", "fixtures")]
    assert not stale, "imports of the old top-level packages:\n" + "\n".join(stale)
