"""The layout of the suite, read from the import graph of its source.

1. The audit/ package stays acyclic: every submodule imports, and no two audit modules
   import each other, directly or through others, at module level (top-level imports run
   at import time, so a cycle there breaks depending on which module loads first).
2. The floors (issue 39), bottom-up: ground (privacy_audit/ground/: errors, atomic I/O,
   progress, safe loading, the lock; and privacy_audit/registry.py) and fixtures/ import no
   other part of the suite; defenses/ stands on ground only; attacks/ on defenses and
   ground; reports/ on attacks, defenses and ground; audit/ may import every floor. No
   import, at module level or inside a function, runs from a floor to a higher one, and no
   product module imports the paper experiments (``experiments``, not installed).
3. Size: no product file over 1,000 lines and no function over 120 lines, except those
   listed with their reason (the lists only shrink).

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


# --- floors (issue 39) ------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
ROOT_PACKAGE = "privacy_audit"
# dotted prefix -> (folder in the repository, floor); a higher floor may import a lower one
FLOORS = {
    f"{ROOT_PACKAGE}.ground": ("privacy_audit/ground", 0),
    f"{ROOT_PACKAGE}.registry": ("privacy_audit/registry.py", 0),  # name -> class, imports nothing
    f"{ROOT_PACKAGE}.fixtures": ("fixtures", 0),  # the bundled corpus: data, imports nothing
    f"{ROOT_PACKAGE}.stats": ("stats", 1),  # pure statistics over scores and counts
    # the user's model and the suite's targets beside the defenses that train them: the
    # two import each other's records (Examples, ReleasedModel), never a floor above
    f"{ROOT_PACKAGE}.targets": ("targets", 2),
    f"{ROOT_PACKAGE}.defenses": ("defenses", 2),
    f"{ROOT_PACKAGE}.attacks": ("attacks", 3),
    f"{ROOT_PACKAGE}.reports": ("reports", 4),
    f"{ROOT_PACKAGE}.audit": ("audit", 5),
}
FLOOR_NAMES = {
    0: "ground",
    1: "stats",
    2: "targets/defenses",
    3: "attacks",
    4: "reports",
    5: "audit",
}
# Arrows that still run one floor up, each with its reason; the test fails when one is
# added and when one listed here is gone (then delete it here), so the list only shrinks.
KNOWN_UPWARD = {
    ("privacy_audit.defenses.dp_blogs", "privacy_audit.attacks.shuffle_audit"): (
        "the DP-BloGS release carries its own white-box audit (gradient_audits)"
    ),
}


def _product_modules() -> dict[str, Path]:
    """Every module of the installed product, by the dotted name it has under the root."""
    mods = {}
    for prefix, (folder, _) in FLOORS.items():
        base = REPO / folder
        paths = [base] if base.suffix == ".py" else sorted(base.rglob("*.py"))
        for path in paths:
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(base).with_suffix("").parts if base.is_dir() else ()
            if rel and rel[-1] == "__init__":
                rel = rel[:-1]
            mods[".".join((prefix, *rel))] = path
    return mods


def _floor(module: str) -> int | None:
    for prefix, (_, floor) in FLOORS.items():
        if module == prefix or module.startswith(prefix + "."):
            return floor
    return None


def _all_imports(module: str, path: Path) -> set[str]:
    """Every name ``module`` imports (absolute, relative resolved), at module level or not."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


PRODUCT = _product_modules()


def _target_module(name: str) -> str | None:
    while name and name not in PRODUCT:
        name = name.rpartition(".")[0]
    return name or None


def _floor_violations(imports: dict[str, set[str]]) -> set[tuple[str, str]]:
    bad = set()
    for module, names in imports.items():
        here = _floor(module)
        for name in names:
            target = _target_module(name)
            if target is None or target == module:
                continue
            there = _floor(target)
            if there is None:
                continue
            if there > here or (here == 0 and not _same_ground(module, target)):
                bad.add((module, target))
    return bad


def _same_ground(module: str, target: str) -> bool:
    """On the ground floor, a module imports only the ground package (fixtures and the
    registry import nothing of the suite at all)."""
    ground = f"{ROOT_PACKAGE}.ground"
    return module.startswith(ground + ".") and target.startswith(ground)


