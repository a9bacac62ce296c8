"""Which TPR-at-FPR numbers a sample can resolve, for the report and the VERDICT line.

A TPR at false-positive rate ``f`` rests on the ``f * n_nonmembers`` non-members that
score above the threshold. With fewer than :data:`MIN_FALSE_POSITIVES` of them the
threshold is set by one or two texts and the exact interval (attacks/metrics.py,
``tpr_interval_exact``) spans most of [0, 1]: "31.9% [0.0, 95.8]" says nothing. Such a
number is shown as "not resolvable at this n (needs about N non-members)", and the
summary leads with the lowest FPR of :data:`FPR_LADDER` the sample does resolve (computed
here from the per-example scores results.json keeps, with the same exact interval).
results.json itself keeps the raw numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .formatting import as_finite, pct_ci

#: FPRs tried, lowest first, for the "lowest resolvable FPR" the summary leads with.
FPR_LADDER = (0.001, 0.01, 0.05, 0.1, 0.2)
#: Non-members needed above the threshold: n_nonmembers * FPR >= this.
MIN_FALSE_POSITIVES = 3
#: An interval wider than this (in TPR) resolves nothing.
MAX_WIDTH = 0.5


def _fpr_text(fpr: float) -> str:
    return f"{100 * fpr:g}%"


def needed_nonmembers(fpr: float, n_non: int | None, width: float | None) -> int:
    """About how many non-members would resolve TPR at ``fpr``: at least
    ``MIN_FALSE_POSITIVES / fpr``, and, for an interval of ``width`` at ``n_non``, the size
    at which it would shrink (as 1/sqrt(n)) to :data:`MAX_WIDTH`."""
    need = math.ceil(MIN_FALSE_POSITIVES / fpr - 1e-9)
    if n_non and width is not None and width > MAX_WIDTH:
        need = max(need, math.ceil(n_non * (width / MAX_WIDTH) ** 2))
    return int(need)


def _stored(attack: dict, fpr: float) -> dict | None:
    metrics = attack.get("metrics") if isinstance(attack.get("metrics"), dict) else {}
    m = metrics.get(f"tpr_at_fpr_{fpr:g}")
    return m if isinstance(m, dict) else None


def _from_scores(attack: dict, fpr: float) -> dict | None:
    """TPR at ``fpr`` with its exact interval, from the attack's per-example scores."""
    from privacy_audit.attacks.metrics import tpr_at_fpr, tpr_interval_exact

    ex = attack.get("examples") if isinstance(attack.get("examples"), dict) else None
    if ex is None:
        return None
    try:
        s = np.asarray(ex["scores"], dtype=float)
        m = np.asarray(ex["members"], dtype=float) > 0.5
    except (KeyError, TypeError, ValueError):
        return None
    if s.size != m.size or not np.all(np.isfinite(s)) or m.all() or not m.any():
        return None
    members = np.sort(s[m])[::-1][None]
    nonmembers = np.sort(s[~m])[::-1][None]
    if fpr < 1.0 / nonmembers.shape[1]:
        return None
    lo, hi = tpr_interval_exact(members, nonmembers, fpr, 0.05)
    return {
        "value": tpr_at_fpr(s, m.astype(int), fpr),
        "ci_low": float(lo[0]),
        "ci_high": float(hi[0]),
    }


def tpr_view(attack: dict | None, fpr: float) -> dict[str, Any]:
    """``{"fpr", "resolvable", "text", "needs", "metric"}`` for TPR at ``fpr``."""
    out: dict[str, Any] = {"fpr": fpr, "resolvable": False, "needs": None, "metric": None}
    if not isinstance(attack, dict):
        out["text"] = "—"
        return out
    n_non = attack.get("n_nonmembers")
    n_non = n_non if isinstance(n_non, int) and not isinstance(n_non, bool) else None
    m = _stored(attack, fpr)
    if m is None or as_finite(m.get("value")) is None:
        m = _from_scores(attack, fpr) if m is None or not m.get("below_resolution") else None
    lo = as_finite((m or {}).get("ci_low"))
    hi = as_finite((m or {}).get("ci_high"))
    width = hi - lo if lo is not None and hi is not None else None
    few = n_non is not None and n_non * fpr < MIN_FALSE_POSITIVES
    value = as_finite((m or {}).get("value"))
    if value is None and not few and n_non is None:
        out["text"] = "not measured"
        return out
    if few or value is None or width is None or width > MAX_WIDTH:
        need = needed_nonmembers(fpr, n_non, width)
        out["needs"] = need
        out["text"] = f"not resolvable at this n (needs about {need:,} non-members)"
        return out
    out.update(resolvable=True, metric=m, text=pct_ci(m))
    return out


def lead_tpr(attack: dict | None) -> dict[str, Any] | None:
    """The TPR at the lowest FPR of :data:`FPR_LADDER` the sample resolves (``None``:
    none), as ``tpr_view`` plus ``"label"`` (e.g. ``"TPR @ 5% FPR"``)."""
    for fpr in FPR_LADDER:
        v = tpr_view(attack, fpr)
        if v["resolvable"]:
            return {**v, "label": f"TPR @ {_fpr_text(fpr)} FPR"}
    return None


__all__ = [
    "FPR_LADDER",
    "MAX_WIDTH",
    "MIN_FALSE_POSITIVES",
    "lead_tpr",
    "needed_nonmembers",
    "tpr_view",
]
