"""The user-level audit: membership of a *person*, not of one text (``[data] group``).

A model fine-tuned on people's data leaks about people: a user with many texts is found
by pooling weak per-text signals (Kandpal et al. 2023, "User inference attacks on large
language models"). With a user column this adds to a run's record a ``users`` section
with the same shape as the run's own attack list, so the verdict, the report, stdout and
the gate read user-level numbers by the same rules:

- **Threat model (a), aggregation of training texts**: every per-text membership attack
  of the battery, its scores aggregated per user (``stats/by_user.py``
  ``AGGREGATORS``: mean, sum, median), members = member users.
- **Threat model (b), user inference from fresh texts** (``[data] fresh``): the attacker
  holds only texts of each user that the model never saw. Statistic: Kandpal et al.'s
  sum over the user's fresh texts of ``log p_target(x) - log p_ref(x)`` with the first
  reference model; without one, the mean target log-likelihood per token (weaker, and
  said so). Measured with the first 1, 3 and 10 fresh texts of each user (seeded order);
  users with fewer fresh texts, or none, are *not tested* at that k (counted, never
  treated as safe).
- **Intervals resample users.** The per-text attacks' own intervals are replaced by
  ones that resample users (``grouped_text_metrics``), and the battery's family-wise
  test relabels users, because a user's texts are a cluster: intervals that resample
  texts are too narrow (docs/users.md, coverage).
- **Per-user p-values** ("were this person's texts used?"): each member user's
  aggregate against the non-member users' (conformal p-values), with the users found at
  a Benjamini-Hochberg false-discovery rate of 5%. The attack and aggregator are fixed in
  advance (:data:`DI_ATTACKS`, mean), never chosen on the data.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

#: Fresh texts per user at which user inference is measured.
FRESH_KS = (1, 3, 10)
#: Users listed in the per-user leakage map.
TOP_USERS = 10
#: The pre-specified attack of the per-user p-values: the first of these the run has
#: ("user-scores": a scores file's own scores, the only attack of ``score --group-by``).
DI_ATTACKS = ("reference", "lm-loss", "loss", "user-scores")
#: False-discovery rate of the list of users found.
DI_FDR = 0.05


#: Level of the check that member and non-member users hold alike numbers of texts.
COUNTS_ALPHA = 0.05


def counts_check(groups: list[str], members, alpha: float = COUNTS_ALPHA) -> dict[str, Any]:
    """Do member and non-member users hold alike numbers of texts?

    A per-user aggregate's spread depends on its number of texts (a mean of 1 text varies
    more than a mean of 30; a sum more the other way), so when the two sides differ in
    texts per user the per-user scores differ in spread even if training left no trace,
    and a rate in the tail (TPR at 1% FPR) is inflated or deflated by that alone. Two
    two-sided tests on the per-user counts, Mann-Whitney U (location) and Kolmogorov-
    Smirnov (shape), Bonferroni-combined: ``p = min(1, 2 min(p_U, p_KS))``; ``differs``
    when ``p <= alpha``. A non-significant p is not proof of alike counts; the fresh-text
    attacks (equal numbers of texts per user) do not need this check."""
    from scipy.stats import ks_2samp, mannwhitneyu

    from privacy_audit.stats.by_user import user_index

    names, inv = user_index(groups)
    n = np.bincount(inv, minlength=len(names))
    side = np.zeros(len(names), dtype=bool)
    side[inv] = np.asarray(members, dtype=bool)
    a, b = n[side], n[~side]
    p_u = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    p_ks = float(ks_2samp(a, b).pvalue)
    p = min(1.0, 2.0 * min(p_u, p_ks))
    return {
        "p_value": p,
        "p_mann_whitney": p_u,
        "p_kolmogorov_smirnov": p_ks,
        "alpha": alpha,
        "differs": bool(p <= alpha),
        "median_members": float(np.median(a)),
        "median_nonmembers": float(np.median(b)),
    }


def _log(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def _text_scores(att: dict[str, Any], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    ex = att.get("examples") if att.get("status") == "ok" else None
    if not isinstance(ex, dict) or len(ex.get("scores") or []) != n:
        return None
    s = np.asarray(ex["scores"], dtype=np.float64)
    if not np.isfinite(s).all():
        return None
    return s, np.asarray(ex["members"], dtype=np.int64)


def user_relabellings(groups: list[str], members: np.ndarray, permutations: int, seed: int):
    """Rows of 0/1 text labels in which whole users are relabelled at random (the number
    of member users fixed): the battery's family-wise test under "users were assigned to
    the sides at random", which keeps each user's texts together."""
    from privacy_audit.stats.by_user import user_index

    names, inv = user_index(groups)
    side = np.zeros(len(names), dtype=np.int64)
    side[inv] = members
    rng = np.random.default_rng([int(seed), 0x05E5])
    rows = np.stack([rng.permutation(side) for _ in range(permutations)])
    return rows[:, inv]


