"""The layout of the suite, read from the import graph of its source.

1. The audit/ package stays acyclic: every submodule imports, and no two audit modules
   import each other, directly or through others, at module level (top-level imports run
   at import time, so a cycle there breaks depending on which module loads first).
2. The floors, bottom-up: ground (privacy_audit/ground/: errors, atomic I/O, progress,
   safe loading, the lock; and privacy_audit/registry.py) and fixtures/ import no other
   part of the suite; stats/ (pure statistics) stands on ground only; targets/ (the user's
   model and the suite's) and defenses/ on stats and ground, beside each other; attacks/ on
   those; reports/ on attacks and below; audit/ may import every floor. No
   import, at module level or inside a function, runs from a floor to a higher one, and no
   product module imports the paper experiments (``experiments``, not installed).
3. Every command is its own module, ``audit/commands/<name>.py`` (its parser and its
   handler; audit/cli.py only dispatches); only ``commands/bench.py`` imports the
   benchmarks; and no import circle runs through ``experiments/``: the ``experiment`` and
   ``claims`` commands load the experiments by name, so no experiment may import the CLI.
4. A ``_private`` name stays in its module: no product module imports one of another
   module or reads it as a module attribute (a name another module needs is public);
   tests only where listed, each with its reason.
5. Size: no product file over 1,000 lines and no function over 120 lines, except those
   listed with their reason (the lists only shrink).

The folder audit/ is the package privacy_audit.audit (one import root, issue 29; the other
import rules are in tests/project/test_packaging.py)."""

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

REPO = Path(__file__).resolve().parents[2]
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


# --- commands, benchmarks, experiments ------------------------------------------------

COMMANDS = f"{PACKAGE}.commands"
#: the two command modules that load the checkout's experiments by name (importlib)
EXPERIMENT_LOADERS = {f"{COMMANDS}.experiment", f"{COMMANDS}.claims"}


