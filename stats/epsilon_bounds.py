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

Besides the member/non-member bounds this module holds the one-run audit
of Steinke, Nasr & Jagielski 2023 (``one_run_*``: valid from ONE training
run, the canaries' inclusion being randomised independently), the
hypothesis-testing trade-off ceiling of (eps, delta)-DP
(:func:`dp_tradeoff_max_tpr`, :func:`tradeoff_curve`) and a test of an
empirical ROC curve against it (:func:`tradeoff_violations`).

Only numpy and scipy are used.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.optimize import brentq
from scipy.special import betaincinv, gammaln, log_ndtr, ndtr, ndtri

from privacy_audit.stats.scores import (
    _best_threshold,
    _check_confidence,
    _check_split_sizes,
    _roc_counts_1d,
    _stratified_split,
    _validate,
)

__all__ = [
    "dp_tradeoff_max_tpr",
    "epsilon_ceiling",
    "epsilon_lower_bound",
    "epsilon_lower_bound_from_counts",
    "epsilon_point_estimate",
    "gaussian_mechanism_epsilon",
    "one_run_best",
    "one_run_ceiling",
    "one_run_epsilon",
    "one_run_fdp_epsilon",
    "one_run_from_scores",
    "tradeoff_curve",
    "tradeoff_violations",
]

METHODS = ("clopper-pearson", "gdp")
THRESHOLDS = ("split", "bonferroni")
#: Most candidate thresholds used by the Bonferroni strategy.
BONFERRONI_GRID = 100


def _check_delta(delta) -> float:
    d = float(delta)
    if not (0.0 < d < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}.")
    return d


def _check_choice(value, allowed, what: str) -> str:
    if value not in allowed:
        raise ValueError(
            f"unknown {what} {value!r}; allowed values: {', '.join(repr(a) for a in allowed)}."
        )
    return value


# ---------------------------------------------------------------------------
# Clopper-Pearson bounds and their conversion to epsilon
# ---------------------------------------------------------------------------


def _cp_upper(k, n: int, q: float) -> np.ndarray:
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


def _eps_from_rate_bounds(fpr_hi, fnr_hi, delta: float) -> np.ndarray:
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
    fpr_hi = _cp_upper(fp, n_out, q)
    fnr_hi = _cp_upper(fn, n_in, q)
    if method == "gdp":
        return _mu_from_rate_bounds(fpr_hi, fnr_hi)
    return _eps_from_rate_bounds(fpr_hi, fnr_hi, delta)


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


def _gdp_epsilon(mu: float, delta: float) -> float:
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
    return _gdp_epsilon(m, _check_delta(delta))


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
        approx = _eps_from_rate_bounds(fpr_hi, fnr_hi, delta)
    return np.sort(np.argpartition(-approx, SPLIT_CANDIDATES)[:SPLIT_CANDIDATES])


def _split_bound(s, m, delta, alpha, method, seed) -> float:
    n_in, n_out = int(m.sum()), int((~m).sum())
    _check_split_sizes(n_in, n_out)
    q = 1.0 - alpha / 2.0
    half_a, half_b = _stratified_split(m, seed)
    # Choose the threshold on half A with the same bound, taken simultaneously
    # over A's K candidate thresholds (alpha / K).  Maximising the plain bound
    # over K thresholds favours thresholds whose A-counts were lucky, which
    # then fail to replicate on B (winner's curse); the simultaneous bound
    # penalises thin tails.  This choice affects power only, never validity.
    sa, ma = s[half_a], m[half_a]
    na_in, na_out = int(ma.sum()), int((~ma).sum())
    ss, tp, fp, ends = _roc_counts_1d(sa, ma)
    tp_e, fp_e, ss_e = tp[ends], fp[ends], ss[ends]
    q_sel = 1.0 - alpha / (2.0 * ss_e.size)
    cand = _split_candidates(fp_e, na_out, na_in - tp_e, na_in, delta, q_sel, method)
    vals = _bound_from_counts(fp_e[cand], na_out, na_in - tp_e[cand], na_in, delta, q_sel, method)
    best = int(cand[np.argmax(vals)])
    if vals.max() > 0.0:
        below = ss_e[best + 1] if best + 1 < ss_e.size else -np.inf
        thr = ss_e[best] / 2.0 + below / 2.0 if np.isfinite(below) else -np.inf
    else:  # no signal on A: fall back to the best balanced-accuracy threshold
        thr = _best_threshold(ss[None], tp[None], fp[None], ends[None], na_in, na_out)[0]
    # Count on the disjoint half B only.
    sb, mb = s[half_b], m[half_b]
    nb_in, nb_out = int(mb.sum()), int((~mb).sum())
    fp_b = int(np.sum(sb[~mb] >= thr))
    fn_b = int(np.sum(sb[mb] < thr))
    val = float(_bound_from_counts([fp_b], nb_out, [fn_b], nb_in, delta, q, method)[0])
    return _gdp_epsilon(val, delta) if method == "gdp" else val


def _bonferroni_bound(s, m, delta, alpha, method) -> float:
    thresholds = _bonferroni_grid(s)
    # Correct for the full grid size even if ties merged some thresholds, so
    # the correction (and epsilon_ceiling) depends on n only.
    q = 1.0 - alpha / (2.0 * min(BONFERRONI_GRID, s.size))
    s_in, s_out = np.sort(s[m]), np.sort(s[~m])
    fp, fn = _counts_at(thresholds, s_in, s_out)
    vals = _bound_from_counts(fp, s_out.size, fn, s_in.size, delta, q, method)
    val = float(np.max(vals))
    return _gdp_epsilon(val, delta) if method == "gdp" else val


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
    s, m = _validate(scores, members)
    delta = _check_delta(delta)
    alpha = 1.0 - _check_confidence(confidence)
    _check_choice(method, METHODS, "method")
    _check_choice(threshold, THRESHOLDS, "threshold")
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
    delta = _check_delta(delta)
    alpha = 1.0 - _check_confidence(confidence)
    _check_choice(threshold, THRESHOLDS, "threshold")
    _check_choice(method, METHODS, "method")
    sizes = []
    for name, v in (("n_members", n_members), ("n_nonmembers", n_nonmembers)):
        if isinstance(v, bool) or int(v) != v or int(v) < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}.")
        sizes.append(int(v))
    n_in, n_out = sizes
    if threshold == "split":
        _check_split_sizes(n_in, n_out)
        k_in, k_out = n_in - n_in // 2, n_out - n_out // 2
        q = 1.0 - alpha / 2.0
    else:
        k_in, k_out = n_in, n_out
        q = 1.0 - alpha / (2.0 * min(BONFERRONI_GRID, n_in + n_out))
    val = float(_bound_from_counts([0], k_out, [0], k_in, delta, q, method)[0])
    return _gdp_epsilon(val, delta) if method == "gdp" else val


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
    s, m = _validate(scores, members)
    delta = _check_delta(delta)
    if isinstance(min_count, bool) or int(min_count) != min_count or int(min_count) < 1:
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}.")
    n_in, n_out = int(m.sum()), int((~m).sum())
    _, tp, fp, ends = _roc_counts_1d(s, m)
    return _point_estimate_from_counts(tp[ends], fp[ends], n_in, n_out, delta, int(min_count))


