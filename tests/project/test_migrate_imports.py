"""tools/migrate_imports.py (issue 29): the rewrite to the privacy_audit root is right on
each form the tree uses, leaves look-alikes alone, and is idempotent (a second run over
its own output changes nothing), so it can be rerun on a branch with new files."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mig():
    spec = importlib.util.spec_from_file_location(
        "migrate_imports", REPO / "tools/migrate_imports.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Migrator(REPO)


BEFORE = textwrap.dedent(
    '''\
    import os
    import fixtures
    import attacks as atk, os
    from audit.config import X  # see audit.config
    from defenses.targets.lm import (
        LMRelease,
    )

    def f():
        from reports.html import render

    T = "audit.scale.tasks:audit_trial"
    W = "ignore::defenses.dp_blogs.AccountantWarning"
    C = [sys.executable, "-m", "audit", "run"]
    M = f"python -m audit.benchmarks.byo_lm --config {x}"
    rows = fixtures.load_corpus("private")
    k = cfg.audit.get("resolved"), "attacks.names", "out/reports.html"
    S = "import fixtures"
    """Docs: :mod:`attacks.epsilon`, :data:`attacks.ATTACKS`, :class:`~defenses.base.X`.

        >>> from attacks.base import AttackResult
    """
    '''
)
AFTER = textwrap.dedent(
    '''\
    import os
    from privacy_audit import fixtures
    import os
    from privacy_audit import attacks as atk
    from privacy_audit.audit.config import X  # see privacy_audit.audit.config
    from privacy_audit.defenses.targets.lm import (
        LMRelease,
    )

    def f():
        from privacy_audit.reports.html import render

    T = "privacy_audit.audit.scale.tasks:audit_trial"
    W = "ignore::privacy_audit.defenses.dp_blogs.AccountantWarning"
    C = [sys.executable, "-m", "privacy_audit", "run"]
    M = f"python -m privacy_audit.audit.benchmarks.byo_lm --config {x}"
    rows = fixtures.load_corpus("private")
    k = cfg.audit.get("resolved"), "attacks.names", "out/reports.html"
    S = "from privacy_audit import fixtures"
    """Docs: :mod:`privacy_audit.attacks.epsilon`, :data:`privacy_audit.attacks.ATTACKS`, :class:`~privacy_audit.defenses.base.X`.

        >>> from privacy_audit.attacks.base import AttackResult
    """
    '''
)


def test_python_source_is_rewritten_and_look_alikes_are_not(mig):
    assert mig.rewrite_python(BEFORE, "t.py") == AFTER
    assert mig.rewrite_python(AFTER, "t.py") == AFTER  # idempotent


def test_text_files_are_rewritten(mig):
    md = textwrap.dedent(
        """\
        Run `python -m fixtures.generate`, or `python -m audit run x.toml`.
        The gate is `audit.integrations.gate.check`; keys `[attacks.options.x]` stay.
            from audit.integrations.callbacks import PrivacyAuditCallback
        fixtures/README.md and fixtures.load_corpus() are not modules.
        """
    )
    out = mig.rewrite_text(md, "t.md")
    assert "`python -m privacy_audit.fixtures.generate`" in out
    assert "`python -m privacy_audit run x.toml`" in out
    assert "`privacy_audit.audit.integrations.gate.check`" in out
    assert "[attacks.options.x]" in out
    assert "    from privacy_audit.audit.integrations.callbacks import" in out
    assert "fixtures/README.md and fixtures.load_corpus()" in out
    assert mig.rewrite_text(out, "t.md") == out


def test_an_import_that_binds_the_old_name_is_left_for_a_hand_edit(mig):
    src = "import audit.config\n\naudit.config.X = 1\n"
    assert mig.rewrite_python(src, "t.py") == src
    assert any("t.py" in m and "by hand" in m for m in mig.manual)
