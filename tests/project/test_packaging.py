"""One import root (issue 29): the wheel installs only ``privacy_audit``.

The repository keeps its folders audit/, attacks/, defenses/, reports/ and fixtures/ at the
top; pyproject.toml maps them to privacy_audit.audit, ... privacy_audit.fixtures. These tests
build the real wheel and read it, install it beside testing-cabal's ``fixtures`` (the PyPI
package whose name the old top-level ``fixtures`` shadowed), and check the editable install,
the entry points, the light plugin import and that run directories written before the root
existed still resume.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
ROOT = "privacy_audit"
FOLDERS = ("audit", "attacks", "defenses", "reports", "fixtures", "stats", "targets")
HEAVY = ("torch", "transformers", "numpy", "scipy", "sklearn", "pandas", "matplotlib")
SKIP_DIRS = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".pytest_cache"}


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _run(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 120):
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _source_packages() -> set[str]:
    """Every folder with an __init__.py under the root package and the five folders, as the
    dotted name it has under the root."""
    found = {ROOT}
    for init in (REPO / ROOT).rglob("__init__.py"):  # privacy_audit/ground/ (issue 39)
        rel = init.parent.relative_to(REPO)
        if SKIP_DIRS.isdisjoint(rel.parts):
            found.add(".".join(rel.parts))
    for folder in FOLDERS:
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO)
            if SKIP_DIRS.isdisjoint(rel.parts):
                found.add(".".join((ROOT, *rel.parts)))
    return found


def test_pyproject_maps_the_five_folders_under_one_root():
    tool = _pyproject()["tool"]["setuptools"]
    assert tool["package-dir"] == {ROOT: ROOT, **{f"{ROOT}.{f}": f for f in FOLDERS}}
    listed = set(tool["packages"])
    missing = sorted(_source_packages() - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert all(p == ROOT or p.startswith(ROOT + ".") for p in listed)
    scripts = _pyproject()["project"]
    assert scripts["scripts"]["privacy-audit"] == f"{ROOT}.audit.cli:main"
    assert scripts["entry-points"]["pytest11"] == {ROOT: f"{ROOT}.audit.integrations.pytest_plugin"}


def _python_files() -> list[Path]:
    out = []
    for path in REPO.rglob("*.py"):
        rel = path.relative_to(REPO)
        if SKIP_DIRS.isdisjoint(rel.parts) and not any(p.endswith(".egg-info") for p in rel.parts):
            out.append(path)
    return out


def test_no_code_imports_the_old_top_level_names():
    """Code and tests import through privacy_audit (or relatively): a bare ``import audit``
    would load a second copy of a module (two registries, failing isinstance checks) in a
    checkout, and nothing at all from an installed wheel."""
    bad = []
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in FOLDERS:
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {name}")
    assert not bad, "old top-level imports (run migrate_imports.py):\n" + "\n".join(bad)


def _fresh(code: str, cwd: Path, extra_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return _run([sys.executable, *extra_args, "-c", code], cwd=cwd, env=env)


def test_plugin_and_root_import_nothing_heavy(tmp_path):
    """pytest loads the plugin in every run of an environment with the suite installed."""
    code = (
        "import sys, privacy_audit, privacy_audit.audit.integrations.pytest_plugin as p\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "print(p.__file__)"
    )
    r = _fresh(code, tmp_path)
    assert r.returncode == 0, r.stderr
    loaded, where = r.stdout.splitlines()
    assert loaded == "[]", f"importing the plugin loaded {loaded}"
    assert Path(where).resolve() == REPO / "audit" / "integrations" / "pytest_plugin.py"


def test_public_api_is_lazy_and_is_the_defining_objects(tmp_path):
    code = (
        "import sys, importlib, privacy_audit as pa\n"
        "assert 'torch' not in sys.modules\n"
        "assert sorted(pa.__all__) == sorted(['__version__', *pa._API])\n"
        "for name in pa.__all__:\n"
        "    if name == '__version__':\n"
        "        continue\n"
        "    mod = importlib.import_module(pa._API[name])\n"
        "    assert getattr(pa, name) is getattr(mod, name), name\n"
        "from privacy_audit import AttackResult, PrivacyClaim, epsilon_lower_bound\n"
        "from privacy_audit.attacks.base import AttackResult as A\n"
        "assert AttackResult is A\n"
        "assert pa.fixtures.load_corpus('private')\n"
        "print(pa.__version__, sorted(pa.__all__))"
    )
    r = _fresh(code, tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ("AttackResult", "epsilon_lower_bound", "run_record", "write_outputs"):
        assert name in r.stdout  # the README's Python API section
    r = _fresh("import privacy_audit as pa; pa.no_such_name", tmp_path)
    assert "has no attribute 'no_such_name'" in r.stderr


@pytest.mark.parametrize("cwd", ["repo", "elsewhere"])
def test_editable_or_checkout_import_finds_the_repository_folders(cwd, tmp_path):
    """From the repository root (where audit/ is on sys.path as a folder) and from any other
    directory, privacy_audit.audit is the repository's audit/ folder, loaded once."""
    where = REPO if cwd == "repo" else tmp_path
    code = (
        "import sys, privacy_audit.audit.config as c, privacy_audit.fixtures as f\n"
        "print(c.__file__); print(f.__file__)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{FOLDERS!r}))"
    )
    r = _fresh(code, where)
    assert r.returncode == 0, r.stderr
    config, fixtures, stray = r.stdout.splitlines()
    assert Path(config).resolve() == REPO / "audit" / "config.py"
    assert Path(fixtures).resolve() == REPO / "fixtures" / "__init__.py"
    assert stray == "[]", f"modules loaded under an old top-level name: {stray}"
    if cwd == "elsewhere":  # the install itself puts none of the five names on sys.path
        code = f"import importlib.util as u; print([n for n in {FOLDERS!r} if u.find_spec(n)])"
        r = _fresh(code, where)
        assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_python_dash_m_privacy_audit_is_the_cli(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = _run([sys.executable, "-m", ROOT, "--version"], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("privacy-audit ")


def test_installed_entry_points_name_the_root():
    dist = metadata.distribution("privacy-audit")
    eps = {(e.group, e.name): e for e in dist.entry_points}
    script = eps[("console_scripts", "privacy-audit")]
    plugin = eps[("pytest11", ROOT)]
    assert script.value == f"{ROOT}.audit.cli:main"
    assert plugin.value == f"{ROOT}.audit.integrations.pytest_plugin"
    assert callable(script.load())
    assert hasattr(plugin.load(), "pytest_configure")


def test_task_keys_are_those_of_run_directories_written_before_the_root():
    """A run directory stores each finished task under a hash of its function's name; the
    name gained the privacy_audit. prefix, so keys hash it without, as before (the blob
    is rebuilt here by hand, as the old executor built it)."""
    from privacy_audit.audit.scale.executors import TASK_FORMAT, Task

    payload = {"seed": 3, "defense": "none", "params": {"epsilon": 8.0}}
    old_blob = json.dumps(
        {
            "format": TASK_FORMAT,
            "kind": "audit-trial",
            "fn": ".".join(("audit", "scale", "tasks:audit_trial")),  # the old name
            "payload": payload,
            "deps": ["abc"],
        },
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    old_key = hashlib.sha256(old_blob.encode()).hexdigest()[:24]
    task = Task("audit-trial", f"{ROOT}.audit.scale.tasks:audit_trial", payload, deps=("abc",))
    assert task.key == old_key
    other = Task("audit-trial", f"{ROOT}.audit.scale.tasks:train_shadow", payload, deps=("abc",))
    assert other.key != old_key  # the function still counts


# -- the wheel ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built offline from a copy of the sources (the checkout gets no build/)."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in (ROOT, *FOLDERS, "experiments"):  # experiments/: there, but not packaged
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    r = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(out), str(src)],
        cwd=src,
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("privacy_audit-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_installs_one_top_level_package_with_its_data(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (top,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert z.read(top).decode().split() == [ROOT]
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {ROOT}
    inside = set(names)
    for rel in [
        *(p.relative_to(REPO) for p in (REPO / "audit" / "configs").glob("*.toml")),
        *(p.relative_to(REPO) for p in (REPO / "reports" / "templates").glob("*.j2")),
        *(p.relative_to(REPO) for p in (REPO / "fixtures" / "data").iterdir()),
        Path("fixtures/README.md"),
    ]:
        assert f"{ROOT}/{rel.as_posix()}" in inside, rel
    assert {f"{ROOT}/audit/configs/default.toml", f"{ROOT}/fixtures/data/corpus.jsonl"} <= inside
    for pkg in _source_packages():
        assert f"{pkg.replace('.', '/')}/__init__.py" in inside, pkg
    assert f"{ROOT}/ground/errors.py" in inside  # the ground floor (issue 39)


@pytest.mark.slow
def test_wheel_holds_no_paper_experiment(wheel):
    """The paper-reproduction experiments (experiments/, issue 39) stay in the checkout:
    no file of the wheel is one of them, under any folder."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    experiments = sorted(p.name for p in (REPO / "experiments").glob("*.py"))
    assert "dp_forward_table4.py" in experiments and "run.py" in experiments
    assert not [n for n in names if "experiments" in n.split("/")[:-1]]
    shipped = {n.rsplit("/", 1)[-1] for n in names if n.startswith(f"{ROOT}/audit/benchmarks/")}
    assert "byo_lm.py" in shipped and "cost_of_privacy.py" in shipped  # what users bench stays
    assert not shipped & (set(experiments) - {"__init__.py"}), shipped & set(experiments)


@pytest.mark.slow
def test_wheel_and_testing_cabal_fixtures_side_by_side(wheel, tmp_path):
    """A fresh venv with the wheel and PyPI's ``fixtures``: both import, the bundled corpus
    and configs load from the wheel, and ``privacy-audit run --help`` works. The heavy
    dependencies come from this test's environment through a path entry (.pth line: a plain
    directory, so that environment's own .pth files, the editable finder among them, are
    not run); the wheel goes in with --no-deps."""
    venv = tmp_path / "venv"
    r = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    py = venv / "bin" / "python"
    purelib = _run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path
    )
    site = Path(purelib.stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_test_deps.pth").write_text("\n".join(sorted(ours)) + "\n", encoding="utf-8")
    pip = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q"]
    r = _run([*pip, "--no-deps", str(wheel)], cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _run([*pip, "fixtures"], cwd=tmp_path, timeout=300)  # testing-cabal's, from the index
    assert r.returncode == 0, f"pip install fixtures (needs the package index): {r.stderr[-2000:]}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        "import privacy_audit, fixtures, privacy_audit.fixtures as corpus\n"
        "from privacy_audit.audit.config import load_config\n"
        "assert issubclass(fixtures.Fixture, object) and hasattr(fixtures, 'TempDir')\n"
        "assert corpus.load_corpus('private'), 'no corpus'\n"
        "import privacy_audit.audit.integrations.pytest_plugin\n"
        "load_config(None); load_config('lm')\n"
        "from privacy_audit.reports.html import TEMPLATE_DIR\n"
        "assert (TEMPLATE_DIR / 'report.html.j2').is_file()\n"
        "print(fixtures.__file__); print(corpus.__file__); print(privacy_audit.__file__)"
    )
    r = _run([str(py), "-c", code], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    theirs, ours_corpus, root = (Path(p) for p in r.stdout.splitlines())
    assert theirs.parent.parent == site and theirs.parent.name == "fixtures"
    assert ours_corpus.parent.parent == site / ROOT
    assert root.parent.parent == site and REPO not in root.parents
    r = _run([str(venv / "bin" / "privacy-audit"), "run", "--help"], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage: privacy-audit run" in r.stdout
    # every product module imports from the wheel alone (nothing needs experiments/)
    code = (
        "import importlib, pkgutil, privacy_audit\n"
        "mods = [m.name for m in pkgutil.walk_packages(privacy_audit.__path__, 'privacy_audit.')"
        " if not m.name.endswith('__main__')]\n"
        "[importlib.import_module(m) for m in mods]\n"
        "print(len(mods))"
    )
    r = _run([str(py), "-c", code], cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout) > 100
    # the checkout's commands say, in one line, what to do (issue 39)
    for argv in (["claims"], ["experiment", "dp-blogs-audit", "--out", "e.json"]):
        r = _run([str(venv / "bin" / "privacy-audit"), *argv], cwd=tmp_path, env=env)
        assert r.returncode == 2 and "source checkout" in r.stderr, (argv, r.stderr[-2000:])
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "e.json").exists()
    # the user's commands run from the wheel alone (issue 39): run on a saved model, score
    # on a CSV, the gate on both records, and the bring-your-own-model bench
    from tests.own_models import build_causal_lm, random_texts, save, word_tokenizer, write_lines

    tok = word_tokenizer()
    model = save(build_causal_lm("gpt2", len(tok), seed=0, d=32), tok, tmp_path / "model")
    texts = random_texts(60, 3)
    m = write_lines(tmp_path / "m.txt", texts[:30])
    n = write_lines(tmp_path / "n.txt", texts[30:])
    cli = str(venv / "bin" / "privacy-audit")
    argv = ["run", "--model", str(model), "--members", str(m), "--nonmembers", str(n)]
    r = _run([cli, *argv, "--max-length", "32", "--out", "o", "--quiet"], tmp_path, env, 300)
    assert r.returncode == 0, r.stderr[-3000:]
    run = json.loads((tmp_path / "o" / "results.json").read_text(encoding="utf-8"))["runs"][0]
    assert run["verdict"]["level"] in ("low", "inconclusive", "moderate", "high")
    assert sum(a.get("status") == "ok" for a in run["attacks"]) >= 4
    rows = ["score,member"] + [f"{0.01 * i},{int(i % 2 == 0)}" for i in range(200)]
    (tmp_path / "s.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    r = _run([cli, "score", "s.csv", "--out", "so", "--bootstrap", "100"], tmp_path, env, 300)
    assert r.returncode == 0, r.stderr[-3000:]
    for record in ("o", "so"):
        r = _run([cli, "gate", f"{record}/results.json", "--max-auc", "0.99"], tmp_path, env)
        assert r.returncode == 0, (record, r.stdout[-2000:], r.stderr[-2000:])
    r = _run([cli, "bench", "byo-lm", "--quick", "--out", "b.json"], tmp_path, env, 600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))
    # dp-check from the wheel alone: the bundled setups ship as package data; exit 0 on a
    # correct Opacus setup, 1 on a bug, 2 (one line, nothing written) on a bad SETUP
    r = _run(
        [
            str(py),
            "-c",
            "import privacy_audit.fixtures as f, pathlib; "
            "print(pathlib.Path(f.__file__).parent / 'dp_setups')",
        ],
        tmp_path,
        env,
    )
    setups = Path(r.stdout.strip())
    assert setups.is_dir() and site in setups.parents, r.stderr
    for name, code in (("opacus_default", 0), ("bug_clip_after_aggregation", 1)):
        r = _run(
            [cli, "dp-check", str(setups / f"{name}.py"), "--out", f"dpc-{name}", "--quiet"],
            tmp_path,
            env,
            600,
        )
        assert r.returncode == code, (name, r.stdout[-2000:], r.stderr[-2000:])
        rec = json.loads((tmp_path / f"dpc-{name}" / "results.json").read_text(encoding="utf-8"))
        assert rec["exit_code"] == code and (tmp_path / f"dpc-{name}" / "report.html").is_file()
    bad = tmp_path / "bad_setup.py"
    bad.write_text("def make_dataset():\n    return list(range(8))\n", encoding="utf-8")
    r = _run([cli, "dp-check", str(bad), "--out", "dpc-bad"], tmp_path, env)
    assert r.returncode == 2 and "CLAIM" in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "dpc-bad").exists()