def regroup_text_attacks(run: dict[str, Any], groups: list[str], settings) -> None:
    """Replace each per-text attack's intervals by ones that resample users, and the
    battery's family-wise test by one that relabels users (in place)."""
    from privacy_audit.audit.results import (
        FAMILY_PERMUTATIONS,
        battery_chance_test,
        pick_strongest,
    )
    from privacy_audit.stats.by_user import grouped_text_metrics

    n = len(groups)
    members = None
    for att in run["attacks"]:
        got = _text_scores(att, n)
        if got is None:
            continue
        s, members = got
        att["metrics"] = grouped_text_metrics(
            s,
            members,
            groups,
            delta=settings.delta,
            n_boot=settings.n_boot,
            confidence=settings.confidence,
            seed=settings.seed,
        )
        att["resampled"] = "users"
    picked = pick_strongest(run["attacks"])
    run["strongest_attack"] = picked["attack"]
    run["strongest_attack_by_auc"] = picked["by_auc"]
    run["strongest_attack_low_fpr"] = picked["low_fpr"]
    if members is not None:
        run["battery_chance"] = battery_chance_test(
            run["attacks"],
            relabellings=user_relabellings(groups, members, FAMILY_PERMUTATIONS, settings.seed),
        )
        if isinstance(run["battery_chance"], dict):
            run["battery_chance"]["relabelled"] = "users"


def _user_record(
    name: str,
    description: str,
    us,
    settings,
    extra: dict[str, Any],
) -> dict[str, Any]:
    from privacy_audit.stats.metrics import membership_metrics

    metrics = membership_metrics(
        us.scores,
        us.members,
        delta=settings.delta,
        n_boot=settings.n_boot,
        confidence=settings.confidence,
        seed=settings.seed,
    )
    for m in metrics.values():  # users are the trials: say so where n is named
        if isinstance(m, dict) and isinstance(m.get("reason"), str):
            m["reason"] = m["reason"].replace("non-members)", "non-member users)")
    return {
        "attack": name,
        "description": description,
        "unit": "user",
        "status": "ok",
        "reason": None,
        "n_members": int(us.members.sum()),
        "n_nonmembers": int(len(us.members) - us.members.sum()),
        **extra,
        "metrics": metrics,
        "examples": {
            "ids": list(us.names),
            "scores": [float(x) for x in us.scores],
            "members": [int(x) for x in us.members],
            "n_texts": [int(x) for x in us.n_texts],
        },
    }


def _not_tested(name: str, description: str, reason: str, extra: dict[str, Any]) -> dict:
    return {
        "attack": name,
        "description": description,
        "unit": "user",
        "status": "not_applicable",
        "reason": reason,
        "n_members": 0,
        "n_nonmembers": 0,
        **extra,
    }


