"""Which TPR-at-FPR numbers a sample resolves, as every surface shows them.

The rule is :func:`privacy_audit.stats.metrics.tpr_resolution`, applied once when the
metrics are computed: an unresolved TPR is stored in ``results.json`` as ``null`` with
``below_resolution: true``, ``needs_nonmembers`` and its ``reason``. This module only
reads that record (and applies the same rule to a record written before the rule was
stored, so an old file never shows a number the rule calls unresolved); the report, the
VERDICT line, ``score`` and the gate all go through it.
"""

from __future__ import annotations

from typing import Any

from privacy_audit.reports import sentences as S
from privacy_audit.reports.formatting import as_finite, pct_ci
from privacy_audit.stats.metrics import (
    MAX_RESOLVED_WIDTH as MAX_WIDTH,
)
from privacy_audit.stats.metrics import (
    MIN_FALSE_POSITIVES,
    REPORTED_FPRS,
    needed_nonmembers,
    tpr_resolution,
    unresolved_text,
)

#: FPRs tried, lowest first, for the "lowest resolvable FPR" the summary leads with.
FPR_LADDER = tuple(sorted(REPORTED_FPRS))


def _fpr_text(fpr: float) -> str:
    return f"{100 * fpr:g}%"


def stored_tpr(attack: dict | None, fpr: float) -> dict | None:
    """The stored ``tpr_at_fpr_<fpr>`` record of an attack (None: not stored)."""
    if not isinstance(attack, dict):
        return None
    metrics = attack.get("metrics") if isinstance(attack.get("metrics"), dict) else {}
    m = metrics.get(f"tpr_at_fpr_{fpr:g}")
    return m if isinstance(m, dict) else None


def tpr_standing(attack: dict | None, fpr: float) -> dict[str, Any]:
    """``{"measured", "resolvable", "needs", "metric", "reason"}`` of TPR at ``fpr``, read
    from the record: the one answer the report, stdout, ``score`` and the gate give."""
    m = stored_tpr(attack, fpr)
    out: dict[str, Any] = {"measured": False, "resolvable": False, "needs": None, "metric": None}
    if m is None:
        out["reason"] = "not measured"
        return out
    n_non = attack.get("n_nonmembers") if isinstance(attack, dict) else None
    n_non = n_non if isinstance(n_non, int) and not isinstance(n_non, bool) else None
    if m.get("below_resolution") is True:
        needs = m.get("needs_nonmembers")
        if not isinstance(needs, int) or isinstance(needs, bool):
            needs = needed_nonmembers(fpr, n_non, None)
        stored = m.get("reason")
        # the record's own words (they name the unit: "non-member users" when users are)
        reason = stored if isinstance(stored, str) and stored else unresolved_text(needs)
        out.update(measured=True, needs=needs, reason=reason)
        return out
    value = as_finite(m.get("value"))
    if value is None:
        out["reason"] = "not measured"
        return out
    out["measured"] = True
    if n_non is not None:
        ok, needs = tpr_resolution(
            fpr, n_non, as_finite(m.get("ci_low")), as_finite(m.get("ci_high"))
        )
        if not ok:
            out.update(needs=needs, reason=unresolved_text(needs))
            return out
    out.update(resolvable=True, metric=m, reason="")
    return out


def tpr_view(attack: dict | None, fpr: float) -> dict[str, Any]:
    """``{"fpr", "resolvable", "text", "needs", "metric"}`` for TPR at ``fpr``."""
    st = tpr_standing(attack, fpr)
    out: dict[str, Any] = {"fpr": fpr, "resolvable": st["resolvable"], "needs": st["needs"]}
    out["metric"] = st["metric"]
    if not isinstance(attack, dict):
        out["text"] = "—"
    elif st["resolvable"]:
        out["text"] = pct_ci(st["metric"])
    else:
        out["text"] = st["reason"]
    return out


def lead_tpr(attack: dict | None) -> dict[str, Any] | None:
    """The TPR at the lowest FPR of :data:`FPR_LADDER` the sample resolves (``None``:
    none), as ``tpr_view`` plus ``"label"`` (e.g. ``"TPR @ 5% FPR"``)."""
    for fpr in FPR_LADDER:
        v = tpr_view(attack, fpr)
        if v["resolvable"]:
            return {**v, "label": S.TPR_LABEL(fpr=_fpr_text(fpr))}
    return None


__all__ = [
    "FPR_LADDER",
    "MAX_WIDTH",
    "MIN_FALSE_POSITIVES",
    "lead_tpr",
    "needed_nonmembers",
    "stored_tpr",
    "tpr_standing",
    "tpr_view",
]
