"""Reporting layer: verdicts, plots and a self-contained HTML report.

Everything here reads only the results dictionary (the content of
results.json); no model is loaded. The names below are imported on first use, so
``gate`` (which reads verdicts) does not load matplotlib and jinja2.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> submodule that defines it
_API = {
    "render_html": "html",
    "write_report": "html",
    "compare_runs": "run_comparison",
    "verdict_for_run": "verdict",
}


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(f"{__name__}.{_API[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:  # for type checkers and IDEs; never run
    from privacy_audit.reports.html import render_html, write_report
    from privacy_audit.reports.run_comparison import compare_runs
    from privacy_audit.reports.verdict import verdict_for_run

__all__ = ["compare_runs", "render_html", "verdict_for_run", "write_report"]
