"""Empirical lower bounds on differential-privacy epsilon from attack scores.

An (eps, delta)-DP mechanism limits every membership test: with false
positive rate FPR and false negative rate FNR,

    FPR + e^eps * FNR >= 1 - delta   and   FNR + e^eps * FPR >= 1 - delta.

Upper confidence bounds on FPR and FNR (Clopper-Pearson) at a threshold
therefore give a lower confidence bound on eps (Jagielski et al. 2020).

Assumptions shared by every bound here:

* every member/non-member score is an independent trial: members' scores
  i.i.d. from one distribution and non-members' scores i.i.d. from another
  (e.g. one model trained per trial, or canaries whose inclusion was
  randomised independently).  Scores of many examples taken from ONE
  trained model are correlated through that model; treating them as
  independent trials is the usual approximation of member/non-member audits
  but is not a formal DP guarantee (a one-run audit such as Steinke, Nasr &
  Jagielski 2023 is needed for that);
* a higher score means "member"; threshold ``t`` predicts member iff
  ``score >= t``.  Reversed scores (low = member) are not exploited.

Besides the member/non-member bounds this module holds the
hypothesis-testing trade-off ceiling of (eps, delta)-DP
(:func:`dp_tradeoff_max_tpr`, :func:`tradeoff_curve`) and a test of an
empirical ROC curve against it (:func:`tradeoff_violations`).  The one-run
audits (Steinke, Nasr & Jagielski 2023; its f-DP form, Mahloujifar, Melis &
Chaudhuri 2024) are in :mod:`privacy_audit.stats.one_run_bounds`.

Only numpy and scipy are used.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.optimize import brentq
from scipy.special import betaincinv, log_ndtr, ndtr, ndtri

from privacy_audit.stats.scores import (
    best_threshold,
    check_confidence,
    check_split_sizes,
    roc_counts_1d,
    stratified_split,
    validate_scores,
)

__all__ = [
    "dp_tradeoff_max_tpr",
    "epsilon_ceiling",
    "epsilon_lower_bound",
    "epsilon_lower_bound_from_counts",
    "epsilon_point_estimate",
    "gaussian_mechanism_epsilon",
    "tradeoff_curve",
    "tradeoff_violations",
]

METHODS = ("clopper-pearson", "gdp")
THRESHOLDS = ("split", "bonferroni")
#: Most candidate thresholds used by the Bonferroni strategy.
BONFERRONI_GRID = 100


def check_delta(delta) -> float:
    d = float(delta)
    if not (0.0 < d < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}.")
    return d


def check_choice(value, allowed, what: str) -> str:
    if value not in allowed:
        raise ValueError(
            f"unknown {what} {value!r}; allowed values: {', '.join(repr(a) for a in allowed)}."
        )
    return value


# ---------------------------------------------------------------------------
# Clopper-Pearson bounds and their conversion to epsilon
# ---------------------------------------------------------------------------


def clopper_pearson_upper(k, n: int, q: float) -> np.ndarray:
    """Clopper-Pearson upper bound Beta^{-1}(q; k + 1, n - k) of a rate k / n.

    ``q`` is the quantile, e.g. ``1 - alpha/2``.  ``k = n`` gives 1 (the
    Beta distribution degenerates).  ``k = 0`` gives ``1 - (1 - q)^(1/n)``.
    """
    k = np.asarray(k, dtype=np.int64)
    out = np.ones(k.shape, dtype=np.float64)
    part = k < n
    if np.any(part):
        uniq, inv = np.unique(k[part], return_inverse=True)
        out[part] = betaincinv(uniq + 1.0, n - uniq, q)[inv]
    return out


def eps_from_rate_bounds(fpr_hi, fnr_hi, delta: float) -> np.ndarray:
    """max(ln((1-d-FNR)/FPR), ln((1-d-FPR)/FNR)), floored at 0 (vectorised)."""
    fpr_hi = np.asarray(fpr_hi, dtype=np.float64)
    fnr_hi = np.asarray(fnr_hi, dtype=np.float64)
    num1 = 1.0 - delta - fnr_hi
    num2 = 1.0 - delta - fpr_hi
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.where(num1 > 0, np.log(np.where(num1 > 0, num1, 1.0) / fpr_hi), 0.0)
        e2 = np.where(num2 > 0, np.log(np.where(num2 > 0, num2, 1.0) / fnr_hi), 0.0)
    return np.maximum(np.maximum(e1, e2), 0.0)


def _mu_from_rate_bounds(fpr_hi, fnr_hi) -> np.ndarray:
    """Gaussian-DP parameter mu_LB = Phi^-1(1 - FPR) - Phi^-1(FNR), floored at 0.

    The symmetric orientation Phi^-1(1 - FNR) - Phi^-1(FPR) is the same
    number (Phi^-1(1 - x) = -Phi^-1(x)), so one formula covers both.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = -ndtri(np.asarray(fpr_hi, dtype=np.float64)) - ndtri(
            np.asarray(fnr_hi, dtype=np.float64)
        )
    return np.maximum(np.nan_to_num(mu, nan=0.0, neginf=0.0), 0.0)


