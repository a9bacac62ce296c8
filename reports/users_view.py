"""Display strings of a run's user-level section (``run["users"]``, audit/users.py)."""

from __future__ import annotations

from typing import Any

from privacy_audit.reports.formatting import num


def _dist(side: dict[str, Any]) -> str:
    d = side.get("texts_per_user") or {}
    return (
        f"{num(side.get('users'))} users, {num(side.get('texts'))} texts; texts per user: "
        f"median {num(d.get('median'))}, quartiles {num(d.get('q25'))}\u2013"
        f"{num(d.get('q75'))}, range {num(d.get('min'))}\u2013{num(d.get('max'))}"
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
    from privacy_audit.reports import sentences as S

    fresh = users.get("fresh") or {}
    if fresh.get("reason"):
        return [str(fresh["reason"])]
    out = [f"Statistic: {fresh.get('statistic')}."]
    for k, row in (fresh.get("by_k") or {}).items():
        out.append(
            S.USER_FRESH_K(
                k=k,
                m_in=num(row.get("member_users_tested")),
                n_in=num(row.get("nonmember_users_tested")),
                m_out=num(row.get("member_users_not_tested")),
                n_out=num(row.get("nonmember_users_not_tested")),
            )
        )
    return out


def dataset_inference_line(users: dict[str, Any]) -> str | None:
    from privacy_audit.reports import sentences as S

    di = users.get("dataset_inference")
    if not isinstance(di, dict):
        return None
    return S.USER_DI(
        found=num(di.get("n_found")),
        tested=num(di.get("n_tested")),
        q=num(di.get("q")),
        attack=str(di.get("attack")),
        null=str(di.get("null")),
        pmin=num(di.get("min_pvalue")),
    )


def found_users(users: dict[str, Any]) -> list[dict[str, Any]]:
    """The users found, smallest p-value first, with their number of texts."""
    di = users.get("dataset_inference")
    if not isinstance(di, dict) or not isinstance(di.get("pvalues"), dict):
        return []
    texts: dict[str, int] = {}
    for a in users.get("attacks") or []:
        if isinstance(a, dict) and a.get("attack") == di.get("attack"):
            ex = a.get("examples") or {}
            texts = dict(zip(ex.get("ids") or [], ex.get("n_texts") or [], strict=False))
    rows = [
        {"user": u, "p": di["pvalues"].get(u), "texts": texts.get(u)} for u in di.get("found") or []
    ]
    rows.sort(key=lambda r: (r["p"] if isinstance(r["p"], float) else 1.0, r["user"]))
    return rows


def group_privacy_line(users: dict[str, Any]) -> str | None:
    from privacy_audit.reports import sentences as S

    gp = users.get("group_privacy")
    if not isinstance(gp, dict) or not gp.get("implied"):
        return None
    items = [
        S.USER_GROUP_ITEM(
            which=str(r["user"]), k=num(r["texts"]), eps=num(r["epsilon"]), delta=num(r["delta"])
        )
        for r in gp["implied"]
    ]
    return S.USER_GROUP_PRIVACY(
        unit=str(gp.get("claim_unit")),
        eps=num(gp.get("epsilon")),
        delta=num(gp.get("delta")),
        items="; ".join(items),
    )
