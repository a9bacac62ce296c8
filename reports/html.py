"""Self-contained HTML report rendered from a results dictionary.

The report reads only the results dictionary (the content of results.json).
All text from the data is escaped by Jinja2's autoescaping; images are
embedded as ``data:image/png;base64,...`` URIs; the CSS is inline and there is
no JavaScript, so the file can be opened offline and mailed around as is.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from privacy_audit.reports import plots
from privacy_audit.reports.epsilon_audit_view import epsilon_audit_view
from privacy_audit.reports.epsilon_readout import epsilon_audit_bounds
from privacy_audit.reports.formatting import (
    DASH,
    as_finite,
    as_float,
    ci,
    data_uri,
    num,
    small,
    text_or,
)
from privacy_audit.reports.leakage_view import (
    MAX_ID_CHARS,
    extraction_view,
    leakage_map_view,
    leakage_rows,
)
from privacy_audit.reports.resolution import lead_tpr, tpr_view
from privacy_audit.reports.results_record import ResultsRecord, RunRecord
from privacy_audit.reports.run_comparison import compare_runs
from privacy_audit.reports.split_check_view import split_view
from privacy_audit.reports.verdict import (
    AT_CEILING,
    EPS_LB,
    LEVELS,
    TPR_1,
    audit_violated,
    check_claim,
    epsilon_headline,
    metric,
    ok_attacks,
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


def _ci_or_value(m: Any) -> str:
    return ci(m) if isinstance(m, dict) else num(m)


# --------------------------------------------------------------------------- #
# View model
# --------------------------------------------------------------------------- #
def _utility(run: dict) -> str:
    u = RunRecord.of(run).utility
    if u is None or as_float(u.get("value")) is None:
        return DASH
    text = f"{text_or(u.get('metric'), 'utility')} {ci(u)}"
    if u.get("n") is not None:
        text += f" (n = {num(u.get('n'))})"
    return text


def _claim_view(run: dict, attack: dict | None) -> dict:
    claim = RunRecord.of(run).claim
    formal = claim.formal
    eps = as_float(claim.epsilon)
    checked = check_claim(run, attack)
    view: dict[str, Any] = {
        "formal": formal,
        "main": DASH,
        "detail": "no formal claim",
        "proven": None,
        "accountant": text_or(claim.raw.get("accountant"), ""),
        "note": text_or(claim.raw.get("note"), ""),
        "badge": None,
        "badge_class": "",
        "check": checked["text"],
    }
    if not formal:
        return view
    main = [f"ε = {num(eps)}" if eps is not None else "ε not stated"]
    if claim.delta is not None:
        main.append(f"δ = {small(claim.delta)}")
    view["main"] = ", ".join(main)
    detail = [_NOTION_TEXT.get(claim.notion, str(claim.notion))]
    if claim.unit:
        detail.append(f"per {_UNIT_TEXT.get(claim.unit, str(claim.unit))}")
    view["detail"] = " · ".join(detail)
    view["proven"] = claim.proven
    status = checked["status"]
    if status in _CLAIM_BADGE:
        view["badge"], view["badge_class"] = _CLAIM_BADGE[status]
    return view


def _claim_details(run: dict) -> list[str]:
    claim = RunRecord.of(run).claim.raw
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
        status = text_or(a.get("status"), "unknown")
        surfaces = a.get("surfaces")
        if isinstance(surfaces, list | tuple):
            surfaces_txt = ", ".join(str(s) for s in surfaces)
        else:
            surfaces_txt = text_or(surfaces, "")
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
                "name": text_or(a.get("attack"), "unnamed"),
                "description": text_or(a.get("description"), ""),
                "surfaces": surfaces_txt,
                "status": status,
                "status_label": _STATUS_TEXT.get(status, status),
                "status_class": status if status in _STATUS_TEXT else "error",
                "reason": text_or(a.get("reason"), ""),
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
        if len(ident) > MAX_ID_CHARS:
            ident = ident[: MAX_ID_CHARS - 1] + "\u2026"
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


def _scoring_view(run: dict) -> str:
    """One line on how a model audited as it is was scored: its encoding, how the first
    token is handled, the cut length and how many texts it cut ("" for other runs)."""
    target = run.get("target") if isinstance(run.get("target"), dict) else {}
    enc = target.get("encoding") if isinstance(target.get("encoding"), dict) else None
    if enc is None:
        return ""
    parts = [f"scored as {text_or(enc.get('encoding'))}"]
    if enc.get("first_token"):
        parts.append(f"first token {text_or(enc.get('first_token'))}")
    if enc.get("suffix_tokens"):
        parts.append("ends with " + " ".join(text_or(t) for t in enc["suffix_tokens"]))
    n_cut, n = target.get("texts_cut_to_max_length"), target.get("texts_scored")
    cut = f"{text_or(n_cut)} of {text_or(n)} texts" if n is not None else f"{text_or(n_cut)} texts"
    parts.append(
        f"{cut} cut to max_length = {text_or(enc.get('max_length'))} tokens "
        f"({text_or(enc.get('max_length_source'), 'target.max_length')})"
    )
    if target.get("texts_without_scored_token"):
        parts.append(
            f"{text_or(target['texts_without_scored_token'])} texts left out (no token predicted)"
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

    record = RunRecord.of(run).users
    if record is None or not isinstance(record.raw.get("attacks"), list):
        return None
    users = record.raw
    attacks = [a.raw for a in record.attacks]
    best = next((a for a in attacks if a.get("attack") == users.get("strongest_attack")), None)
    verdict = record.verdict if isinstance(record.verdict, dict) else {}
    found = [] if aggregate_only else uv.found_users(users)
    return {
        "counts": uv.counts_lines(users),
        "level": text_or(verdict.get("level"), "unknown"),
        "level_class": _level_class(str(verdict.get("level"))),
        "verdict": text_or(verdict.get("text"), ""),
        "attacks": _attack_rows({"attacks": attacks}, best),
        "fresh": uv.fresh_lines(users),
        "dataset_inference": uv.dataset_inference_line(users),
        "found": [
            {"user": text_or(u.get("user")), "p": num(u.get("p")), "texts": num(u.get("texts"))}
            for u in found[:20]
        ],
        "exposed": [
            {
                "user": text_or(r.get("user")),
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
    record = ResultsRecord.of(results)
    runs = [r.raw for r in record.runs]
    summary, verdicts, run_views, eps_views = [], [], [], []
    for idx, run in enumerate(record.runs):
        verdict = _verdict(run.raw)
        summary += _summary_rows(idx, run, verdict)
        verdicts.append(_verdict_view(idx, run, verdict))
        eps_view = epsilon_audit_view(run.raw, idx, run.display_name)
        if eps_view is not None:
            eps_views.append(eps_view)
        run_views.append(_run_view(idx, run, verdict, eps_view, record.aggregate_only))
    comparison = record.comparison
    if comparison is not None and isinstance(comparison.get("text"), str):
        comparison_text = comparison["text"]
    else:
        comparison_text = compare_runs(runs)["text"]
    epsilon_section = None
    if eps_views:
        epsilon_section = {
            "runs": eps_views,
            "violated": [v for v in eps_views if v["violated"]],
            "figure": data_uri(plots.claimed_vs_audited(runs)),
        }
    env = results.get("environment") if isinstance(results.get("environment"), dict) else {}
    packages = env.get("packages") if isinstance(env.get("packages"), dict) else {}
    return {
        "title": text_or(record.title, "Privacy audit"),
        "created": text_or(record.created),
        "tool_name": text_or(record.tool.get("name"), "privacy-audit"),
        "tool_version": text_or(record.tool.get("version")),
        "seed": text_or(record.seed),
        "schema_version": text_or(record.schema_version),
        "aggregate_only": record.aggregate_only,
        "flag_fpr_pct": num(100 * FLAG_FPR),
        "warnings": _warnings(record),
        "dangers": _dangers(record),
        "summary": summary,
        "summary_split": any(row["split"] is not None for row in summary),
        "show_comparison": len(runs) >= 2,
        "verdicts": verdicts,
        "epsilon": epsilon_section,
        "comparison_lines": [line for line in comparison_text.splitlines() if line.strip()],
        "metric_headers": [label for _, label in METRIC_COLUMNS],
        "runs": run_views,
        "figures": _figures(record),
        "cost_of_privacy": _cost_view(results.get("cost_of_privacy")),
        "config_json": json.dumps(record.config, indent=2, ensure_ascii=False, default=str),
        "timing": timing_view(results.get("timing")),
        "python": text_or(env.get("python")),
        "platform": text_or(env.get("platform")),
        "packages": sorted((str(k), text_or(v)) for k, v in packages.items()),
    }


def _warnings(record: ResultsRecord) -> list[str]:
    """The report's warnings: an unknown schema, no runs, non-members removed as exact
    copies of members."""
    warnings = []
    schema = record.schema_version
    if schema != SUPPORTED_SCHEMA:
        warnings.append(
            f"This report understands results schema version {SUPPORTED_SCHEMA}; "
            f"the input declares {text_or(schema, 'no version')}. Some fields may be "
            "missing or misread."
        )
    if not record.runs:
        warnings.append("The results contain no runs.")
    for run in record.runs:
        dup = run.raw.get("exact_duplicates")
        n_dup = dup.get("removed_nonmembers") if isinstance(dup, dict) else None
        if isinstance(n_dup, int) and not isinstance(n_dup, bool) and n_dup > 0:
            before = dup.get("nonmembers_before")
            of = f" of {before}" if isinstance(before, int) else ""
            warnings.append(
                f"{text_or(run.name, 'A run')}: {n_dup}{of} non-member text(s) were exact "
                "copies of member texts and were removed before the attacks ran (a text the "
                "model was trained on is not a non-member)."
            )
    return warnings


def _dangers(record: ResultsRecord) -> list[str]:
    """Weights the checkpoint did not hold (target.allow_uninitialized = true): red banner."""
    dangers = []
    for run in record.runs:
        missing = run.uninitialized_weights
        if missing:
            names = ", ".join(text_or(m, "?") for m in missing[:8])
            more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
            dangers.append(
                f"UNTRAINED WEIGHTS in {text_or(run.name, 'a run')}: {names}{more} were "
                "not in the checkpoint and were initialised at random. This audit measures a "
                "partly random model, not the model you trained; its numbers say nothing "
                "about the trained model's privacy."
            )
    return dangers


def _summary_rows(idx: int, run: RunRecord, verdict: dict) -> list[dict]:
    """The run's row of the Summary table, and a second row per user when its data names
    users (the same columns for the user as the unit, named as such)."""
    best = strongest_attack(run)
    name = run.display_name
    lb = _summary_eps_view(run.raw, best)
    if verdict["level"] == "split-shifted" and not epsilon_audit_bounds(run):
        # an attack's bound then measures the texts; canary ε audits stay valid
        lb = {
            "value": DASH,
            "detail": "not evidence about the model: the split is shifted",
            "larger": [],
            "why": "",
        }
    row = {
        "anchor": f"run-{idx}",
        "name": name,
        "defense": text_or(run.defense),
        "utility": _utility(run.raw),
        "claim": _claim_view(run.raw, best),
        "attack": text_or(best.get("attack")) if best else DASH,
        "auc": ci(metric(best, "auc")),
        "tpr1": ci(metric(best, TPR_1)),
        "tpr": _summary_tpr(best),
        "split": _summary_split(run.raw),
        "eps_lb": lb["value"],
        "eps_lb_detail": lb["detail"],
        "eps_lb_larger": lb["larger"],
        "eps_lb_why": lb["why"],
        "level": verdict["level"],
        "level_class": _level_class(verdict["level"]),
        "scoring": _scoring_view(run.raw),
        "unit": None,
    }
    uview = user_view(run.raw)
    if uview is None:
        return [row]
    row["unit"] = "unit: one text (per-text attacks; intervals resample users)"
    ubest = strongest_attack(uview)
    users = run.users.raw if run.users is not None else {}
    uverdict = users.get("verdict") or {}
    ulb = _summary_eps_view(uview, ubest)
    counts = users.get("counts") or {}
    per_user = {
        **row,
        "name": f"{name} — per user",
        "unit": f"unit: one user ({num((counts.get('members') or {}).get('users'))} "
        f"member / {num((counts.get('nonmembers') or {}).get('users'))} non-member "
        "users)",
        "claim": _claim_view(uview, ubest),
        "attack": text_or(ubest.get("attack")) if ubest else DASH,
        "auc": ci(metric(ubest, "auc")),
        "tpr1": ci(metric(ubest, TPR_1)),
        "tpr": _summary_tpr(ubest),
        "eps_lb": ulb["value"],
        "eps_lb_detail": ulb["detail"],
        "eps_lb_larger": [],
        "eps_lb_why": "",
        "level": text_or(uverdict.get("level"), "unknown"),
        "level_class": _level_class(str(uverdict.get("level"))),
        "scoring": "",
    }
    return [row, per_user]


def _verdict_view(idx: int, run: RunRecord, verdict: dict) -> dict:
    return {
        "anchor": f"run-{idx}",
        "name": run.display_name,
        "level": verdict["level"],
        "level_class": _level_class(verdict["level"]),
        "text": verdict["text"],
        # one paragraph per unit (reports/user_verdict.py writes both)
        "paragraphs": unit_paragraphs(verdict["text"]),
    }


def _run_view(
    idx: int, run: RunRecord, verdict: dict, eps_view: dict | None, aggregate_only: bool
) -> dict:
    """One run's section: its claim, attack table, plots, exposed examples, split check,
    leakage and users."""
    raw, name = run.raw, run.display_name
    best = strongest_attack(run)
    training = raw.get("training") if isinstance(raw.get("training"), dict) else {}
    measured = ok_attacks(run)
    histograms = []
    for a in measured:
        title = f"{name} \u2014 {a.get('attack')}: score distributions"
        histograms.append({"title": title, "src": data_uri(plots.score_histogram(a, title))})
    return {
        "anchor": f"run-{idx}",
        "epsilon_audit": eps_view,
        "name": name,
        "defense": text_or(run.defense),
        "level": verdict["level"],
        "level_class": _level_class(verdict["level"]),
        "utility": _utility(raw),
        "claim": _claim_view(raw, best),
        "claim_details": _claim_details(raw),
        "leakage": leakage_rows(raw, aggregate_only),
        "training": [(str(k), _kv(v)) for k, v in training.items()],
        "attacks": _attack_rows(raw, best),
        "roc": data_uri(plots.roc_loglog([raw], all_attacks_for=0)) if len(measured) > 1 else None,
        "histograms": histograms,
        "strongest": text_or(best.get("attack")) if best else None,
        "exposed": [] if aggregate_only else _exposed_examples(best, raw),
        "split": split_view(raw, aggregate_only),
        "extraction": extraction_view(raw),
        "leakage_map": leakage_map_view(raw, aggregate_only),
        "users": _users_view(raw, aggregate_only),
    }


def _figures(record: ResultsRecord) -> list[dict]:
    """The report's figures across runs, and the sweep's curves when it has one."""
    runs = [r.raw for r in record.runs]
    if not runs:
        return []
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
    sweep = record.raw.get("sweep")
    if isinstance(sweep, dict):  # [sweep]: privacy-utility curves across seeds
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
    return figures


def _cost_view(cost: Any) -> dict | None:
    """The cost-of-privacy table (time and memory of the DP engines against non-private
    training), when the results carry one."""
    if not (isinstance(cost, dict) and isinstance(cost.get("rows"), list)):
        return None

    def _x(v):
        return f"{v:.2f}\u00d7" if isinstance(v, (int, float)) and math.isfinite(v) else DASH

    return {
        "source": text_or(cost.get("source")),
        "quick": bool(cost.get("quick")),
        "setup": ", ".join(f"{k}={_kv(v)}" for k, v in (cost.get("setup") or {}).items()),
        "rows": [
            {
                "vocab": text_or(r.get("vocab")),
                "shape": f"B={text_or(r.get('batch_size'))}, T={text_or(r.get('seq_len'))}",
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
                "stage": text_or(s.get("stage")),
                "seconds": f"{sec:.2f}",
                "share": share,
                "count": text_or(count) if isinstance(count, int) and count > 1 else "",
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
