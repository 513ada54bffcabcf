"""Layers point one way: no import cycle between files or between subpackages of ``care``.

Every ``import`` / ``from ... import`` in every module counts — at module level, inside functions
(lazy imports), under ``if TYPE_CHECKING`` — and so does a call with a literal ``"care..."`` name to
``importlib.import_module`` or ``importlib.resources.files``. An import names the deepest module it
reaches (``from care.bench import registry`` -> ``care.bench.registry``; ``from care.bench import
get_task`` -> the package ``care.bench``); the parent packages Python initialises on the way are
not counted (every submodule would otherwise "import" its own package).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import care

#: Calls whose first (literal) argument names a module that the call imports.
IMPORTING_CALLS = frozenset({"import_module", "files"})


def module_names(package_dir: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` of every ``.py`` file under ``package_dir`` (packages by ``__init__``)."""
    names = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _deepest(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(module: str, path: Path, known: dict[str, Path], root: str) -> set[str]:
    """The modules of ``known`` that ``module`` (file ``path``) imports anywhere in its body."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()

    def add(name: str) -> None:
        if name == root or name.startswith(root + "."):
            target = _deepest(name, known)
            if target is not None and target != module:
                targets.add(target)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                add(full if full in known else source)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in IMPORTING_CALLS and isinstance(node.args[0].value, str):
                add(node.args[0].value)
    return targets


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over the package at ``package_dir``."""
    known = module_names(package_dir)
    return {m: imported_modules(m, p, known, package_dir.name) for m, p in known.items()}


def subpackage_of(module: str) -> str:
    """``care.bench.runner`` -> ``care.bench``; a top-level module (``care.cli``) is its own node."""
    return ".".join(module.split(".")[:2])


def subpackage_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """``{subpackage: {imported subpackage: [(importing module, imported module), ...]}}``."""
    out: dict[str, dict[str, list[tuple[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for source, targets in graph.items():
        for target in targets:
            a, b = subpackage_of(source), subpackage_of(target)
            if a != b:
                out[a][b].append((source, target))
    return out


def cycles(nodes: Iterable[str], edges: dict[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(component: list[str], edges: dict[str, dict[str, list[tuple[str, str]]]] | None,
              graph: dict[str, set[str]]) -> str:
    lines = [" <-> ".join(component)]
    for a in component:
        for b in component:
            if edges is not None and b in edges.get(a, {}):
                lines.append(f"    {a} -> {b} via {sorted(edges[a][b])[:4]}")
            elif edges is None and b in graph.get(a, set()):
                lines.append(f"    {a} -> {b}")
    return "\n".join(lines)


PACKAGE_DIR = Path(care.__file__).resolve().parent


def test_no_import_cycle_between_files():
    graph = import_graph(PACKAGE_DIR)
    found = cycles(sorted(graph), graph)
    assert not found, "import cycles between files:\n" + "\n".join(_describe(c, None, graph) for c in found)


def test_no_import_cycle_between_subpackages():
    graph = import_graph(PACKAGE_DIR)
    edges = subpackage_graph(graph)
    nodes = sorted({subpackage_of(m) for m in graph})
    found = cycles(nodes, {a: list(b) for a, b in edges.items()})
    assert not found, "import cycles between subpackages:\n" + "\n".join(_describe(c, edges, graph) for c in found)


#: Inner layers: (lower package, upper package) — the lower never imports the upper, lazily or not.
INNER_LAYERS = [("care.train.engine", "care.train.recipes")]


def test_inner_layers_point_one_way():
    graph = import_graph(PACKAGE_DIR)
    wrong = [f"{module} imports {target}" for lower, upper in INNER_LAYERS for module, targets in sorted(graph.items())
             if module == lower or module.startswith(lower + ".")
             for target in sorted(targets) if target == upper or target.startswith(upper + ".")]
    assert not wrong, "a lower layer imports an upper one:\n" + "\n".join(wrong)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_the_walker_sees_lazy_relative_and_string_imports(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "from pkg.a.x import f\n",
        "pkg/a/x.py": "def f():\n    from ..b import y  # lazy, relative\n",
        "pkg/b/__init__.py": "",
        "pkg/b/y.py": "import importlib\n\ndef g():\n    return importlib.import_module('pkg.c.z')\n",
        "pkg/c/__init__.py": "",
        "pkg/c/z.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n",
    })
    graph = import_graph(package)
    assert graph["pkg.a.x"] == {"pkg.b.y"} and graph["pkg.b.y"] == {"pkg.c.z"} and graph["pkg.c.z"] == {"pkg.a"}
    assert graph["pkg.a"] == {"pkg.a.x"}
    # files: pkg.a -> a.x -> b.y -> c.z -> pkg.a is one cycle; subpackages a -> b -> c -> a another
    assert cycles(sorted(graph), graph) == [["pkg.a", "pkg.a.x", "pkg.b.y", "pkg.c.z"]]
    edges = subpackage_graph(graph)
    assert cycles(sorted(edges), {k: list(v) for k, v in edges.items()}) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_a_one_way_package_has_no_cycle(tmp_path):
    package = _write(tmp_path, {"pkg/__init__.py": "", "pkg/low.py": "X = 1\n",
                                "pkg/high.py": "from pkg.low import X\n\ndef f():\n    import pkg.low\n"})
    graph = import_graph(package)
    assert graph["pkg.high"] == {"pkg.low"} and cycles(sorted(graph), graph) == []