def _bound_from_counts(fp, n_out, fn, n_in, delta, q, method) -> np.ndarray:
    """Per-threshold bound: epsilon (clopper-pearson) or mu (gdp)."""
    fpr_hi = clopper_pearson_upper(fp, n_out, q)
    fnr_hi = clopper_pearson_upper(fn, n_in, q)
    if method == "gdp":
        return _mu_from_rate_bounds(fpr_hi, fnr_hi)
    return eps_from_rate_bounds(fpr_hi, fnr_hi, delta)


# ---------------------------------------------------------------------------
# Gaussian differential privacy
# ---------------------------------------------------------------------------


def _log1mexp(x: float) -> float:
    """log(1 - exp(x)) for x < 0, accurate everywhere."""
    if x > -math.log(2.0):
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


def _log_gaussian_delta(eps: float, mu: float) -> float:
    """log of delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), mu > 0."""
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la = float(log_ndtr(a))
    x = eps + float(log_ndtr(b)) - la  # log(e^eps Phi(b) / Phi(a)) < 0
    return la + _log1mexp(min(x, -1e-300))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest eps >= 0 with delta(eps; mu) <= delta for the mu-GDP trade-off curve."""
    if mu <= 0.0:
        return 0.0
    if delta >= 2.0 * float(ndtr(mu / 2.0)) - 1.0:  # delta(0; mu)
        return 0.0
    target = math.log(delta)

    def f(e: float) -> float:
        return _log_gaussian_delta(e, mu) - target

    hi = max(1.0, mu * mu)
    while f(hi) > 0.0:
        hi *= 2.0
        if hi > 1e12:  # pragma: no cover - only for absurd mu
            return math.inf
    return float(brentq(f, 0.0, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500))


def gaussian_mechanism_epsilon(mu: float, delta: float) -> float:
    """Exact eps at ``delta`` of a Gaussian mechanism with sensitivity / sigma = ``mu``.

    Solves ``delta = Phi(-eps/mu + mu/2) - e^eps * Phi(-eps/mu - mu/2)``
    (Balle & Wang 2018; equivalently the mu-GDP trade-off curve of Dong,
    Roth & Su) for eps >= 0 with a bracketed Brent root in log space, so the
    relative error of the implied delta is ~1e-12.  Returns 0 when ``mu = 0``
    or when ``delta`` already exceeds ``delta(0) = 2 Phi(mu/2) - 1``.

    Assumes a single release of one Gaussian mechanism (or anything whose
    privacy profile is exactly mu-GDP, e.g. composed Gaussians with
    mu = sqrt(sum mu_i^2)).
    """
    m = float(mu)
    if not np.isfinite(m) or m < 0.0:
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}.")
    return gdp_epsilon(m, check_delta(delta))


# ---------------------------------------------------------------------------
# Threshold strategies
# ---------------------------------------------------------------------------


def _bonferroni_grid(s: np.ndarray, size: int = BONFERRONI_GRID) -> np.ndarray:
    """Candidate thresholds from the pooled scores only (labels are not used).

    ``G = min(size, n)`` quantile levels (``size`` = 100 by default): half
    spread uniformly, the other half placed geometrically towards both tails
    (where the strongest bounds of attacks that expose only a few examples
    come from: few false positives or few false negatives).  Duplicated
    thresholds are removed; the Bonferroni factor stays ``G``.
    """
    n = s.size
    g = min(size, n)
    n_tail = g // 4
    n_mid = g - 2 * n_tail
    mid = (np.arange(n_mid) + 0.5) / n_mid
    if n_tail:
        tail = np.geomspace(0.5 / n, 0.5 / max(n_mid, 1), n_tail + 1)[:-1]
        levels = np.concatenate([tail, mid, 1.0 - tail])
    else:
        levels = mid
    return np.unique(np.quantile(s, np.clip(levels, 0.0, 1.0), method="linear"))


def _counts_at(thresholds, s_in_sorted, s_out_sorted):
    """(FP, FN) for each threshold, rule ``score >= t`` (inputs sorted ascending)."""
    fp = s_out_sorted.size - np.searchsorted(s_out_sorted, thresholds, side="left")
    fn = np.searchsorted(s_in_sorted, thresholds, side="left")
    return fp, fn


#: Thresholds of half A whose exact (Clopper-Pearson) selection bound is computed.
SPLIT_CANDIDATES = 256


def _wilson_upper(k, n: int, q: float) -> np.ndarray:
    """Wilson score upper limit of k / n at quantile q (cheap; only ranks candidates)."""
    z = float(ndtri(q))
    p = np.asarray(k, dtype=np.float64) / n
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4.0 * n * n))
    return np.minimum((centre + half) / (1 + z * z / n), 1.0)


def _split_candidates(fp, n_out, fn, n_in, delta, q, method) -> np.ndarray:
    """Indices of the thresholds whose exact selection bound is computed.

    All of them when there are at most :data:`SPLIT_CANDIDATES`; otherwise the
    SPLIT_CANDIDATES best by the same bound with Wilson instead of Clopper-Pearson
    limits (one ``betaincinv`` per distinct count is what made the split slow).
    Which threshold half A picks affects power only: the bound is counted on half B.
    """
    if fp.size <= SPLIT_CANDIDATES:
        return np.arange(fp.size)
    fpr_hi, fnr_hi = _wilson_upper(fp, n_out, q), _wilson_upper(fn, n_in, q)
    if method == "gdp":
        approx = _mu_from_rate_bounds(fpr_hi, fnr_hi)
    else:
        approx = eps_from_rate_bounds(fpr_hi, fnr_hi, delta)
    return np.sort(np.argpartition(-approx, SPLIT_CANDIDATES)[:SPLIT_CANDIDATES])


def _split_bound(s, m, delta, alpha, method, seed) -> float:
    n_in, n_out = int(m.sum()), int((~m).sum())
    check_split_sizes(n_in, n_out)
    q = 1.0 - alpha / 2.0
    half_a, half_b = stratified_split(m, seed)
    # Choose the threshold on half A with the same bound, taken simultaneously
    # over A's K candidate thresholds (alpha / K).  Maximising the plain bound
    # over K thresholds favours thresholds whose A-counts were lucky, which
    # then fail to replicate on B (winner's curse); the simultaneous bound
    # penalises thin tails.  This choice affects power only, never validity.
    sa, ma = s[half_a], m[half_a]
    na_in, na_out = int(ma.sum()), int((~ma).sum())
    ss, tp, fp, ends = roc_counts_1d(sa, ma)
    tp_e, fp_e, ss_e = tp[ends], fp[ends], ss[ends]
    q_sel = 1.0 - alpha / (2.0 * ss_e.size)
    cand = _split_candidates(fp_e, na_out, na_in - tp_e, na_in, delta, q_sel, method)
    vals = _bound_from_counts(fp_e[cand], na_out, na_in - tp_e[cand], na_in, delta, q_sel, method)
    best = int(cand[np.argmax(vals)])
    if vals.max() > 0.0:
        below = ss_e[best + 1] if best + 1 < ss_e.size else -np.inf
        thr = ss_e[best] / 2.0 + below / 2.0 if np.isfinite(below) else -np.inf
    else:  # no signal on A: fall back to the best balanced-accuracy threshold
        thr = best_threshold(ss[None], tp[None], fp[None], ends[None], na_in, na_out)[0]
    # Count on the disjoint half B only.
    sb, mb = s[half_b], m[half_b]
    nb_in, nb_out = int(mb.sum()), int((~mb).sum())
    fp_b = int(np.sum(sb[~mb] >= thr))
    fn_b = int(np.sum(sb[mb] < thr))
    val = float(_bound_from_counts([fp_b], nb_out, [fn_b], nb_in, delta, q, method)[0])
    return gdp_epsilon(val, delta) if method == "gdp" else val


def _bonferroni_bound(s, m, delta, alpha, method) -> float:
    thresholds = _bonferroni_grid(s)
    # Correct for the full grid size even if ties merged some thresholds, so
    # the correction (and epsilon_ceiling) depends on n only.
    q = 1.0 - alpha / (2.0 * min(BONFERRONI_GRID, s.size))
    s_in, s_out = np.sort(s[m]), np.sort(s[~m])
    fp, fn = _counts_at(thresholds, s_in, s_out)
    vals = _bound_from_counts(fp, s_out.size, fn, s_in.size, delta, q, method)
    val = float(np.max(vals))
    return gdp_epsilon(val, delta) if method == "gdp" else val


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def epsilon_lower_bound(
    scores,
    members,
    delta: float,
    method: str = "clopper-pearson",
    confidence: float = 0.95,
    threshold: str = "split",
    seed=0,
) -> float:
    """One-sided lower confidence bound on epsilon at ``delta`` from attack scores.

    Methods (``alpha = 1 - confidence``):

    * ``"clopper-pearson"`` (Jagielski et al. 2020).  At a threshold with FP
      false positives among N_out non-members and FN false negatives among
      N_in members, ``FPR_hi = Beta^-1(1 - alpha/2; FP + 1, N_out - FP)`` and
      ``FNR_hi = Beta^-1(1 - alpha/2; FN + 1, N_in - FN)`` (1 when FP = N_out
      or FN = N_in), and
      ``eps_LB = max(ln((1 - delta - FNR_hi) / FPR_hi),
      ln((1 - delta - FPR_hi) / FNR_hi))`` floored at 0.  With probability
      >= confidence both rate bounds hold, and then eps_LB <= eps for ANY
      (eps, delta)-DP mechanism.
    * ``"gdp"`` (Nasr et al. 2023).  From the same rate bounds,
      ``mu_LB = Phi^-1(1 - FPR_hi) - Phi^-1(FNR_hi)`` floored at 0, then the
      eps at ``delta`` of the mu_LB-Gaussian mechanism.  This ASSUMES the
      mechanism's trade-off curve is Gaussian (mu-GDP); it is a valid lower
      bound only under that assumption (true for a Gaussian mechanism, a
      common approximation for DP-SGD), and it can exceed the true eps of a
      mechanism whose trade-off curve is not Gaussian: it is valid only for
      mechanisms with a Gaussian trade-off curve.  For the Laplace mechanism
      (scores Laplace(Delta, 1) vs Laplace(0, 1), true eps ~ Delta) it
      reports bounds far above the true eps in most trials (pinned by
      ``tests/stats/test_epsilon_bounds_soundness.py::test_gdp_is_unsound_on_laplace``).

    Threshold strategies:

    * ``"split"``: the examples are split into stratified random halves
      (seeded by ``seed``); the threshold maximising the same bound on half A
      is chosen (with the Clopper-Pearson level Bonferroni-adjusted over the
      K distinct scores of half A, which avoids picking a threshold whose
      A-counts were lucky; falling back to the best balanced-accuracy
      threshold if every bound on A is 0), and the bound is computed at
      ``alpha`` by counting on the disjoint half B only.  The threshold is
      independent of half B, so the bound is valid however it was picked.
      Needs >= 2 examples per class.
    * ``"bonferroni"``: all examples are counted; ``G = min(100, n)``
      candidate thresholds are taken from quantiles of the pooled scores
      (chosen without looking at labels; denser towards both tails), each
      Clopper-Pearson interval is computed at ``alpha / G`` and the maximum
      is reported; valid by the union bound over the G thresholds.  Strictly, the union bound covers
      thresholds fixed in advance; pooled-score quantiles are label-free and
      very stable, which is the usual practical reading.

    Assumes independent trials (see the module docstring).  Returns a float
    >= 0 that is never larger than :func:`epsilon_ceiling` for the same
    sizes (up to rounding).
    """
    s, m = validate_scores(scores, members)
    delta = check_delta(delta)
    alpha = 1.0 - check_confidence(confidence)
    check_choice(method, METHODS, "method")
    check_choice(threshold, THRESHOLDS, "threshold")
    if threshold == "split":
        return _split_bound(s, m, delta, alpha, method, seed)
    return _bonferroni_bound(s, m, delta, alpha, method)


def epsilon_ceiling(
    n_members: int,
    n_nonmembers: int,
    delta: float,
    confidence: float = 0.95,
    threshold: str = "split",
    method: str = "clopper-pearson",
) -> float:
    """Largest eps a PERFECT attack could certify with these sample sizes.

    This is the bound of :func:`epsilon_lower_bound` with FP = FN = 0 on the
    counted examples:

    * ``"split"``: counting happens on half B, which holds
      ``n - floor(n/2)`` examples of each class, at ``alpha = 1 - confidence``;
    * ``"bonferroni"``: all examples are counted, at ``alpha / G`` with
      ``G = min(100, n_members + n_nonmembers)``.  A label-free grid rarely
      contains the exact separating threshold, so real perfect attacks can
      fall a little short of this value.

    For ``"clopper-pearson"`` with k counted trials per side this is
    ``ln((1 - delta - p) / p)`` with ``p = 1 - (alpha/2)^(1/k)``; at 95 % and
    delta = 1e-5 it is 3.28 / 5.60 / 7.91 / 10.21 for k = 1e2 / 1e3 / 1e4 / 1e5,
    so with the split, ``epsilon_ceiling(2k, 2k, ...)`` gives those numbers.
    Any reported eps lower bound should be read next to this ceiling.
    """
    delta = check_delta(delta)
    alpha = 1.0 - check_confidence(confidence)
    check_choice(threshold, THRESHOLDS, "threshold")
    check_choice(method, METHODS, "method")
    sizes = []
    for name, v in (("n_members", n_members), ("n_nonmembers", n_nonmembers)):
        if isinstance(v, bool) or int(v) != v or int(v) < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}.")
        sizes.append(int(v))
    n_in, n_out = sizes
    if threshold == "split":
        check_split_sizes(n_in, n_out)
        k_in, k_out = n_in - n_in // 2, n_out - n_out // 2
        q = 1.0 - alpha / 2.0
    else:
        k_in, k_out = n_in, n_out
        q = 1.0 - alpha / (2.0 * min(BONFERRONI_GRID, n_in + n_out))
    val = float(_bound_from_counts([0], k_out, [0], k_in, delta, q, method)[0])
    return gdp_epsilon(val, delta) if method == "gdp" else val


def epsilon_point_estimate(scores, members, delta: float, min_count: int = 10) -> float:
    """Raw eps estimate with NO statistical guarantee (display only).

    ``max`` over thresholds of ``ln((TPR - delta) / FPR)`` (thresholds with at
    least ``min_count`` = 10 false positives) and of the symmetric
    ``ln((TNR - delta) / FNR)`` (thresholds with at least ``min_count`` false
    negatives), floored at 0.  The count restriction keeps the estimate from
    exploding on one or two lucky examples; it is still a maximum over
    thresholds on the data it is reported on, so it is biased upwards at
    small n and can exceed the true eps.  Returns 0 when no threshold has
    enough false positives or false negatives.  Assumes independent examples.
    """
    s, m = validate_scores(scores, members)
    delta = check_delta(delta)
    if isinstance(min_count, bool) or int(min_count) != min_count or int(min_count) < 1:
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}.")
    n_in, n_out = int(m.sum()), int((~m).sum())
    _, tp, fp, ends = roc_counts_1d(s, m)
    return point_estimate_from_counts(tp[ends], fp[ends], n_in, n_out, delta, int(min_count))


def point_estimate_from_counts(tp, fp, n_in: int, n_out: int, delta: float, min_count: int):
    """:func:`epsilon_point_estimate` from cumulative (TP, FP) at the tie-group ends."""
    tp = np.concatenate([[0], tp])
    fp = np.concatenate([[0], fp])
    tpr, fpr = tp / n_in, fp / n_out
    fn = n_in - tp
    best = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ok1 = (fp >= min_count) & (tpr > delta)
        if np.any(ok1):
            best = max(best, float(np.max(np.log((tpr[ok1] - delta) / fpr[ok1]))))
        ok2 = (fn >= min_count) & (1.0 - fpr > delta)
        if np.any(ok2):
            fnr = fn[ok2] / n_in
            best = max(best, float(np.max(np.log((1.0 - fpr[ok2] - delta) / fnr))))
    return best


# ---------------------------------------------------------------------------
# Shared input checks for the functions below
# ---------------------------------------------------------------------------


def check_count(value, name: str, minimum: int = 0) -> int:
    """Return ``value`` as an int >= ``minimum``, or raise ValueError."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        v = float(value)
        ok = math.isfinite(v) and v == math.floor(v) and v >= minimum
    if not ok:
        what = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {what}, got {value!r}.")
    return int(value)


