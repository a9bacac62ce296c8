"""The sample project's privacy regression test: a few lines, run by plain ``pytest``.

``PRIVACY_CONFIG=privacy_regressed.toml pytest`` runs the same test against the deliberate
regression (DP-SGD's noise multiplier lowered), which this test must catch.
"""

import os

import pytest

CONFIG = os.environ.get("PRIVACY_CONFIG", "privacy.toml")


@pytest.mark.privacy(max_auc=0.62, max_epsilon_lb=0.3)
def test_model_does_not_leak(privacy_audit):
    privacy_audit.run(CONFIG)
