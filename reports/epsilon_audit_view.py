"""The report's ε-audit section: one row per audit of a run's ``epsilon_audit`` and one
for its ROC trade-off test, with the run's badge and evidence (display strings only)."""

from __future__ import annotations

from typing import Any

from privacy_audit.reports import plots
from privacy_audit.reports.formatting import DASH, as_float, data_uri, num, small, text_or
from privacy_audit.reports.results_record import RunRecord
from privacy_audit.reports.verdict import audit_evidence, audit_exceeds, audited_claim

#: Run-level ε-audit status -> (badge text, tag class).
_AUDIT_RUN_BADGE = {
    "violated": ("VIOLATED", "violated"),
    "consistent": ("consistent", "ok"),
    "untestable": ("untestable", "muted"),
    "no-claim": ("no claim", "muted"),
}
#: Per-audit row status -> (badge text, tag class).
_AUDIT_ROW_BADGE = {
    "violated": ("VIOLATED", "violated"),
    "exceeds": ("exceeds claim", "warn"),
    "consistent": ("consistent", "ok"),
    "untestable": ("untestable", "muted"),
    "no-claim": ("no claim", "muted"),
    "not_applicable": ("not applicable", "muted"),
    "error": ("error", "warn"),
}


def _int_or_text(value: Any) -> str:
    return num(value) if value is not None else DASH


def _audit_samples(audit: dict) -> list[str]:
    lines = []
    if audit.get("n_in") is not None or audit.get("n_out") is not None:
        lines.append(
            f"{_int_or_text(audit.get('n_in'))} in / {_int_or_text(audit.get('n_out'))} out"
        )
    extra = [
        f"{_int_or_text(audit.get(k))} {label}"
        for k, label in (("canaries", "canaries"), ("guesses", "guesses"), ("correct", "correct"))
        if audit.get(k) is not None
    ]
    if extra:
        lines.append(", ".join(extra))
    return lines or [DASH]


def audit_row(audit: dict, run_status: Any, eps: float | None) -> dict:
    status = text_or(audit.get("status"), "ok")
    lb = as_float(audit.get("epsilon_lb"))
    ceiling = as_float(audit.get("ceiling"))
    exceeds = audit_exceeds(audit, eps)
    if status != "ok":
        key = status if status in ("not_applicable", "error") else "error"
    elif run_status == "no-claim" or eps is None:
        key = "no-claim"
    elif exceeds:
        key = "violated" if run_status == "violated" else "exceeds"
    elif ceiling is not None and ceiling <= eps:
        key = "untestable"
    else:
        key = "consistent"
    label, cls = _AUDIT_ROW_BADGE[key]
    if audit.get("asymptotic") and status == "ok":  # shown for comparison, never a verdict
        label, cls = "asymptotic · informational", "muted"
    conf = as_float(audit.get("confidence"))
    bound_detail = []
    if conf is not None:
        bound_detail.append(f"{100 * conf:g}% confidence")
    sampling = as_float(audit.get("sampling_confidence"))
    if sampling is not None and conf is not None and sampling > conf:
        bound_detail.append(
            f"μ bound at {100 * sampling:g}%: the rest of the error budget is held back for "
            "the asymptotic approximation"
        )
    if audit.get("point_estimate") is not None:
        bound_detail.append(f"point estimate, not a bound: {num(audit.get('point_estimate'))}")
    method = [text_or(audit.get("method"), "")] if audit.get("method") else []
    if audit.get("delta") is not None:
        method.append(f"δ = {small(audit.get('delta'))}")
    if audit.get("source"):  # white-box canaries: recorded in the run, or simulated beside it
        method.append(f"signals {text_or(audit.get('source'), '')}")
    return {
        "kind": "audit",
        "name": text_or(audit.get("name"), "unnamed audit"),
        "description": text_or(audit.get("description"), ""),
        "ok": status == "ok",
        "reason": text_or(audit.get("reason"), "no reason given") if status != "ok" else "",
        "bound": f"ε ≥ {num(lb)}" if lb is not None else DASH,
        "bound_detail": " · ".join(bound_detail),
        "method": " · ".join(method) or DASH,
        "ceiling": num(ceiling) if ceiling is not None else DASH,
        "threat_model": text_or(audit.get("threat_model"), DASH),
        "cost": text_or(audit.get("cost"), ""),
        "samples": _audit_samples(audit),
        "status": key,
        "badge": label,
        "badge_class": cls,
        "exceeds": key == "violated",
    }


