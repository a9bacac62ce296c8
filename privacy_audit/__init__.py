"""privacy-audit: privacy auditing and attack evaluation for language models.

One import root for the suite. The subpackages are the repository's top-level folders,
mapped here by ``[tool.setuptools] package-dir`` in pyproject.toml:

- :mod:`privacy_audit.targets`: build the suite's targets or load the user's own model;
- :mod:`privacy_audit.defenses`: train or wrap a target and release its surfaces;
- :mod:`privacy_audit.attacks`: turn surfaces into per-example scores;
- :mod:`privacy_audit.stats`: metrics, intervals and ε bounds from scores and counts;
- :mod:`privacy_audit.reports`: verdicts, plots and the HTML report;
- :mod:`privacy_audit.audit`: config, data, runner, results.json, CLI, gate, pytest plugin;
- :mod:`privacy_audit.fixtures`: the bundled synthetic corpus;
- :mod:`privacy_audit.ground`: errors, atomic I/O, progress, safe loading and the lock, the
  floor the others stand on (it imports none of them; this folder, not a mapped one).

The names below (the README's "Python API") are imported on first use, so
``import privacy_audit`` (and the pytest plugin, which every pytest run of an environment
with the suite installed loads) stays light: no torch, transformers or numpy until a name
that needs them is touched.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

# A source checkout keeps the subpackages beside this folder (audit/, attacks/, ... at the
# top of the repository). A wheel and setuptools' editable finder place or map them under
# this package; a bare checkout on sys.path (pytest's pythonpath, a Ray worker given the
# driver's PYTHONPATH) finds them through this extra search location instead. An installed
# wheel has privacy_audit/audit/ here, so it never searches its parent (site-packages).
_HERE = Path(__file__).resolve().parent
if not (_HERE / "audit").is_dir() and (_HERE.parent / "audit" / "__init__.py").is_file():
    __path__.append(str(_HERE.parent))  # noqa: F821 - a package's __path__

from privacy_audit.audit import __version__  # noqa: E402 - light: audit/__init__ imports nothing

#: public name -> module that defines it
_API = {
    "AttackResult": "privacy_audit.attacks.base",
    "MetricSettings": "privacy_audit.attacks.base",
    "epsilon_lower_bound": "privacy_audit.stats.epsilon_bounds",
    "run_record": "privacy_audit.audit.results",
    "assemble_results": "privacy_audit.audit.results",
    "write_outputs": "privacy_audit.audit.results",
    "PrivacyClaim": "privacy_audit.defenses.base",
    "PrivacyAuditCallback": "privacy_audit.audit.integrations.callbacks",
    "PrivacyMonitor": "privacy_audit.audit.integrations.callbacks",
    "dp_check": "privacy_audit.audit.epsilon.dp_check",
    "assert_dp": "privacy_audit.audit.epsilon.dp_check",
    "DPCheckResult": "privacy_audit.audit.epsilon.dp_check",
}
_SUBPACKAGES = ("audit", "attacks", "defenses", "reports", "fixtures", "ground", "stats", "targets")

__all__ = [
    "AttackResult",
    "DPCheckResult",
    "MetricSettings",
    "PrivacyAuditCallback",
    "PrivacyClaim",
    "PrivacyMonitor",
    "__version__",
    "assemble_results",
    "assert_dp",
    "dp_check",
    "epsilon_lower_bound",
    "run_record",
    "write_outputs",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API, *_SUBPACKAGES})


if TYPE_CHECKING:  # for type checkers and IDEs; never run
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit.integrations.callbacks import PrivacyAuditCallback, PrivacyMonitor
    from privacy_audit.audit.results import assemble_results, run_record, write_outputs
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.stats.epsilon_bounds import epsilon_lower_bound
