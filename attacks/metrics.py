"""Membership-inference metrics: ROC, AUC, TPR at low FPR, advantage, CIs.

Conventions used throughout the suite:

* ``scores`` is a 1-D array of finite real numbers; a HIGHER score means
  "more likely a member".
* ``members`` is a 1-D array of the same length holding 0/1 or booleans;
  1 / ``True`` marks a member (the positive class).
* A threshold ``t`` predicts "member" iff ``score >= t``.

All statistics treat the examples as independent draws: members from one
score distribution and non-members from another.  The confidence intervals
are only meaningful under that assumption.  Each function checks its inputs
and raises :class:`ValueError` with one sentence naming the problem.

Only numpy and scipy are used.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "advantage",
    "auc",
    "balanced_accuracy_split",
    "bootstrap_ci",
    "membership_metrics",
    "roc_curve",
    "tpr_at_fpr",
]

#: Names of the statistics that :func:`bootstrap_ci` computes in vectorised form.
VECTORISED_STATISTICS = (
    "auc",
    "tpr_at_fpr_0.001",
    "tpr_at_fpr_0.01",
    "advantage",
    "balanced_accuracy",
)

# Upper limit on the number of array elements handled at once by the
# vectorised bootstrap (about 32 MB per float64 work array).
_CHUNK_ELEMENTS = 4_000_000


# ---------------------------------------------------------------------------
# Input validation (shared with attacks.epsilon)
# ---------------------------------------------------------------------------


def _validate(scores, members) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(scores, members)`` as float64 and bool arrays, or raise ValueError."""
    s = np.asarray(scores)
    m = np.asarray(members)
    if s.ndim != 1 or m.ndim != 1:
        raise ValueError(f"scores and members must be 1-D arrays (got {s.ndim}-D and {m.ndim}-D).")
    if s.shape[0] != m.shape[0]:
        raise ValueError(
            f"scores and members must have the same length (got {s.shape[0]} and {m.shape[0]})."
        )
    if s.shape[0] == 0:
        raise ValueError("scores and members must not be empty.")
    if not (
        s.dtype == bool or np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)
    ):
        raise ValueError(f"scores must be real numbers (got dtype {s.dtype}).")
    s = s.astype(np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite; found NaN or infinite values.")
    if m.dtype == bool:
        mb = m
    else:
        if not (np.issubdtype(m.dtype, np.integer) or np.issubdtype(m.dtype, np.floating)):
            raise ValueError(f"members must hold 0/1 or boolean values (got dtype {m.dtype}).")
        if not np.all((m == 0) | (m == 1)):
            raise ValueError("members must hold only 0/1 or boolean values.")
        mb = m == 1
    n_in = int(mb.sum())
    if n_in == 0 or n_in == mb.shape[0]:
        present = "members" if n_in else "non-members"
        raise ValueError(f"members must contain both classes, but only {present} are present.")
    return s, mb


def _check_confidence(confidence) -> float:
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}.")
    return c


def _check_n_boot(n_boot) -> int:
    if isinstance(n_boot, bool) or int(n_boot) != n_boot or int(n_boot) < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}.")
    return int(n_boot)


def _check_split_sizes(n_in: int, n_out: int) -> None:
    if n_in < 2 or n_out < 2:
        raise ValueError(
            "a stratified split needs at least 2 members and 2 non-members "
            f"(got {n_in} and {n_out})."
        )


