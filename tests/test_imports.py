"""No import cycles among the modules of tui/ and tracer/: every import is read with `ast`
(module-level and inside functions), resolved inside the two packages, and cycles are searched."""
from __future__ import annotations

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tui", "tracer")


def module_names() -> dict[str, Path]:
    """Dotted name → file, for every .py file of the packages (a package is its __init__)."""
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _type_checking_only(node: ast.AST, parents: dict) -> bool:
    """Imports under `if TYPE_CHECKING:` never run, so they cannot make a cycle."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(name: str, path: Path, modules: dict) -> set[str]:
    """The modules of the packages that `name` imports, wherever the import statement stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = here[:len(here) - node.level + 1] if node.level else []
            stem = ".".join(base + ([node.module] if node.module else []))
            # `from a import b`: b is a module when there is one by that name, else a name in a
            targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem
                       for alias in node.names]
        for target in targets:
            while target and target not in modules:  # `import tracer.printing.x`: the deepest module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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
                    out.append(sorted(component))
    return out


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_the_cycle_finder_finds_a_cycle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_resolve_relative_absolute_and_function_level(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {"pkg/__init__.py": "", "pkg/a.py": "from .sub import b\n",
             "pkg/sub/__init__.py": "", "pkg/sub/b.py": "def f():\n    from .. import a\n",
             "pkg/sub/c.py": "import pkg.a\nfrom typing import TYPE_CHECKING\n"
                             "if TYPE_CHECKING:\n    from . import b\n"}
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    modules = {"pkg": pkg / "__init__.py", "pkg.a": pkg / "a.py", "pkg.sub": pkg / "sub" / "__init__.py",
               "pkg.sub.b": pkg / "sub" / "b.py", "pkg.sub.c": pkg / "sub" / "c.py"}
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert graph["pkg.a"] == {"pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.a"}
    assert graph["pkg.sub.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def _cycles_in(package: str) -> list[list[str]]:
    return [c for c in cycles(import_graph()) if any(m.split(".")[0] == package for m in c)]


def test_no_import_cycles_in_tui():
    assert _cycles_in("tui") == []


def test_no_import_cycles_in_tracer():
    assert _cycles_in("tracer") == []