def _check_epsilon(epsilon) -> float:
    e = float(epsilon)
    if not (math.isfinite(e) and e >= 0.0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}.")
    return e


# ---------------------------------------------------------------------------
# Clopper-Pearson bound from counts alone
# ---------------------------------------------------------------------------


def epsilon_lower_bound_from_counts(
    fp, n_neg, fn, n_pos, delta: float, confidence: float = 0.95
) -> float:
    """Clopper-Pearson lower confidence bound on eps from ONE threshold's counts.

    ``fp`` false positives among ``n_neg`` non-members and ``fn`` false
    negatives among ``n_pos`` members, counted at a single threshold that was
    fixed independently of these examples (e.g. chosen on other data, as the
    ``"split"`` strategy of :func:`epsilon_lower_bound` does, which ends with
    exactly this computation on half B).  Each rate gets the upper bound
    ``Beta^-1(1 - alpha/2; k + 1, n - k)`` so that both hold jointly with
    probability >= ``confidence``, and
    ``eps_LB = max(ln((1 - delta - FNR_hi) / FPR_hi),
    ln((1 - delta - FPR_hi) / FNR_hi))`` floored at 0 (Jagielski et al. 2020).

    Assumes independent trials (see the module docstring) and a threshold not
    chosen on these counts; valid for any (eps, delta)-DP mechanism.
    """
    delta = check_delta(delta)
    alpha = 1.0 - check_confidence(confidence)
    n_neg = check_count(n_neg, "n_neg", 1)
    n_pos = check_count(n_pos, "n_pos", 1)
    fp = check_count(fp, "fp")
    fn = check_count(fn, "fn")
    if fp > n_neg:
        raise ValueError(f"fp ({fp}) must not exceed n_neg ({n_neg}).")
    if fn > n_pos:
        raise ValueError(f"fn ({fn}) must not exceed n_pos ({n_pos}).")
    q = 1.0 - alpha / 2.0
    return float(_bound_from_counts([fp], n_neg, [fn], n_pos, delta, q, "clopper-pearson")[0])


