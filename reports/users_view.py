"""Display strings of a run's user-level section (``run["users"]``, audit/users.py)."""

from __future__ import annotations

from typing import Any

from privacy_audit.reports.formatting import num


def _dist(side: dict[str, Any]) -> str:
    return (
        f"{num(side.get('users'))} users, {num(side.get('texts'))} texts; texts per user: "
        f"median {num(side.get('median'))}, quartiles {num(side.get('q25'))}\u2013"
        f"{num(side.get('q75'))}, range {num(side.get('min'))}\u2013{num(side.get('max'))}"
    )


def counts_lines(users: dict[str, Any]) -> list[tuple[str, str]]:
    c = users.get("counts") or {}
    col = users.get("column")
    who = f"column {col!r}" if col and col != "file" else "one .txt file per user"
    return [
        ("Users named by", who),
        ("Member users", _dist(c.get("members") or {})),
        ("Non-member users", _dist(c.get("nonmembers") or {})),
    ]


def fresh_lines(users: dict[str, Any]) -> list[str]:
    fresh = users.get("fresh") or {}
    if fresh.get("reason"):
        return [str(fresh["reason"])]
    out = [f"Statistic: {fresh.get('statistic')}."]
    for k, row in (fresh.get("by_k") or {}).items():
        out.append(
            f"{k} fresh text(s) per user: {num(row.get('member_users_tested'))} member and "
            f"{num(row.get('nonmember_users_tested'))} non-member users tested; "
            f"{num(row.get('member_users_not_tested'))} member and "
            f"{num(row.get('nonmember_users_not_tested'))} non-member users not tested (too "
            "few fresh texts): not tested is not safe"
        )
    return out


def dataset_inference_line(users: dict[str, Any]) -> str | None:
    di = users.get("dataset_inference")
    if not isinstance(di, dict):
        return None
    return (
        f"Were these people's texts used? {num(di.get('found'))} of {num(di.get('tested'))} "
        f"member users found at a false-discovery rate of {num(di.get('q'))} "
        f"(Benjamini-Hochberg over per-user p-values of {di.get('attack')}, null: "
        f"{di.get('null')})."
    )


def group_privacy_line(users: dict[str, Any]) -> str | None:
    gp = users.get("group_privacy")
    if not isinstance(gp, dict):
        return None
    parts = [
        f"a {r['user']} member user ({num(r['texts'])} texts): ε \u2264 {num(r['epsilon'])}, "
        f"δ \u2264 {num(r['delta'])}"
        for r in gp.get("implied") or []
    ]
    return (
        f"The claim is per {gp.get('claim_unit')} (ε = {num(gp.get('epsilon'))}, δ = "
        f"{num(gp.get('delta'))}); for a person it implies, by group privacy (proven, and "
        f"loose): {'; '.join(parts)}."
    )
