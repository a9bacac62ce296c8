"""Forwarder for installs whose ``pytest11`` entry point still names ``audit.pytest_plugin``
(an editable install made before the plugin moved to :mod:`audit.integrations.pytest_plugin`).
pytest registers hooks and fixtures by module-level name, so they are re-exported by name."""

from audit.integrations.pytest_plugin import (  # noqa: F401
    privacy_audit,
    pytest_configure,
    pytest_runtest_call,
    pytest_runtest_setup,
)
