"""The report's view of a run's split check (``run["split_check"]``, stats/split_check.py):
blind AUC, per-family AUCs, near-duplicates and each attack's AUC beside the blind AUC.
Text from data is escaped by the template (Jinja autoescape); nothing here builds HTML."""

from __future__ import annotations

from typing import Any

from privacy_audit.reports import sentences as S
from privacy_audit.reports.formatting import ci


def _diff(d: dict[str, Any]) -> str:
    try:
        return f"{d['value']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
    except (KeyError, TypeError, ValueError):
        return "—"


def level(conf: Any, default: str = "") -> str:
    """``"98%"`` from a stored confidence (0.98); ``default`` when there is none."""
    ok = isinstance(conf, int | float) and not isinstance(conf, bool) and 0 < conf < 1
    return f"{100 * conf:g}%" if ok else default


def _num(v: Any, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, int | float) and not isinstance(v, bool) else "—"


def split_view(run: dict[str, Any], aggregate_only: bool) -> dict[str, Any] | None:
    """What the template shows for the split check, or ``None`` when the run has none."""
    check = run.get("split_check")
    if not isinstance(check, dict):
        return None
    blind = check.get("blind") if isinstance(check.get("blind"), dict) else {}
    dups = check.get("duplicates") if isinstance(check.get("duplicates"), dict) else {}
    rows = []
    for r in check.get("attacks") or []:
        if not isinstance(r, dict):
            continue
        d = r.get("difference") if isinstance(r.get("difference"), dict) else {}
        above = isinstance(d.get("ci_low"), int | float) and d["ci_low"] > 0
        rows.append(
            {
                "attack": str(r.get("attack")),
                "auc": f"{r['auc']:.3f}" if isinstance(r.get("auc"), float) else "—",
                "blind": f"{r['blind_auc']:.3f}" if isinstance(r.get("blind_auc"), float) else "—",
                "diff": _diff(d),
                "above": above,
                "n": r.get("n"),
            }
        )
    examples = [] if aggregate_only else list(dups.get("examples") or [])
    shifted = check.get("shifted")
    return {
        "status": "shifted" if shifted else ("ok" if shifted is False else "not-measured"),
        "blind_auc": ci(blind.get("auc")) if blind.get("auc") else "—",
        # the split check's own level (98%) and the difference rows' (95%), as stored
        "level": level(check.get("confidence"), "—"),
        "diff_level": level(check.get("difference_confidence"), "95%"),
        "p_value": _num((blind.get("auc") or {}).get("p_value"), ".3g"),
        "detectable_auc": _num(blind.get("detectable_auc"), ".3f"),
        "n_members": blind.get("n_members"),
        "n_nonmembers": blind.get("n_nonmembers"),
        "families": [(k, f"{v:.3f}") for k, v in (blind.get("families") or {}).items()],
        "method": str(check.get("method") or ""),
        "text": str(check.get("text") or check.get("reason") or ""),
        "advice": str(check.get("advice") or ""),
        "dup_pairs": dups.get("pairs", 0),
        "dup_exact": dups.get("exact_pairs", 0),
        "dup_members": dups.get("members_removed", 0),
        "dup_nonmembers": dups.get("nonmembers_removed", 0),
        "dup_criterion": str(dups.get("criterion") or ""),
        "within": within_sentence(dups),
        "examples": [
            {
                "member": str(e.get("member", "")),
                "nonmember": str(e.get("nonmember", "")),
                "jaccard": e.get("jaccard"),
            }
            for e in examples
            if isinstance(e, dict)
        ],
        "attacks": rows,
    }


def within_sentence(dups: dict[str, Any]) -> str:
    """What collapsing duplicates inside each side did, and what it means for a bound."""
    parts = []
    largest = 0
    for side, label in (("members", "member"), ("nonmembers", "non-member")):
        w = dups.get(f"within_{side}") or {}
        if w.get("removed"):
            parts.append(
                S.WITHIN_SIDE(
                    texts=w["texts"],
                    side=label,
                    distinct=w["distinct"],
                    removed=w["removed"],
                    largest=w["largest"],
                )
            )
            if side == "members":
                largest = int(w.get("largest") or 0)
    if not parts:
        return ""
    out = S.WITHIN_COUNTS(sides="; ".join(parts))
    if largest > 1:
        out += S.WITHIN_GROUP(k=largest)
    return out
