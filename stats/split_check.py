"""Is the member / non-member split valid? A model-free *blind baseline* and a
near-duplicate check, run before any membership attack.

Why: where members and non-members differ in source, time or style, every membership
attack "succeeds" on a model that never saw the members. Model-free classifiers (bag of
words, dates, length) beat published LLM membership attacks on eight benchmark splits
(Das, Zhang and Tramèr 2024); on same-distribution splits the same attacks are near chance
(Duan et al. 2024; Meeus et al. 2024). So before reading any attack we ask: can a
classifier that never sees the model tell the two sets apart?

The two parts live in their own modules: the near-duplicate join in
:mod:`privacy_audit.stats.near_duplicates` (with :mod:`~privacy_audit.stats.shingles` and
:mod:`~privacy_audit.stats.partition_join`), the blind classifier, its permutation test,
interval and power in :mod:`privacy_audit.stats.blind_baseline` (its module docstring
states the test and its assumptions). This module runs them in order (:class:`SplitCheck`)
and compares the attacks with the blind baseline.

- **Attack vs blind**: each attack's AUC beside the blind AUC on the same examples, with
  the paired DeLong interval of the difference (DeLong, DeLong and Clarke-Pearson 1988)
  at ``DIFFERENCE_CONFIDENCE`` (95%, the audit's usual level): these rows describe the
  attacks and decide nothing, so they keep the level of the attacks' own intervals.

Everything returned is a plain dict stored in the run record (``run["split_check"]``);
the report, the verdict and the gate read only that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privacy_audit.stats.blind_baseline import (
    FAMILIES,
    PERMUTATIONS,
    SHIFT_CONFIDENCE,
    blind_interval,
    clustered_difference,
    cross_fit,
    delong_auc,
    delong_difference,
    detectable_auc,
    is_shifted,
    permutation_test,
    sample_users,
    text_folds,
    user_clusters,
    user_counts,
)
from privacy_audit.stats.near_duplicates import (
    NEAR_DUP_JACCARD,
    Join,
    duplicate_groups,
    join_description,
    near_duplicates,
)
from privacy_audit.stats.shingles import JOIN_STATS, SHINGLE

#: Level of the descriptive attack-vs-blind difference intervals (paired DeLong).
DIFFERENCE_CONFIDENCE = 0.95
#: Pairs kept as examples in results.json (none in aggregate-only mode).
MAX_EXAMPLES = 3
#: Characters of each example text kept.
EXAMPLE_CHARS = 300
#: Texts per class the blind classifier reads at most (a seeded sample beyond it): the
#: operator H is N x N, so time grows as N^2 to N^3; 1,000 per class keeps the check near
#: a tenth of a default own-model audit (privacy-audit bench split-check).
MAX_BLIND_PER_CLASS = 1000

ADVICE = (
    "Sample the non-members from the same source and the same time period as the members "
    "(e.g. hold out a random part of the training data before training), or audit with "
    "canaries (random texts inserted into training, privacy-audit epsilon), whose "
    "non-members are the same kind of text by construction."
)


@dataclass(frozen=True)
class SplitCheck:
    """Settings of the split check (small estimator object; :meth:`run` returns the dict
    stored in ``run["split_check"]``)."""

    folds: int = 5
    confidence: float = SHIFT_CONFIDENCE
    jaccard: float = NEAR_DUP_JACCARD
    seed: int = 0
    aggregate_only: bool = False
    families: bool = True
    permutations: int = PERMUTATIONS

    def __post_init__(self) -> None:
        if self.permutations < 19:
            raise ValueError(f"permutations must be at least 19, got {self.permutations}")
        if self.folds < 2:
            raise ValueError(f"split check folds must be at least 2, got {self.folds}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if not 0 < self.jaccard <= 1:
            raise ValueError(f"near-duplicate Jaccard must be in (0, 1], got {self.jaccard}")

    def duplicates(
        self, members: list[str], nonmembers: list[str], join: Join | None = None
    ) -> dict[str, Any]:
        pairs = near_duplicates(members, nonmembers, self.jaccard, join)
        how = join_description(join.stats if join is not None else JOIN_STATS, self.jaccard)
        drop_m = sorted({i for i, _, _ in pairs})
        drop_n = sorted({j for _, j, _ in pairs})
        out: dict[str, Any] = {
            "criterion": f"equal normalised text, or Jaccard >= {self.jaccard:g} of "
            f"character {SHINGLE}-gram shingles ({how['text']})",
            "join": how,
            "pairs": len(pairs),
            "exact_pairs": sum(1 for *_, v in pairs if v >= 1.0),
            "members_removed": len(drop_m),
            "nonmembers_removed": len(drop_n),
            "member_index": drop_m,
            "nonmember_index": drop_n,
        }
        if not self.aggregate_only:
            out["examples"] = [
                {
                    "member": members[i][:EXAMPLE_CHARS],
                    "nonmember": nonmembers[j][:EXAMPLE_CHARS],
                    "jaccard": round(v, 4),
                }
                for i, j, v in pairs[:MAX_EXAMPLES]
            ]
        return out

    def blind(
        self,
        members: list[str],
        nonmembers: list[str],
        join: Join | None = None,
        positions: np.ndarray | None = None,
        users=None,
    ) -> tuple[dict, np.ndarray]:
        """Blind AUC with its permutation p-value and interval (and per-family AUCs) on
        members + non-members; also the out-of-fold scores of the combined classifier, in
        that order (``nan`` where subsampled out). ``join`` / ``positions``: a
        :class:`Join` holding these texts at ``positions`` (members then non-members), for
        their near-duplicate groups. ``users``: one user id per text (same order); the
        units are then users (:func:`user_clusters` folds, :func:`user_permutations`,
        :func:`sample_users`)."""
        texts = list(members) + list(nonmembers)
        y = np.r_[np.ones(len(members), int), np.zeros(len(nonmembers), int)]
        rng = np.random.default_rng(self.seed)
        keep = np.arange(len(texts))
        sampled = False
        if users is not None:
            users = list(users)
            if len(users) != len(texts):
                raise ValueError(f"{len(users)} user ids for {len(texts)} texts")
            chosen = sample_users(y, users, MAX_BLIND_PER_CLASS, rng)
            if chosen is not None:
                keep, sampled = chosen, True
        else:
            for cls in (1, 0):
                idx = np.flatnonzero(y == cls)
                if idx.size > MAX_BLIND_PER_CLASS:
                    drop = rng.choice(idx, idx.size - MAX_BLIND_PER_CLASS, replace=False)
                    keep = np.setdiff1d(keep, drop)
                    sampled = True
        sub = [texts[i] for i in keep]
        ys = y[keep]
        result: dict[str, Any] = {"n_members": int(ys.sum()), "n_nonmembers": int((1 - ys).sum())}
        full = np.full(len(texts), np.nan)
        fams = FAMILIES if self.families else {"combined": FAMILIES["combined"]}
        if join is not None:
            groups = duplicate_groups(sub, self.jaccard, join, np.asarray(positions)[keep])
        else:
            groups = duplicate_groups(sub, self.jaccard)
        sub_users = None
        if users is not None:
            sub_users = [users[i] for i in keep]
            groups = user_clusters(sub_users, groups)
            result.update(user_counts(ys, sub_users, groups))
        fold_id = text_folds(sub, groups, self.folds, self.seed)
        scores, h = cross_fit(sub, fold_id, ys, fams, "combined")
        full[keep] = scores["combined"]
        perm = permutation_test(
            h,
            ys,
            groups,
            self.permutations,
            self.seed,
            confidence=self.confidence,
            users=sub_users,
        )
        dl = delong_auc(scores["combined"], ys, self.confidence)
        # the interval inverts the permutation test under a shift of the AUC: its half-
        # widths are the distances from 0.5 to the relabelled AUCs' (1 -+ c) / 2
        # quantiles, so under H0 it misses 0.5 with probability <= 1 - c whatever the
        # texts' clusters (Ojala and Garriga 2010); never narrower than DeLong's z SE
        # (which assumes independent texts and one fixed classifier)
        auc = perm["value"]
        lo, hi = blind_interval(
            auc, perm["null_q_low"], perm["null_q_high"], dl["se"], self.confidence
        )
        result["auc"] = {
            "value": auc,
            "ci_low": lo,
            "ci_high": hi,
            "se": max(perm["null_sd"], dl["se"]),
            "null_q_low": perm["null_q_low"],
            "null_q_high": perm["null_q_high"],
            "p_value": perm["p_value"],
            "null_mean": perm["null_mean"],
            "null_sd": perm["null_sd"],
            "delong_se": dl["se"],
            "permutations": perm["permutations"],
        }
        result["detectable_auc"] = round(detectable_auc(perm["null_sd"], self.confidence), 4)
        result["families"] = {
            name: round(delong_auc(s, ys, self.confidence)["value"], 4)
            for name, s in scores.items()
            if name != "combined"
        }
        result["subsampled"] = sampled
        return result, full

    def run(
        self,
        members: list[str],
        nonmembers: list[str],
        dedupe: bool = True,
        users: list[str] | None = None,
    ) -> tuple[dict[str, Any], np.ndarray | None]:
        """The split check of two text lists: near-duplicates (counted, and removed when
        ``dedupe``) then the blind baseline on what is left. Returns the results dict and
        the out-of-fold blind scores of the kept members then kept non-members.

        ``users``: one user id per text, members then non-members in the order of the
        texts (``len(members) + len(nonmembers)`` ids; any hashable id, compared by
        equality). Every user must be on one side (a ``ValueError`` names how many are on
        both), with at least 2 users a side. The unit is then the user: the folds never
        split a user (nor a near-duplicate group: users sharing a near-duplicate text are
        one cluster), the permutation test permutes users' labels (H0 "users were
        assigned to the sides at random", :func:`user_permutations`), the sub-sample above
        ``MAX_BLIND_PER_CLASS`` draws whole users (:func:`sample_users`), and the record
        states the unit (``unit``, ``users``, the blind part's user counts). Cross-set
        near-duplicates are found and removed as without users, also when the two texts
        are two users' texts. ``None``: texts are the units (results as before)."""
        if len(members) < 2 or len(nonmembers) < 2:
            raise ValueError(
                "the split check needs at least 2 members and 2 non-members, got "
                f"{len(members)} and {len(nonmembers)}"
            )
        if users is not None:
            users = check_users(users, len(members), len(nonmembers))
        # Without sub-sampling the blind baseline groups the very texts the near-duplicate
        # pass joins (less the removed ones): join them once, not twice (at
        # 1,600-character texts the join is most of the split check's cost).
        join = None
        if len(members) <= MAX_BLIND_PER_CLASS and len(nonmembers) <= MAX_BLIND_PER_CLASS:
            join = Join(list(members) + list(nonmembers), self.jaccard)
        dups = self.duplicates(members, nonmembers, join)
        keep_m, keep_n = list(range(len(members))), list(range(len(nonmembers)))
        if dedupe:
            dm, dn = set(dups["member_index"]), set(dups["nonmember_index"])
            keep_m = [i for i in keep_m if i not in dm]
            keep_n = [j for j in keep_n if j not in dn]
        kept_users = None
        if users is not None:
            nm = len(members)
            dups["member_users_involved"] = len({users[i] for i in dups["member_index"]})
            dups["nonmember_users_involved"] = len({users[nm + j] for j in dups["nonmember_index"]})
            kept_users = [users[i] for i in keep_m] + [users[nm + j] for j in keep_n]
        out: dict[str, Any] = {
            "method": "cross-fitted kernel ridge (word 1-2-gram and char 2-4-gram TF-IDF, "
            f"length, number and date tokens; pre-specified block weights), {self.folds} "
            f"label-free folds; label-permutation test ({self.permutations} relabellings): "
            f"split-shifted when the one-sided p <= {(1 - self.confidence) / 2:g} and the "
            f"{100 * self.confidence:g}% interval (the same test inverted: relabelled AUC "
            "quantiles, each half-width at least DeLong's z SE) lies above 0.5",
            "confidence": self.confidence,
            "difference_confidence": DIFFERENCE_CONFIDENCE,
            "duplicates": dups,
            "removed_from_attack_set": bool(dedupe),
            "advice": ADVICE,
        }
        if users is not None:
            nm = len(members)
            out["method"] += (
                "; users as units: folds never split a user (users sharing a near-duplicate "
                "text are one cluster), the relabellings permute whole users' labels among "
                "clusters of as many users (number of member users kept)"
            )
            out["unit"] = "user"
            out["users"] = {
                "members": len(set(users[:nm])),
                "nonmembers": len(set(users[nm:])),
            }
        left_m = len(keep_m) if kept_users is None else len(set(kept_users[: len(keep_m)]))
        left_n = len(keep_n) if kept_users is None else len(set(kept_users[len(keep_m) :]))
        if len(keep_m) < 2 or len(keep_n) < 2 or left_m < 2 or left_n < 2:
            out.update(status="not-measured", shifted=None, blind={})
            out["reason"] = (
                "fewer than 2 members or non-members left after removing duplicates"
                if kept_users is None
                else "fewer than 2 member or non-member users left after removing duplicates"
            )
            return out, None
        blind, scores = self.blind(
            [members[i] for i in keep_m],
            [nonmembers[j] for j in keep_n],
            join,
            np.r_[np.asarray(keep_m, np.int64), len(members) + np.asarray(keep_n, np.int64)],
            users=kept_users,
        )
        out["blind"] = blind
        out["shifted"] = is_shifted(blind["auc"], self.confidence)
        out["status"] = "shifted" if out["shifted"] else "ok"
        out["text"] = split_text(out)
        return out, scores


def check_users(users, n_members: int, n_nonmembers: int) -> list:
    """The user ids as a list, after the checks :meth:`SplitCheck.run` needs: one id per
    text, no user on both sides, at least 2 users a side (``ValueError`` otherwise)."""
    users = list(users)
    if len(users) != n_members + n_nonmembers:
        raise ValueError(
            f"{len(users)} user ids for {n_members} members and {n_nonmembers} non-members "
            "(one id per text, members first)"
        )
    if any(u is None for u in users):
        raise ValueError(f"{sum(u is None for u in users)} text(s) have no user id")
    m, n = set(users[:n_members]), set(users[n_members:])
    both = m & n
    if both:
        raise ValueError(
            f"{len(both)} of {len(m | n)} users have texts on both sides (e.g. "
            f"{sorted(map(str, both))[0]!r}); every user must be a member or a non-member"
        )
    if len(m) < 2 or len(n) < 2:
        raise ValueError(
            "the split check with users as units needs at least 2 member users and 2 "
            f"non-member users, got {len(m)} and {len(n)}"
        )
    return users


def split_text(check: dict[str, Any]) -> str:
    """One plain-language paragraph on the split check (for the report and the verdict)."""
    blind = check.get("blind") or {}
    auc = blind.get("auc") or {}
    d = check.get("duplicates") or {}
    parts = []
    if auc:
        conf = check.get("confidence")
        level = f"{100 * conf:g}% interval; " if isinstance(conf, int | float) else ""
        head = (
            f"A classifier that never sees the model tells members from non-members with "
            f"blind AUC {auc['value']:.3f} [{auc['ci_low']:.3f}, {auc['ci_high']:.3f}] "
            f"({level}{_side(blind, 'member')}, {_side(blind, 'nonmember')}"
            + (
                f"; permutation p = {auc['p_value']:.3g}"
                + (" with users as the units" if "n_member_users" in blind else "")
                if isinstance(auc.get("p_value"), int | float)
                else ""
            )
            + ")"
        )
        if check.get("shifted"):
            head += (
                ": the two sets differ in their text itself, so the membership attacks "
                "measure that difference as well as any memorisation."
            )
        else:
            head += ": not significantly above chance, so no shift between the sets was found"
            det = blind.get("detectable_auc")
            head += (
                f" (on this many texts the check detects a blind AUC of {det:.2f} or more "
                "with 80% power)."
                if isinstance(det, int | float)
                else "."
            )
        parts.append(head)
    if d.get("pairs"):
        parts.append(
            f"{d['pairs']} near-duplicate member/non-member pair(s) found "
            f"({d.get('exact_pairs', 0)} identical after normalising); "
            f"{d.get('members_removed', 0)} member(s) and {d.get('nonmembers_removed', 0)} "
            "non-member(s) were removed from the attack set."
        )
    return " ".join(parts)


def _side(blind: dict[str, Any], side: str) -> str:
    """``"40 members"``, or ``"40 members of 12 users"`` when users were the units."""
    label = "members" if side == "member" else "non-members"
    out = f"{blind.get(f'n_{side}s')} {label}"
    if f"n_{side}_users" in blind:
        out += f" of {blind[f'n_{side}_users']} users"
    return out


def compare_attacks(
    check: dict[str, Any],
    attacks: list[dict[str, Any]],
    blind: np.ndarray,
    users: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Each ``ok`` attack's AUC beside the blind AUC on the same examples, with the paired
    DeLong interval of (attack AUC - blind AUC). ``blind`` holds the blind out-of-fold
    score of every example of the attack set, in its order (members then non-members, as
    the attack records store them; ``nan`` where the blind classifier did not score it).
    ``users`` (one per example, same order): the difference's interval treats users as
    clusters (:func:`clustered_difference`)."""
    conf = float(check.get("difference_confidence", DIFFERENCE_CONFIDENCE))
    blind = np.asarray(blind, dtype=np.float64)
    rows = []
    for att in attacks:
        ex = att.get("examples") if isinstance(att, dict) else None
        if att.get("status") != "ok" or not isinstance(ex, dict):
            continue
        scores = np.asarray(ex.get("scores", []), dtype=np.float64)
        mem = np.asarray(ex.get("members", []))
        if scores.size != blind.size:
            continue  # not scored on this attack set
        keep = np.isfinite(blind) & np.isfinite(scores)
        m = mem[keep]
        if keep.sum() < 4 or m.min() == m.max():
            continue
        if users is not None and len(users) == keep.size:
            kept_users = [g for g, k in zip(users, keep, strict=True) if k]
            diff = clustered_difference(scores[keep], blind[keep], m, kept_users, conf)
        else:
            diff = delong_difference(scores[keep], blind[keep], m, conf)
        rows.append(
            {
                "attack": att.get("attack"),
                "auc": delong_auc(scores[keep], m, conf)["value"],
                "blind_auc": delong_auc(blind[keep], m, conf)["value"],
                "difference": {k: diff[k] for k in ("value", "ci_low", "ci_high")},
                "n": int(keep.sum()),
            }
        )
    return rows