def _graph() -> dict[str, set[str]]:
    return {m: _all_imports(m, p) for m, p in PRODUCT.items()}


def test_floor_check_sees_the_floors():
    # the walk finds every floor and its modules under the dotted names they import by
    assert {"privacy_audit.ground.errors", "privacy_audit.ground.io", "privacy_audit.ground.lock",
            "privacy_audit.ground.progress", "privacy_audit.ground.safe_load"} <= set(PRODUCT)  # fmt: skip
    assert {_floor(m) for m in PRODUCT} == {0, 1, 2, 3, 4, 5}
    graph = _graph()
    assert "privacy_audit.defenses.base" in graph["privacy_audit.attacks.base"]
    # an upward import is caught, at module level or inside a function, relative or not
    fake = {
        "privacy_audit.defenses.base": {"privacy_audit.audit.config.load_config"},
        "privacy_audit.ground.io": {"privacy_audit.fixtures"},
        "privacy_audit.attacks.metrics_x": {"privacy_audit.attacks.base"},  # same floor: fine
    }
    assert _floor_violations(fake) == {
        ("privacy_audit.defenses.base", "privacy_audit.audit.config"),
        ("privacy_audit.ground.io", "privacy_audit.fixtures"),
    }


def test_relative_imports_resolve(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from ..audit import config\n    from .base import Surface\n")
    names = _all_imports("privacy_audit.defenses.x", f)
    assert {"privacy_audit.audit.config", "privacy_audit.defenses.base.Surface"} <= names
    assert _floor_violations({"privacy_audit.defenses.x": names}) == {
        ("privacy_audit.defenses.x", "privacy_audit.audit"),  # the package's __init__ runs too
        ("privacy_audit.defenses.x", "privacy_audit.audit.config"),
    }


def test_no_import_runs_up_a_floor():
    bad = _floor_violations(_graph())
    new = sorted(bad - set(KNOWN_UPWARD))
    assert not new, "imports from a floor to a higher one:\n" + "\n".join(
        f"{m} ({FLOOR_NAMES[_floor(m)]}) -> {t} ({FLOOR_NAMES[_floor(t)]})" for m, t in new
    )
    gone = sorted(set(KNOWN_UPWARD) - bad)
    assert not gone, f"no longer imported, remove from KNOWN_UPWARD: {gone}"


def test_ground_imports_nothing_of_the_suite(tmp_path):
    """Importing every ground module loads no other floor (the root package's lazy
    __init__ aside, which imports only the light privacy_audit.audit for __version__)."""
    import subprocess
    import sys

    ground = sorted(m for m in PRODUCT if m.startswith(f"{ROOT_PACKAGE}.ground"))
    code = (
        f"import importlib, sys\nfor m in {ground!r}:\n    importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.startswith('privacy_audit.')"
        " and not m.startswith('privacy_audit.ground') and m != 'privacy_audit.audit'))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=60, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_no_product_module_imports_the_experiments():
    """The paper experiments are not installed; a product import of one would fail in
    every installed wheel."""
    bad = sorted(
        f"{m} -> {n}"
        for m, names in _graph().items()
        for n in names
        if n.split(".")[0] == "experiments" or n.startswith(f"{ROOT_PACKAGE}.experiments")
    )
    assert not bad, "\n".join(bad)


def test_only_the_experiment_command_names_the_experiments_package():
    """Besides import statements, a module could load an experiment by name (importlib);
    only the CLI's ``experiment`` command does, from a checkout (issue 39)."""
    allowed = {"privacy_audit.audit.integrations.cli"}
    named = sorted(
        f"{m}:{node.lineno}"
        for m, path in PRODUCT.items()
        if m not in allowed
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value == "experiments" or node.value.startswith("experiments."))
    )
    assert not named, named


# --------------------------------------------------------------------------------------
# Size: a reader holds a file of at most 1,000 lines and a function of at most 120
# --------------------------------------------------------------------------------------
MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 120
SIZE_FOLDERS = ("stats", "targets", "defenses", "attacks", "reports", "audit", "fixtures",
                "privacy_audit")  # fmt: skip
_SPLITTING = "being split (another change)"
# "module:function" (module dotted from the repository root, function qualified by its
# class or enclosing function) -> why it stays longer than MAX_FUNCTION_LINES. The test
# fails when a function grows past the limit unlisted, and when a listed one is back
# within it (then delete it here), so the list only shrinks.
LONG_ALLOWED = {
    "stats.by_user:grouped_text_metrics": _SPLITTING,
    "stats.metrics:membership_metrics": _SPLITTING,
    "stats.split_check:_partition_candidates": _SPLITTING,
    "reports.html:build_context": _SPLITTING,
    "reports.verdict:verdict_for_run": _SPLITTING,
    "audit.benchmarks.byo_lm:run": _SPLITTING,
    "audit.benchmarks.cost_of_privacy:run": _SPLITTING,
    "audit.benchmarks.users:run": _SPLITTING,
    "audit.config:parse_config": _SPLITTING,
    "audit.config:resolve_targets": _SPLITTING,
    "audit.data:read_table": _SPLITTING,
    "audit.data:load_audit_data": _SPLITTING,
    "audit.dataset_inference_command:run_dataset_inference": _SPLITTING,
    "audit.integrations.cli:build_parser": _SPLITTING,
    "audit.integrations.cli:_cmd_gate": _SPLITTING,
    "audit.integrations.gate:check_all": _SPLITTING,
    "audit.own_model:_audit_own_model": _SPLITTING,
    "audit.runner:score_file": _SPLITTING,
}
# module -> why its file stays longer than MAX_FILE_LINES (the same rule: only shrinks)
LONG_FILES_ALLOWED = {
    "stats.epsilon_bounds": _SPLITTING,
    "stats.split_check": _SPLITTING,
    "reports.html": _SPLITTING,
    "reports.verdict": _SPLITTING,
    "audit.config": _SPLITTING,
    "audit.integrations.cli": _SPLITTING,
    "audit.integrations.gate": _SPLITTING,
}


def _size_modules() -> dict[str, Path]:
    """Every product source file under SIZE_FOLDERS, by its dotted path from the
    repository root (``audit.epsilon.dp_check.verdict``; a package is its folder)."""
    mods = {}
    for folder in SIZE_FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(REPO).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _function_lengths(tree: ast.AST) -> dict[str, int]:
    """Lines of every function (``end_lineno - lineno + 1``, decorators aside), by its name
    qualified with its enclosing classes and functions; the longest of a repeated name."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    n = child.end_lineno - child.lineno + 1
                    lengths[name] = max(n, lengths.get(name, 0))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return lengths


def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    """The product's files over MAX_FILE_LINES and functions over MAX_FUNCTION_LINES, with
    their lengths (files by module, functions as "module:function")."""
    files, functions = {}, {}
    for module, path in _size_modules().items():
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        if n > MAX_FILE_LINES:
            files[module] = n
        for name, length in _function_lengths(ast.parse(text)).items():
            if length > MAX_FUNCTION_LINES:
                functions[f"{module}:{name}"] = length
    return files, functions


def test_size_check_sees_the_product():
    mods = _size_modules()
    assert "audit.epsilon.dp_check.verdict" in mods and "privacy_audit.ground.io" in mods
    assert "fixtures" in mods and "stats.metrics" in mods
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            pass\n")
    assert _function_lengths(tree) == {"A.f": 3, "A.f.g": 2}


def test_no_file_over_the_line_limit():
    files, _ = _sizes()
    new = sorted(f"{m} ({n} lines)" for m, n in files.items() if m not in LONG_FILES_ALLOWED)
    assert not new, f"files over {MAX_FILE_LINES} lines: split them along their structure: {new}"
    gone = sorted(set(LONG_FILES_ALLOWED) - set(files))
    assert not gone, f"within {MAX_FILE_LINES} lines now, remove from LONG_FILES_ALLOWED: {gone}"


def test_no_function_over_the_line_limit():
    _, functions = _sizes()
    new = sorted(f"{f} ({n} lines)" for f, n in functions.items() if f not in LONG_ALLOWED)
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines: split them into named steps: {new}"
    gone = sorted(set(LONG_ALLOWED) - set(functions))
    assert not gone, f"within {MAX_FUNCTION_LINES} lines now, remove from LONG_ALLOWED: {gone}"