def _point_estimate_from_counts(tp, fp, n_in: int, n_out: int, delta: float, min_count: int):
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


def _check_count(value, name: str, minimum: int = 0) -> int:
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
    delta = _check_delta(delta)
    alpha = 1.0 - _check_confidence(confidence)
    n_neg = _check_count(n_neg, "n_neg", 1)
    n_pos = _check_count(n_pos, "n_pos", 1)
    fp = _check_count(fp, "fp")
    fn = _check_count(fn, "fn")
    if fp > n_neg:
        raise ValueError(f"fp ({fp}) must not exceed n_neg ({n_neg}).")
    if fn > n_pos:
        raise ValueError(f"fn ({fn}) must not exceed n_pos ({n_pos}).")
    q = 1.0 - alpha / 2.0
    return float(_bound_from_counts([fp], n_neg, [fn], n_pos, delta, q, "clopper-pearson")[0])


# ---------------------------------------------------------------------------
# One-run audit (Steinke, Nasr & Jagielski 2023)
# ---------------------------------------------------------------------------

#: Absolute/relative tolerance of the one-run bisection on eps.
_ONE_RUN_XTOL = 1e-9
#: Grid steps used to locate the largest crossing when 2 m delta > 1.
_ONE_RUN_SCAN = 2048
#: Fractions of m used by the default grid of :func:`one_run_best`.
ONE_RUN_K_FRACTIONS = (0.01, 0.03, 0.1, 0.3)


def _one_run_p_value_fn(m: int, r: int, v: int, delta: float):
    """Return ``eps -> p(eps)``, the one-run p-value of v correct out of r guesses.

    ``q = e^eps / (1 + e^eps)``, ``B ~ Bin(r, q)``, ``beta = P[B >= v]``;
    ``delta = 0``: ``p = beta``; otherwise
    ``p = min(1, beta + 2 m delta max_{i=1..v} P[v - i <= B <= v - 1] / i)``
    (``P[v - i <= B <= v - 1] = P[B >= v - i] - beta``).  The binomial pmf is
    evaluated in log space and only non-negative terms are summed, so small
    tails keep full relative accuracy.  Accepts ``delta = 0`` (pure DP).
    """
    k = np.arange(r + 1, dtype=np.float64)
    log_comb = gammaln(r + 1.0) - gammaln(k + 1.0) - gammaln(r - k + 1.0)
    inv_i = 1.0 / np.arange(1, v + 1, dtype=np.float64)
    c = 2.0 * m * delta

    def p(eps: float) -> float:
        if v == 0:
            return 1.0
        log_q = -float(np.logaddexp(0.0, -eps))
        log_1mq = -float(np.logaddexp(0.0, eps))
        pmf = np.exp(log_comb + k * log_q + (r - k) * log_1mq)
        beta = min(1.0, float(pmf[v:].sum()))
        if c == 0.0:
            return beta
        window = np.cumsum(pmf[v - 1 :: -1])  # P[v - i <= B <= v - 1], i = 1..v
        return min(1.0, beta + c * float(np.max(window * inv_i)))

    return p


