"""The ε lower bounds a run's ε audits certify (``run["epsilon_audit"]``): every ``ok``,
non-asymptotic audit and the trade-off test's violations. The verdict's headline, the
report and the gate read them from here."""

from __future__ import annotations

import math
from typing import Any

from privacy_audit.reports.formatting import as_finite
from privacy_audit.reports.results_record import RunRecord


def tradeoff_epsilon_lb(tradeoff: dict[str, Any]) -> float | None:
    """An ε lower bound implied by the trade-off test's significant points.

    Each stored point has a one-sided bound ``fpr_hi`` on its false-positive rate and
    ``tpr_lo`` on its true-positive rate, simultaneous over the tested thresholds at the
    test's confidence. Any (ε, δ)-DP mechanism has ``TPR <= e^ε FPR + δ`` and
    ``1 - FPR <= e^ε (1 - TPR) + δ`` (Kairouz et al. 2015), so
    ``ε >= max(log((tpr_lo - δ) / fpr_hi), log((1 - fpr_hi - δ) / (1 - tpr_lo)))`` at that
    confidence. Only thresholds that violated the claimed ε are stored, so this is
    ``None`` when the test found no violation (it is a bound, never an estimate)."""
    points = tradeoff.get("points")
    delta = as_finite(tradeoff.get("delta"))
    if not isinstance(points, list) or delta is None:
        return None
    best = None
    for p in points:
        if not isinstance(p, dict):
            continue
        f, t = as_finite(p.get("fpr_hi")), as_finite(p.get("tpr_lo"))
        if f is None or t is None:
            continue
        cands = []
        if f > 0 and t - delta > 0:
            cands.append(math.log((t - delta) / f))
        if t < 1 and 1 - f - delta > 0:
            cands.append(math.log((1 - f - delta) / (1 - t)))
        for c in cands:
            if c > 0 and (best is None or c > best):
                best = c
    return best


def has_claim(run: dict[str, Any] | RunRecord) -> bool:
    """Whether the run claims a privacy guarantee (a notion other than "none" and an ε)."""
    return RunRecord.of(run).claim.finite_epsilon is not None


def simulated_audit(audit: dict[str, Any]) -> bool:
    """An ε audit of the declared mechanism simulated beside the training (gradient
    canaries, the one-run white-box audits), not of the released model."""
    return audit.get("source") == "simulated from the mechanism" or "simulated run" in str(
        audit.get("cost") or ""
    )


def epsilon_audit_bounds(run: dict[str, Any] | RunRecord) -> list[tuple[str, Any]]:
    """``(name, ε lower bound)`` of every ``ok``, non-asymptotic ε audit of a run (gradient
    canaries, one-run input canaries, ...) and of the trade-off test when it found a
    violation. A run without a privacy claim has no declared mechanism: audits simulated
    from one are not about it and are left out (a non-private run's simulated, noiseless
    updates read "ε ≥ 9.51" beside its measured 0.76)."""
    rec = RunRecord.of(run)
    ea = rec.epsilon_audit
    if ea is None:
        return []
    claimed = has_claim(rec)
    out: list[tuple[str, Any]] = []
    for a in ea.audits:
        # asymptotic bounds (the Gaussian one-run audit) are informational: never gated on
        if a.get("status") == "ok" and not a.get("asymptotic"):
            if not claimed and simulated_audit(a):
                continue
            out.append((str(a.get("name") or "unnamed audit"), a.get("epsilon_lb")))
    tr = ea.tradeoff
    if tr is not None and tr.get("violated"):
        out.append(
            (f"trade-off test ({tr.get('attack') or 'strongest'} attack)", tradeoff_epsilon_lb(tr))
        )
    return out