def aggregation_attacks(run: dict[str, Any], groups: list[str], settings) -> list[dict]:
    """Threat model (a): each per-text attack's scores aggregated per user."""
    from privacy_audit.stats.by_user import AGGREGATORS, user_scores

    out = []
    n = len(groups)
    for att in run["attacks"]:
        got = _text_scores(att, n)
        if got is None:
            continue
        s, m = got
        for how in AGGREGATORS:
            us = user_scores(s, m, groups, how)
            out.append(
                _user_record(
                    f"{att['attack']}:user-{how}",
                    f"{att['attack']} scores of each user's training texts, {how} per user",
                    us,
                    settings,
                    {
                        "threat_model": "aggregation of the user's training texts",
                        "based_on": att["attack"],
                        "aggregator": how,
                    },
                )
            )
    return out


def fresh_statistics(release, reference, texts: list[str]) -> tuple[np.ndarray, str]:
    """Per fresh text: ``log p_target(x) - log p_ref(x)`` (Kandpal et al. 2023, summed per
    user) with a reference, else the target's mean log-probability per token."""
    target = release.token_stats(list(texts))
    if reference is not None:
        ref = reference.token_stats(list(texts))
        s = np.array(
            [float(t.log_probs.sum() - r.log_probs.sum()) for t, r in zip(target, ref, strict=True)]
        )
        return s, "sum over fresh texts of log p_target(x) - log p_reference(x)"
    s = np.array([float(t.log_probs.mean()) if t.log_probs.size else np.nan for t in target])
    return s, "mean over fresh texts of the target's mean token log-probability (no reference)"


def fresh_attacks(
    fresh, release, reference, member_users: set[str], nonmember_users: set[str], settings
) -> tuple[list[dict], dict[str, Any]]:
    """Threat model (b): user inference from 1, 3 and 10 fresh texts per user."""
    from privacy_audit.stats.by_user import user_scores

    scores, statistic = fresh_statistics(release, reference, fresh.texts)
    how = "lr-sum" if reference is not None else "mean"
    groups = list(fresh.groups)
    rng = np.random.default_rng([int(settings.seed), 0xF2E5])
    order = rng.permutation(len(groups))
    rank: dict[str, int] = {}
    position = np.empty(len(groups), dtype=np.int64)  # the text's place in its user's order
    for i in order:
        position[i] = rank.get(groups[i], 0)
        rank[groups[i]] = position[i] + 1
    counts = {g: rank.get(g, 0) for g in member_users | nonmember_users}
    info: dict[str, Any] = {"statistic": statistic, "aggregator": how, "by_k": {}}
    out = []
    for k in FRESH_KS:
        tested = {g for g, c in counts.items() if c >= k}
        nt_m = len(member_users - tested)
        nt_n = len(nonmember_users - tested)
        info["by_k"][str(k)] = {
            "member_users_tested": len(member_users & tested),
            "nonmember_users_tested": len(nonmember_users & tested),
            "member_users_not_tested": nt_m,
            "nonmember_users_not_tested": nt_n,
        }
        keep = np.array(
            [position[i] < k and groups[i] in tested for i in range(len(groups))], dtype=bool
        )
        name = f"user-inference:{k}-fresh"
        desc = f"user inference from {k} fresh text(s) per user: {statistic}"
        extra = {
            "threat_model": "user inference from fresh texts never trained on",
            "fresh_texts_per_user": k,
            "aggregator": how,
            "users_not_tested": {"members": nt_m, "nonmembers": nt_n},
        }
        s = scores[keep]
        m = np.asarray(fresh.members)[keep]
        ok = np.isfinite(s)
        n_in = len({g for g, k_ in zip(np.asarray(groups)[keep], m, strict=True) if k_})
        n_out = len({g for g, k_ in zip(np.asarray(groups)[keep], m, strict=True) if not k_})
        if n_in < 2 or n_out < 2 or not ok.all():
            out.append(
                _not_tested(
                    name,
                    desc,
                    f"not tested: {n_in} member and {n_out} non-member user(s) have {k} or "
                    "more fresh texts (at least 2 of each are needed)",
                    extra,
                )
            )
            continue
        us = user_scores(s, m, list(np.asarray(groups)[keep]), how)
        out.append(_user_record(name, desc, us, settings, extra))
    return out, info


