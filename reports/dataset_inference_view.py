"""The dataset-inference report (``privacy-audit dataset-inference``): the main report's
template environment and stylesheet, the sets named as the command names them (suspect /
validation), and every row filled, a missing p-value with its reason.

The result object is audit/dataset_inference_command.py's (and attacks/dataset_inference.py's);
every field is read defensively, so a field added, renamed or missing shows as "—" or as
the reason, never as an empty row or a template error.
"""

from __future__ import annotations

import json
import re
from typing import Any

from markupsafe import Markup

from privacy_audit.reports import sentences as S
from privacy_audit.reports.formatting import DASH, as_finite, ci, num
from privacy_audit.reports.split_check_view import level

DI_TEMPLATE = "dataset_inference.html.j2"

_STATUS = {
    "ok": ("tested", "low"),
    "split-shifted": ("split shifted: no p-value", "split-shifted"),
    "not-measured": ("not measured", "not-measured"),
}


def _sets(text: str) -> str:
    """The split check's sentences name members / non-members; here they are the suspect
    and the validation texts (the check's text is the suite's, never data)."""
    text = re.sub(r"\bnon-members\b", "validation texts", text)
    text = re.sub(r"\bnon-member\b", "validation text", text)
    text = re.sub(r"\bmembers\b", "suspect texts", text)
    text = re.sub(r"\bmember\b", "suspect text", text)
    return text


def stylesheet() -> Markup:
    """The main report's ``<style>`` block, read from its template so the two pages never
    drift apart (its optional ε-audit rules rendered off)."""
    from privacy_audit.reports.html import TEMPLATE_DIR, TEMPLATE_NAME, jinja_environment

    src = (TEMPLATE_DIR / TEMPLATE_NAME).read_text(encoding="utf-8")
    m = re.search(r"<style>(.*?)</style>", src, re.S)
    css = jinja_environment().from_string(m.group(1)).render(epsilon=None) if m else ""
    return Markup(css)  # noqa: S704 - the suite's own CSS, no data


def why_no_p(r: dict[str, Any]) -> str:
    status = r.get("status")
    if status == "split-shifted":
        auc = ((r.get("split_check") or {}).get("blind") or {}).get("auc")
        at = S.PAREN_BLIND_AUC(auc=ci(auc)) if isinstance(auc, dict) else ""
        return S.DI_SHIFTED(blind=at)
    if status != "ok":
        return S.DI_NO_TEST(reason=str(r.get("reason") or "").strip() or "no test ran")
    return S.DI_NO_P()


def _pair(d: Any) -> str:
    if isinstance(d, dict) and ("suspect" in d or "validation" in d):
        return f"{d.get('suspect', DASH)} suspect, {d.get('validation', DASH)} validation"
    return DASH


