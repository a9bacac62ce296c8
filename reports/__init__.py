"""Reporting layer: verdicts, plots and a self-contained HTML report.

Everything here reads only the results dictionary (the content of
results.json); no model is loaded.
"""

from .html import render_html, write_report
from .verdict import compare_runs, verdict_for_run

__all__ = ["compare_runs", "render_html", "verdict_for_run", "write_report"]
