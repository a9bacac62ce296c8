"""Shared fixtures: one tiny end-to-end audit that several CLI tests read.

The tiny audit trains a 2-layer BERT for one epoch on 40 fixture members, once with
no defense and once with DP-SGD (ε = 8), and runs the four membership attacks; it
takes a few seconds of CPU plus DP noise calibration, so it runs once per session.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _hash_cache(tmp_path_factory):
    """Input hashes are cached per test session, never in the user's ~/.cache."""
    import os

    key = "PRIVACY_AUDIT_HASH_CACHE"
    before = os.environ.get(key)
    os.environ[key] = str(tmp_path_factory.mktemp("hash-cache") / "file-hashes.json")
    yield
    if before is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = before


TINY_CONFIG = """\
title = "Tiny test audit"
seed = 0
device = "cpu"

[data]
corpus = "fixtures"
n_members = 40
n_nonmembers = 40
n_test = 40

[target]
preset = "tiny"
max_length = 32
public_epochs = 0

[train]
epochs = 1
batch_size = 16

[[defenses]]
name = "none"
label = "non-private"

[[defenses]]
name = "dp-sgd"
label = "dp-sgd (eps=8)"
epsilon = 8.0

[attacks]
names = ["loss", "confidence", "entropy", "modified-entropy"]

[metrics]
bootstrap = 100
"""


@dataclass(frozen=True)
class CliOutcome:
    """What one in-process ``privacy-audit`` invocation did."""

    code: int
    stdout: str
    stderr: str


def invoke_cli(argv: list[str]) -> CliOutcome:
    """Run ``privacy_audit.audit.cli.main(argv)`` in-process, capturing stdout/stderr and SystemExit."""
    from privacy_audit.audit.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse errors and --version exit through SystemExit
            code = exc.code if isinstance(exc.code, int) else 1
    return CliOutcome(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def tiny_config_path(tmp_path_factory) -> Path:
    """A TOML config that trains fast on the fixture corpus (two defenses)."""
    path = tmp_path_factory.mktemp("tiny-config") / "tiny.toml"
    path.write_text(TINY_CONFIG, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_run(tiny_config_path, tmp_path_factory) -> tuple[Path, CliOutcome]:
    """Run ``privacy-audit run`` on the tiny config once; ``(out_dir, outcome)``."""
    out_dir = tmp_path_factory.mktemp("tiny-run") / "out"
    outcome = invoke_cli(["run", str(tiny_config_path), "--out", str(out_dir)])
    return out_dir, outcome


@pytest.fixture(scope="session")
def tiny_run_dir(tiny_run) -> Path:
    """The output directory of the shared tiny run (fails loudly if the run failed)."""
    out_dir, outcome = tiny_run
    assert outcome.code == 0, f"tiny run failed ({outcome.code}): {outcome.stderr[-2000:]}"
    return out_dir


@pytest.fixture(scope="session")
def cli():
    """``cli([...])`` runs the command line in-process and returns a :class:`CliOutcome`."""
    return invoke_cli


TINY_LABELS = ["account", "billing", "shipping", "technical"]


@pytest.fixture(scope="session")
def tiny_model():
    """A freshly initialised tiny target ``(model, tokenizer)`` over the fixture labels."""
    from privacy_audit.targets.loading import TargetSpec

    return TargetSpec("tiny", max_length=32).build(TINY_LABELS, 0)


@pytest.fixture(scope="session")
def fixture_examples():
    """Eight private fixture rows as ``Examples`` (task labels as indices of TINY_LABELS)."""
    from privacy_audit import fixtures
    from privacy_audit.defenses.base import Examples

    rows = fixtures.load_corpus("private")[:8]
    return Examples(
        ids=[r["id"] for r in rows],
        texts=[r["text"] for r in rows],
        labels=[TINY_LABELS.index(r["label"]) for r in rows],
    )
