"""Self-contained HTML report rendered from a results dictionary.

The report reads only the results dictionary (the content of results.json).
All text from the data is escaped by Jinja2's autoescaping; images are
embedded as ``data:image/png;base64,...`` URIs; the CSS is inline and there is
no JavaScript, so the file can be opened offline and mailed around as is.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from privacy_audit.reports import plots
from privacy_audit.reports.formatting import DASH, as_finite, as_float, ci, num, small
from privacy_audit.reports.resolution import lead_tpr, tpr_view
from privacy_audit.reports.split_check_view import split_view
from privacy_audit.reports.verdict import (
    AT_CEILING,
    EPS_LB,
    LEVELS,
    TPR_1,
    audit_evidence,
    audit_exceeds,
    audit_violated,
    audited_claim,
    check_claim,
    compare_runs,
    epsilon_audit,
    epsilon_audit_bounds,
    epsilon_audit_entries,
    epsilon_audit_tradeoff,
    epsilon_headline,
    metric,
    ok_attacks,
    run_name,
    strongest_attack,
    verdict_for_run,
)
from privacy_audit.stats.metrics import REPORTED_FPRS

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "report.html.j2"
SUPPORTED_SCHEMA = 1
REPORT_FILENAME = "report.html"

#: Metric columns of the per-run attack tables, in display order.
METRIC_COLUMNS = (
    ("auc", "AUC"),
    ("tpr_at_fpr_0.001", "TPR @ 0.1% FPR"),
    (TPR_1, "TPR @ 1% FPR"),
    ("advantage", "Advantage"),
    ("balanced_accuracy", "Balanced acc."),
)
# sample sizes are shown in their own column, not as extra metrics
_KNOWN_METRICS = (
    {k for k, _ in METRIC_COLUMNS}
    | {EPS_LB, "n_members", "n_nonmembers"}
    # the FPR ladder the summary leads with when 1% is not resolvable
    | {f"tpr_at_fpr_{x:g}" for x in REPORTED_FPRS}
    # user-resampled intervals: shown as one line (:func:`_attack_rows`)
    | {"unit", "resampled", "n_member_users", "n_nonmember_users"}
)
_TOP_EXPOSED = 10
_MAX_ID_CHARS = 120

_UNIT_TEXT = {"example": "example", "sequence": "sequence", "token": "token", "user": "user"}
_NOTION_TEXT = {"central-dp": "central DP", "local-dp": "local DP", "metric-dp": "metric DP"}
_STATUS_TEXT = {"ok": "ok", "not_applicable": "not applicable", "error": "error"}
_CLAIM_BADGE = {
    "violated": ("VIOLATED", "violated"),
    "not-comparable": ("exceeded, not comparable", "warn"),
    "untestable": ("not testable at this n", "muted"),
    "consistent": ("not contradicted", "ok"),
    "unmeasured": ("not checked", "muted"),
}

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


@functools.lru_cache(maxsize=1)
def jinja_environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=select_autoescape(
            enabled_extensions=("html", "htm", "xml", "j2"),
            default_for_string=True,
            default=True,
        ),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _text(value: Any, default: str = DASH) -> str:
    if value is None:
        return default
    return str(value)


def _ci_or_value(m: Any) -> str:
    return ci(m) if isinstance(m, dict) else num(m)


# --------------------------------------------------------------------------- #
# View model
# --------------------------------------------------------------------------- #
def _utility(run: dict) -> str:
    u = run.get("utility")
    if not isinstance(u, dict) or as_float(u.get("value")) is None:
        return DASH
    text = f"{_text(u.get('metric'), 'utility')} {ci(u)}"
    if u.get("n") is not None:
        text += f" (n = {num(u.get('n'))})"
    return text


def _claim_view(run: dict, attack: dict | None) -> dict:
    claim = run.get("claim") if isinstance(run.get("claim"), dict) else {}
    notion = claim.get("notion")
    formal = notion not in (None, "none")
    eps = as_float(claim.get("epsilon"))
    checked = check_claim(run, attack)
    view: dict[str, Any] = {
        "formal": formal,
        "main": DASH,
        "detail": "no formal claim",
        "proven": None,
        "accountant": _text(claim.get("accountant"), ""),
        "note": _text(claim.get("note"), ""),
        "badge": None,
        "badge_class": "",
        "check": checked["text"],
    }
    if not formal:
        return view
    main = [f"ε = {num(eps)}" if eps is not None else "ε not stated"]
    if claim.get("delta") is not None:
        main.append(f"δ = {small(claim.get('delta'))}")
    view["main"] = ", ".join(main)
    detail = [_NOTION_TEXT.get(notion, str(notion))]
    if claim.get("unit"):
        detail.append(f"per {_UNIT_TEXT.get(claim.get('unit'), str(claim.get('unit')))}")
    view["detail"] = " · ".join(detail)
    view["proven"] = bool(claim.get("proven"))
    status = checked["status"]
    if status in _CLAIM_BADGE:
        view["badge"], view["badge_class"] = _CLAIM_BADGE[status]
    return view


def _leakage_rows(run: dict, aggregate_only: bool) -> list[dict]:
    """Leakage beyond membership: one row per attack, headline metric first."""
    rows = []
    for rec in run.get("leakage") or []:
        if not isinstance(rec, dict):
            continue
        status = _text(rec.get("status"), "error")
        row: dict[str, Any] = {
            "name": _text(rec.get("attack")),
            "kind": _text(rec.get("kind")),
            "description": _text(rec.get("description"), ""),
            "surfaces": ", ".join(str(x) for x in rec.get("surfaces") or []) or DASH,
            "status": status,
            "reason": _text(rec.get("reason"), ""),
            "headline": DASH,
            "headline_name": DASH,
            "others": [],
            "samples": [],
            "finding": "",
        }
        metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
        head = rec.get("headline")
        if status == "ok" and head in metrics:
            row["headline_name"] = _text(head)
            row["headline"] = _metric_text(metrics[head])
            others = [k for k in metrics if k != head]
            details = rec.get("details") if isinstance(rec.get("details"), dict) else {}
            if isinstance(details.get("finding"), str):  # a plain-language statement
                row["finding"] = details["finding"]
            if rec.get("attack") == "extraction-risk" and "@" in str(head):
                # dozens of metrics (per n, per level, per group): the headline's n here,
                # the full table in the extraction-risk section
                at = "@" + str(head).rsplit("@", 1)[1]
                short = [k for k in others if k.endswith(at) and "median" in k]
                short += [k for k in others if k.endswith(at) and "frac_risk>0.01" in k]
                row["finding"] = ""
                row["others"] = [f"{k}: {_metric_text(metrics[k])}" for k in short]
                row["others"].append(
                    f"{len(others) - len(short)} more in results.json and in the "
                    "extraction-risk section below"
                )
            else:
                row["others"] = [f"{k}: {_metric_text(metrics[k])}" for k in others]
        if not aggregate_only:
            for smp in (rec.get("samples") or [])[:5]:
                if isinstance(smp, dict):
                    row["samples"].append(" · ".join(f"{k}: {_text(v)}" for k, v in smp.items()))
        rows.append(row)
    return rows


def _metric_text(m: Any) -> str:
    if not isinstance(m, dict):
        return _text(m)
    text = ci(m) if m.get("ci_low") is not None else num(m.get("value"))
    if m.get("n") is not None:
        text += f" (n = {num(m.get('n'))})"
    return text


def _claim_details(run: dict) -> list[str]:
    claim = run.get("claim") if isinstance(run.get("claim"), dict) else {}
    details = claim.get("details") if isinstance(claim.get("details"), dict) else {}
    return [f"{k}: {_kv(v)}" for k, v in details.items()]


def _eps_lb_view(attack: dict | None) -> dict:
    lb = metric(attack, EPS_LB)
    if not lb or as_float(lb.get("value")) is None:
        return {"value": DASH, "detail": ""}
    detail = []
    if lb.get("delta") is not None:
        detail.append(f"δ = {small(lb.get('delta'))}")
    conf = as_float(lb.get("confidence"))
    if conf is not None:
        detail.append(f"{100 * conf:g}% conf.")
    if lb.get("ceiling") is not None:
        detail.append(f"ceiling {num(lb.get('ceiling'))}")
    return {"value": f"≥ {num(lb.get('value'))}", "detail": " · ".join(detail)}


def _summary_eps_view(run: dict, attack: dict | None) -> dict:
    """The Summary table's ε cell: the run's one headline bound
    (:func:`~privacy_audit.reports.verdict.epsilon_headline`, the verdict's number) with
    its source, and beside it, labelled, any larger bound another audit gave, so a
    VIOLATED claim badge always sits beside the bound that violates it."""
    head = epsilon_headline(run)
    if head is None:
        return {"value": DASH, "detail": "", "larger": [], "why": ""}
    detail = [head["source"]]
    if head["at_ceiling"]:
        detail.append(AT_CEILING)
    larger = [
        {
            "value": f"≥ {num(b['value'])}",
            "source": b["source"],
            "note": AT_CEILING if b["at_ceiling"] else "",
        }
        for b in head["larger"]
    ]
    return {
        "value": f"≥ {num(head['value'])}",
        "detail": " · ".join(detail),
        "larger": larger,
        "why": "headline: " + head["why"],
    }


def _eps_lb_full(attack: dict) -> str:
    lb = metric(attack, EPS_LB)
    if not lb or as_float(lb.get("value")) is None:
        return ""
    parts = []
    if lb.get("point_estimate") is not None:
        parts.append(f"point estimate, not a bound: {num(lb.get('point_estimate'))}")
    if lb.get("method"):
        parts.append(f"{lb.get('method')} bounds")
    if lb.get("threshold"):
        parts.append(f"threshold: {lb.get('threshold')}")
    return " · ".join(str(p) for p in parts)


def _verdict(run: dict) -> dict:
    given = run.get("verdict")
    if (
        isinstance(given, dict)
        and isinstance(given.get("level"), str)
        and isinstance(given.get("text"), str)
    ):
        text = given["text"]
        if audit_violated(run) and "VIOLATED" not in text:
            # A stored verdict computed before the ε audit: add its outcome.
            text += " " + check_claim(run)["text"]
        return {"level": given["level"], "text": text}
    v = verdict_for_run(run)
    return {"level": v["level"], "text": v["text"]}


def _level_class(level: str) -> str:
    return level if level in LEVELS else "unknown"


_TPR_KEYS = {"tpr_at_fpr_0.001": 0.001, TPR_1: 0.01}


def _metric_cell(attack: dict, key: str, m: Any) -> str:
    """One cell of the attack table: a TPR the sample cannot resolve says so
    (reports/resolution.py); results.json keeps the raw numbers."""
    if key in _TPR_KEYS:
        v = tpr_view(attack, _TPR_KEYS[key])
        if not v["resolvable"]:
            return v["text"]
    return ci(m)


def _summary_split(run: dict) -> dict | None:
    """The summary's split-check cell (blind AUC, interval, status), or ``None`` for a run
    without a split check."""
    view = split_view(run, True)
    if view is None:
        return None
    label = {"shifted": "split shifted", "ok": "no shift found"}.get(view["status"], "not measured")
    cls = {"shifted": "split-shifted", "ok": "low"}.get(view["status"], "not-measured")
    n = ""
    if view.get("n_members") is not None:
        n = f"{view['level']} interval; {view['n_members']} members, {view['n_nonmembers']} non-members"
    return {"auc": view["blind_auc"], "label": label, "class": cls, "n": n}


def _summary_tpr(best: dict | None) -> dict:
    """The summary's TPR cell: TPR at 1% FPR where the sample resolves it; otherwise
    why not, led by the lowest FPR it does resolve."""
    if best is None:
        return {"lead": DASH, "label": "", "note": ""}
    one = tpr_view(best, 0.01)
    if one["resolvable"]:
        return {"lead": ci(one["metric"]), "label": "", "note": ""}
    lead = lead_tpr(best)
    note = f"TPR @ 1% FPR: {one['text']}"
    if lead is None:
        return {"lead": DASH, "label": "no FPR up to 20% is resolvable at this n", "note": note}
    return {"lead": lead["text"], "label": lead["label"], "note": note}


def _attack_rows(run: dict, best: dict | None) -> list[dict]:
    rows = []
    for a in run.get("attacks") or []:
        if not isinstance(a, dict):
            continue
        status = _text(a.get("status"), "unknown")
        surfaces = a.get("surfaces")
        if isinstance(surfaces, list | tuple):
            surfaces_txt = ", ".join(str(s) for s in surfaces)
        else:
            surfaces_txt = _text(surfaces, "")
        metrics = a.get("metrics") if isinstance(a.get("metrics"), dict) else {}
        extras = [f"{k}: {_ci_or_value(v)}" for k, v in metrics.items() if k not in _KNOWN_METRICS]
        if metrics.get("resampled") == "users":
            extras.insert(
                0,
                f"intervals resample users ({num(metrics.get('n_member_users'))} member / "
                f"{num(metrics.get('n_nonmember_users'))} non-member users)",
            )
        lb = _eps_lb_view(a)
        rows.append(
            {
                "name": _text(a.get("attack"), "unnamed"),
                "description": _text(a.get("description"), ""),
                "surfaces": surfaces_txt,
                "status": status,
                "status_label": _STATUS_TEXT.get(status, status),
                "status_class": status if status in _STATUS_TEXT else "error",
                "reason": _text(a.get("reason"), ""),
                "n": f"{num(a.get('n_members'))} / {num(a.get('n_nonmembers'))}",
                "cells": [_metric_cell(a, k, metrics.get(k)) for k, _ in METRIC_COLUMNS],
                "eps_lb": lb["value"],
                "eps_lb_detail": lb["detail"],
                "eps_lb_more": _eps_lb_full(a) if status == "ok" else "",
                "extras": extras,
                "strongest": a is best,
            }
        )
    return rows


#: An attack "flags" an example when at most this fraction of non-members score as high.
FLAG_FPR = 0.05
_MAX_TEXT_CHARS = 400


def _flagging_attacks(run: dict) -> dict[str, list[str]]:
    """Example id -> the ok attacks under which at most FLAG_FPR of the non-members score
    at least as high as that example."""
    out: dict[str, list[str]] = {}
    for att in run.get("attacks") or []:
        ex = att.get("examples") if isinstance(att, dict) and att.get("status") == "ok" else None
        if not isinstance(ex, dict):
            continue
        try:
            s = np.asarray([np.nan if v is None else v for v in ex["scores"]], dtype=float)
            m = np.asarray(ex["members"], dtype=float) > 0.5
            ids = [str(i) for i in ex["ids"]]
        except (KeyError, TypeError, ValueError):
            continue
        non = np.sort(s[~m & ~np.isnan(s)])
        if non.size == 0 or len(ids) != s.size:
            continue
        fpr = (non.size - np.searchsorted(non, s, side="left")) / non.size
        for i in np.flatnonzero(m & ~np.isnan(s) & (fpr <= FLAG_FPR)):
            out.setdefault(ids[i], []).append(str(att.get("attack")))
    return out


def _exposed_examples(attack: dict | None, run: dict | None = None) -> list[dict]:
    """Highest-scoring members of ``attack`` with their per-example FPR, their text (when
    the run carries ``example_texts``: never in aggregate-only runs) and the attacks that
    flag them (see :data:`FLAG_FPR`)."""
    ex = attack.get("examples") if isinstance(attack, dict) else None
    if not isinstance(ex, dict):
        return []
    ids, scores, members = ex.get("ids"), ex.get("scores"), ex.get("members")
    if not (isinstance(ids, list) and isinstance(scores, list) and isinstance(members, list)):
        return []
    if not (len(ids) == len(scores) == len(members)) or not ids:
        return []
    try:
        s = np.asarray([np.nan if v is None else v for v in scores], dtype=float)
        m = np.asarray(members, dtype=float) > 0.5
    except (TypeError, ValueError):
        return []
    valid = ~np.isnan(s)
    non = np.sort(s[valid & ~m])
    if non.size == 0:
        return []
    texts = (run or {}).get("example_texts")
    texts = texts if isinstance(texts, dict) else {}
    flags = _flagging_attacks(run) if run else {}
    cand = np.flatnonzero(valid & m)
    top = cand[np.argsort(-s[cand], kind="mergesort")][:_TOP_EXPOSED]
    rows = []
    for i in top:
        # Fraction of non-members that score at least as high as this member.
        fpr = (non.size - np.searchsorted(non, s[i], side="left")) / non.size
        ident = str(ids[i])
        if len(ident) > _MAX_ID_CHARS:
            ident = ident[: _MAX_ID_CHARS - 1] + "\u2026"
        text = texts.get(str(ids[i]))
        if isinstance(text, str) and len(text) > _MAX_TEXT_CHARS:
            text = text[: _MAX_TEXT_CHARS - 1] + "\u2026"
        rows.append(
            {
                "id": ident,
                "score": num(float(s[i])),
                "fpr": num(float(fpr)),
                "text": text if isinstance(text, str) else None,
                "flagged_by": ", ".join(flags.get(str(ids[i]), [])) or DASH,
            }
        )
    return rows


def _extraction_view(run: dict) -> dict | None:
    """The ``extraction-risk`` record as a table per n and a risk-against-n plot."""
    rec = next(
        (
            r
            for r in run.get("leakage") or []
            if isinstance(r, dict)
            and r.get("attack") == "extraction-risk"
            and r.get("status") == "ok"
        ),
        None,
    )
    if rec is None:
        return None
    details = rec.get("details") if isinstance(rec.get("details"), dict) else {}
    metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
    levels = [x for x in details.get("risk_levels") or [] if isinstance(x, (int, float))]
    rows = []
    for n in details.get("queries") or []:
        cells = []
        for g in ("member", "nonmember"):
            cells.append(_metric_text(metrics.get(f"{g}_median_risk@{n}")))
            for lv in levels:
                m = metrics.get(f"{g}_frac_risk>{lv:g}@{n}")
                cells.append(_metric_text(m) if isinstance(m, dict) else DASH)
        rows.append(
            {
                "n": _text(n),
                "cells": cells,
                "max": num(as_float((metrics.get(f"max_member_risk@{n}") or {}).get("value"))),
            }
        )
    dec = details.get("decoding") if isinstance(details.get("decoding"), dict) else {}
    eligible = details.get("eligible") if isinstance(details.get("eligible"), dict) else {}
    short = details.get("too_short") if isinstance(details.get("too_short"), dict) else {}
    return {
        "settings": f"temperature {_text(dec.get('temperature'))}, top-k {_text(dec.get('top_k'))}, "
        f"top-p {_text(dec.get('top_p'))}; prefix {_text(details.get('prefix_tokens'))} tokens, "
        f"suffix {_text(details.get('suffix_tokens'))} tokens",
        "levels": [f"{100 * lv:g}%" for lv in levels],
        "rows": rows,
        "eligible": f"{_text(eligible.get('member'))} members and {_text(eligible.get('nonmember'))} "
        f"non-members scored; {_text(short.get('member'))} / {_text(short.get('nonmember'))} too "
        "short for prefix + suffix (not counted)",
        "finding": _text(details.get("finding"), ""),
        "plot": data_uri(plots.extraction_risk_curve(rec)),
    }


def _shade(value: float | None, reference: bool) -> str:
    """Background of one token in the leakage map (built from numbers only, never data):
    red for tokens the target predicts far better than the reference (or, without one,
    for tokens it predicts with high probability), blue for the opposite."""
    if value is None or not math.isfinite(value):
        return "background:#eceff3"
    if reference:
        a = max(-1.0, min(1.0, value / 4.0))  # 4 nats = a 55x likelihood ratio: full colour
    else:
        a = math.exp(min(0.0, value))  # the target probability of the token
    if a >= 0:
        return f"background:rgba(214,39,40,{0.08 + 0.72 * a:.2f})"
    return f"background:rgba(31,119,180,{0.08 + 0.5 * -a:.2f})"


def _leakage_map_view(run: dict, aggregate_only: bool) -> dict | None:
    """The per-record leakage table with its per-token map (never in aggregate-only runs)."""
    lm = run.get("leakage_map")
    if aggregate_only or not isinstance(lm, dict):
        return None
    reference = bool(lm.get("reference"))
    queries = [q for q in lm.get("queries") or [] if isinstance(q, int)]
    rows = []
    for rec in lm.get("records") or []:
        if not isinstance(rec, dict):
            continue
        tokens = rec.get("tokens") if isinstance(rec.get("tokens"), list) else []
        values = rec.get("values") if isinstance(rec.get("values"), list) else []
        risk = rec.get("extraction_risk") if isinstance(rec.get("extraction_risk"), dict) else {}
        ident = _text(rec.get("id"))
        if len(ident) > _MAX_ID_CHARS:
            ident = ident[: _MAX_ID_CHARS - 1] + "\u2026"
        rows.append(
            {
                "id": ident,
                "score": num(as_float(rec.get("score"))),
                "risks": [
                    num(as_float(risk.get(str(q)))) if risk.get(str(q)) is not None else DASH
                    for q in queries
                ],
                "tokens": [
                    {
                        "text": _text(t, ""),
                        "style": _shade(as_float(v), reference),
                        "title": num(as_float(v)),
                    }
                    for t, v in zip(tokens, values, strict=False)
                ],
            }
        )
    return {
        "ranked_by": _text(lm.get("ranked_by")),
        "shade": _text(lm.get("shade")),
        "legend": "red: the target gives the token up to 4 nats more log-probability than the "
        "reference; blue: less"
        if reference
        else "red: probability near 1 under the target; pale: improbable",
        "queries": [f"risk@{q}" for q in queries],
        "rows": rows,
    }


# --------------------------------------------------------------------------- #
# Epsilon audit view
# --------------------------------------------------------------------------- #
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
    status = _text(audit.get("status"), "ok")
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
    method = [_text(audit.get("method"), "")] if audit.get("method") else []
    if audit.get("delta") is not None:
        method.append(f"δ = {small(audit.get('delta'))}")
    if audit.get("source"):  # white-box canaries: recorded in the run, or simulated beside it
        method.append(f"signals {_text(audit.get('source'), '')}")
    return {
        "kind": "audit",
        "name": _text(audit.get("name"), "unnamed audit"),
        "description": _text(audit.get("description"), ""),
        "ok": status == "ok",
        "reason": _text(audit.get("reason"), "no reason given") if status != "ok" else "",
        "bound": f"ε ≥ {num(lb)}" if lb is not None else DASH,
        "bound_detail": " · ".join(bound_detail),
        "method": " · ".join(method) or DASH,
        "ceiling": num(ceiling) if ceiling is not None else DASH,
        "threat_model": _text(audit.get("threat_model"), DASH),
        "cost": _text(audit.get("cost"), ""),
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
        "name": f"ROC trade-off test ({_text(tr.get('attack'), 'strongest attack')})",
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


def _epsilon_audit_view(run: dict, idx: int, name: str) -> dict | None:
    """Rows, badges and evidence of the run's ``epsilon_audit`` (or ``None``)."""
    ea = epsilon_audit(run)
    if ea is None:
        return None
    eps, delta = audited_claim(run)
    claim = run.get("claim") if isinstance(run.get("claim"), dict) else {}
    run_status = ea.get("status")
    rows = [audit_row(a, run_status, eps) for a in epsilon_audit_entries(run)]
    tr = epsilon_audit_tradeoff(run)
    if tr is not None:
        rows.append(_tradeoff_row(tr, run_status, eps, delta))
    if run_status in _AUDIT_RUN_BADGE:
        badge, badge_class = _AUDIT_RUN_BADGE[run_status]
    else:
        badge, badge_class = _text(run_status, "unknown"), "muted"
    if eps is None:
        claim_main = "no claim"
    else:
        claim_main = f"ε = {num(eps)}"
        if delta is not None:
            claim_main += f" (δ = {small(delta)})"
    has_claim = eps is not None
    violated = run_status == "violated"
    histograms = []
    for a in epsilon_audit_entries(run):
        ex = a.get("examples")
        if a.get("status", "ok") == "ok" and isinstance(ex, dict) and ex.get("scores"):
            title = f"{name} — {_text(a.get('name'), 'audit')}: scores, in vs out"
            histograms.append({"title": title, "src": data_uri(plots.canary_histogram(a, title))})
    return {
        "anchor": f"run-{idx}",
        "name": name,
        "claim_main": claim_main,
        "has_claim": has_claim,
        "proven": bool(claim.get("proven")) if has_claim else None,
        "comparable": ea.get("comparable"),
        "badge": badge,
        "badge_class": badge_class,
        "violated": violated,
        "evidence": audit_evidence(run),
        "diagnosis": ea.get("diagnosis") if violated else None,
        "rows": rows,
        "tradeoff_plot": data_uri(plots.roc_vs_tradeoff(run)) if tr is not None else None,
        "tradeoff_attack": _text(tr.get("attack"), "strongest") if tr is not None else None,
        "histograms": histograms,
    }


def _scoring_view(run: dict) -> str:
    """One line on how a model audited as it is was scored: its encoding, how the first
    token is handled, the cut length and how many texts it cut ("" for other runs)."""
    target = run.get("target") if isinstance(run.get("target"), dict) else {}
    enc = target.get("encoding") if isinstance(target.get("encoding"), dict) else None
    if enc is None:
        return ""
    parts = [f"scored as {_text(enc.get('encoding'))}"]
    if enc.get("first_token"):
        parts.append(f"first token {_text(enc.get('first_token'))}")
    if enc.get("suffix_tokens"):
        parts.append("ends with " + " ".join(_text(t) for t in enc["suffix_tokens"]))
    n_cut, n = target.get("texts_cut_to_max_length"), target.get("texts_scored")
    cut = f"{_text(n_cut)} of {_text(n)} texts" if n is not None else f"{_text(n_cut)} texts"
    parts.append(
        f"{cut} cut to max_length = {_text(enc.get('max_length'))} tokens "
        f"({_text(enc.get('max_length_source'), 'target.max_length')})"
    )
    if target.get("texts_without_scored_token"):
        parts.append(
            f"{_text(target['texts_without_scored_token'])} texts left out (no token predicted)"
        )
    return " · ".join(parts)


def _kv(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, str):
        return value
    return num(value)


def unit_paragraphs(text: str) -> list[str]:
    import re

    parts = re.split(r" (?=Per (?:text: |user \())", text)
    return [p for p in parts if p]


def user_view(run: dict) -> dict | None:
    from privacy_audit.reports.user_verdict import user_view as view

    return view(run)


def _users_view(run: dict, aggregate_only: bool) -> dict | None:
    """The per-user section: counts, the per-user verdict, the user-level attacks (same
    columns as the per-text ones), fresh-text coverage, per-user p-values, the users most
    at risk and what a per-example claim implies for a person."""
    from privacy_audit.reports import users_view as uv

    users = run.get("users")
    if not isinstance(users, dict) or not isinstance(users.get("attacks"), list):
        return None
    attacks = [a for a in users["attacks"] if isinstance(a, dict)]
    best = next((a for a in attacks if a.get("attack") == users.get("strongest_attack")), None)
    verdict = users.get("verdict") if isinstance(users.get("verdict"), dict) else {}
    found = [] if aggregate_only else uv.found_users(users)
    return {
        "counts": uv.counts_lines(users),
        "level": _text(verdict.get("level"), "unknown"),
        "level_class": _level_class(str(verdict.get("level"))),
        "verdict": _text(verdict.get("text"), ""),
        "attacks": _attack_rows({"attacks": attacks}, best),
        "fresh": uv.fresh_lines(users),
        "dataset_inference": uv.dataset_inference_line(users),
        "found": [
            {"user": _text(u.get("user")), "p": num(u.get("p")), "texts": num(u.get("texts"))}
            for u in found[:20]
        ],
        "exposed": [
            {
                "user": _text(r.get("user")),
                "score": num(r.get("score")),
                "texts": num(r.get("texts")),
            }
            for r in users.get("most_exposed") or []
        ],
        "group_privacy": uv.group_privacy_line(users),
    }


def build_context(results: dict) -> dict:
    """Everything the template needs, as display strings (no raw numbers)."""
    if not isinstance(results, dict):
        raise TypeError("results must be a dict (the content of results.json)")
    runs = [r for r in results.get("runs") or [] if isinstance(r, dict)]
    aggregate_only = bool(results.get("aggregate_only", False))
    tool = results.get("tool") if isinstance(results.get("tool"), dict) else {}
    env = results.get("environment") if isinstance(results.get("environment"), dict) else {}
    warnings = []
    schema = results.get("schema_version")
    if schema != SUPPORTED_SCHEMA:
        warnings.append(
            f"This report understands results schema version {SUPPORTED_SCHEMA}; "
            f"the input declares {_text(schema, 'no version')}. Some fields may be "
            "missing or misread."
        )
    if not runs:
        warnings.append("The results contain no runs.")
    for run in runs:
        dup = run.get("exact_duplicates")
        n_dup = dup.get("removed_nonmembers") if isinstance(dup, dict) else None
        if isinstance(n_dup, int) and not isinstance(n_dup, bool) and n_dup > 0:
            before = dup.get("nonmembers_before")
            of = f" of {before}" if isinstance(before, int) else ""
            warnings.append(
                f"{_text(run.get('name'), 'A run')}: {n_dup}{of} non-member text(s) were exact "
                "copies of member texts and were removed before the attacks ran (a text the "
                "model was trained on is not a non-member)."
            )
    # Weights the checkpoint did not hold (target.allow_uninitialized = true): red banner
    dangers = []
    for run in runs:
        missing = run.get("uninitialized_weights")
        if isinstance(missing, list) and missing:
            names = ", ".join(_text(m, "?") for m in missing[:8])
            more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
            dangers.append(
                f"UNTRAINED WEIGHTS in {_text(run.get('name'), 'a run')}: {names}{more} were "
                "not in the checkpoint and were initialised at random. This audit measures a "
                "partly random model, not the model you trained; its numbers say nothing "
                "about the trained model's privacy."
            )

    summary, verdicts, run_views, eps_views = [], [], [], []
    for idx, run in enumerate(runs):
        best = strongest_attack(run)
        verdict = _verdict(run)
        name = run_name(run)
        claim = _claim_view(run, best)
        lb = _summary_eps_view(run, best)
        if verdict["level"] == "split-shifted" and not epsilon_audit_bounds(run):
            # an attack's bound then measures the texts; canary ε audits stay valid
            lb = {
                "value": DASH,
                "detail": "not evidence about the model: the split is shifted",
                "larger": [],
                "why": "",
            }
        summary.append(
            {
                "anchor": f"run-{idx}",
                "name": name,
                "defense": _text(run.get("defense")),
                "utility": _utility(run),
                "claim": claim,
                "attack": _text(best.get("attack")) if best else DASH,
                "auc": ci(metric(best, "auc")),
                "tpr1": ci(metric(best, TPR_1)),
                "tpr": _summary_tpr(best),
                "split": _summary_split(run),
                "eps_lb": lb["value"],
                "eps_lb_detail": lb["detail"],
                "eps_lb_larger": lb["larger"],
                "eps_lb_why": lb["why"],
                "level": verdict["level"],
                "level_class": _level_class(verdict["level"]),
                "scoring": _scoring_view(run),
                "unit": None,
            }
        )
        uview = user_view(run)
        if uview is not None:  # the same columns for the user as the unit, named as such
            summary[-1]["unit"] = "unit: one text (per-text attacks; intervals resample users)"
            ubest = strongest_attack(uview)
            uverdict = (run.get("users") or {}).get("verdict") or {}
            ulb = _summary_eps_view(uview, ubest)
            counts = (run.get("users") or {}).get("counts") or {}
            summary.append(
                {
                    **summary[-1],
                    "name": f"{name} — per user",
                    "unit": f"unit: one user ({num((counts.get('members') or {}).get('users'))} "
                    f"member / {num((counts.get('nonmembers') or {}).get('users'))} non-member "
                    "users)",
                    "claim": _claim_view(uview, ubest),
                    "attack": _text(ubest.get("attack")) if ubest else DASH,
                    "auc": ci(metric(ubest, "auc")),
                    "tpr1": ci(metric(ubest, TPR_1)),
                    "tpr": _summary_tpr(ubest),
                    "eps_lb": ulb["value"],
                    "eps_lb_detail": ulb["detail"],
                    "eps_lb_larger": [],
                    "eps_lb_why": "",
                    "level": _text(uverdict.get("level"), "unknown"),
                    "level_class": _level_class(str(uverdict.get("level"))),
                    "scoring": "",
                }
            )
        verdicts.append(
            {
                "anchor": f"run-{idx}",
                "name": name,
                "level": verdict["level"],
                "level_class": _level_class(verdict["level"]),
                "text": verdict["text"],
                # one paragraph per unit (reports/user_verdict.py writes both)
                "paragraphs": unit_paragraphs(verdict["text"]),
            }
        )
        training = run.get("training") if isinstance(run.get("training"), dict) else {}
        histograms = []
        for a in ok_attacks(run):
            title = f"{name} \u2014 {a.get('attack')}: score distributions"
            histograms.append(
                {
                    "title": title,
                    "src": data_uri(plots.score_histogram(a, title)),
                }
            )
        eps_view = _epsilon_audit_view(run, idx, name)
        if eps_view is not None:
            eps_views.append(eps_view)
        run_views.append(
            {
                "anchor": f"run-{idx}",
                "epsilon_audit": eps_view,
                "name": name,
                "defense": _text(run.get("defense")),
                "level": verdict["level"],
                "level_class": _level_class(verdict["level"]),
                "utility": _utility(run),
                "claim": claim,
                "claim_details": _claim_details(run),
                "leakage": _leakage_rows(run, aggregate_only),
                "training": [(str(k), _kv(v)) for k, v in training.items()],
                "attacks": _attack_rows(run, best),
                "roc": data_uri(plots.roc_loglog([run], all_attacks_for=0))
                if len(ok_attacks(run)) > 1
                else None,
                "histograms": histograms,
                "strongest": _text(best.get("attack")) if best else None,
                "exposed": [] if aggregate_only else _exposed_examples(best, run),
                "split": split_view(run, aggregate_only),
                "extraction": _extraction_view(run),
                "leakage_map": _leakage_map_view(run, aggregate_only),
                "users": _users_view(run, aggregate_only),
            }
        )

    comparison = results.get("comparison")
    if isinstance(comparison, dict) and isinstance(comparison.get("text"), str):
        comparison_text = comparison["text"]
    else:
        comparison_text = compare_runs(runs)["text"]
    comparison_lines = [line for line in comparison_text.splitlines() if line.strip()]

    figures = []
    if runs:
        figures = [
            {
                "title": "ROC curves (log-log)",
                "caption": "Strongest attack per run. The left part of the curve "
                "(low false-positive rate) is what matters for privacy: it shows "
                "how many members can be identified with high confidence.",
                "src": data_uri(plots.roc_loglog(runs)),
            },
            {
                "title": "Attack success across runs",
                "caption": "Strongest-attack AUC and TPR at 1% FPR with 95% "
                "confidence intervals; dotted lines mark chance.",
                "src": data_uri(plots.metric_bars(runs)),
            },
            {
                "title": "Privacy / utility trade-off",
                "caption": "Claimed ε on a log axis; runs without a formal "
                "guarantee are placed at \u201c\u221e\u201d. Error bars are 95% CIs.",
                "src": data_uri(plots.privacy_utility(runs)),
            },
        ]

    sweep = results.get("sweep")
    if runs and isinstance(sweep, dict):  # [sweep]: privacy-utility curves across seeds
        from privacy_audit.reports.sweep_plots import sweep_curves

        figures.append(
            {
                "title": "Sweep: privacy-utility curves",
                "caption": "Each point is a defense at one ε, averaged over the seeds "
                f"{', '.join(str(s) for s in sweep.get('seeds', []))}; error bars are "
                "two-sided 95% Student-t intervals across seeds (none for a single seed).",
                "src": data_uri(sweep_curves(sweep)),
            }
        )

    epsilon_section = None
    if eps_views:
        epsilon_section = {
            "runs": eps_views,
            "violated": [v for v in eps_views if v["violated"]],
            "figure": data_uri(plots.claimed_vs_audited(runs)),
        }

    cost = results.get("cost_of_privacy")
    cost_view = None
    if isinstance(cost, dict) and isinstance(cost.get("rows"), list):

        def _x(v):
            return f"{v:.2f}\u00d7" if isinstance(v, (int, float)) and math.isfinite(v) else DASH

        cost_view = {
            "source": _text(cost.get("source")),
            "quick": bool(cost.get("quick")),
            "setup": ", ".join(f"{k}={_kv(v)}" for k, v in (cost.get("setup") or {}).items()),
            "rows": [
                {
                    "vocab": _text(r.get("vocab")),
                    "shape": f"B={_text(r.get('batch_size'))}, T={_text(r.get('seq_len'))}",
                    "cells": [
                        _x(r.get(k))
                        for k in (
                            "phantom_time_x_nonprivate",
                            "explicit_time_x_nonprivate",
                            "opacus_time_x_nonprivate",
                            "explicit_over_phantom_time",
                            "phantom_memory_x_nonprivate",
                            "explicit_memory_x_nonprivate",
                            "opacus_memory_x_nonprivate",
                        )
                    ],
                }
                for r in cost["rows"]
                if isinstance(r, dict)
            ],
        }

    config = results.get("config", {})
    config_json = json.dumps(config, indent=2, ensure_ascii=False, default=str)
    packages = env.get("packages") if isinstance(env.get("packages"), dict) else {}

    return {
        "title": _text(results.get("title"), "Privacy audit"),
        "created": _text(results.get("created")),
        "tool_name": _text(tool.get("name"), "privacy-audit"),
        "tool_version": _text(tool.get("version")),
        "seed": _text(results.get("seed")),
        "schema_version": _text(schema),
        "aggregate_only": aggregate_only,
        "flag_fpr_pct": num(100 * FLAG_FPR),
        "warnings": warnings,
        "dangers": dangers,
        "summary": summary,
        "summary_split": any(row["split"] is not None for row in summary),
        "show_comparison": len(runs) >= 2,
        "verdicts": verdicts,
        "epsilon": epsilon_section,
        "comparison_lines": comparison_lines,
        "metric_headers": [label for _, label in METRIC_COLUMNS],
        "runs": run_views,
        "figures": figures,
        "cost_of_privacy": cost_view,
        "config_json": config_json,
        "timing": timing_view(results.get("timing")),
        "python": _text(env.get("python")),
        "platform": _text(env.get("platform")),
        "packages": sorted((str(k), _text(v)) for k, v in packages.items()),
    }


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #
def render_html(results: dict) -> str:
    """Render the full, self-contained HTML report for a results dict."""
    return render_context(build_context(results))


def render_context(context: dict) -> str:
    """The report from a :func:`build_context` result (which the caller may amend)."""
    template = jinja_environment().get_template(TEMPLATE_NAME)
    return template.render(**context)


def timing_view(timing: Any) -> dict | None:
    """The run's stage times (results.json ``timing``) as table rows, or ``None``."""
    if not isinstance(timing, dict) or not isinstance(timing.get("stages"), list):
        return None
    wall = as_finite(timing.get("wall_seconds"))
    rows = []
    for s in timing["stages"]:
        if not isinstance(s, dict):
            continue
        sec = as_finite(s.get("seconds"))
        if sec is None:
            continue
        share = f"{100 * sec / wall:.1f}%" if wall else DASH
        count = s.get("count")
        rows.append(
            {
                "stage": _text(s.get("stage")),
                "seconds": f"{sec:.2f}",
                "share": share,
                "count": _text(count) if isinstance(count, int) and count > 1 else "",
            }
        )
    other = as_finite(timing.get("unattributed_seconds"))
    return {
        "rows": rows,
        "wall": f"{wall:.2f}" if wall is not None else DASH,
        "other": f"{other:.2f}" if other is not None else DASH,
    }


def write_report(results: dict, out_dir: str | os.PathLike) -> Path:
    """Render and atomically write ``out_dir/report.html``; return its path.

    Rendering happens first, in memory; the file is then written through a sibling
    temporary file and ``os.replace``, so readers never see a half-written report and a
    failed render leaves any previous report untouched.
    """
    from privacy_audit.ground.io import atomic_write_text

    html = render_html(results)
    return atomic_write_text(Path(out_dir) / REPORT_FILENAME, html)
