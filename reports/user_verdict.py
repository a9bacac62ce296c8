"""One verdict for a run whose data names users: the per-text and the per-user levels,
each by the rules of :func:`privacy_audit.reports.verdict.verdict_for_run`, the run's level
the more severe of the two, and a text that says which unit each number is about.

The user-level numbers (``run["users"]``, audit/users.py) are read as a run of their own:
the same strongest-attack choice, family-wise test and resolvability rule, with member
*users* as the positive class. A claim is checked against them only when its unit is the
user; a per-example claim says nothing direct about a user with k texts (group privacy,
``run["users"]["group_privacy"]``), so the user view then carries no claim.
"""

from __future__ import annotations

from typing import Any

from privacy_audit.reports.verdict import SEVERITY, verdict_for_run

#: Example-level levels that stand whatever the users show: nothing was measured on a
#: partly random model, and a shifted split shifts its users too.
_FINAL = ("split-shifted",)


def user_view(run: dict[str, Any]) -> dict[str, Any] | None:
    """The run as its user-level attacks see it (None: no users)."""
    users = run.get("users")
    if not isinstance(users, dict) or not isinstance(users.get("attacks"), list):
        return None
    claim = run.get("claim") if (run.get("claim") or {}).get("unit") == "user" else None
    view = {
        k: run.get(k)
        for k in ("name", "defense", "split_check", "uninitialized_weights", "training")
        if k in run
    }
    view.update(
        {
            # per-user aggregates whose spread differs by side only through the number of
            # texts per user are shown, not judged (audit/users.py ``counts_check``)
            "attacks": [
                a
                for a in users["attacks"]
                if not (isinstance(a, dict) and a.get("comparable") is False)
            ],
            "strongest_attack": users.get("strongest_attack"),
            "strongest_attack_by_auc": users.get("strongest_attack_by_auc"),
            "strongest_attack_low_fpr": users.get("strongest_attack_low_fpr"),
            "battery_chance": users.get("battery_chance"),
            "claim": claim or {"epsilon": None, "unit": "user"},
        }
    )
    return view


def _lead(level: str) -> str:
    from privacy_audit.reports import sentences as S

    if level == "high":
        return S.USER_LEAD_HIGH()
    if level == "moderate":
        return S.USER_LEAD_MODERATE()
    if level == "low":
        return S.USER_LEAD_LOW()
    if level == "inconclusive":
        return S.USER_LEAD_INCONCLUSIVE()
    if level == "invalid-attack":
        return S.USER_LEAD_INVALID()
    if level == "split-shifted":
        return S.USER_LEAD_SHIFTED()
    return S.USER_LEAD_NOT_MEASURED()


def user_sentence(users: dict[str, Any], uv: dict[str, Any], view: dict[str, Any]) -> str:
    """The per-user verdict in one sentence: the level, the users counted, the strongest
    user-level attack's AUC and TPR (or why this number of users cannot resolve it, in
    users) and its per-user ε lower bound. Every number is read from the record."""
    from privacy_audit.reports import sentences as S
    from privacy_audit.reports.formatting import ci, num
    from privacy_audit.reports.resolution import lead_tpr, tpr_view
    from privacy_audit.reports.verdict import EPS_LB, metric, strongest_attack

    c = users.get("counts") or {}
    best = strongest_attack(view)
    attack_clause = eps_clause = ""
    if best is not None:
        one = tpr_view(best, 0.01)
        if one["resolvable"]:
            tpr = S.USER_TPR(tpr=one["text"])
        else:
            lead = lead_tpr(best)
            tpr = S.USER_TPR_UNRESOLVED(
                why=one["text"].replace("non-members)", "non-member users)"),
                lead=S.USER_TPR_LEAD(fpr=f"{100 * lead['fpr']:g}%", tpr=lead["text"])
                if lead is not None
                else "",
            )
        attack_clause = S.USER_ATTACK(
            attack=str(best.get("attack")), auc=ci(metric(best, "auc")), tpr=tpr
        )
        lb = metric(best, EPS_LB) or {}
        if isinstance(lb.get("value"), (int, float)) and lb["value"] > 0:
            eps_clause = S.USER_EPS(eps=num(lb["value"]), delta=num(lb.get("delta")))
    extra = ""
    check = users.get("counts_check") if isinstance(users.get("counts_check"), dict) else {}
    if check.get("differs") and check.get("text") and uv.get("inconclusive") != check["text"]:
        extra += S.USER_NOT_COMPARABLE(reason=str(check["text"]))
    if uv.get("level") == "inconclusive" and uv.get("inconclusive"):
        extra += S.USER_EXTRA(reason=str(uv["inconclusive"]))
    if uv.get("claim_status") == "violated":
        extra += S.USER_VIOLATED(
            claim=str(uv.get("claim_text") or "The per-user privacy claim is VIOLATED")
        )
    lead = _lead(uv["level"])
    if check.get("differs") and uv.get("inconclusive") == check.get("text"):
        lead = S.USER_LEAD_NOT_COMPARABLE()
    return S.USER_VERDICT(
        n_in=num((c.get("members") or {}).get("users")),
        n_out=num((c.get("nonmembers") or {}).get("users")),
        lead=lead,
        attack_clause=attack_clause,
        eps_clause=eps_clause,
        extra=extra,
    )


def combine_unit_verdicts(run: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
    """``verdict`` (the per-text one) combined with the run's per-user verdict."""
    view = user_view(run)
    if view is None:
        return verdict
    uv = verdict_for_run(view)
    users = run["users"]
    check = users.get("counts_check") if isinstance(users.get("counts_check"), dict) else {}
    if check.get("differs") and uv["level"] == "not-measured":
        # nothing comparable was measured per user: not an all-clear for people
        uv = {**uv, "level": "inconclusive", "inconclusive": str(check.get("text") or "")}
    if uv.get("claim_status") == "violated":
        from privacy_audit.reports.verdict import check_claim

        uv["claim_text"] = check_claim(view)["text"]
    users["verdict"] = {**uv, "text": user_sentence(users, uv, view)}
    out = {
        **verdict,
        "unit": "example",
        "by_unit": {"example": verdict["level"], "user": uv["level"]},
    }
    if uv.get("claim_status") == "violated":  # a per-user claim below a per-user bound
        out["claim_status"] = "violated"
    if (
        verdict["level"] in _FINAL
        or verdict["level"] == "not-measured"
        and run.get("uninitialized_weights")
    ):
        return out
    from privacy_audit.reports import sentences as S

    per_text = S.UNIT_TEXT(text=verdict["text"])
    per_user = users["verdict"]["text"]
    user_worse = SEVERITY.get(uv["level"], -1) > SEVERITY.get(verdict["level"], -1) or (
        verdict["level"] in ("not-measured", "invalid-attack")
        and uv["level"] not in ("not-measured", "invalid-attack")
    )
    if user_worse:
        out.update(
            level=uv["level"],
            unit="user",
            attack=uv["attack"],
            text=f"{per_user} {per_text}",
        )
        for key in ("inconclusive", "invalid"):
            out.pop(key, None)
            if key in uv:
                out[key] = uv[key]
    else:
        out["text"] = f"{per_text} {per_user}"
    return out