def _one_run_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """p(eps) of :func:`_one_run_p_value_fn` at one eps (``delta = 0`` allowed)."""
    return _one_run_p_value_fn(m, r, v, delta)(eps)


def _one_run_eps(m: int, r: int, v: int, delta: float, alpha: float) -> float:
    """Largest eps >= 0 with ``p(eps) <= alpha`` (to ~1e-9); 0 if there is none found.

    The search is bracketed above by an eps where ``beta > alpha`` (beta grows
    to 1 with eps and ``p >= beta``, so nothing larger qualifies).  When
    ``2 m delta <= 1``, p is nondecreasing in eps (see
    :func:`one_run_epsilon`): 0 if ``p(0) > alpha``, else plain bisection.
    Otherwise the largest grid point with ``p <= alpha`` is refined by
    bisection.  The value returned always satisfies ``p <= alpha`` (or is 0).
    Shortcut: ``p >= min(1, 2 m delta / v)`` for every eps (the ``i = v``
    term), so the result is 0 whenever ``2 m delta / v > alpha``.
    """
    c = 2.0 * m * delta
    # The i = v term alone gives p >= beta + (c / v)(1 - beta) >= min(1, c / v).
    if v == 0 or c / v > alpha:
        return 0.0
    p = _one_run_p_value_fn(m, r, v, delta)
    beta = _one_run_p_value_fn(m, r, v, 0.0)
    hi = 1.0
    while beta(hi) <= alpha:
        hi *= 2.0
    if c <= 1.0:
        if p(0.0) > alpha:
            return 0.0
        lo = 0.0
    else:
        grid = np.linspace(0.0, hi, _ONE_RUN_SCAN + 1)
        ok = np.flatnonzero([p(float(e)) <= alpha for e in grid])
        if ok.size == 0:
            return 0.0
        lo, hi = float(grid[ok[-1]]), float(grid[ok[-1] + 1])
    while hi - lo > _ONE_RUN_XTOL * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if p(mid) <= alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_epsilon(correct, guesses, canaries, delta: float, confidence: float = 0.95) -> float:
    """Lower confidence bound on eps from ONE training run (Steinke, Nasr & Jagielski 2023).

    Assumptions: ``canaries`` = m canaries were each included in the training
    data independently with probability 1/2; after one run the auditor made
    ``guesses`` = r in/out guesses (abstaining on the other m - r) using only
    the run's output, and ``correct`` = v of them were right.  No other
    independence is needed (canaries may share one model).  Which canaries
    are guessed (hence r) may depend on the output but never on the
    inclusion bits; the paper's bound holds conditionally on that choice.

    With ``q = e^eps / (1 + e^eps)``, ``B ~ Bin(r, q)`` and ``beta = P[B >= v]``,
    an (eps, delta)-DP mechanism satisfies ``P[W >= v] <= p(eps)`` where
    ``p(eps) = beta`` for delta = 0 and
    ``p(eps) = min(1, beta + 2 m delta max_{i=1..v} (P[B >= v - i] - beta) / i)``
    otherwise.  The bound is the largest eps with ``p(eps) <= 1 - confidence``,
    and 0 if even eps = 0 is not rejected.

    Monotonicity: with ``c = 2 m delta <= 1`` each candidate
    ``(1 - c/i) P[B >= v] + (c/i) P[B >= v - i]`` is a non-negative mixture
    of binomial upper tails, each nondecreasing in q and so in eps; hence p is
    nondecreasing and the crossing is found by bisection (tolerance 1e-9).
    For ``c > 1`` (m > 1 / (2 delta)) monotonicity is not guaranteed and the
    largest crossing is located on a 2048-step grid first.  Either way the
    returned eps has ``p(eps) <= 1 - confidence``, which is all validity needs.

    At 95 %, delta = 1e-5, m = 1000 and all guesses correct this gives
    1.01 / 3.47 / 5.78 for r = 10 / 100 / 1000 (see :func:`one_run_ceiling`).
    """
    delta = _check_delta(delta)
    alpha = 1.0 - _check_confidence(confidence)
    v = _check_count(correct, "correct")
    r = _check_count(guesses, "guesses")
    m = _check_count(canaries, "canaries", 1)
    if r > m:
        raise ValueError(
            f"guesses ({r}) must not exceed canaries ({m}); fewer canaries than guesses."
        )
    if v > r:
        raise ValueError(f"correct ({v}) must not exceed guesses ({r}).")
    return _one_run_eps(m, r, v, delta, alpha)