def user_pvalues_section(records: list[dict], aggregate_only: bool) -> dict[str, Any] | None:
    """Per member user: the p-value of "this person's texts were used", against the
    non-member users, for the pre-specified attack (:data:`DI_ATTACKS`, mean per user)."""
    from privacy_audit.stats.by_user import user_dataset_inference

    by_name = {r["attack"]: r for r in records if r.get("status") == "ok"}
    for base in DI_ATTACKS:
        rec = by_name.get(f"{base}:user-mean")
        if rec is not None:
            break
    else:
        return None
    ex = rec["examples"]
    s = np.asarray(ex["scores"], dtype=np.float64)
    m = np.asarray(ex["members"], dtype=bool)
    names = [n for n, k in zip(ex["ids"], m, strict=True) if k]
    res = user_dataset_inference(s[m], s[~m], names, q=DI_FDR)
    res["attack"] = rec["attack"]
    res["null"] = f"the {int((~m).sum())} non-member users (held out)"
    if aggregate_only:  # counts only: no user name, not even a pseudonym, per p-value
        res.pop("pvalues", None)
        res.pop("found", None)
    return res


def most_exposed_users(records: list[dict], strongest: str | None) -> list[dict[str, Any]]:
    """The member users the strongest user-level attack ranks highest (score, texts)."""
    rec = next((r for r in records if r.get("attack") == strongest), None)
    if rec is None or rec.get("status") != "ok":
        return []
    ex = rec["examples"]
    rows = [
        (float(s), str(i), int(n))
        for i, s, m, n in zip(ex["ids"], ex["scores"], ex["members"], ex["n_texts"], strict=True)
        if m
    ]
    rows.sort(key=lambda r: -r[0])
    return [{"user": u, "score": s, "texts": n} for s, u, n in rows[:TOP_USERS]]


