"""A privacy claim in words: ``"ε = 8.00, δ = 1e-5; central DP, per example, proven"``
(the verdict's claim sentences read these)."""

from __future__ import annotations

from typing import Any

from privacy_audit.reports.formatting import as_float, num, small
from privacy_audit.reports.results_record import ClaimRecord

_UNIT_TEXT = {
    "example": "per example",
    "sequence": "per sequence",
    "token": "per token",
    "user": "per user",
}
_NOTION_TEXT = {
    "central-dp": "central DP",
    "local-dp": "local DP",
    "metric-dp": "metric DP",
}


def _record(claim: Any) -> ClaimRecord:
    return claim if isinstance(claim, ClaimRecord) else ClaimRecord.of(claim)


def claim_details(claim: Any) -> str:
    """``"central DP, per example, proven"`` (notion, unit, proof status)."""
    c = _record(claim)
    if not c.formal:
        return "no formal privacy claim"
    details = [_NOTION_TEXT.get(c.notion, str(c.notion))]
    if c.unit:
        details.append(_UNIT_TEXT.get(c.unit, f"per {c.unit}"))
    details.append("proven" if c.proven else "heuristic, not proven")
    return ", ".join(details)


def describe_claim(claim: Any) -> str:
    """Short human description of a claim, e.g.
    ``"ε = 8.00, δ = 1e-5; central DP, per example, proven"``."""
    c = _record(claim)
    if not c.formal:
        return "no formal privacy claim"
    eps = as_float(c.epsilon)
    parts = [f"ε = {num(eps)}" if eps is not None else "ε not stated"]
    if c.delta is not None:
        parts.append(f"δ = {small(c.delta)}")
    return ", ".join(parts) + "; " + claim_details(c)