def one_run_ceiling(canaries, guesses, delta: float, confidence: float = 0.95) -> float:
    """Largest eps a one-run audit can certify: all ``guesses`` correct.

    Same assumptions as :func:`one_run_epsilon`; e.g. at 95 % and
    delta = 1e-5, m = 1000: 1.01 / 3.47 / 5.78 for r = 10 / 100 / 1000, and
    m = 1e4, r = 10: 0.61.  Print it next to any one-run eps_LB.
    """
    return one_run_epsilon(guesses, guesses, canaries, delta, confidence)


# ---------------------------------------------------------------------------
# f-DP one-run audit (Mahloujifar, Melis & Chaudhuri 2024)
# ---------------------------------------------------------------------------

#: Trade-off curves the f-DP one-run audit can test (see :func:`one_run_fdp_epsilon`).
FDP_CURVES = ("dp", "gaussian")
#: One-run estimators :func:`one_run_best` and :func:`one_run_from_scores` accept.
ONE_RUN_ESTIMATORS = ("best", "steinke", "fdp")
#: How :func:`one_run_best` / :func:`one_run_from_scores` treat tied scores at a cut.
TIE_BREAKS = ("random", "abstain")
#: Most parameters tested per row and pass of the f-DP search, and the array size
#: (rows x parameters) a pass aims at.
_FDP_GRID = 128
_FDP_ELEMENTS = 8192
ESTIMATOR_LABELS = {
    "steinke": "one-run (Steinke, Nasr & Jagielski 2023)",
    "fdp": "f-DP one-run (Mahloujifar, Melis & Chaudhuri 2024)",
}


def _fdp_inverse_blowup(y: np.ndarray, theta: np.ndarray, delta: float, curve: str) -> np.ndarray:
    """Smallest FPR at which the curve allows TPR ``y``: the inverse of 1 - f.

    ``"dp"``: f of (eps, delta)-DP, ``1 - f(x) = min(1, e^eps x + delta,
    1 - e^-eps (1 - delta - x))`` (the ceiling of :func:`dp_tradeoff_max_tpr`), so
    ``x = max(0, e^-eps (y - delta), 1 - delta - e^eps (1 - y))``; ``theta`` = eps.
    ``"gaussian"``: mu-GDP, ``1 - f(x) = Phi(Phi^-1(x) + mu)``, so
    ``x = Phi(Phi^-1(y) - mu)``; ``theta`` = mu.
    """
    if curve == "gaussian":
        return ndtr(ndtri(np.clip(y, 0.0, 1.0)) - theta)
    e = np.exp(np.minimum(theta, 700.0))
    return np.maximum(np.maximum((y - delta) / e, 1.0 - delta - e * (1.0 - y)), 0.0)


def _fdp_rejects(theta, m, r, v, delta: float, alpha: float, curve: str) -> np.ndarray:
    """Does ``v`` correct of ``r`` guesses on ``m`` canaries reject the curve at level alpha?

    The recursion of Mahloujifar et al. (2024, Alg. "audit with abstention", alphabet
    size 2).  Suppose ``P[W >= v] >= alpha`` under an f-DP mechanism.  Start from
    ``r_v = alpha v / m`` (expected fraction of correct guesses forced by that event)
    and ``h_v = alpha (r - v) / m`` (incorrect ones); for i = v - 1, ..., 0:
    ``h_i = max(h_{i+1}, fbar^-1(r_{i+1}))`` (f-DP: correct mass needs at least that
    much incorrect mass) and ``r_i = r_{i+1} + i / (r - i) (h_i - h_{i+1})``, capped at 1
    (capping only makes rejection harder).  Guesses total ``r / m``, so
    ``r_0 + h_0 > r / m`` contradicts the supposition: then ``P[W >= v] < alpha``.
    Vectorised over broadcast arrays; returns a bool array.
    """
    theta, m, r, v = np.broadcast_arrays(
        np.asarray(theta, dtype=np.float64),
        np.asarray(m, dtype=np.float64),
        np.asarray(r, dtype=np.float64),
        np.asarray(v, dtype=np.float64),
    )
    rr = alpha * v / m
    hh = alpha * (r - v) / m
    v_min = int(v.min()) if v.size else 0
    for i in range(int(v.max()) - 1 if v.size else -1, -1, -1):
        act = i < v
        h_new = np.where(act, np.maximum(hh, _fdp_inverse_blowup(rr, theta, delta, curve)), hh)
        gain = h_new - hh
        if i < v_min and not np.any(gain > 0.0):
            break  # every row is active and fixed: nothing changes any more
        rr = np.minimum(rr + np.where(act, i / np.maximum(r - i, 1.0), 0.0) * gain, 1.0)
        hh = h_new
    return (rr + hh > r / m) & (v > 0)