def _stratified_split(members: np.ndarray, seed) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified random halves; returns index arrays ``(half_a, half_b)``.

    Half A gets ``floor(k / 2)`` of each class (k = class size), half B the rest,
    so half B (the one used for counting) is never the smaller one.
    """
    rng = np.random.default_rng(seed)
    idx_in = rng.permutation(np.flatnonzero(members))
    idx_out = rng.permutation(np.flatnonzero(~members))
    h_in, h_out = idx_in.size // 2, idx_out.size // 2
    half_a = np.concatenate([idx_in[:h_in], idx_out[:h_out]])
    half_b = np.concatenate([idx_in[h_in:], idx_out[h_out:]])
    return half_a, half_b


# ---------------------------------------------------------------------------
# ROC core: one sort, ties collapsed
# ---------------------------------------------------------------------------


def _sorted_counts(
    sorted_scores: np.ndarray, sorted_labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative (TP, FP) per position of rows sorted by decreasing score.

    Inputs are 2-D ``(rows, n)``.  Returns ``(tp, fp, ends)`` where ``tp`` and
    ``fp`` hold, at every position, the counts obtained with the threshold
    equal to that position's score (so tied scores share the counts of the
    end of their tie group), and ``ends`` marks the last position of each
    tie group.  The ROC points of a row are its ``(fp, tp)`` pairs at
    ``ends``, preceded by ``(0, 0)``; repeated pairs at non-end positions are
    harmless duplicates for max/area computations.
    """
    rows, n = sorted_scores.shape
    tp = np.cumsum(sorted_labels, axis=1, dtype=np.int64)
    fp = np.arange(1, n + 1, dtype=np.int64) - tp
    ends = np.empty((rows, n), dtype=bool)
    ends[:, :-1] = sorted_scores[:, :-1] != sorted_scores[:, 1:]
    ends[:, -1] = True
    if not ends.all():
        # For each position, the index of the end of its tie group.
        pos = np.where(ends, np.arange(n), n - 1)
        nxt = np.minimum.accumulate(pos[:, ::-1], axis=1)[:, ::-1]
        tp = np.take_along_axis(tp, nxt, axis=1)
        fp = np.take_along_axis(fp, nxt, axis=1)
    return tp, fp, ends


def _auc_from_counts(tp: np.ndarray, fp: np.ndarray, n_in: int, n_out: int):
    """Trapezoidal area under (fp, tp) rows that start implicitly at (0, 0)."""
    zeros = np.zeros((tp.shape[0], 1), dtype=np.int64)
    tp0 = np.concatenate([zeros, tp], axis=1)
    fp0 = np.concatenate([zeros, fp], axis=1)
    area2 = np.sum(np.diff(fp0, axis=1) * (tp0[:, 1:] + tp0[:, :-1]), axis=1)
    return area2 / (2.0 * n_in * n_out)


def _tpr_at_fpr_from_counts(tp, fp, n_in: int, n_out: int, max_fpr: float):
    ok = (fp / n_out) <= max_fpr
    return np.max(np.where(ok, tp, 0), axis=1) / n_in


def _advantage_from_counts(tp, fp, n_in: int, n_out: int):
    return np.maximum(np.max(tp / n_in - fp / n_out, axis=1), 0.0)


def _best_threshold(sorted_scores, tp, fp, ends, n_in: int, n_out: int):
    """Threshold maximising TPR - FPR (= balanced accuracy) for each sorted row.

    The chosen threshold is the midpoint between the score of the best tie
    group and the next lower distinct score (``-inf`` when the best point is
    "everything is a member", ``+inf`` when no point beats (0, 0)).
    """
    rows, n = sorted_scores.shape
    gain = np.where(ends, tp / n_in - fp / n_out, -np.inf)
    best = np.argmax(gain, axis=1)
    r = np.arange(rows)
    best_gain = gain[r, best]
    here = sorted_scores[r, best]
    nxt_idx = np.minimum(best + 1, n - 1)
    below = np.where(best + 1 < n, sorted_scores[r, nxt_idx], -np.inf)
    thr = np.where(np.isfinite(below), here / 2.0 + below / 2.0, -np.inf)
    # The starting point (0, 0) has gain 0; keep it when nothing beats it.
    return np.where(best_gain > 0, thr, np.inf)


def _roc_counts_1d(s: np.ndarray, m: np.ndarray):
    order = np.argsort(-s)
    ss = s[order][None, :]
    tp, fp, ends = _sorted_counts(ss, m[order][None, :])
    return ss[0], tp[0], fp[0], ends[0]


# ---------------------------------------------------------------------------
# Public point statistics
# ---------------------------------------------------------------------------