# ---------------------------------------------------------------------------
# Hypothesis-testing trade-off of (eps, delta)-DP
# ---------------------------------------------------------------------------

#: Most ROC points returned for plotting by :func:`tradeoff_violations`.
ROC_PLOT_POINTS = 400


def dp_tradeoff_max_tpr(fpr, epsilon: float, delta: float) -> np.ndarray:
    """Largest TPR any membership test can reach at ``fpr`` against (eps, delta)-DP.

    ``min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))`` clipped to
    [0, 1]: the two hypothesis-testing inequalities
    ``FNR + e^eps FPR >= 1 - delta`` and ``FPR + e^eps FNR >= 1 - delta``
    solved for TPR = 1 - FNR.  Nondecreasing in FPR.  Makes no assumption
    beyond (eps, delta)-DP of the mechanism that produced the scores.
    """
    f = np.asarray(fpr, dtype=np.float64)
    if not np.all((f >= 0.0) & (f <= 1.0)):
        raise ValueError("fpr must lie in [0, 1].")
    eps = _check_epsilon(epsilon)
    delta = check_delta(delta)
    with np.errstate(over="ignore", invalid="ignore"):
        line1 = np.where(f > 0.0, math.exp(min(eps, 700.0)) * f, 0.0) + delta
    line2 = 1.0 - math.exp(-eps) * (1.0 - delta - f)
    return np.clip(np.minimum(line1, line2), 0.0, 1.0)