def _user_rows(r: dict[str, Any], tested: bool, why: str) -> list[tuple[str, str]]:
    """The rows of a user-level result (unit, users and texts per side, the set-level
    test, the per-user test and the users found); every field read defensively."""
    nu = r.get("n_users") if isinstance(r.get("n_users"), dict) else {}
    nt = r.get("n_texts") if isinstance(r.get("n_texts"), dict) else {}
    held = r.get("n_test") if isinstance(r.get("n_test"), dict) else {}
    held_t = r.get("n_test_texts") if isinstance(r.get("n_test_texts"), dict) else {}

    def side(users: dict, texts: dict, name: str) -> str:
        return f"{users.get(name, DASH)} {name} users ({texts.get(name, DASH)} texts)"

    rows = [
        (
            "Unit",
            f"users (group column {r.get('group_column') or DASH}): users, not texts, are "
            "split into fit and test parts, and the test compares users",
        ),
        ("Users", f"{side(nu, nt, 'suspect')}, {side(nu, nt, 'validation')}"),
    ]
    if not tested:
        return rows + [("Users tested", f"none ({why.replace('no p-value: ', '', 1)})")]
    rows.append(("Users tested (held out from the fit)", f"{side(held, held_t, 'suspect')}, {side(held, held_t, 'validation')}"))  # fmt: skip
    rows.append(("Set-level test", str(r.get("test") or DASH)))
    users = r.get("users") if isinstance(r.get("users"), list) else []
    found = r.get("found")
    n_found = r.get("n_found")
    if isinstance(found, list):
        names = ", ".join(str(u) for u in found) or "none"
    else:
        names = "user names withheld (aggregate-only)"
    rows.append(
        (
            f"Users found (FDR q = {r.get('fdr', DASH)})",
            f"{n_found if n_found is not None else DASH} of {len(users)}: {names}",
        )
    )
    rows.append(("Per-user test", str(r.get("per_user_test") or DASH)))
    ps = [as_finite(u.get("p_value")) for u in users if isinstance(u, dict)]
    ps = sorted(p for p in ps if p is not None)
    if ps:
        rows.append(
            (
                "Per-user p-values",
                f"smallest {ps[0]:.3g}, median {ps[len(ps) // 2]:.3g}, "
                f"{sum(p <= 0.05 for p in ps)} of {len(ps)} at or below 0.05 (before FDR control)",
            )
        )
    return rows


def _status_label(r: dict[str, Any], status: str) -> tuple[str, str]:
    """The badge's label and style class: the status's own, or whether a test that ran
    found the suspect set trained on (significant) or not."""
    label, cls = _STATUS.get(status, (status, "not-measured"))
    if status == "ok" and r.get("significant") is True:
        label, cls = "trained on (significant)", "high"
    elif status == "ok" and r.get("significant") is False:
        label, cls = "no evidence of training", "low"
    return label, cls


def _result_rows(r: dict[str, Any], status: str, why: str) -> list[tuple[str, str]]:
    """The result table of a ``dataset_inference`` record: p-value, effect size, the
    assumption, the split check, near-duplicates, the texts counted, fitted and tested,
    features, split, models and tokens; the user rows first when users are the unit.
    ``why`` says why there is no p-value (shown where a value is missing)."""
    check = r.get("split_check") if isinstance(r.get("split_check"), dict) else {}
    blind = check.get("blind") if isinstance(check.get("blind"), dict) else {}
    dups = check.get("duplicates") if isinstance(check.get("duplicates"), dict) else {}
    tested = status == "ok"
    by_user = r.get("unit") == "user"
    p = as_finite(r.get("p_value"))
    d = as_finite(r.get("effect_size"))
    alpha = as_finite(r.get("alpha"))
    assumption = r.get("assumption") or (
        "the suspect and validation texts come from the same distribution (same source, same "
        "time), so only training can make the model score them differently"
        + ("; the split check found it broken for these sets" if status == "split-shifted" else "")
    )
    n_suspect = r.get("n_suspect", blind.get("n_members"))
    n_validation = r.get("n_validation", blind.get("n_nonmembers"))
    rows = [
        ("Result", str(r.get("text") or why)),
        (
            "p-value",
            (f"{p:.3g}" + (f" (one-sided, α = {alpha:g})" if alpha else ""))
            if p is not None
            else why,
        ),
        (
            "Effect size",
            f"{d:.3f} ({r.get('effect_size_name') or 'effect size'})"
            if d is not None
            else f"— ({why.replace('no p-value: ', 'no test: ', 1)})",
        ),
        ("Assumption", str(assumption)),
        (
            f"Split check (blind AUC, {lv} CI)"
            if (lv := level(check.get("confidence")))
            else "Split check (blind AUC, CI)",
            (ci(blind.get("auc")) if isinstance(blind.get("auc"), dict) else DASH)
            + f" · {'shifted' if check.get('shifted') else ('no shift found' if check.get('shifted') is False else 'not measured')}",
        ),
        ("Split check finding", _sets(str(check.get("text") or check.get("reason") or DASH))),
        (
            "Near-duplicates removed",
            f"{dups.get('pairs', 0)} suspect/validation pair(s): "
            f"{dups.get('members_removed', 0)} suspect, {dups.get('nonmembers_removed', 0)} validation text(s)",
        ),
        (
            "Texts",
            f"{num(n_suspect) if n_suspect is not None else DASH} suspect, "
            f"{num(n_validation) if n_validation is not None else DASH} validation",
        ),
        (
            "Texts tested",
            _pair(r.get("n_test_texts" if by_user else "n_test"))
            if tested
            else f"none ({why.replace('no p-value: ', '', 1)})",
        ),
        (
            "Texts fitting the aggregator",
            _pair(r.get("n_fit_texts" if by_user else "n_fit"))
            if tested
            else f"none ({why.replace('no p-value: ', '', 1)})",
        ),
        (
            "Features",
            ", ".join(str(f) for f in r.get("features") or [])
            or ("— (no test ran)" if not tested else DASH),
        ),
        (
            "Fit / test split",
            str(
                r.get("split")
                or f"fit fraction {r.get('fit_fraction', DASH)}, seed {r.get('seed', DASH)}"
                + ("" if tested else " (not used: no test ran)")
            ),
        ),
        ("Model", str(r.get("model") or DASH)),
        ("Reference model", str(r.get("reference") or "none (the features use the target only)")),
        (
            "Tokens per text",
            f"{r.get('max_length', DASH)} ({r.get('texts_cut_to_max_length', 0)} text(s) cut)",
        ),
    ]
    if r.get("unit") == "user":
        rows = _user_rows(r, tested, why) + rows
    return rows