def _tradeoff_row(tr: dict, run_status: Any, eps: float | None, delta: float | None) -> dict:
    points = [p for p in tr.get("points") or [] if isinstance(p, dict)]
    violated = bool(tr.get("violated"))
    n_thr = tr.get("n_thresholds")
    tested = f"{num(n_thr)} thresholds" if n_thr is not None else "thresholds"
    if violated:
        bound = f"{len(points)} of {tested} above the bound"
    else:
        bound = f"none of {tested} above the bound"
    conf = as_float(tr.get("confidence"))
    if run_status == "no-claim" or eps is None:
        key = "no-claim"
    elif violated:
        key = "violated" if run_status == "violated" else "exceeds"
    else:
        key = "consistent"
    label, cls = _AUDIT_ROW_BADGE[key]
    method = ["ROC vs the (ε, δ) trade-off curve, CI corners"]
    if delta is not None:
        method.append(f"δ = {small(delta)}")
    return {
        "kind": "tradeoff",
        "name": f"ROC trade-off test ({text_or(tr.get('attack'), 'strongest attack')})",
        "description": "strongest membership attack vs the claim's TPR bound",
        "ok": True,
        "reason": "",
        "bound": bound,
        "bound_detail": f"{100 * conf:g}% confidence" if conf is not None else "",
        "method": " · ".join(method),
        "threat_model": "black-box: the strongest membership attack's scores on members and non-members",
        "cost": "no extra training (reuses the attack's scores)",
        "ceiling": DASH,
        "samples": [f"{len(tr['roc']['fpr'])} ROC points"]
        if isinstance(tr.get("roc"), dict) and isinstance(tr["roc"].get("fpr"), list)
        else [DASH],
        "status": key,
        "badge": label,
        "badge_class": cls,
        "exceeds": key == "violated",
    }


def epsilon_audit_view(run: dict, idx: int, name: str) -> dict | None:
    """Rows, badges and evidence of the run's ``epsilon_audit`` (or ``None``)."""
    rec = RunRecord.of(run)
    ea = rec.epsilon_audit
    if ea is None:
        return None
    eps, delta = audited_claim(rec)
    run_status = ea.status
    rows = [audit_row(a, run_status, eps) for a in ea.audits]
    tr = ea.tradeoff
    if tr is not None:
        rows.append(_tradeoff_row(tr, run_status, eps, delta))
    if run_status in _AUDIT_RUN_BADGE:
        badge, badge_class = _AUDIT_RUN_BADGE[run_status]
    else:
        badge, badge_class = text_or(run_status, "unknown"), "muted"
    if eps is None:
        claim_main = "no claim"
    else:
        claim_main = f"ε = {num(eps)}"
        if delta is not None:
            claim_main += f" (δ = {small(delta)})"
    has_claim = eps is not None
    violated = run_status == "violated"
    histograms = []
    for a in ea.audits:
        ex = a.get("examples")
        if a.get("status", "ok") == "ok" and isinstance(ex, dict) and ex.get("scores"):
            title = f"{name} — {text_or(a.get('name'), 'audit')}: scores, in vs out"
            histograms.append({"title": title, "src": data_uri(plots.canary_histogram(a, title))})
    return {
        "anchor": f"run-{idx}",
        "name": name,
        "claim_main": claim_main,
        "has_claim": has_claim,
        "proven": rec.claim.proven if has_claim else None,
        "comparable": ea.raw.get("comparable"),
        "badge": badge,
        "badge_class": badge_class,
        "violated": violated,
        "evidence": audit_evidence(run),
        "diagnosis": ea.raw.get("diagnosis") if violated else None,
        "rows": rows,
        "tradeoff_plot": data_uri(plots.roc_vs_tradeoff(run)) if tr is not None else None,
        "tradeoff_attack": text_or(tr.get("attack"), "strongest") if tr is not None else None,
        "histograms": histograms,
    }