def _fdp_bound(m, r, v, delta: float, alpha: float, curve: str) -> np.ndarray:
    """Largest curve parameter (eps, or mu for ``"gaussian"``) rejected; 0 if none.

    Each row is tested on G parameters per pass of the recursion (G = 128 for a few
    rows, down to 3 for many rows, so a pass costs about the same either way): first
    0 and a geometric grid up to ``2^12``, then uniform grids between the largest
    rejected point and the next one until the bracket is below ``1e-7`` (relative).
    Every value returned is itself rejected (or 0), which is all validity needs (see
    :func:`one_run_fdp_epsilon`).
    """
    m, r, v = (np.ravel(x).astype(np.float64) for x in np.broadcast_arrays(m, r, v))
    n_grid = int(np.clip(_FDP_ELEMENTS // max(m.size, 1), 3, _FDP_GRID))
    col = (slice(None), None)
    theta = np.broadcast_to(
        np.concatenate([[0.0], np.geomspace(1e-3, 4096.0, n_grid - 1)]), (m.size, n_grid)
    )
    steps = np.linspace(0.0, 1.0, n_grid)
    ok0 = None
    while True:
        rej = _fdp_rejects(theta, m[col], r[col], v[col], delta, alpha, curve)
        if ok0 is None:
            ok0 = rej[:, 0].copy()
        rej[:, 0] = True  # the lower end is 0 or already known to be rejected
        j = n_grid - 1 - np.argmax(rej[:, ::-1], axis=1)
        lo = np.take_along_axis(theta, j[col], 1)[:, 0]
        hi = np.take_along_axis(theta, np.minimum(j + 1, n_grid - 1)[col], 1)[:, 0]
        if np.all(hi - lo <= 1e-7 * np.maximum(hi, 1.0)):
            return np.where(ok0, lo, 0.0)
        theta = lo[col] + (hi - lo)[col] * steps


def _fdp_epsilon_array(m, r, v, delta: float, alpha: float, curve: str) -> np.ndarray:
    shape = np.broadcast_shapes(np.shape(m), np.shape(r), np.shape(v))
    theta = _fdp_bound(m, r, v, delta, alpha, curve).reshape(shape)
    if curve == "gaussian":
        flat = [_gdp_epsilon(float(t), delta) for t in np.ravel(theta)]
        return np.asarray(flat, dtype=np.float64).reshape(theta.shape)
    return theta


def one_run_fdp_epsilon(
    correct, guesses, canaries, delta: float, confidence: float = 0.95, curve: str = "dp"
) -> float:
    """Lower confidence bound on eps from ONE run, by the f-DP audit of Mahloujifar et al.

    "Auditing f-Differential Privacy in One Run" (Mahloujifar, Melis & Chaudhuri 2024):
    the same game as :func:`one_run_epsilon` (``canaries`` = m canaries, each included
    independently with probability 1/2; ``guesses`` = r in/out guesses made from the
    run's output alone, abstaining on the rest; ``correct`` = v of them right), but the
    probability of v or more correct guesses is bounded through the mechanism's whole
    trade-off curve f instead of through (eps, delta) alone, which gives tighter bounds
    for the same guesses (see :func:`_fdp_rejects` for the recursion).

    ``curve``:

    * ``"dp"`` (default): f is the trade-off curve of (eps, delta)-DP itself
      (``FNR >= max(0, 1 - delta - e^eps FPR, e^-eps (1 - delta - FPR))``).  Every
      (eps, delta)-DP mechanism is f-DP for this f, so the bound is valid for ANY
      (eps, delta)-DP mechanism, with no assumption on its noise.
    * ``"gaussian"``: f is the mu-GDP curve; returns the eps at ``delta`` of the largest
      rejected mu.  ASSUMES the mechanism's trade-off curve is Gaussian (a Gaussian
      mechanism; a common approximation for DP-SGD); it can overstate eps for other
      mechanisms, exactly like ``method="gdp"`` of :func:`epsilon_lower_bound`.

    The bound is the largest eps whose curve the recursion rejects at
    ``alpha = 1 - confidence`` (bisection to ~1e-9; 0 if eps = 0 is not rejected).
    Validity: a mechanism that is (eps0, delta)-DP is (eps', delta)-DP for every
    eps' >= eps0, and each rejection of eps' means ``W >= v`` with ``P[W >= v] <
    alpha`` under that eps', so ``P[bound > eps0] <= alpha``.  As in
    :func:`one_run_epsilon`, which canaries are guessed may depend on the output (and on
    randomness independent of the inclusion bits) but never on the inclusion bits.
    """
    delta = _check_delta(delta)
    alpha = 1.0 - _check_confidence(confidence)
    _check_choice(curve, FDP_CURVES, "curve")
    v = _check_count(correct, "correct")
    r = _check_count(guesses, "guesses")
    m = _check_count(canaries, "canaries", 1)
    if r > m:
        raise ValueError(
            f"guesses ({r}) must not exceed canaries ({m}); fewer canaries than guesses."
        )
    if v > r:
        raise ValueError(f"correct ({v}) must not exceed guesses ({r}).")
    return float(_fdp_epsilon_array(m, r, v, delta, alpha, curve))


def _validate_canaries(scores, included) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(scores, included)`` as float64 and bool arrays, or raise ValueError.

    Unlike member/non-member audits, one class may be absent.
    """
    s = np.asarray(scores)
    b = np.asarray(included)
    if s.ndim != 1 or b.ndim != 1:
        raise ValueError(f"scores and included must be 1-D arrays (got {s.ndim}-D and {b.ndim}-D).")
    if s.shape[0] != b.shape[0]:
        raise ValueError(
            f"scores and included must have the same length (got {s.shape[0]} and {b.shape[0]})."
        )
    if s.shape[0] == 0:
        raise ValueError("scores and included must not be empty.")
    if not (s.dtype == bool or np.issubdtype(s.dtype, np.number)) or np.iscomplexobj(s):
        raise ValueError(f"scores must be real numbers (got dtype {s.dtype}).")
    s = s.astype(np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite; found NaN or infinite values.")
    if b.dtype != bool:
        if not np.issubdtype(b.dtype, np.number) or not np.all((b == 0) | (b == 1)):
            raise ValueError("included must hold only 0/1 or boolean values.")
        b = b == 1
    return s, b


def _one_run_counts(s: np.ndarray, inc: np.ndarray, k_plus: int, k_minus: int, tie_key=None):
    """``(correct, guesses)``: IN for the top ``k_plus`` scores, OUT for the bottom ``k_minus``.

    ``tie_key=None``: canaries tied with the first canary left out of a cut are all
    abstained on (ties never decide a guess); the number of guesses can then be smaller
    than ``k_plus + k_minus``.  Otherwise ``tie_key`` (one independent random number per
    canary) orders tied scores, so exactly ``k_plus + k_minus`` guesses are made.  Labels
    are never looked at.
    """
    m = s.size
    if tie_key is not None:
        order = np.lexsort((tie_key, s))  # ascending score, ties by the random key
        guess_in = np.zeros(m, dtype=bool)
        guess_out = np.zeros(m, dtype=bool)
        guess_in[order[m - k_plus :]] = k_plus > 0
        guess_out[order[:k_minus]] = True
    else:
        desc = np.sort(s)[::-1]
        guess_in = s > desc[k_plus] if k_plus < m else np.ones(m, dtype=bool)
        guess_out = s < desc[m - 1 - k_minus] if k_minus < m else np.ones(m, dtype=bool)
    correct = int(np.sum(guess_in & inc)) + int(np.sum(guess_out & ~inc))
    return correct, int(guess_in.sum()) + int(guess_out.sum())


def _tie_key(m: int, tie_break: str, seed):
    """Seeded uniform keys for ``tie_break="random"`` (independent of the inclusion bits)."""
    _check_choice(tie_break, TIE_BREAKS, "tie_break")
    return np.random.default_rng(seed).random(m) if tie_break == "random" else None


def _one_run_estimates(m: int, r, v, delta: float, alpha: float, estimator: str):
    """Per-entry ``(eps, estimator name)`` arrays for counts ``r``, ``v`` at level alpha.

    ``"best"`` is the larger of the two bounds on the same guesses at the same alpha.
    Valid: each bounds the same tail ``P[W >= v]`` of the same count W, so for any
    eps0 the union of their rejection regions lies in ``{W >= v*}`` for the smallest
    rejected v*, whose probability is <= alpha under (eps0, delta)-DP.
    """
    r = np.atleast_1d(np.asarray(r, dtype=np.int64))
    v = np.atleast_1d(np.asarray(v, dtype=np.int64))
    st = np.zeros(r.shape)
    fd = np.zeros(r.shape)
    if estimator in ("best", "steinke"):
        st = np.array(
            [_one_run_eps(m, int(a), int(b), delta, alpha) for a, b in zip(r, v, strict=True)]
        )
    if estimator in ("best", "fdp"):
        fd = _fdp_epsilon_array(m, r, v, delta, alpha, "dp")
    use_fdp = fd > st
    eps = np.where(use_fdp, fd, st)
    names = np.where(use_fdp, "fdp", "steinke")
    return eps, names


def _check_ks(k_plus, k_minus, m: int) -> tuple[int, int]:
    kp = _check_count(k_plus, "k_plus")
    km = _check_count(k_minus, "k_minus")
    if kp + km > m:
        raise ValueError(
            f"k_plus + k_minus ({kp + km}) must not exceed the {m} canaries; "
            "fewer canaries than guesses."
        )
    return kp, km


def one_run_from_scores(
    scores,
    included,
    delta: float,
    k_plus,
    k_minus=0,
    confidence: float = 0.95,
    estimator: str = "steinke",
    tie_break: str = "abstain",
    seed=0,
) -> dict:
    """One-run eps lower bound from per-canary scores and inclusion bits.

    Guesses IN for the ``k_plus`` highest scores and OUT for the ``k_minus``
    lowest (higher score = member), abstains otherwise.  ``k_plus`` and ``k_minus``
    must be fixed before looking at the data (use :func:`one_run_best` to try several).
    Same assumptions as :func:`one_run_epsilon`: each canary included
    independently with probability 1/2 (``included`` holds those coin
    flips), scores from ONE run.

    ``estimator``: ``"steinke"`` (:func:`one_run_epsilon`), ``"fdp"``
    (:func:`one_run_fdp_epsilon` with the (eps, delta)-DP curve) or ``"best"`` (the
    larger of the two on the same guesses; valid, see :func:`one_run_best`).
    ``tie_break``: ``"abstain"`` abstains on canaries tied at a cut; ``"random"`` orders
    tied scores by a uniform key drawn from ``numpy.random.default_rng(seed)``, which is
    independent of the inclusion bits, so the guesses still depend only on the output
    (plus independent randomness) and the bound stays valid.

    Returns ``{"epsilon", "correct", "guesses", "canaries"}`` (plus ``"estimator"`` when
    ``estimator != "steinke"``).
    """
    s, inc = _validate_canaries(scores, included)
    delta = _check_delta(delta)
    alpha = 1.0 - _check_confidence(confidence)
    _check_choice(estimator, ONE_RUN_ESTIMATORS, "estimator")
    kp, km = _check_ks(k_plus, k_minus, s.size)
    v, r = _one_run_counts(s, inc, kp, km, _tie_key(s.size, tie_break, seed))
    out = {"correct": v, "guesses": r, "canaries": int(s.size)}
    if estimator == "steinke":
        return {"epsilon": _one_run_eps(s.size, r, v, delta, alpha), **out}
    eps, names = _one_run_estimates(s.size, r, v, delta, alpha, estimator)
    return {"epsilon": float(eps[0]), **out, "estimator": str(names[0])}


def _default_k_grid(m: int) -> list[tuple[int, int]]:
    """``(k, 0)`` and ``(k, k)`` for ``k = round(f m)``, f in ONE_RUN_K_FRACTIONS (m only)."""
    grid: list[tuple[int, int]] = []
    for f in ONE_RUN_K_FRACTIONS:
        k = max(1, int(round(f * m)))
        for pair in ((k, 0), (k, k)):
            if sum(pair) <= m and pair not in grid:
                grid.append(pair)
    return grid


def _check_k_grid(k_grid, m: int) -> list[tuple[int, int]]:
    if k_grid is None:
        return _default_k_grid(m)
    grid = []
    for item in k_grid:
        kp, km = (item, 0) if isinstance(item, numbers.Real) else tuple(item)
        grid.append(_check_ks(kp, km, m))
    if not grid:
        raise ValueError("k_grid must hold at least one k_plus or (k_plus, k_minus) entry.")
    return grid


def one_run_best(
    scores,
    included,
    delta: float,
    confidence: float = 0.95,
    k_grid=None,
    estimator: str = "best",
    tie_break: str = "random",
    seed=0,
) -> dict:
    """Best one-run bound over a small grid of (k_plus, k_minus), Bonferroni-corrected.

    Choosing k by looking at the bounds of the same data biases the result,
    so every grid entry is evaluated at confidence ``1 - alpha / G`` (G =
    grid size, ``alpha = 1 - confidence``) and the largest eps is reported:
    by the union bound all G bounds hold jointly with probability >=
    ``confidence``, so the maximum is a valid lower bound.  ``k_grid``
    entries are ``k_plus`` ints (k_minus = 0) or ``(k_plus, k_minus)`` pairs;
    the default depends on the number of canaries m only:
    ``(k, 0)`` and ``(k, k)`` for ``k = round(f m)``, f = 1, 3, 10, 30 %.

    ``estimator="best"`` (default) takes, per grid entry, the larger of Steinke et al.'s
    bound (:func:`one_run_epsilon`) and the f-DP bound of Mahloujifar et al. with the
    (eps, delta)-DP curve (:func:`one_run_fdp_epsilon`), both at ``1 - alpha / G`` on
    the same guesses.  Both bound the same tail probability ``P[W >= v]`` of the number
    of correct guesses, so rejecting eps when either does is still a level
    ``alpha / G`` test, and the maximum stays a valid lower bound; ``"estimator"`` in
    the result names the one that gave it.  ``"steinke"`` / ``"fdp"`` use one only.

    ``tie_break="random"`` (default) orders tied scores by a uniform key from
    ``numpy.random.default_rng(seed)`` instead of abstaining on them, so discrete or
    binary scores still yield guesses.  The key is drawn independently of the
    inclusion bits, so which canaries are guessed depends on the output and independent
    randomness only, which the one-run theorems allow: the bound stays valid.  The same
    seed gives the same guesses.  ``"abstain"`` abstains on canaries tied at a cut.
    Same assumptions as :func:`one_run_from_scores`.

    Returns the best entry's ``{"epsilon", "correct", "guesses", "canaries"}``
    plus ``"k_plus"``, ``"k_minus"``, ``"k_grid"`` (list of pairs),
    ``"confidence"``, ``"confidence_per_k"``, ``"estimator"`` (``"steinke"`` or
    ``"fdp"``), ``"method"`` (its citation), ``"tie_break"`` and ``"seed"``.
    """
    s, inc = _validate_canaries(scores, included)
    delta = _check_delta(delta)
    alpha = 1.0 - _check_confidence(confidence)
    _check_choice(estimator, ONE_RUN_ESTIMATORS, "estimator")
    grid = _check_k_grid(k_grid, s.size)
    key = _tie_key(s.size, tie_break, seed)
    conf_k = 1.0 - alpha / len(grid)
    counts = [_one_run_counts(s, inc, kp, km, key) for kp, km in grid]
    v = np.array([c[0] for c in counts])
    r = np.array([c[1] for c in counts])
    eps, names = _one_run_estimates(s.size, r, v, delta, 1.0 - conf_k, estimator)
    i = int(np.argmax(eps))  # first maximum: ties keep the earlier grid entry
    name = str(names[i])
    return {
        "epsilon": float(eps[i]),
        "correct": int(v[i]),
        "guesses": int(r[i]),
        "canaries": int(s.size),
        "k_plus": grid[i][0],
        "k_minus": grid[i][1],
        "k_grid": grid,
        "confidence": 1.0 - alpha,
        "confidence_per_k": conf_k,
        "estimator": name,
        "method": ESTIMATOR_LABELS[name],
        "tie_break": tie_break,
        "seed": seed,
    }


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
    delta = _check_delta(delta)
    with np.errstate(over="ignore", invalid="ignore"):
        line1 = np.where(f > 0.0, math.exp(min(eps, 700.0)) * f, 0.0) + delta
    line2 = 1.0 - math.exp(-eps) * (1.0 - delta - f)
    return np.clip(np.minimum(line1, line2), 0.0, 1.0)


def tradeoff_curve(epsilon: float, delta: float, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """``(fpr, max_tpr)`` of :func:`dp_tradeoff_max_tpr` on ``n`` log-spaced FPRs in [1e-4, 1].

    For plotting the (eps, delta)-DP ceiling next to an empirical ROC curve.
    """
    n = _check_count(n, "n", 2)
    fpr = np.geomspace(1e-4, 1.0, n)
    return fpr, dp_tradeoff_max_tpr(fpr, epsilon, delta)


def _roc_for_plot(s: np.ndarray, m: np.ndarray, max_points: int = ROC_PLOT_POINTS):
    """Empirical ROC ``(fpr, tpr)`` from (0, 0) to (1, 1), at most ``max_points`` points.

    Downsampling keeps both end points, half of the points evenly spaced and
    half geometrically spaced from the top of the ranking (dense at low FPR,
    for log-scale plots).
    """
    n_in, n_out = int(m.sum()), int((~m).sum())
    _, tp, fp, ends = _roc_counts_1d(s, m)
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
    s, m = _validate(scores, members)
    eps = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    g = min(_check_count(max_points, "max_points", 1), s.size)
    thresholds = _bonferroni_grid(s, g)
    q = 1.0 - (1.0 - confidence) / (2.0 * g)
    s_in, s_out = np.sort(s[m]), np.sort(s[~m])
    n_in, n_out = s_in.size, s_out.size
    fp, fn = _counts_at(thresholds, s_in, s_out)
    fpr_hi = _cp_upper(fp, n_out, q)
    tpr_lo = 1.0 - _cp_upper(fn, n_in, q)  # lower bound on TPR = 1 - upper bound on FNR
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