def _experiment_names(module: str, path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that name an experiments module (an importlib
    load, ``spec_from_file_location("experiments", ...)`` or a registry entry
    ``"experiments.x:run"``), with their lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value.partition(":")[0]
            if name == "experiments" or name.startswith("experiments."):
                out.append((node.lineno, name))
    return out


def test_only_the_experiment_command_names_the_experiments_package():
    """Besides import statements, a module could load an experiment by name (importlib);
    only the ``experiment`` and ``claims`` commands do, from a checkout (issue 39)."""
    named = sorted(
        f"{m}:{line}"
        for m, path in PRODUCT.items()
        if m not in EXPERIMENT_LOADERS
        for line, _ in _experiment_names(m, path)
    )
    assert not named, named
    loaders = {m for m in PRODUCT if _experiment_names(m, PRODUCT[m])}
    assert loaders == EXPERIMENT_LOADERS  # each still loads them (else shrink the set)


def _misplaced_commands(commands: dict[str, object]) -> list[str]:
    """Commands (name -> the module the CLI dispatches it to) whose module is not
    ``commands/<name>.py`` or whose parser or handler is defined elsewhere."""
    bad = []
    for name, module in commands.items():
        want = f"{COMMANDS}.{name.replace('-', '_')}"
        if module.__name__ != want:
            bad.append(f"{name}: dispatched to {module.__name__}, not {want}")
            continue
        for func in ("add_parser", "run"):
            defined = getattr(getattr(module, func, None), "__module__", None)
            if defined != want:
                bad.append(f"{name}: {func} is defined in {defined}, not {want}")
    return bad


def _subcommands(parser) -> set[str]:
    import argparse

    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(action.choices)


def test_every_command_is_its_own_module():
    """Each command of the parser is dispatched to ``audit/commands/<name>.py``, which
    defines both its sub-parser (``add_parser``, adding that command and no other) and
    its handler (``run``)."""
    from privacy_audit.audit import cli
    from privacy_audit.audit.commands.common import command_parser

    names = _subcommands(cli.build_parser())
    assert names == set(cli.BY_NAME) and len(names) >= 13
    assert _misplaced_commands(cli.BY_NAME) == []
    for name, module in cli.BY_NAME.items():
        assert module.NAME == name
        assert _subcommands(command_parser([module])) == {name}


def test_misplaced_commands_are_found():
    import types

    def run(args):  # pragma: no cover - never called
        return 0

    def add_parser(sub):  # pragma: no cover - never called
        pass

    def fake(name, here=None):
        module = types.SimpleNamespace(__name__=name, run=run, add_parser=add_parser)
        run.__module__ = add_parser.__module__ = here or name
        return module

    ok = fake(f"{COMMANDS}.export_risky")
    assert _misplaced_commands({"export-risky": ok}) == []
    assert _misplaced_commands({"gate": fake(f"{PACKAGE}.integrations.cli")}) == [
        f"gate: dispatched to {PACKAGE}.integrations.cli, not {COMMANDS}.gate"
    ]
    assert _misplaced_commands({"gate": fake(f"{COMMANDS}.gate", f"{PACKAGE}.cli")}) == [
        f"gate: add_parser is defined in {PACKAGE}.cli, not {COMMANDS}.gate",
        f"gate: run is defined in {PACKAGE}.cli, not {COMMANDS}.gate",
    ]


BENCHMARKS = f"{PACKAGE}.benchmarks"
#: the ``bench`` command runs the benchmarks; nothing else of the product loads them
BENCHMARK_LOADERS = {f"{COMMANDS}.bench"}
# Product modules that still import a benchmark, each with its reason; the test fails
# when one is added and when one listed here is gone (then delete it here). The audit reads
# a benchmark's output file (audit/cost_of_privacy_table.py), never its code.
KNOWN_BENCHMARK_IMPORTERS: dict[str, str] = {}


def _is_benchmark(name: str) -> bool:
    return name == BENCHMARKS or name.startswith(BENCHMARKS + ".")


def _benchmark_importers(graph: dict[str, set[str]]) -> set[str]:
    """Product modules outside the benchmarks that import one, but the bench command."""
    return {
        m
        for m, names in graph.items()
        if not _is_benchmark(m) and m not in BENCHMARK_LOADERS and any(map(_is_benchmark, names))
    }


def test_only_the_bench_command_imports_the_benchmarks():
    found = _benchmark_importers(_graph())
    new = sorted(found - set(KNOWN_BENCHMARK_IMPORTERS))
    assert not new, f"import privacy_audit.audit.benchmarks (only commands/bench.py may): {new}"
    gone = sorted(set(KNOWN_BENCHMARK_IMPORTERS) - found)
    assert not gone, f"no longer import a benchmark, remove from KNOWN_BENCHMARK_IMPORTERS: {gone}"
    assert any(map(_is_benchmark, _graph()[f"{COMMANDS}.bench"]))


def test_benchmark_importers_are_found():
    fake = {
        f"{PACKAGE}.runner": {f"{BENCHMARKS}.cost_of_privacy.CASES"},  # found
        f"{PACKAGE}.cli": {BENCHMARKS},  # the package itself: found
        f"{COMMANDS}.bench": {f"{BENCHMARKS}.timing"},  # the bench command: allowed
        f"{BENCHMARKS}.scale": {f"{BENCHMARKS}.timing", f"{COMMANDS}.run"},  # among themselves
        f"{PACKAGE}.benchmarks_x": {f"{PACKAGE}.results"},  # a look-alike name: not one
    }
    assert _benchmark_importers(fake) == {f"{PACKAGE}.runner", f"{PACKAGE}.cli"}


def _experiment_modules() -> dict[str, Path]:
    base = REPO / "experiments"
    mods = {}
    for path in sorted(base.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(base).with_suffix("").parts
        if rel[-1] == "__init__":
            rel = rel[:-1]
        mods[".".join(("experiments", *rel))] = path
    return mods


LOADERS = {"import_module", "spec_from_file_location", "find_spec", "__import__"}


def _loads(path: Path) -> set[str]:
    """The modules a file loads by a constant name: ``importlib.import_module("x")``,
    ``spec_from_file_location("x", ...)``, ``__import__("x")`` (a registry's
    "module:function" strings are names, not loads: the load takes a variable)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and node.args:
            func = node.func.attr if isinstance(node.func, ast.Attribute) else None
            func = node.func.id if isinstance(node.func, ast.Name) else func
            first = node.args[0]
            if func in LOADERS and isinstance(first, ast.Constant):
                if isinstance(first.value, str):
                    out.add(first.value)
    return out


def test_constant_loads_are_found(tmp_path):
    f = tmp_path / "x.py"
    f.write_text(
        "import importlib\nfrom importlib import import_module\n"
        "def f(name):\n    importlib.import_module('experiments.claims')\n"
        "    import_module('experiments.run')\n    importlib.import_module(name)\n"
        "    REGISTRY = {'a': 'experiments.dp_bugs:run'}\n"
    )
    assert _loads(f) == {"experiments.claims", "experiments.run"}


def _with_experiments_graph() -> dict[str, set[str]]:
    """Product and experiments modules -> the modules they import (at module level or in
    a function) or load by a constant name (importlib)."""
    mods = {**PRODUCT, **_experiment_modules()}

    def target(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for m, path in mods.items():
        names = _all_imports(m, path) | _loads(path)
        graph[m] = {t for t in map(target, names) if t is not None and t != m}
    return graph


def _cycle_through(graph: dict[str, set[str]], starts) -> list[str] | None:
    """A path from one of ``starts`` back to itself, or None."""
    for start in sorted(starts):
        parent: dict[str, str] = {}
        todo = [start]
        while todo:
            node = todo.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if nxt not in parent and nxt != start:
                    parent[nxt] = node
                    todo.append(nxt)
    return None


def test_no_import_cycle_through_the_experiments():
    """The experiments import the product; the product reaches them only through the
    ``experiment`` and ``claims`` commands' loads. No experiment imports anything that
    leads back (the CLI, which loads those commands), so nothing runs in a circle."""
    graph = _with_experiments_graph()
    assert "experiments.run" in graph[f"{COMMANDS}.experiment"]  # the load is an edge
    assert f"{PACKAGE}.outputs" in graph["experiments.run"]
    experiments = {m for m in graph if m.split(".")[0] == "experiments"}
    cycle = _cycle_through(graph, experiments)
    assert cycle is None, " -> ".join(cycle)


def test_cycles_through_the_experiments_are_found():
    fake = {
        "experiments.run": {f"{PACKAGE}.cli", "experiments.dp_bugs"},
        f"{PACKAGE}.cli": {f"{COMMANDS}.experiment"},
        f"{COMMANDS}.experiment": {"experiments.run"},
        "experiments.dp_bugs": {f"{PACKAGE}.runner"},
    }
    assert _cycle_through(fake, {"experiments.run", "experiments.dp_bugs"}) == [
        "experiments.run",
        f"{PACKAGE}.cli",
        f"{COMMANDS}.experiment",
        "experiments.run",
    ]
    fake["experiments.run"] = {f"{PACKAGE}.outputs"}
    assert _cycle_through(fake, {"experiments.run", "experiments.dp_bugs"}) is None


# --- private names stay in their module -------------------------------------------------
# A ``_name`` is its module's own: no other module imports it (``from m import _x``) or
# reads it as a module attribute (``m._x``, ``alias._x``). A name another module needs is
# public in its defining module. Tests may reach a private name only when listed here,
# each with its reason (the test fails when one is added, and when one listed is gone).
# (``monkeypatch.setattr(module, "_name", ...)`` replaces a module's internals for one
# test; it is neither an import nor an attribute read, and is not counted.)
TESTS_REACHING_PRIVATE = {
    ("test_malloc", "privacy_audit.audit.scale.malloc", "_libc"): (
        "glibc detection is tested directly (None off Linux and on musl); callers go "
        "through tune_malloc(), so the loader stays private"
    ),
}


def _private_reaches(module: str, path: Path, modules: set[str]) -> set[tuple[str, str]]:
    """``(module, name)`` of every ``_private`` name of another module of ``modules`` that
    the file imports (absolute or relative, at any depth) or reads as a module attribute
    (``package.module._x``, or ``alias._x`` with ``alias`` bound to a module by an
    import). Dunder names (``__version__``) are not private."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    aliases: dict[str, str] = {}  # local name -> the module it is bound to
    out: set[tuple[str, str]] = set()

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    head = a.name.split(".")[0]
                    aliases[head] = head
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{base}.{a.name}"
                elif base in modules and base != module and private(a.name):
                    out.add((base, a.name))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and private(node.attr)):
            continue
        chain, value = [], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if not isinstance(value, ast.Name) or value.id not in aliases:
            continue
        target = ".".join([aliases[value.id], *reversed(chain)])
        if target in modules and target != module:
            out.add((target, node.attr))
    return out


def _private_violations(files: dict[str, Path], modules: set[str]) -> set[tuple[str, str, str]]:
    return {
        (m, target, name)
        for m, path in files.items()
        for target, name in _private_reaches(m, path, modules)
    }


def test_private_name_check_sees_both_forms(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "import fake.stats.b as bb\n"
        "import fake.stats.c\n"
        "from fake.stats import b\n"
        "from fake.stats.b import _x, public, __version__\n"
        "from . import c as cc\n"
        "import fake.stats.a as me\n"
        "def f():\n"
        "    from .b import _v\n"
        "    return bb._z, b._w, fake.stats.c._y, cc._u, me._own, b.public, bb.attr._deep\n"
    )
    modules = {"fake.stats.a", "fake.stats.b", "fake.stats.c"}
    got = _private_violations({"fake.stats.a": pkg / "a.py"}, modules)
    assert got == {
        ("fake.stats.a", "fake.stats.b", "_x"),  # imported by name
        ("fake.stats.a", "fake.stats.b", "_v"),  # relative, inside a function
        ("fake.stats.a", "fake.stats.b", "_z"),  # attribute of an ``import ... as`` alias
        ("fake.stats.a", "fake.stats.b", "_w"),  # attribute of a ``from pkg import mod``
        ("fake.stats.a", "fake.stats.c", "_y"),  # attribute of the full dotted name
        ("fake.stats.a", "fake.stats.c", "_u"),  # attribute of a relative module import
    }


def test_no_product_module_reaches_a_private_name_of_another():
    bad = sorted(_private_violations(PRODUCT, set(PRODUCT)))
    assert not bad, "make these public in their module:\n" + "\n".join(
        f"{m} -> {t}.{n}" for m, t, n in bad
    )


def test_tests_reach_private_names_only_where_listed():
    # keyed by the file's name, so the list holds wherever the test files sit under tests/
    tests = {p.stem: p for p in sorted((REPO / "tests").rglob("test_*.py"))}
    found = _private_violations(tests, set(PRODUCT))
    new = sorted(found - set(TESTS_REACHING_PRIVATE))
    assert not new, "make these public, or list them with a reason:\n" + "\n".join(
        f"{m} -> {t}.{n}" for m, t, n in new
    )
    gone = sorted(set(TESTS_REACHING_PRIVATE) - found)
    assert not gone, f"no longer reached, remove from TESTS_REACHING_PRIVATE: {gone}"


# --------------------------------------------------------------------------------------
# Size: a reader holds a file of at most 1,000 lines and a function of at most 120
# --------------------------------------------------------------------------------------
MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 120
SIZE_FOLDERS = ("stats", "targets", "defenses", "attacks", "reports", "audit", "fixtures",
                "privacy_audit")  # fmt: skip
# "module:function" (module dotted from the repository root, function qualified by its
# class or enclosing function) -> why it stays longer than MAX_FUNCTION_LINES. The test
# fails when a function grows past the limit unlisted, and when a listed one is back
# within it (then delete it here), so the list only shrinks.
LONG_ALLOWED: dict[str, str] = {}
# module -> why its file stays longer than MAX_FILE_LINES (the same rule: only shrinks)
LONG_FILES_ALLOWED: dict[str, str] = {}


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
