"""One dp-check finding, the ε it carries, and the ledger the checks write to.

A finding names its check, its bug class and severity, what was measured against what
was expected, where to look in the code, and the ε it implies (docs/dp-check.md). The
finding families (:mod:`.findings_noise`, :mod:`.findings_sensitivity`,
:mod:`.findings_schedule`, :mod:`.findings_model`, :mod:`.findings_sampling`) append to
one :class:`Ledger` in report order; :mod:`.verdict` turns the ledger into the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: relative slack on a measured effect before it counts as larger than the claimed one
#: (crafted pairs are exact up to float rounding; 1% is far above it)
EFFECT_SLACK = 0.01


@dataclass
class Finding:
    check: str
    bug_class: str
    severity: str  # violation | inconclusive | warning | info
    title: str
    measured: str
    expected: str
    where: str
    epsilon: dict[str, Any] | None = None


def eps_view(value: float | None, kind: str, how: str = "") -> dict[str, Any]:
    """An ε for results.json: a number, or infinite (strict JSON has no Infinity)."""
    inf = value is not None and math.isinf(value)
    return {
        "value": None if (value is None or inf) else float(value),
        "infinite": bool(inf),
        "kind": kind,
        "how": how,
    }


@dataclass
class Ledger:
    """What the checks found so far, in the order the report shows it.

    ``status`` holds every check's state (``not-tested``, ``passed``, ``inconclusive``,
    ``violated``), ``findings`` the findings in report order and ``why_untested`` why a
    check did not run. Each family appends to it in turn and may read what an earlier
    family found (a later finding is not repeated when an earlier one explains it)."""

    status: dict[str, str]
    findings: list[Finding] = field(default_factory=list)
    why_untested: dict[str, str] = field(default_factory=dict)
