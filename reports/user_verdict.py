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

from privacy_audit.reports.verdict import _SEVERITY, verdict_for_run

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
            "attacks": users["attacks"],
            "strongest_attack": users.get("strongest_attack"),
            "strongest_attack_by_auc": users.get("strongest_attack_by_auc"),
            "strongest_attack_low_fpr": users.get("strongest_attack_low_fpr"),
            "battery_chance": users.get("battery_chance"),
            "claim": claim or {"epsilon": None, "unit": "user"},
        }
    )
    return view


def _users_phrase(users: dict[str, Any]) -> str:
    c = users.get("counts") or {}
    m, n = (c.get("members") or {}), (c.get("nonmembers") or {})
    return (
        f"Per user ({m.get('users', '?')} member and {n.get('users', '?')} non-member users, "
        "each user's texts pooled; intervals resample users)"
    )


def _per_user_words(text: str) -> str:
    """The verdict rules' sentence with users as the positive class."""
    return (
        text.replace(" of members at ", " of member users at ")
        .replace(" of members", " of member users")
        .replace(" members.", " member users.")
    )


def combine_unit_verdicts(run: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
    """``verdict`` (the per-text one) combined with the run's per-user verdict."""
    view = user_view(run)
    if view is None:
        return verdict
    uv = verdict_for_run(view)
    users = run["users"]
    users["verdict"] = {**uv, "text": _per_user_words(uv["text"])}
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
    per_text = "Per text: " + verdict["text"]
    per_user = f"{_users_phrase(users)}: {users['verdict']['text']}"
    user_worse = _SEVERITY.get(uv["level"], -1) > _SEVERITY.get(verdict["level"], -1) or (
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
