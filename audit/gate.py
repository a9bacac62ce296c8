"""Privacy gate for CI: fail when any attack's metric exceeds a threshold.

Reads only ``results.json``. A metric is compared by its point ``value``; ``--strict``
compares the upper end of its 95% CI instead (fails when the threshold is inside the CI).
The ε lower bound is already a one-sided 95% lower confidence bound, so it is always
compared by its value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.errors import DataError

GATED = {
    "max_auc": ("auc", "AUC"),
    "max_tpr_at_1pct_fpr": ("tpr_at_fpr_0.01", "TPR@1%FPR"),
    "max_epsilon_lb": ("epsilon_lower_bound", "empirical epsilon lower bound"),
}


@dataclass(frozen=True)
class Violation:
    run: str
    attack: str
    metric: str
    observed: float
    threshold: float

    def __str__(self) -> str:
        return (
            f"{self.metric} of attack '{self.attack}' on '{self.run}' is {self.observed:.4g}, "
            f"above the threshold {self.threshold:.4g}"
        )


def load_results(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise DataError(f"results file {str(p)!r} does not exist")
    try:
        results = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"results file {str(p)!r} is not valid JSON: {exc}") from None
    if not isinstance(results, dict) or not isinstance(results.get("runs"), list):
        raise DataError(
            f"results file {str(p)!r} has no 'runs' list; is it a privacy-audit results.json?"
        )
    return results


def check(
    results: dict[str, Any], thresholds: dict[str, float | None], strict: bool = False
) -> list[Violation]:
    """All threshold violations over every run and every attack with status ``ok``."""
    violations = []
    for run in results["runs"]:
        for att in run.get("attacks", []):
            if att.get("status") != "ok":
                continue
            for key, limit in thresholds.items():
                if limit is None:
                    continue
                metric, label = GATED[key]
                m = (att.get("metrics") or {}).get(metric)
                if not isinstance(m, dict) or "value" not in m:
                    raise DataError(
                        f"results file: attack {att.get('attack')!r} of run {run.get('name')!r} "
                        f"has no '{metric}' metric; is it a privacy-audit results.json?"
                    )
                observed = m["value"]
                if strict and metric != "epsilon_lower_bound" and m.get("ci_high") is not None:
                    observed = m["ci_high"]
                if observed is not None and observed > limit:
                    violations.append(Violation(run["name"], att["attack"], label, observed, limit))
    return violations
