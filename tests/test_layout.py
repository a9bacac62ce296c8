"""The audit/ package layout stays acyclic: every submodule imports, and no two audit
modules import each other, directly or through others, at module level (top-level
imports run at import time, so a cycle there breaks depending on which module loads first).

The folder audit/ is the package privacy_audit.audit (one import root, issue 29; the other
import rules are in tests/test_packaging.py)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

from privacy_audit import audit

ROOT = Path(audit.__file__).resolve().parent
PACKAGE = audit.__name__  # privacy_audit.audit


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join((PACKAGE, *parts))] = path
    return mods


MODULES = _modules()


def _target(name: str) -> str | None:
    """The audit module that ``import name`` loads last (a submodule, or its package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" for a in node.names]  # a submodule, or a name in base
        else:
            continue
        for name in names:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                t = _target(name)
                if t is not None and t != module:
                    out.add(t)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_graph_sees_the_layout():
    graph = {m: _imports(m, p, top_level_only=True) for m, p in MODULES.items()}
    assert f"{PACKAGE}.results" in graph[f"{PACKAGE}.evaluate"]
    assert f"{PACKAGE}.config" in graph[f"{PACKAGE}.scale.plan"]
    assert f"{PACKAGE}.scale.plan" not in graph[f"{PACKAGE}.config"]
    assert PACKAGE == "privacy_audit.audit" and len(MODULES) > 20


def test_no_module_level_import_cycle():
    graph = {m: _imports(m, p, top_level_only=True) for m, p in MODULES.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_no_import_cycle_even_through_function_local_imports():
    # The pipeline reads in one direction: runner -> scale.plan -> scale.tasks -> evaluate
    # -> results; config owns sweep expansion, so nothing below imports back up.
    graph = {m: _imports(m, p, top_level_only=False) for m, p in MODULES.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


@pytest.mark.parametrize(
    "module", sorted(set(MODULES) - {f"{PACKAGE}.__main__"})
)  # __main__ runs the CLI
def test_every_module_imports(module):
    importlib.import_module(module)


def test_every_package_module_is_listed():
    walked = {m.name for m in pkgutil.walk_packages([str(ROOT)], PACKAGE + ".")}
    assert walked <= set(MODULES)