def roc_curve(scores, members) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact empirical ROC curve.

    Rule: predict "member" iff ``score >= threshold``.  One sort, O(n log n).
    Tied scores move together (one ROC point per distinct score), so the
    curve does not depend on the order of tied examples.

    Returns ``(fpr, tpr, thresholds)``: the first point is ``(0, 0)`` with
    threshold ``+inf``; the following thresholds are the distinct scores in
    decreasing order, and the last point is ``(1, 1)`` (threshold = the
    smallest score).  Assumes nothing about the score distributions; the rates
    are plain empirical frequencies.
    """
    s, m = _validate(scores, members)
    n_in, n_out = int(m.sum()), int((~m).sum())
    ss, tp, fp, ends = _roc_counts_1d(s, m)
    fpr = np.concatenate([[0.0], fp[ends] / n_out])
    tpr = np.concatenate([[0.0], tp[ends] / n_in])
    thresholds = np.concatenate([[np.inf], ss[ends]])
    return fpr, tpr, thresholds


def auc(scores, members) -> float:
    """Area under the empirical ROC curve.

    Equals the Mann-Whitney probability P(member score > non-member score)
    + 0.5 P(tie), estimated over all member/non-member pairs.  0.5 means no
    separation, 1 perfect separation, 0 perfectly reversed scores.
    """
    s, m = _validate(scores, members)
    n_in, n_out = int(m.sum()), int((~m).sum())
    _, tp, fp, _ = _roc_counts_1d(s, m)
    return float(_auc_from_counts(tp[None], fp[None], n_in, n_out)[0])


def tpr_at_fpr(scores, members, max_fpr: float) -> float:
    """Largest TPR among ROC points whose FPR is <= ``max_fpr`` (LiRA convention).

    Resolution: with ``n`` non-members the empirical FPR moves in steps of
    ``1/n``, so ``max_fpr < 1/n`` means "TPR at zero false positives".  For
    example at 0.1% with 500 non-members this is the TPR at zero false
    positives; reporting it as "TPR at 0.1% FPR" is then optimistic about the
    resolution, so report ``n_nonmembers`` next to it.  The value is a
    maximum over thresholds chosen on the same data, hence biased upwards
    for small samples.
    """
    s, m = _validate(scores, members)
    x = float(max_fpr)
    if not (0.0 <= x <= 1.0) or not np.isfinite(x):
        raise ValueError(f"max_fpr must be in [0, 1], got {max_fpr!r}.")
    n_in, n_out = int(m.sum()), int((~m).sum())
    _, tp, fp, _ = _roc_counts_1d(s, m)
    return float(_tpr_at_fpr_from_counts(tp[None], fp[None], n_in, n_out, x)[0])


def advantage(scores, members) -> float:
    """Membership advantage (Yeom et al. 2018): max over thresholds of TPR - FPR.

    Always >= 0 (the trivial thresholds give 0).  The maximum is taken on the
    same data it is reported on, so it is biased upwards for small samples;
    :func:`balanced_accuracy_split` gives an estimate free of that bias.
    """
    s, m = _validate(scores, members)
    n_in, n_out = int(m.sum()), int((~m).sum())
    _, tp, fp, _ = _roc_counts_1d(s, m)
    return float(_advantage_from_counts(tp[None], fp[None], n_in, n_out)[0])


def balanced_accuracy_split(scores, members, seed=0) -> float:
    """Balanced accuracy of a threshold chosen on one half, measured on the other.

    The examples are split into two stratified random halves (seeded by
    ``seed``).  On half A the threshold maximising balanced accuracy
    (TPR + TNR) / 2 is chosen (the midpoint between the best score and the
    next lower one); the balanced accuracy of that threshold on the disjoint
    half B is returned.  Because half B played no part in choosing the
    threshold, the result is an unbiased estimate of the accuracy of the
    selected threshold (no optimistic selection bias, unlike
    ``(1 + advantage) / 2``).  Assumes independent examples; needs at least
    two members and two non-members.
    """
    s, m = _validate(scores, members)
    _check_split_sizes(int(m.sum()), int((~m).sum()))
    half_a, half_b = _stratified_split(m, seed)
    sa, ma = s[half_a], m[half_a]
    ss, tp, fp, ends = _roc_counts_1d(sa, ma)
    thr = _best_threshold(
        ss[None], tp[None], fp[None], ends[None], int(ma.sum()), int((~ma).sum())
    )[0]
    sb, mb = s[half_b], m[half_b]
    pred = sb >= thr
    return float(0.5 * (np.mean(pred[mb]) + np.mean(~pred[~mb])))


# ---------------------------------------------------------------------------
# Bootstrap
# ---------------------------------------------------------------------------


def _chunk_rows(n: int, n_boot: int) -> int:
    return int(max(1, min(n_boot, _CHUNK_ELEMENTS // max(n, 1))))


def _resample_chunks(rng, n_in: int, n_out: int, n_boot: int):
    """Yield ``(idx_in, idx_out)`` index blocks for the stratified bootstrap."""
    rows = _chunk_rows(n_in + n_out, n_boot)
    done = 0
    while done < n_boot:
        k = min(rows, n_boot - done)
        yield rng.integers(0, n_in, size=(k, n_in)), rng.integers(0, n_out, size=(k, n_out))
        done += k


def _vectorised_bootstrap(
    s_in: np.ndarray, s_out: np.ndarray, names, n_boot: int, seed
) -> dict[str, np.ndarray]:
    """Bootstrap replicates of the named statistics, one sort per resample.

    Each resample draws ``n_in`` members and ``n_out`` non-members with
    replacement.  For ``"balanced_accuracy"`` the first ``floor(n_in/2)``
    member draws and ``floor(n_out/2)`` non-member draws of a resample form
    half A and the rest half B; since the draws are i.i.d. this is a random
    stratified split, as in :func:`balanced_accuracy_split`.  Half A's sorted
    order is read off the resample's single sort.
    """
    n_in, n_out = s_in.size, s_out.size
    n = n_in + n_out
    h_in, h_out = n_in // 2, n_out // 2
    want_ba = "balanced_accuracy" in names
    labels = np.zeros(n, dtype=bool)
    labels[:n_in] = True
    in_a = np.zeros(n, dtype=bool)
    in_a[:h_in] = True
    in_a[n_in : n_in + h_out] = True
    out = {name: [] for name in names}
    rng = np.random.default_rng(seed)
    for idx_in, idx_out in _resample_chunks(rng, n_in, n_out, n_boot):
        rows = idx_in.shape[0]
        block = np.concatenate([s_in[idx_in], s_out[idx_out]], axis=1)
        order = np.argsort(-block, axis=1)
        ss = np.take_along_axis(block, order, axis=1)
        tp, fp, ends = _sorted_counts(ss, labels[order])
        for name in names:
            if name == "auc":
                out[name].append(_auc_from_counts(tp, fp, n_in, n_out))
            elif name == "advantage":
                out[name].append(_advantage_from_counts(tp, fp, n_in, n_out))
            elif name.startswith("tpr_at_fpr_"):
                x = float(name[len("tpr_at_fpr_") :])
                out[name].append(_tpr_at_fpr_from_counts(tp, fp, n_in, n_out, x))
        if want_ba:
            sel = in_a[order]
            order_a = order[sel].reshape(rows, h_in + h_out)
            ss_a = np.take_along_axis(block, order_a, axis=1)
            tp_a, fp_a, ends_a = _sorted_counts(ss_a, labels[order_a])
            thr = _best_threshold(ss_a, tp_a, fp_a, ends_a, h_in, h_out)[:, None]
            tpr_b = np.mean(block[:, h_in:n_in] >= thr, axis=1)
            tnr_b = np.mean(block[:, n_in + h_out :] < thr, axis=1)
            out["balanced_accuracy"].append(0.5 * (tpr_b + tnr_b))
    return {name: np.concatenate(v) for name, v in out.items()}


def _percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return float(lo), float(hi)


def bootstrap_ci(
    statistic: Callable[[np.ndarray, np.ndarray], float] | str,
    scores,
    members,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed=0,
) -> tuple[float, float]:
    """Stratified percentile-bootstrap confidence interval of a statistic.

    Each of ``n_boot`` resamples draws the members with replacement (keeping
    their count) and, separately, the non-members with replacement (keeping
    their count); the interval is the ``(1 - confidence)/2`` and
    ``(1 + confidence)/2`` quantiles of the statistic over the resamples.

    ``statistic`` is either a callable ``f(scores, members) -> float`` (called
    once per resample; members come first in each resample) or one of the
    names in :data:`VECTORISED_STATISTICS`, computed for all resamples at
    once from one sort per resample.  For a callable and the matching name,
    the same ``seed`` gives the same resamples.

    Assumptions: examples are independent, and the statistic is smooth
    enough for the percentile bootstrap to be accurate.  It is accurate for
    AUC at moderate n; for TPR at very low FPR (a few non-members above the
    threshold) the interval is coarse and can undercover.
    """
    s, m = _validate(scores, members)
    n_boot = _check_n_boot(n_boot)
    confidence = _check_confidence(confidence)
    s_in, s_out = s[m], s[~m]
    if isinstance(statistic, str):
        if statistic not in VECTORISED_STATISTICS:
            raise ValueError(
                f"unknown statistic {statistic!r}; allowed names: "
                f"{', '.join(repr(x) for x in VECTORISED_STATISTICS)} (or a callable)."
            )
        if statistic == "balanced_accuracy":
            _check_split_sizes(s_in.size, s_out.size)
        reps = _vectorised_bootstrap(s_in, s_out, (statistic,), n_boot, seed)[statistic]
        return _percentile_interval(reps, confidence)
    if not callable(statistic):
        raise ValueError("statistic must be a callable or a statistic name.")
    n_in, n_out = s_in.size, s_out.size
    labels = np.concatenate([np.ones(n_in, dtype=bool), np.zeros(n_out, dtype=bool)])
    reps = []
    rng = np.random.default_rng(seed)
    for idx_in, idx_out in _resample_chunks(rng, n_in, n_out, n_boot):
        for i in range(idx_in.shape[0]):
            block = np.concatenate([s_in[idx_in[i]], s_out[idx_out[i]]])
            reps.append(float(statistic(block, labels)))
    return _percentile_interval(np.asarray(reps), confidence)


# ---------------------------------------------------------------------------
# Everything at once
# ---------------------------------------------------------------------------


def membership_metrics(
    scores,
    members,
    delta: float = 1e-5,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed=0,
) -> dict:
    """All headline membership-inference metrics with confidence intervals.

    Returns a dict with exactly these keys:

    * ``"auc"``, ``"tpr_at_fpr_0.001"``, ``"tpr_at_fpr_0.01"``,
      ``"advantage"``, ``"balanced_accuracy"``: each
      ``{"value", "ci_low", "ci_high"}`` (floats), the value computed on all
      data (``balanced_accuracy`` by :func:`balanced_accuracy_split` with
      ``seed``) and a stratified percentile-bootstrap interval with
      ``n_boot`` resamples at ``confidence`` (:func:`bootstrap_ci`).  All
      five use the same ``n_boot`` resamples and one sort per resample.
    * ``"epsilon_lower_bound"``: ``{"value", "ci_low", "ci_high", "delta",
      "confidence", "method", "threshold", "ceiling", "point_estimate"}``.
      ``value`` is :func:`attacks.epsilon.epsilon_lower_bound` with
      Clopper-Pearson and a split threshold.  It is already a one-sided lower
      confidence bound at ``confidence`` (valid for any (eps, delta)-DP
      mechanism if the trials are independent), so ``ci_low`` equals
      ``value`` and ``ci_high`` is ``None``: data can never certify an upper
      bound on epsilon.  ``ceiling`` is the largest value a perfect attack
      could certify with these sample sizes; ``point_estimate`` is the raw
      estimate without any guarantee (display only).
    * ``"n_members"``, ``"n_nonmembers"``: ints.

    Needs at least two members and two non-members (for the split).
    """
    from .epsilon import (
        _check_delta,
        epsilon_ceiling,
        epsilon_lower_bound,
        epsilon_point_estimate,
    )

    s, m = _validate(scores, members)
    n_boot = _check_n_boot(n_boot)
    confidence = _check_confidence(confidence)
    delta = _check_delta(delta)
    n_in, n_out = int(m.sum()), int((~m).sum())
    _check_split_sizes(n_in, n_out)

    _, tp, fp, _ = _roc_counts_1d(s, m)
    tp, fp = tp[None], fp[None]
    values = {
        "auc": float(_auc_from_counts(tp, fp, n_in, n_out)[0]),
        "tpr_at_fpr_0.001": float(_tpr_at_fpr_from_counts(tp, fp, n_in, n_out, 0.001)[0]),
        "tpr_at_fpr_0.01": float(_tpr_at_fpr_from_counts(tp, fp, n_in, n_out, 0.01)[0]),
        "advantage": float(_advantage_from_counts(tp, fp, n_in, n_out)[0]),
        "balanced_accuracy": balanced_accuracy_split(s, m, seed=seed),
    }
    reps = _vectorised_bootstrap(s[m], s[~m], VECTORISED_STATISTICS, n_boot, seed)
    result: dict = {}
    for name in VECTORISED_STATISTICS:
        lo, hi = _percentile_interval(reps[name], confidence)
        result[name] = {"value": values[name], "ci_low": lo, "ci_high": hi}

    lb = epsilon_lower_bound(
        s,
        m,
        delta,
        method="clopper-pearson",
        confidence=confidence,
        threshold="split",
        seed=seed,
    )
    result["epsilon_lower_bound"] = {
        "value": lb,
        "ci_low": lb,
        "ci_high": None,
        "delta": float(delta),
        "confidence": confidence,
        "method": "clopper-pearson",
        "threshold": "split",
        "ceiling": epsilon_ceiling(n_in, n_out, delta, confidence=confidence, threshold="split"),
        "point_estimate": epsilon_point_estimate(s, m, delta),
    }
    result["n_members"] = n_in
    result["n_nonmembers"] = n_out
    return result
