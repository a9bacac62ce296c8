"""User-level membership statistics: the user, not the text, is the independent unit.

Conventions (as in :mod:`privacy_audit.stats.metrics`): ``scores`` are finite reals,
HIGHER = more likely a member; ``members`` holds 0/1 or booleans, 1 = member (the
positive class); ``groups`` names each text's user (any hashable values; they are
compared as strings).  Every user is on exactly one side: a member user had all of their
training texts in the training set, a non-member user none.

Assumption of every interval here: users are independent draws (members from one
population of users, non-members from another); the texts of one user may be dependent
in any way (same author, same topic, copies).  Intervals that resample texts as if they
were independent are too narrow on such data (measured in docs/users.md), so every
interval below resamples, or computes the variance over, USERS.

Style: the texts are sorted once (by user for the aggregates, by decreasing score for
the ROC); every statistic and every bootstrap replicate is derived from counts on that
fixed order (a bootstrap replicate is a vector of per-user multiplicities).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import t as student_t

from privacy_audit.stats.epsilon_bounds import check_delta, epsilon_lower_bound
from privacy_audit.stats.metrics import (
    REPORTED_FPRS,
    membership_metrics,
    tpr_resolution,
    unresolved_text,
)
from privacy_audit.stats.scores import (
    CHUNK_ELEMENTS,
    SortedScores,
    advantage_from_counts,
    best_threshold,
    check_confidence,
    check_n_boot,
    roc_counts_1d,
    tpr_at_fpr_from_counts,
    validate_scores,
)

__all__ = [
    "AGGREGATORS",
    "UserScores",
    "aggregate",
    "benjamini_hochberg",
    "cluster_bootstrap",
    "clustered_auc",
    "group_privacy",
    "grouped_text_metrics",
    "texts_per_user",
    "user_dataset_inference",
    "user_index",
    "user_metrics",
    "user_pvalues",
    "user_scores",
]

#: Per-user aggregates of per-text scores (higher = member).  "mean": the mean of the
#: user's text scores; "lr-sum": their sum (Kandpal et al. 2023's user-inference
#: statistic when the per-text score is log p_target(x) - log p_ref(x)); "median": the
#: median, robust to a few long texts dominating.
AGGREGATORS = ("mean", "lr-sum", "median")

#: Expected false-positive users (non-member users x FPR) below which the user-bootstrap
#: TPR interval is not reported. Measured (docs/users.md, coverage): at 7.5 (150 Debian
#: users, 5% FPR) it covered 92.5% [90.7, 94.1] under the null, below the 93% bar; every
#: cell at 15 or more covered >= 94.1%. A round number above the failing cell, not tuned.
MIN_BOOTSTRAP_FALSE_POSITIVES = 10

#: How each interval of :func:`grouped_text_metrics` is computed.
GROUPED_CI_METHODS = {
    "auc": "cluster-robust DeLong variance (Obuchowski 1997, users as clusters), logit scale",
    "tpr_at_fpr": "user bootstrap (users resampled within each side), expanded percentile",
    "advantage": "lower: cluster-robust Wald (t quantile) at a threshold chosen on a separate "
    "half of the users; upper: user-bootstrap percentile",
    "balanced_accuracy": "cluster-robust Wald (t quantile) on half B of the users at the "
    "threshold chosen on half A",
}


# ---------------------------------------------------------------------------
# Users
# ---------------------------------------------------------------------------


def _as_groups(groups, n: int | None = None) -> np.ndarray:
    g = np.asarray(groups)
    if g.ndim != 1:
        raise ValueError(f"groups must be a 1-D sequence of user names (got {g.ndim}-D).")
    if g.shape[0] == 0:
        raise ValueError("groups must not be empty.")
    if n is not None and g.shape[0] != n:
        raise ValueError(
            f"groups must have one user name per text (got {g.shape[0]} names for {n} texts)."
        )
    g = g.astype(str)
    return g


def user_index(groups) -> tuple[list[str], np.ndarray]:
    """Sorted unique user names and each text's position in that list.

    Names are compared as strings (so ``1`` and ``"1"`` are one user).  Returns
    ``(names, idx)`` with ``names[idx[i]]`` the user of text ``i``.
    """
    g = _as_groups(groups)
    names, idx = np.unique(g, return_inverse=True)
    return [str(x) for x in names], idx.astype(np.int64)


def _check_scores(scores, n: int | None = None) -> np.ndarray:
    s = np.asarray(scores)
    if s.ndim != 1:
        raise ValueError(f"scores must be a 1-D array (got {s.ndim}-D).")
    if s.shape[0] == 0:
        raise ValueError("scores must not be empty.")
    if n is not None and s.shape[0] != n:
        raise ValueError(f"scores and groups must have the same length ({s.shape[0]} vs {n}).")
    if not (
        s.dtype == bool or np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)
    ):
        raise ValueError(f"scores must be real numbers (got dtype {s.dtype}).")
    s = s.astype(np.float64)
    bad = int(np.sum(~np.isfinite(s)))
    if bad:
        raise ValueError(f"scores must be finite; found {bad} NaN or infinite value(s).")
    return s


def _check_how(how: str) -> str:
    if how not in AGGREGATORS:
        raise ValueError(
            f"unknown aggregator {how!r}; allowed: {', '.join(repr(a) for a in AGGREGATORS)}."
        )
    return how


def _aggregate_idx(s: np.ndarray, idx: np.ndarray, n_users: int, how: str) -> np.ndarray:
    """Per-user aggregate from scores and user positions (every user has >= 1 text)."""
    counts = np.bincount(idx, minlength=n_users)
    if how == "lr-sum":
        return np.bincount(idx, weights=s, minlength=n_users)
    if how == "mean":
        return np.bincount(idx, weights=s, minlength=n_users) / counts
    # median: one sort by (user, score); the middle one or two of each user's run
    order = np.lexsort((s, idx))
    ss = s[order]
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    lo = ss[starts + (counts - 1) // 2]
    hi = ss[starts + counts // 2]
    return lo / 2.0 + hi / 2.0


def aggregate(scores, groups, how: str = "mean") -> tuple[list[str], np.ndarray]:
    """Per-user aggregate of per-text scores, users in :func:`user_index` order.

    ``how`` is one of :data:`AGGREGATORS`.  NaN or infinite scores raise ``ValueError``
    (a missing score must not silently lower or raise a user's aggregate).
    """
    how = _check_how(how)
    names, idx = user_index(groups)
    s = _check_scores(scores, idx.size)
    return names, _aggregate_idx(s, idx, len(names), how)


@dataclass
class UserScores:
    """Per-user scores: ``names`` (sorted), ``scores`` (the aggregate), ``members``
    (int 0/1 per user) and ``n_texts`` (texts per user), all in the same order."""

    names: list[str]
    scores: np.ndarray
    members: np.ndarray
    n_texts: np.ndarray


def _prepare(scores, members, groups):
    """Validate text-level inputs; return ``(s, m, names, idx, user_member)``.

    ValueError when the lengths differ, an input is empty, a score is NaN, a side is
    empty, or users have texts on both sides (the message names how many users).
    """
    g = _as_groups(groups)
    s, m = validate_scores(scores, members)
    if g.shape[0] != s.shape[0]:
        raise ValueError(
            f"groups must have one user name per text (got {g.shape[0]} names for "
            f"{s.shape[0]} texts)."
        )
    names, idx = np.unique(g, return_inverse=True)
    idx = idx.astype(np.int64)
    k = names.size
    n_in = np.bincount(idx, weights=m, minlength=k)
    n_all = np.bincount(idx, minlength=k)
    both = int(np.sum((n_in > 0) & (n_in < n_all)))
    if both:
        raise ValueError(
            f"{both} user(s) have texts on both sides (member and non-member); every user "
            "must be on exactly one side."
        )
    return s, m, [str(x) for x in names], idx, n_in > 0


def user_scores(scores, members, groups, how: str = "mean") -> UserScores:
    """Aggregate per-text scores into one score per user (see :data:`AGGREGATORS`).

    ValueError naming the count when users have texts on both sides.
    """
    how = _check_how(how)
    s, _, names, idx, um = _prepare(scores, members, groups)
    agg = _aggregate_idx(s, idx, len(names), how)
    return UserScores(
        names=names,
        scores=agg,
        members=um.astype(np.int64),
        n_texts=np.bincount(idx, minlength=len(names)).astype(np.int64),
    )


def user_metrics(
    scores,
    members,
    groups,
    how: str = "mean",
    delta: float = 1e-5,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed=0,
) -> dict:
    """:func:`~privacy_audit.stats.metrics.membership_metrics` on the per-user scores.

    The users are the independent trials, so its intervals (DeLong, exact TPR bracket,
    split advantage, Clopper-Pearson ε bound) and the one resolvability rule
    (:func:`~privacy_audit.stats.metrics.tpr_resolution`) apply at the user level:
    ``n_members`` / ``n_nonmembers`` count users.  Adds ``"unit": "user"``,
    ``"aggregator"``, ``"n_member_users"``, ``"n_nonmember_users"``,
    ``"n_member_texts"``, ``"n_nonmember_texts"``.  Needs at least two users per side.
    """
    us = user_scores(scores, members, groups, how)
    n_mu = int(us.members.sum())
    if n_mu < 2 or us.members.size - n_mu < 2:
        raise ValueError(
            "user-level metrics need at least 2 users per side (got "
            f"{n_mu} member and {us.members.size - n_mu} non-member users)."
        )
    out = membership_metrics(us.scores, us.members, delta, n_boot, confidence, seed)
    mu = us.members.astype(bool)
    out.update(
        unit="user",
        aggregator=how,
        n_member_users=int(mu.sum()),
        n_nonmember_users=int((~mu).sum()),
        n_member_texts=int(us.n_texts[mu].sum()),
        n_nonmember_texts=int(us.n_texts[~mu].sum()),
    )
    return out


# ---------------------------------------------------------------------------
# Clustered AUC (Obuchowski 1997)
# ---------------------------------------------------------------------------


def _placements(s: np.ndarray, m: np.ndarray):
    """Per text: for a member, the share of non-member texts it beats (ties half);
    for a non-member, the share of member texts that beat it (ties half).  One sort."""
    ss = SortedScores(s, m)
    order = np.argsort(-s, kind="stable")  # the order SortedScores uses
    sizes = np.diff(np.r_[ss.group_starts, ss.scores.size])
    tp_g = np.repeat(ss.tp, sizes)
    fp_g = np.repeat(ss.fp, sizes)
    a_g = np.repeat(np.diff(np.r_[0, ss.tp]), sizes)
    b_g = np.repeat(np.diff(np.r_[0, ss.fp]), sizes)
    place = np.empty(s.size)
    lab = ss.labels
    # member: 1 - (non-members above + half the tied) / n_out
    place_sorted = np.where(lab, 1.0 - (fp_g - b_g / 2.0) / ss.n_out, (tp_g - a_g / 2.0) / ss.n_in)
    place[order] = place_sorted
    return place, ss


def _logit_interval(a: float, se: float, z: float, k: int) -> tuple[float, float]:
    """``logit(a) +- z se / (a (1 - a))`` mapped back (as
    :func:`~privacy_audit.stats.metrics.delong_logit_interval`); at a = 0 or 1 the exact
    end point of a rate with ``k`` trials."""
    if 0.0 < a < 1.0:
        lg = math.log(a / (1.0 - a))
        half = z * se / (a * (1.0 - a))
        return 1.0 / (1.0 + math.exp(-(lg - half))), 1.0 / (1.0 + math.exp(-(lg + half)))
    alpha = 2.0 * (1.0 - float(ndtr(z)))
    edge = 1.0 - (alpha / 2.0) ** (1.0 / k)
    return (1.0 - edge, 1.0) if a >= 1.0 else (0.0, edge)


def _clustered_auc(s, m, idx, um, confidence):
    place, ss = _placements(s, m)
    a = ss.auc()
    k = um.size
    n_in, n_out = ss.n_in, ss.n_out
    # Obuchowski (1997): per-user sums of structural components V_i and text counts n_i;
    # S = I / (I - 1) * sum_i (V_i - n_i A)^2 / N per side, Var(A) = S10/N_X + S01/N_Y
    # (no user on both sides, so no covariance term).  One text per user: DeLong.
    v = np.bincount(idx, weights=place, minlength=k)
    n = np.bincount(idx, minlength=k).astype(np.float64)
    var = 0.0
    for side, total in ((um, n_in), (~um, n_out)):
        users = int(side.sum())
        if users < 2:
            raise ValueError(
                f"a clustered AUC needs at least 2 users per side (got {users} on one side)."
            )
        dev = v[side] - n[side] * a
        var += users / (users - 1.0) * float(np.sum(dev * dev)) / total**2
    se = math.sqrt(var)
    z = float(-ndtri((1.0 - confidence) / 2.0))
    lo, hi = _logit_interval(a, se, z, int(min(um.sum(), (~um).sum())))
    return {
        "value": a,
        "ci_low": float(lo),
        "ci_high": float(hi),
        "se": se,
        "method": GROUPED_CI_METHODS["auc"],
    }


def clustered_auc(scores, members, groups, confidence: float = 0.95) -> dict:
    """Text-level AUC with a cluster-robust (user-level) DeLong variance.

    Value: the area under the empirical ROC of all texts (Mann-Whitney, ties half).
    Variance (Obuchowski 1997): with ``V_i`` the sum over user i's texts of their
    placement values and ``n_i`` their count, per side
    ``S = I/(I-1) sum_i (V_i - n_i A)^2 / N`` (I users, N texts on that side) and
    ``Var(A) = S10 / N_members + S01 / N_nonmembers``; no user has texts on both sides,
    so the covariance term is 0.  With one text per user this is DeLong's variance.
    Interval on the logit scale, as :func:`~privacy_audit.stats.metrics.delong_logit_interval`.
    Assumes independent users; texts within a user may be arbitrarily dependent.
    Returns ``{"value", "ci_low", "ci_high", "se", "method"}``.
    """
    confidence = check_confidence(confidence)
    s, m, _, idx, um = _prepare(scores, members, groups)
    return _clustered_auc(s, m, idx, um, confidence)


# ---------------------------------------------------------------------------
# User bootstrap
# ---------------------------------------------------------------------------


def _user_weights(rng, um: np.ndarray, rows: int) -> np.ndarray:
    """Per-user multiplicities of ``rows`` stratified user resamples: the member users
    are drawn with replacement (as many draws as member users), and so are the
    non-member users.  Shape ``(rows, n_users)``; a text's weight is its user's."""
    w = np.zeros((rows, um.size), dtype=np.int64)
    for side in (np.flatnonzero(um), np.flatnonzero(~um)):
        w[:, side] = rng.multinomial(side.size, np.full(side.size, 1.0 / side.size), size=rows)
    return w


def _text_weights(rng, um, idx, rows: int) -> np.ndarray:
    """Per-text resampling weights ``(rows, n_texts)``: every text carries its user's
    multiplicity, so all texts of a drawn user come along."""
    return _user_weights(rng, um, rows)[:, idx]


def _percentile(values: np.ndarray, confidence: float) -> tuple[float, float]:
    lo, hi = np.nanquantile(values, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return float(lo), float(hi)


def _expanded_level(confidence: float, g: int) -> float:
    """Level of the expanded percentile interval (Hesterberg 2015): the percentile
    bootstrap is too narrow by about sqrt((G - 1) / G) and a normal instead of a t
    quantile, so use the percentiles at ``Phi(-sqrt(G / (G - 1)) t_{G-1, 1 - a/2})``;
    G = the fewer users per side."""
    q = math.sqrt(g / (g - 1.0)) * float(student_t.ppf((1.0 + confidence) / 2.0, g - 1))
    return 1.0 - 2.0 * float(ndtr(-q))


def cluster_bootstrap(
    scores,
    members,
    groups,
    statistic: Callable[[np.ndarray, np.ndarray], float],
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed=0,
) -> dict:
    """Percentile interval of ``statistic(scores, members)`` from a user bootstrap.

    Each replicate draws the member users with replacement (as many as there are) and,
    separately, the non-member users (stratified, so both sides keep their user counts);
    all texts of a drawn user come along, once per draw.  ``statistic`` receives the
    replicate's texts (scores, 0/1 members) and returns a float.  Valid when users are
    independent; the percentile interval of a max-type statistic (advantage, TPR at a
    low FPR) is biased like any percentile bootstrap of it.
    Returns ``{"value", "ci_low", "ci_high", "n_boot", "method"}``.
    """
    if not callable(statistic):
        raise ValueError("statistic must be a callable f(scores, members) -> float.")
    n_boot = check_n_boot(n_boot)
    confidence = check_confidence(confidence)
    s, m, _, idx, um = _prepare(scores, members, groups)
    mi = m.astype(np.int64)
    rng = np.random.default_rng(seed)
    reps = np.empty(n_boot)
    rows = int(max(1, min(n_boot, CHUNK_ELEMENTS // max(s.size, 1))))
    done = 0
    base = np.arange(s.size)
    while done < n_boot:
        k = min(rows, n_boot - done)
        w = _text_weights(rng, um, idx, k)
        for i in range(k):
            pick = np.repeat(base, w[i])
            reps[done + i] = float(statistic(s[pick], mi[pick]))
        done += k
    lo, hi = _percentile(reps, confidence)
    return {
        "value": float(statistic(s, mi)),
        "ci_low": lo,
        "ci_high": hi,
        "n_boot": n_boot,
        "method": "user bootstrap (stratified by side), percentile",
    }


def _weighted_reps(s, m, idx, um, n_boot: int, rng, fprs) -> dict[str, np.ndarray]:
    """User-bootstrap replicates of the advantage and TPR at ``fprs``: one sort by score,
    per replicate the ROC counts are cumulative sums of the texts' user multiplicities
    (summed within tie groups, so tied texts move together)."""
    order = np.argsort(-s, kind="stable")
    ss, lab, uidx = s[order], m[order], idx[order]
    ends = np.r_[ss[:-1] != ss[1:], True]
    starts = np.r_[0, np.flatnonzero(ends)[:-1] + 1]
    out = {"advantage": [], **{x: [] for x in fprs}}
    rows = int(max(1, min(n_boot, CHUNK_ELEMENTS // max(s.size, 1))))
    done = 0
    while done < n_boot:
        k = min(rows, n_boot - done)
        w = _text_weights(rng, um, uidx, k)
        wm = np.add.reduceat(np.where(lab, w, 0), starts, axis=1)
        wn = np.add.reduceat(np.where(lab, 0, w), starts, axis=1)
        tp, fp = np.cumsum(wm, axis=1), np.cumsum(wn, axis=1)
        n_in = tp[:, -1].astype(np.float64)
        n_out = fp[:, -1].astype(np.float64)
        out["advantage"].append(advantage_from_counts(tp, fp, n_in, n_out))
        for x in fprs:
            out[x].append(tpr_at_fpr_from_counts(tp, fp, n_in, n_out, x))
        done += k
    return {key: np.concatenate(v) for key, v in out.items()}


# ---------------------------------------------------------------------------
# Text-level metrics with user-level intervals
# ---------------------------------------------------------------------------


def user_halves(um: np.ndarray, seed) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified halves of the USERS (boolean masks over users); half B, the one
    counted on, is never the smaller one."""
    rng = np.random.default_rng(seed)
    a = np.zeros(um.size, dtype=bool)
    for side in (np.flatnonzero(um), np.flatnonzero(~um)):
        perm = rng.permutation(side)
        a[perm[: side.size // 2]] = True
    return a, ~a


def _cluster_rate(hit: np.ndarray, idx: np.ndarray, users: np.ndarray):
    """Ratio estimate ``p = sum_i a_i / sum_i n_i`` over ``users`` (a_i: texts of user i
    with ``hit``) and its Agresti-Caffo-adjusted rate ``(a + 1) / (N + 2)`` with variance
    ``max(cluster-robust, binomial)``: ``I/(I-1) sum_i (a_i - p n_i)^2 / N^2`` (the
    linearised variance of a ratio over independent clusters), floored at the binomial
    ``p (1 - p) / (N + 2)`` so that a rate of 0 or 1 keeps some width."""
    k = users.size
    a_u = np.bincount(idx, weights=hit, minlength=k)[users]
    n_u = np.bincount(idx, minlength=k)[users].astype(np.float64)
    n_tot = n_u.sum()
    i = users.sum()
    p_adj = (a_u.sum() + 1.0) / (n_tot + 2.0)
    dev = a_u - p_adj * n_u
    robust = i / max(i - 1.0, 1.0) * float(np.sum(dev * dev)) / (n_tot + 2.0) ** 2
    return p_adj, max(robust, p_adj * (1.0 - p_adj) / (n_tot + 2.0))


def _grouped_split(s, m, idx, um, seed, confidence):
    """Threshold maximising TPR - FPR on the texts of half A of the users; on half B the
    plain rates, and a cluster-robust Wald interval for TPR - FPR at that threshold.
    The quantile is Student's t with G - 1 degrees of freedom, G the fewer users per side
    in half B (the usual small-sample rule for cluster-robust variances, Cameron & Miller
    2015): with ~20 users per side a normal quantile covered 92.4 % (docs/users.md)."""
    half_a, half_b = user_halves(um, seed)
    in_a = half_a[idx]
    sa, ma = s[in_a], m[in_a]
    ss, tp, fp, ends = roc_counts_1d(sa, ma)
    thr = best_threshold(ss[None], tp[None], fp[None], ends[None], int(ma.sum()), int((~ma).sum()))[
        0
    ]
    hit = (s >= thr).astype(np.float64)
    b_in = half_b & um
    b_out = half_b & ~um
    p1, v1 = _cluster_rate(hit, idx, b_in)
    p0, v0 = _cluster_rate(hit, idx, b_out)
    in_b = half_b[idx]
    tpr = float(hit[in_b & m].mean())
    fpr = float(hit[in_b & ~m].mean())
    g_b = int(min(b_in.sum(), b_out.sum()))
    z = float(student_t.ppf((1.0 + confidence) / 2.0, max(g_b - 1, 1)))
    half = z * math.sqrt(v1 + v0)
    return tpr, fpr, p1 - p0 - half, p1 - p0 + half, float(thr)


def one_text_per_user(idx: np.ndarray, n_users: int, seed) -> np.ndarray:
    """Index of one seeded random text per user (so the ε bound's trials are users)."""
    rng = np.random.default_rng(seed)
    key = rng.random(idx.size)
    order = np.lexsort((key, idx))
    first = np.r_[True, idx[order][1:] != idx[order][:-1]]
    return order[first]


def grouped_text_metrics(
    scores,
    members,
    groups,
    delta: float = 1e-5,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed=0,
) -> dict:
    """Text-level metrics whose intervals treat users as the independent unit.

    Same keys and conventions as :func:`~privacy_audit.stats.metrics.membership_metrics`
    (values are text-level: every text is one trial of the score):

    * ``"auc"``: :func:`clustered_auc` (cluster-robust DeLong, logit scale), plus ``"se"``.
    * ``"tpr_at_fpr_x"`` for x in ``REPORTED_FPRS``: value = largest TPR with empirical
      text FPR <= x; interval = user-bootstrap expanded percentile (Hesterberg 2015:
      percentiles at ``Phi(-sqrt(G/(G-1)) t_{G-1})``, G the fewer users per side; the
      plain percentile covered 92.2 % [90.4, 93.8] at TPR@5 %, 150 users per side).  The resolvability rule
      :func:`~privacy_audit.stats.metrics.tpr_resolution` is applied with the number
      of NON-MEMBER USERS (the independent trials that set the threshold), so
      ``needs_nonmembers`` counts users; unresolved entries are null as in
      ``membership_metrics``.
    * ``"advantage"``: value = max over thresholds of TPR - FPR; lower limit = the
      cluster-robust Wald lower limit (t quantile) of TPR - FPR at a threshold chosen on
      half A of the users, counted on half B (a fixed threshold's advantage is at most the
      maximum); upper limit = user-bootstrap percentile of the plug-in maximum.
    * ``"balanced_accuracy"``: half B's balanced accuracy at half A's threshold
      (``"threshold"``), with the cluster-robust Wald interval mapped to (1 + d) / 2.
    * ``"epsilon_lower_bound"``: :func:`~privacy_audit.stats.epsilon_bounds.epsilon_lower_bound`
      (Clopper-Pearson, split threshold) on ONE seeded text per user, so that its
      trials are independent; ``"texts_used": "one per user"``.

    Plus ``"unit": "example"``, ``"resampled": "users"``, ``"n_member_users"``,
    ``"n_nonmember_users"``; ``n_members`` / ``n_nonmembers`` count texts.  Needs at
    least 4 users per side (two per half).
    """
    n_boot = check_n_boot(n_boot)
    confidence = check_confidence(confidence)
    delta = check_delta(delta)
    s, m, names, idx, um = _prepare(scores, members, groups)
    nu_in, nu_out = int(um.sum()), int((~um).sum())
    if nu_in < 4 or nu_out < 4:
        raise ValueError(
            f"grouped text metrics need at least 4 users per side (got {nu_in} member and "
            f"{nu_out} non-member users)."
        )
    alpha = 1.0 - confidence
    n_in, n_out = int(m.sum()), int((~m).sum())
    expanded = _expanded_level(confidence, min(nu_in, nu_out))
    result: dict = {"auc": _clustered_auc(s, m, idx, um, confidence)}

    ss = SortedScores(s, m)
    fprs = tuple(x for x in REPORTED_FPRS if x >= 1.0 / n_out)
    rng = np.random.default_rng(seed)
    reps = _weighted_reps(s, m, idx, um, n_boot, rng, fprs)
    result.update(_grouped_tpr_entries(ss, reps, nu_out, n_out, expanded))

    tpr_b, fpr_b, d_lo, d_hi, thr = _grouped_split(s, m, idx, um, seed, confidence)
    adv = ss.advantage()
    adv_hi = float(np.nanquantile(reps["advantage"], 1.0 - alpha / 2.0))
    result["advantage"] = {
        "value": adv,
        "ci_low": float(np.clip(min(d_lo, adv), 0.0, 1.0)),
        "ci_high": float(np.clip(max(adv_hi, adv), 0.0, 1.0)),
        "method": GROUPED_CI_METHODS["advantage"],
    }
    result["balanced_accuracy"] = {
        "value": float(0.5 * (tpr_b + 1.0 - fpr_b)),
        "ci_low": float(np.clip((1.0 + d_lo) / 2.0, 0.0, 1.0)),
        "ci_high": float(np.clip((1.0 + d_hi) / 2.0, 0.0, 1.0)),
        "threshold": thr,
        "method": GROUPED_CI_METHODS["balanced_accuracy"],
    }

    result["epsilon_lower_bound"] = _one_per_user_epsilon(
        s, m, idx, len(names), delta, confidence, seed
    )
    result.update(
        n_members=n_in,
        n_nonmembers=n_out,
        unit="example",
        resampled="users",
        n_member_users=nu_in,
        n_nonmember_users=nu_out,
    )
    return result


def _grouped_tpr_entries(ss, reps: dict, nu_out: int, n_out: int, expanded: float) -> dict:
    """``{"tpr_at_fpr_x": ...}`` for x in ``REPORTED_FPRS`` (:func:`grouped_text_metrics`):
    the text-level TPR with the user-bootstrap expanded percentile interval (``reps``:
    the replicates per FPR, ``expanded``: the percentile level), or null values where the
    ``nu_out`` non-member users do not resolve x (:func:`tpr_resolution`) or hold fewer
    than ``MIN_BOOTSTRAP_FALSE_POSITIVES`` expected false positives (the bootstrap's own
    floor)."""
    result: dict = {}
    for x in REPORTED_FPRS:
        key = f"tpr_at_fpr_{x:g}"
        lo_hi = _percentile(reps[x], expanded) if x in reps else None
        ok, needs = tpr_resolution(x, nu_out, *(lo_hi or (None, None)))
        if nu_out * x < MIN_BOOTSTRAP_FALSE_POSITIVES:  # the bootstrap's own floor
            ok = False
            needs = max(needs or 0, math.ceil(MIN_BOOTSTRAP_FALSE_POSITIVES / x - 1e-9))
        entry = {"resolution": 1.0 / n_out, "method": GROUPED_CI_METHODS["tpr_at_fpr"]}
        if not ok:
            entry.update(
                value=None,
                ci_low=None,
                ci_high=None,
                below_resolution=True,
                needs_nonmembers=needs,
                reason=unresolved_text(needs).replace("non-members", "non-member users"),
            )
        else:
            v = ss.tpr_at_fpr(x)
            entry.update(
                value=v,
                ci_low=min(lo_hi[0], v),
                ci_high=max(lo_hi[1], v),
                below_resolution=False,
            )
        result[key] = entry
    return result


def _one_per_user_epsilon(s, m, idx, n_users: int, delta: float, confidence: float, seed):
    """``epsilon_lower_bound`` of :func:`grouped_text_metrics`: Clopper-Pearson at a split
    threshold on ONE seeded text per user (:func:`one_text_per_user`), so that its
    trials are independent (users assumed independent)."""
    one = one_text_per_user(idx, n_users, seed)
    lb = epsilon_lower_bound(
        s[one], m[one], delta, method="clopper-pearson", confidence=confidence, seed=seed
    )
    return {
        "value": lb,
        "ci_low": lb,
        "ci_high": None,
        "delta": float(delta),
        "confidence": confidence,
        "method": "clopper-pearson",
        "threshold": "split",
        "texts_used": "one per user",
    }


# ---------------------------------------------------------------------------
# User-level dataset inference
# ---------------------------------------------------------------------------


def _finite_1d(x, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D array.")
    bad = int(np.sum(~np.isfinite(a)))
    if bad:
        raise ValueError(f"{what} must be finite; found {bad} NaN or infinite value(s).")
    return a


def user_pvalues(test_scores, null_scores) -> np.ndarray:
    """Conformal p-values ``(1 + #{null >= s}) / (1 + m)`` for each test user's score.

    ``null_scores``: the scores of m held-out users known NOT to be in the training set.
    Higher = member.  If a test user is exchangeable with the null users (drawn from the
    same population of non-members and scored the same way), its p-value is
    super-uniform: ``P(p <= a) <= a`` for every a.  One sort of the null.
    """
    t = _finite_1d(test_scores, "test_scores")
    null = np.sort(_finite_1d(null_scores, "null_scores"))
    above = null.size - np.searchsorted(null, t, side="left")  # null >= s
    return (1.0 + above) / (1.0 + null.size)


def benjamini_hochberg(pvalues, q: float = 0.05) -> np.ndarray:
    """Benjamini-Hochberg (1995) step-up: reject the k smallest p-values, k the largest
    i with ``p_(i) <= i q / n``.  Controls the false-discovery rate at q for independent
    or positively dependent (PRDS) p-values; conformal p-values sharing one null set are
    PRDS (Bates et al. 2023).  Returns a boolean mask in input order."""
    p = _finite_1d(pvalues, "pvalues")
    if not (0.0 < float(q) < 1.0):
        raise ValueError(f"q must be in (0, 1), got {q!r}.")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1].")
    n = p.size
    order = np.argsort(p, kind="stable")
    ok = np.flatnonzero(p[order] <= q * np.arange(1, n + 1) / n)
    reject = np.zeros(n, dtype=bool)
    if ok.size:
        reject[order[: ok[-1] + 1]] = True
    return reject


def user_dataset_inference(test_scores, null_scores, names, q: float = 0.05) -> dict:
    """Per-user p-values for "this user's texts were used", and the users found at FDR q.

    ``test_scores``: one aggregate score per tested user (``names`` in the same order);
    ``null_scores``: the aggregates of held-out users known not to be in training.
    Returns ``{"pvalues": {name: p}, "found": [names BH selects at q], "n_tested",
    "n_found", "n_null", "q", "min_pvalue", "assumption"}``.  ``min_pvalue`` =
    1 / (1 + n_null): no user can be found with fewer than about n_tested / q null users.
    """
    t = _finite_1d(test_scores, "test_scores")
    names = [str(x) for x in names]
    if len(names) != t.size:
        raise ValueError(
            f"names must name every tested user ({len(names)} names, {t.size} scores)."
        )
    if len(set(names)) != len(names):
        raise ValueError(f"{len(names) - len(set(names))} tested user name(s) are repeated.")
    p = user_pvalues(t, null_scores)
    rej = benjamini_hochberg(p, q)
    n_null = int(np.asarray(null_scores).size)
    return {
        "pvalues": dict(zip(names, (float(x) for x in p), strict=True)),
        "found": [nm for nm, r in zip(names, rej, strict=True) if r],
        "n_tested": int(t.size),
        "n_found": int(rej.sum()),
        "n_null": n_null,
        "q": float(q),
        "min_pvalue": 1.0 / (1.0 + n_null),
        "assumption": "a tested user who was not trained on is exchangeable with the held-out "
        "null users (same population, same scoring); then each p-value is valid and the "
        "found list has a false-discovery rate of at most q",
    }


# ---------------------------------------------------------------------------
# Group privacy and the texts-per-user table
# ---------------------------------------------------------------------------


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(ε, δ)-DP per example implies (k ε, k e^{(k-1) ε} δ)-DP for a group of k examples
    (Dwork & Roth 2014, Thm 2.2 for δ = 0; the standard (ε, δ) group-privacy lemma).
    Rounded up to the next float (safe side); δ is capped at 1.  A user with k texts is
    a group of k."""
    eps = float(epsilon)
    d = float(delta)
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}.")
    if not (0.0 <= d <= 1.0):
        raise ValueError(f"delta must be in [0, 1], got {delta!r}.")
    if isinstance(k, bool) or int(k) != k or int(k) < 1:
        raise ValueError(f"k (texts per user) must be a positive integer, got {k!r}.")
    k = int(k)
    e_k = math.nextafter(k * eps, math.inf) if eps else 0.0
    if d == 0.0:
        return e_k, 0.0
    try:
        d_k = k * math.exp((k - 1) * eps) * d
    except OverflowError:
        d_k = math.inf
    d_k = min(1.0, math.nextafter(d_k, math.inf))
    return e_k, d_k


def _distribution(n: np.ndarray) -> dict:
    if n.size == 0:
        return {"min": None, "q25": None, "median": None, "q75": None, "max": None, "mean": None}
    q25, med, q75 = np.quantile(n, [0.25, 0.5, 0.75])
    return {
        "min": int(n.min()),
        "q25": float(q25),
        "median": float(med),
        "q75": float(q75),
        "max": int(n.max()),
        "mean": float(n.mean()),
    }


def texts_per_user(groups, members) -> dict:
    """Per side (``"members"``, ``"nonmembers"``): ``users``, ``texts`` and the
    texts-per-user distribution (min, q25, median, q75, max, mean; quantiles by
    linear interpolation).  ValueError when users have texts on both sides or a side
    has no text."""
    g = _as_groups(groups)
    _, m, _, idx, um = _prepare(np.zeros(g.size), members, g)
    n = np.bincount(idx, minlength=um.size)
    out = {}
    for key, side, mask in (("members", um, m), ("nonmembers", ~um, ~m)):
        out[key] = {
            "users": int(side.sum()),
            "texts": int(mask.sum()),
            "texts_per_user": _distribution(n[side]),
        }
    return out