def di_context(results: dict[str, Any]) -> dict[str, Any]:
    """The template's context for a dataset-inference results record (each field read with
    a default, so an older or partial record still renders)."""
    r = results.get("dataset_inference") if isinstance(results, dict) else None
    r = r if isinstance(r, dict) else {}
    status = str(r.get("status") or "not-measured")
    label, cls = _status_label(r, status)
    by_user = r.get("unit") == "user"
    why = why_no_p(r)
    rows = _result_rows(r, status, why)
    tool = results.get("tool") if isinstance(results.get("tool"), dict) else {}
    env = results.get("environment") if isinstance(results.get("environment"), dict) else {}
    packages = env.get("packages") if isinstance(env.get("packages"), dict) else {}
    return {
        "styles": stylesheet(),
        "title": str(results.get("title") or "Dataset inference"),
        "created": str(results.get("created") or DASH),
        "tool_name": str(tool.get("name") or "privacy-audit"),
        "tool_version": str(tool.get("version") or DASH),
        "seed": str(r.get("seed", DASH)),
        "schema_version": str(results.get("schema_version", DASH)),
        "status_label": label,
        "status_class": cls,
        "text": str(r.get("text") or why),
        "unit_note": (
            "Unit: users. A person's texts are one cluster, not independent evidence: users "
            "(all their texts) are split into the part that fits the aggregator and the part "
            "that is tested; the set-level test compares the held-out suspect users' mean "
            "scores with the held-out validation users' by a permutation test over users, "
            "and each held-out suspect user gets a p-value against the held-out validation "
            "users (Benjamini-Hochberg picks the users found)."
            if by_user
            else ""
        ),
        "rows": rows,
        "config_json": json.dumps(
            results.get("config", {}), indent=2, ensure_ascii=False, default=str
        ),
        "python": str(env.get("python") or DASH),
        "platform": str(env.get("platform") or DASH),
        "packages": sorted((str(k), str(v)) for k, v in packages.items()),
    }


def render_dataset_inference(results: dict[str, Any]) -> str:
    """The dataset-inference report page (self-contained, every value escaped)."""
    from privacy_audit.reports.html import jinja_environment

    return jinja_environment().get_template(DI_TEMPLATE).render(**di_context(results))


__all__ = ["di_context", "render_dataset_inference"]