def user_level_section(
    run: dict[str, Any],
    data,
    settings,
    release=None,
    reference=None,
    aggregate_only: bool = False,
    id_salt: bytes | None = None,
    progress: bool = True,
    claim: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``users`` section of a run whose data names users (in place: the run's own
    per-text attacks get user-resampled intervals). See the module docstring."""
    examples = data.attack_set()

    def fresh() -> tuple[list[dict], dict[str, Any]]:
        if data.fresh is not None and release is not None and hasattr(release, "token_stats"):
            return fresh_attacks(
                data.fresh,
                release,
                reference,
                set(data.members.groups),
                set(data.nonmembers.groups),
                settings,
            )
        if data.fresh is not None:
            return [], {"reason": "user inference from fresh texts needs a causal LM"}
        return [], {
            "reason": "no fresh texts given ([data] fresh / --fresh): user inference from "
            "texts the model never saw was not tested"
        }

    return users_section(
        run,
        list(examples.groups),
        examples.members,
        data.group_column,
        settings,
        fresh,
        aggregate_only,
        id_salt,
        progress,
        claim,
    )


def users_section(
    run: dict[str, Any],
    groups: list[str],
    members,
    column: str | None,
    settings,
    fresh=None,
    aggregate_only: bool = False,
    id_salt: bytes | None = None,
    progress: bool = True,
    claim: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``users`` section from a run's per-text attacks and each text's user, in the
    order of the attacks' stored examples (``groups[i]`` is the user of example i,
    ``members`` its 0/1 side); in place, the per-text attacks get user-resampled
    intervals and a family-wise test that relabels users. ``fresh``: a callable returning
    threat model (b)'s records and their ``info`` (None: not tested, said so). Needs at
    least 4 users per side (:func:`grouped_text_metrics`) and no user on both sides."""
    from privacy_audit.audit.results import (
        FAMILY_PERMUTATIONS,
        battery_chance_test,
        new_id_salt,
        pick_strongest,
        pseudonymise_ids,
    )
    from privacy_audit.stats.by_user import texts_per_user

    counts = texts_per_user(groups, members)
    _log(
        f"  users: {counts['members']['users']} member users ({counts['members']['texts']} "
        f"texts), {counts['nonmembers']['users']} non-member users "
        f"({counts['nonmembers']['texts']} texts); intervals resample users",
        progress,
    )
    regroup_text_attacks(run, groups, settings)
    records = aggregation_attacks(run, groups, settings)
    check = counts_check(groups, members)
    if check["differs"]:
        why = (
            f"member and non-member users hold different numbers of texts (median "
            f"{check['median_members']:g} vs {check['median_nonmembers']:g}, p = "
            f"{check['p_value']:.2g}); a per-user aggregate's spread depends on its number of "
            "texts, so these rates would differ without any leakage"
        )
        check["text"] = why
        for r in records:
            r["comparable"] = False
            r["not_comparable"] = why
        _log(f"  users: {why}; the verdict does not read the aggregated attacks", progress)
    section: dict[str, Any] = {
        "unit": "user",
        "column": column,
        "counts": counts,
        "counts_check": check,
    }
    if fresh is not None:
        fresh_recs, section["fresh"] = fresh()
        records += fresh_recs
    else:
        section["fresh"] = {
            "reason": "no fresh texts given: user inference from texts the model never saw "
            "was not tested"
        }
    # the verdict reads only attacks whose per-user scores are comparable across the sides
    picked = pick_strongest([r for r in records if r.get("comparable", True)])
    section["attacks"] = records
    section["strongest_attack"] = picked["attack"]
    section["strongest_attack_by_auc"] = picked["by_auc"]
    section["strongest_attack_low_fpr"] = picked["low_fpr"]
    section["battery_chance"] = battery_chance_test(
        [
            r
            for r in records
            if r.get("threat_model", "").startswith("aggregation") and r.get("comparable", True)
        ],
        FAMILY_PERMUTATIONS,
        settings.seed,
    )
    section["dataset_inference"] = user_pvalues_section(records, aggregate_only)
    section["most_exposed"] = most_exposed_users(records, picked["attack"])
    section["group_privacy"] = group_privacy_note(claim, counts)
    if aggregate_only:
        salt = id_salt if id_salt is not None else new_id_salt()
        for r in records:
            if "examples" in r:
                r["examples"]["ids"] = pseudonymise_ids(r["examples"]["ids"], salt)
        for row in section["most_exposed"]:
            row["user"] = pseudonymise_ids([row["user"]], salt)[0]
    return section


def group_privacy_note(claim: dict[str, Any] | None, counts: dict[str, Any]) -> dict | None:
    """What a per-example claim implies for a member user with k texts (the median and
    the largest k): ``(k ε, k e^{(k-1) ε} δ)`` by the group-privacy lemma (proven, and
    often vacuous: δ grows as e^{(k-1) ε})."""
    from privacy_audit.stats.by_user import group_privacy

    if not isinstance(claim, dict) or claim.get("unit") not in ("example", "sequence"):
        return None
    eps, delta = claim.get("epsilon"), claim.get("delta")
    if eps is None or not np.isfinite(float(eps)):
        return None
    rows = []
    per = counts["members"]["texts_per_user"]
    for label, k in (("median", per["median"]), ("largest", per["max"])):
        k = int(np.ceil(k))
        e_k, d_k = group_privacy(float(eps), float(delta or 0.0), k)
        rows.append({"user": label, "texts": k, "epsilon": e_k, "delta": d_k})
    return {
        "claim_unit": claim.get("unit"),
        "epsilon": float(eps),
        "delta": float(delta or 0.0),
        "implied": rows,
        "notion": "group privacy of an (ε, δ) per-example guarantee (proven)",
    }