def tradeoff_curve(epsilon: float, delta: float, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """``(fpr, max_tpr)`` of :func:`dp_tradeoff_max_tpr` on ``n`` log-spaced FPRs in [1e-4, 1].

    For plotting the (eps, delta)-DP ceiling next to an empirical ROC curve.
    """
    n = check_count(n, "n", 2)
    fpr = np.geomspace(1e-4, 1.0, n)
    return fpr, dp_tradeoff_max_tpr(fpr, epsilon, delta)


def _roc_for_plot(s: np.ndarray, m: np.ndarray, max_points: int = ROC_PLOT_POINTS):
    """Empirical ROC ``(fpr, tpr)`` from (0, 0) to (1, 1), at most ``max_points`` points.

    Downsampling keeps both end points, half of the points evenly spaced and
    half geometrically spaced from the top of the ranking (dense at low FPR,
    for log-scale plots).
    """
    n_in, n_out = int(m.sum()), int((~m).sum())
    _, tp, fp, ends = roc_counts_1d(s, m)
    fpr = np.concatenate([[0.0], fp[ends] / n_out])
    tpr = np.concatenate([[0.0], tp[ends] / n_in])
    if fpr.size > max_points:
        last = fpr.size - 1
        half = max_points // 2
        idx = np.concatenate(
            [np.linspace(0, last, half), np.geomspace(1, last, max_points - half - 1)]
        )
        keep = np.unique(np.round(idx).astype(np.int64))
        fpr, tpr = fpr[keep], tpr[keep]
    return fpr, tpr


def tradeoff_violations(
    scores,
    members,
    epsilon: float,
    delta: float,
    confidence: float = 0.95,
    max_points: int = 100,
) -> dict:
    """Test an empirical ROC curve against the (eps, delta)-DP trade-off ceiling.

    ``G = min(max_points, n)`` thresholds are taken from quantiles of the
    pooled scores (label-free, fixed before counting).  At each, the
    Clopper-Pearson upper bound FPR_hi and lower bound TPR_lo are computed,
    each one-sided at level ``alpha / (2 G)`` (``alpha = 1 - confidence``;
    the same per-rate split as the Clopper-Pearson epsilon bound, with a
    Bonferroni factor G).  By the union bound all 2G bounds hold jointly with
    probability >= ``confidence``; then, since the ceiling is nondecreasing,
    the true TPR <= ceiling(true FPR) <= ceiling(FPR_hi) at every threshold of
    an (eps, delta)-DP mechanism.  ``TPR_lo > dp_tradeoff_max_tpr(FPR_hi)`` is
    therefore a statistically significant violation: the claim is rejected
    with false-alarm probability <= 1 - confidence.

    Assumes independent trials (see the module docstring) and higher
    score = member.  Returns a dict with ``"violated"`` (bool), ``"points"``
    (one ``{"threshold", "fpr", "tpr", "fpr_hi", "tpr_lo",
    "max_tpr_allowed"}`` per violating threshold), ``"n_thresholds"`` (G),
    ``"confidence"``, ``"epsilon"``, ``"delta"``, ``"roc"``
    (``{"fpr", "tpr"}``, the empirical ROC downsampled to <= 400 points) and
    ``"curve"`` (``{"fpr", "max_tpr"}`` from :func:`tradeoff_curve`).
    """
    s, m = validate_scores(scores, members)
    eps = _check_epsilon(epsilon)
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    g = min(check_count(max_points, "max_points", 1), s.size)
    thresholds = _bonferroni_grid(s, g)
    q = 1.0 - (1.0 - confidence) / (2.0 * g)
    s_in, s_out = np.sort(s[m]), np.sort(s[~m])
    n_in, n_out = s_in.size, s_out.size
    fp, fn = _counts_at(thresholds, s_in, s_out)
    fpr_hi = clopper_pearson_upper(fp, n_out, q)
    tpr_lo = 1.0 - clopper_pearson_upper(fn, n_in, q)  # lower bound on TPR = 1 - upper bound on FNR
    allowed = dp_tradeoff_max_tpr(fpr_hi, eps, delta)
    points = [
        {
            "threshold": float(thresholds[j]),
            "fpr": float(fp[j] / n_out),
            "tpr": float(1.0 - fn[j] / n_in),
            "fpr_hi": float(fpr_hi[j]),
            "tpr_lo": float(tpr_lo[j]),
            "max_tpr_allowed": float(allowed[j]),
        }
        for j in np.flatnonzero(tpr_lo > allowed)
    ]
    roc_fpr, roc_tpr = _roc_for_plot(s, m)
    curve_fpr, curve_tpr = tradeoff_curve(eps, delta)
    return {
        "violated": bool(points),
        "points": points,
        "n_thresholds": int(g),
        "confidence": confidence,
        "epsilon": eps,
        "delta": delta,
        "roc": {"fpr": roc_fpr.tolist(), "tpr": roc_tpr.tolist()},
        "curve": {"fpr": curve_fpr.tolist(), "max_tpr": curve_tpr.tolist()},
    }
