#!/usr/bin/env python3
"""Rewrite the five old top-level packages to the ``privacy_audit`` import root (issue 29).

    python tools/migrate_imports.py [REPO]          # rewrite in place (default REPO: cwd)
    python tools/migrate_imports.py [REPO] --check  # list what would change; exit 1 if any

Then ``ruff check --fix . && ruff format .`` (import order and the lines that grew); the
script runs both on the files it changed when it finds ruff (``--ruff PATH`` to name one).
It works on any branch that still uses the old names, e.g. one opened before the rename.

The folders ``audit/``, ``attacks/``, ``defenses/``, ``reports/`` and ``fixtures/`` stay where
they are; pyproject.toml maps them to ``privacy_audit.audit`` ... ``privacy_audit.fixtures``.
This script rewrites every reference to the old names over the whole tree (code, tests, docs,
README, Makefile, configs, recorded JSON):

* import statements (also indented, and inside docstrings and Markdown code blocks):
  ``from audit.x import y``  -> ``from privacy_audit.audit.x import y``;
  ``import fixtures``        -> ``from privacy_audit import fixtures`` (same binding);
  ``import audit.x as y``    -> ``import privacy_audit.audit.x as y``;
* dotted module paths anywhere in text, strings and comments, when the dotted path starts
  with a real module of the tree (so ``fixtures.load_corpus()``, ``cfg.audit.get`` or the
  config key ``attacks.names`` are left alone, but ``"audit.scale.tasks:audit_trial"``,
  ``mock.patch("audit.config.X")``, ``ignore::defenses.dp_blogs.AccountantWarning``,
  ``resources.files("audit.configs")`` and ``python -m audit.benchmarks.x`` are rewritten);
* Sphinx roles name Python objects, so ``:data:`attacks.ATTACKS``` is rewritten too;
* ``python -m audit`` / ``[sys.executable, "-m", "audit", ...]`` -> ``privacy_audit``.

In Python *code* (not strings or comments) dotted attribute chains are never rewritten:
``from privacy_audit import fixtures`` keeps the name ``fixtures`` bound, so
``fixtures.load_corpus()`` stays valid. ``import audit.x`` without ``as`` binds ``audit``
and is reported instead of rewritten (it needs a hand edit).

Idempotent: already-migrated text (``privacy_audit.audit.x``) never matches again, so it
can be rerun on a future tree with new files. pyproject.toml (the mapping itself), the
``privacy_audit/`` root package, .git, virtualenvs and build outputs are skipped.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOTS = ("audit", "attacks", "defenses", "reports", "fixtures")
NEW = "privacy_audit"
TEXT_SUFFIXES = {
    ".py", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".j2", ".html", ".json",
    ".jsonl", ".yml", ".yaml", ".sh", ".ipynb",
}  # fmt: skip
TEXT_NAMES = {"Makefile", "run", "Dockerfile"}
SKIP_PARTS = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".ruff_cache",
              ".pytest_cache", NEW, "node_modules"}  # fmt: skip
# the mapping itself, this script and its test (which quote the old names on purpose)
SKIP_FILES = {"pyproject.toml", "tools/migrate_imports.py", "tests/project/test_migrate_imports.py"}
SKIP_SUFFIX_DIRS = (".egg-info",)

_R = "|".join(ROOTS)
# indentation, an opening quote (an import inside a one-line string) or a doctest prompt
_IND = r"[ \t]*(?:[rbfuRBFU]{0,2}(?:\"\"\"|'''|\"|'))?(?:>>> |\.\.\. )?"
# ``from audit.x import`` / ``import audit`` at the start of a (possibly indented) line
FROM_RE = re.compile(
    rf"^(?P<ind>{_IND})from (?P<mod>(?:{_R})(?:\.[\w.]+)?)(?P<rest>\s+import\b)", re.M
)
IMPORT_RE = re.compile(rf"^(?P<ind>{_IND})import (?P<names>(?:{_R})\b[\w., ]*)", re.M)
# a dotted name that starts with a root; not part of a longer name, path or attribute chain
DOTTED_RE = re.compile(rf"(?<![\w./\\-])(?P<root>{_R})(?P<tail>(?:\.[A-Za-z_]\w*)+)")
# a Sphinx cross-reference names a Python object, module or not (:data:`attacks.ATTACKS`)
SPHINX_RE = re.compile(rf"(?P<role>:(?:mod|func|class|data|attr|meth|obj|exc):`~?)(?P<root>{_R})\.")
# ``python -m audit`` and ``"-m", "audit"``
DASH_M_RE = re.compile(r"(?P<pre>-m\s+|[\"']-m[\"'],\s*[\"'])audit(?![\w.-])")


def module_names(repo: Path) -> set[str]:
    """Every importable module of the five folders, as ``root.sub.mod`` (packages too)."""
    mods: set[str] = set()
    for root in ROOTS:
        base = repo / root
        if not (base / "__init__.py").is_file():
            continue
        mods.add(root)
        for path in base.rglob("*.py"):
            if any(p in SKIP_PARTS for p in path.relative_to(repo).parts):
                continue
            parts = list(path.relative_to(repo).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            # only inside real packages (every folder on the way has __init__.py)
            if all(
                (repo.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))
            ):
                mods.add(".".join(parts))
    return mods


class Migrator:
    def __init__(self, repo: Path):
        self.repo = repo
        self.mods = module_names(repo)
        self.manual: list[str] = []  # places that need a hand edit

    # -- text rules ---------------------------------------------------------------------
    def _dotted(self, m: re.Match) -> str:
        parts = m.group("root") + m.group("tail")
        comps = parts.split(".")
        # rewrite only when root.<next> is a real module (root alone is too generic a word)
        if len(comps) >= 2 and ".".join(comps[:2]) in self.mods:
            return f"{NEW}.{parts}"
        return m.group(0)

    def _from(self, m: re.Match) -> str:
        return f"{m.group('ind')}from {NEW}.{m.group('mod')}{m.group('rest')}"

    def _import(self, m: re.Match, where: str) -> str:
        names = m.group("names").rstrip()
        trail = m.group("names")[len(names) :]
        items = [s.strip() for s in names.split(",")]
        plain, dotted, other = [], [], []
        for it in items:
            name, _, alias = (x.strip() for x in it.partition(" as "))
            root = name.split(".")[0]
            if root not in ROOTS:
                other.append(it)
            elif "." not in name:
                plain.append(f"{name} as {alias}" if alias else name)
            elif alias:
                dotted.append(f"import {NEW}.{name} as {alias}")
            else:
                self.manual.append(f"{where}: 'import {name}' binds '{root}'; edit by hand")
                return m.group(0)
        lines = []
        if other:
            lines.append(f"import {', '.join(other)}")
        if plain:
            lines.append(f"from {NEW} import {', '.join(plain)}")
        lines += dotted
        ind = m.group("ind")
        if ind.strip(" \t>.").strip():  # inside a one-line string: stay on that line
            return ind + "; ".join(lines) + trail
        return ind + ("\n" + ind.replace(">>> ", "... ")).join(lines) + trail

    def _dash_m(self, m: re.Match) -> str:
        return f"{m.group('pre')}{NEW}"

    def rewrite_text(self, text: str, where: str) -> str:
        """Every rule, for non-Python text (and docstrings/strings/comments)."""
        text = FROM_RE.sub(self._from, text)
        text = IMPORT_RE.sub(lambda m: self._import(m, where), text)
        text = SPHINX_RE.sub(lambda m: f"{m.group('role')}{NEW}.{m.group('root')}.", text)
        text = DOTTED_RE.sub(self._dotted, text)
        return DASH_M_RE.sub(self._dash_m, text)

    def rewrite_python(self, src: str, where: str) -> str:
        """Import statements in code, and every rule inside strings and comments; code
        attribute chains (``fixtures.load_corpus``) untouched."""
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
        except (tokenize.TokenError, SyntaxError, IndentationError) as exc:
            self.manual.append(f"{where}: not tokenizable ({exc}); rewrote as text")
            return self.rewrite_text(src, where)
        lines = src.splitlines(keepends=True)
        offsets = [0]
        for ln in lines:
            offsets.append(offsets[-1] + len(ln))

        def pos(rc: tuple[int, int]) -> int:
            return offsets[rc[0] - 1] + rc[1]

        edits: list[tuple[int, int, str]] = []
        for tok in tokens:
            if tok.type in (tokenize.STRING, tokenize.COMMENT) or (
                hasattr(tokenize, "FSTRING_MIDDLE") and tok.type == tokenize.FSTRING_MIDDLE
            ):
                a, b = pos(tok.start), pos(tok.end)
                old = src[a:b]
                new = self.rewrite_text(old, where)
                if new != old:
                    edits.append((a, b, new))
        out = src
        for a, b, new in sorted(edits, reverse=True):
            out = out[:a] + new + out[b:]
        # import statements of the code itself (never inside a string: those were done)
        out = self._code_imports(out, where)
        return out

    def _code_imports(self, src: str, where: str) -> str:
        # Both patterns are idempotent, so lines inside strings (already rewritten by the
        # string pass) are not changed twice; what is left to match is code.
        src = FROM_RE.sub(self._from, src)
        src = IMPORT_RE.sub(lambda m: self._import(m, where), src)
        return DASH_M_RE.sub(self._dash_m, src)  # [sys.executable, "-m", "audit", ...]

    # -- files --------------------------------------------------------------------------
    def files(self) -> list[Path]:
        try:
            listed = subprocess.run(
                ["git", "ls-files", "-co", "--exclude-standard"],
                cwd=self.repo, capture_output=True, text=True, check=True,
            ).stdout.splitlines()  # fmt: skip
            paths = [self.repo / p for p in listed]
        except (OSError, subprocess.CalledProcessError):
            paths = [p for p in self.repo.rglob("*") if p.is_file()]
        out = []
        for p in paths:
            rel = p.relative_to(self.repo)
            if any(part in SKIP_PARTS or part.endswith(SKIP_SUFFIX_DIRS) for part in rel.parts):
                continue
            if rel.as_posix() in SKIP_FILES:
                continue
            if p.is_symlink() or not p.is_file():
                continue
            if p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES:
                out.append(p)
        return sorted(out)

    def migrate(self, write: bool) -> list[Path]:
        changed = []
        for p in self.files():
            try:
                old = p.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            where = str(p.relative_to(self.repo))
            new = (
                self.rewrite_python(old, where)
                if p.suffix == ".py"
                else self.rewrite_text(old, where)
            )
            if new != old:
                changed.append(p)
                if write:
                    p.write_text(new, encoding="utf-8")
        return changed


def leftovers(repo: Path) -> list[str]:
    """Old-style imports still in the tree (the acceptance grep of issue 29)."""
    pat = re.compile(rf"^\s*(from ({_R})[\s.]|import ({_R})\b)")
    out = []
    for p in Migrator(repo).files():
        try:
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if pat.match(line):
                    out.append(f"{p.relative_to(repo)}:{i}: {line.strip()}")
        except (UnicodeDecodeError, OSError):
            continue
    return out


def _ruff(repo: Path, files: list[Path], ruff: str | None) -> None:
    """Sort the rewritten imports and re-wrap lines that grew past the line length."""
    import shutil

    exe = ruff or (str(repo / ".venv/bin/ruff") if (repo / ".venv/bin/ruff").is_file() else None)
    exe = exe or shutil.which("ruff")
    if not exe or not files:
        print("migrate_imports: ruff not found; run `ruff check --fix . && ruff format .`")
        return
    names = [str(p.relative_to(repo)) for p in files]
    for cmd in (
        [exe, "check", "--fix", "--select", "I", "-q", *names],
        [exe, "format", "-q", *names],
    ):
        r = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"migrate_imports: {' '.join(cmd[:3])} ...: {r.stdout}{r.stderr}".rstrip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", nargs="?", default=".", type=Path)
    ap.add_argument("--check", action="store_true", help="list files that would change")
    ap.add_argument("--ruff", help="ruff executable (default: .venv/bin/ruff, else on PATH)")
    ap.add_argument("--no-ruff", action="store_true", help="do not run ruff afterwards")
    args = ap.parse_args(argv)
    repo = args.repo.resolve()
    if not (repo / "pyproject.toml").is_file() or not (repo / "audit").is_dir():
        print(f"migrate_imports: {repo} is not the privacy-audit repository", file=sys.stderr)
        return 2
    m = Migrator(repo)
    changed = m.migrate(write=not args.check)
    verb = "would rewrite" if args.check else "rewrote"
    print(f"migrate_imports: {verb} {len(changed)} file(s)")
    for p in changed:
        print(f"  {p.relative_to(repo)}")
    for line in m.manual:
        print(f"  MANUAL: {line}")
    if not args.check and changed and not args.no_ruff:
        _ruff(repo, [p for p in changed if p.suffix == ".py"], args.ruff)
    if not args.check:
        for line in leftovers(repo):
            print(f"  LEFT: {line}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
