"""The report's leakage sections beyond membership: one row per leakage attack, the
extraction-risk table and the per-record leakage map (display strings only)."""

from __future__ import annotations

import math
from typing import Any

from privacy_audit.reports import plots
from privacy_audit.reports.formatting import DASH, as_float, ci, data_uri, num, text_or
from privacy_audit.reports.results_record import RunRecord

#: Longest example id shown; longer ones end in "…".
MAX_ID_CHARS = 120


def leakage_rows(run: dict, aggregate_only: bool) -> list[dict]:
    """Leakage beyond membership: one row per attack, headline metric first."""
    rows = []
    for att in RunRecord.of(run).leakage:
        rec = att.raw
        status = text_or(att.status, "error")
        row: dict[str, Any] = {
            "name": text_or(att.name),
            "kind": text_or(rec.get("kind")),
            "description": text_or(rec.get("description"), ""),
            "surfaces": ", ".join(str(x) for x in rec.get("surfaces") or []) or DASH,
            "status": status,
            "reason": text_or(rec.get("reason"), ""),
            "headline": DASH,
            "headline_name": DASH,
            "others": [],
            "samples": [],
            "finding": "",
        }
        metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
        head = rec.get("headline")
        if status == "ok" and head in metrics:
            row["headline_name"] = text_or(head)
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
                    row["samples"].append(" · ".join(f"{k}: {text_or(v)}" for k, v in smp.items()))
        rows.append(row)
    return rows


def _metric_text(m: Any) -> str:
    if not isinstance(m, dict):
        return text_or(m)
    text = ci(m) if m.get("ci_low") is not None else num(m.get("value"))
    if m.get("n") is not None:
        text += f" (n = {num(m.get('n'))})"
    return text


def extraction_view(run: dict) -> dict | None:
    """The ``extraction-risk`` record as a table per n and a risk-against-n plot."""
    rec = next(
        (
            a.raw
            for a in RunRecord.of(run).leakage
            if a.name == "extraction-risk" and a.status == "ok"
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
                "n": text_or(n),
                "cells": cells,
                "max": num(as_float((metrics.get(f"max_member_risk@{n}") or {}).get("value"))),
            }
        )
    dec = details.get("decoding") if isinstance(details.get("decoding"), dict) else {}
    eligible = details.get("eligible") if isinstance(details.get("eligible"), dict) else {}
    short = details.get("too_short") if isinstance(details.get("too_short"), dict) else {}
    return {
        "settings": f"temperature {text_or(dec.get('temperature'))}, top-k {text_or(dec.get('top_k'))}, "
        f"top-p {text_or(dec.get('top_p'))}; prefix {text_or(details.get('prefix_tokens'))} tokens, "
        f"suffix {text_or(details.get('suffix_tokens'))} tokens",
        "levels": [f"{100 * lv:g}%" for lv in levels],
        "rows": rows,
        "eligible": f"{text_or(eligible.get('member'))} members and {text_or(eligible.get('nonmember'))} "
        f"non-members scored; {text_or(short.get('member'))} / {text_or(short.get('nonmember'))} too "
        "short for prefix + suffix (not counted)",
        "finding": text_or(details.get("finding"), ""),
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


def leakage_map_view(run: dict, aggregate_only: bool) -> dict | None:
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
        ident = text_or(rec.get("id"))
        if len(ident) > MAX_ID_CHARS:
            ident = ident[: MAX_ID_CHARS - 1] + "\u2026"
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
                        "text": text_or(t, ""),
                        "style": _shade(as_float(v), reference),
                        "title": num(as_float(v)),
                    }
                    for t, v in zip(tokens, values, strict=False)
                ],
            }
        )
    return {
        "ranked_by": text_or(lm.get("ranked_by")),
        "shade": text_or(lm.get("shade")),
        "legend": "red: the target gives the token up to 4 nats more log-probability than the "
        "reference; blue: less"
        if reference
        else "red: probability near 1 under the target; pale: improbable",
        "queries": [f"risk@{q}" for q in queries],
        "rows": rows,
    }
