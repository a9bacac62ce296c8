"""One-run lower bounds on differential-privacy epsilon: the audit of Steinke, Nasr &
Jagielski 2023 from ONE training run, and its f-DP form (Mahloujifar, Melis & Chaudhuri
2024), from canary scores or from the counts of correct guesses.

Assumptions shared by every bound here: the ``m`` canaries' inclusion in the training
run was randomised independently (each with probability 1/2, a fair coin per canary);
from the run's output alone the auditor guesses in/out on ``r`` of them (abstaining on
the rest; which ones may depend on the output, never on the inclusion bits) and ``v``
guesses are correct. The canaries may share one model: no other independence is
needed, and the Steinke bound and the f-DP bound with ``curve="dp"`` hold for ANY
(eps, delta)-DP training run. The f-DP estimator with
``curve="gaussian"`` assumes in addition that the mechanism's trade-off curve is
Gaussian (see :func:`one_run_fdp_epsilon`). The member/non-member bounds and the checks
shared with them are in :mod:`privacy_audit.stats.epsilon_bounds`.

Only numpy and scipy are used.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.special import gammaln, ndtr, ndtri

from privacy_audit.stats.epsilon_bounds import (
    check_choice,
    check_count,
    check_delta,
    gdp_epsilon,
)
from privacy_audit.stats.scores import check_confidence

__all__ = [
    "one_run_best",
    "one_run_ceiling",
    "one_run_epsilon",
    "one_run_fdp_epsilon",
    "one_run_from_scores",
]

#: Absolute/relative tolerance of the one-run bisection on eps.
_ONE_RUN_XTOL = 1e-9
#: Grid steps used to locate the largest crossing when 2 m delta > 1.
_ONE_RUN_SCAN = 2048
#: Fractions of m used by the default grid of :func:`one_run_best`.
ONE_RUN_K_FRACTIONS = (0.01, 0.03, 0.1, 0.3)


def one_run_p_value_fn(m: int, r: int, v: int, delta: float):
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


def one_run_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """p(eps) of :func:`one_run_p_value_fn` at one eps (``delta = 0`` allowed)."""
    return one_run_p_value_fn(m, r, v, delta)(eps)


def one_run_eps(m: int, r: int, v: int, delta: float, alpha: float) -> float:
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
    p = one_run_p_value_fn(m, r, v, delta)
    beta = one_run_p_value_fn(m, r, v, 0.0)
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
    delta = check_delta(delta)
    alpha = 1.0 - check_confidence(confidence)
    v = check_count(correct, "correct")
    r = check_count(guesses, "guesses")
    m = check_count(canaries, "canaries", 1)
    if r > m:
        raise ValueError(
            f"guesses ({r}) must not exceed canaries ({m}); fewer canaries than guesses."
        )
    if v > r:
        raise ValueError(f"correct ({v}) must not exceed guesses ({r}).")
    return one_run_eps(m, r, v, delta, alpha)


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


def fdp_bound(m, r, v, delta: float, alpha: float, curve: str) -> np.ndarray:
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


def fdp_epsilon_array(m, r, v, delta: float, alpha: float, curve: str) -> np.ndarray:
    shape = np.broadcast_shapes(np.shape(m), np.shape(r), np.shape(v))
    theta = fdp_bound(m, r, v, delta, alpha, curve).reshape(shape)
    if curve == "gaussian":
        flat = [gdp_epsilon(float(t), delta) for t in np.ravel(theta)]
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
    delta = check_delta(delta)
    alpha = 1.0 - check_confidence(confidence)
    check_choice(curve, FDP_CURVES, "curve")
    v = check_count(correct, "correct")
    r = check_count(guesses, "guesses")
    m = check_count(canaries, "canaries", 1)
    if r > m:
        raise ValueError(
            f"guesses ({r}) must not exceed canaries ({m}); fewer canaries than guesses."
        )
    if v > r:
        raise ValueError(f"correct ({v}) must not exceed guesses ({r}).")
    return float(fdp_epsilon_array(m, r, v, delta, alpha, curve))


def validate_canaries(scores, included) -> tuple[np.ndarray, np.ndarray]:
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


def one_run_counts(s: np.ndarray, inc: np.ndarray, k_plus: int, k_minus: int, tie_key=None):
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


def tie_break_key(m: int, tie_break: str, seed):
    """Seeded uniform keys for ``tie_break="random"`` (independent of the inclusion bits)."""
    check_choice(tie_break, TIE_BREAKS, "tie_break")
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
            [one_run_eps(m, int(a), int(b), delta, alpha) for a, b in zip(r, v, strict=True)]
        )
    if estimator in ("best", "fdp"):
        fd = fdp_epsilon_array(m, r, v, delta, alpha, "dp")
    use_fdp = fd > st
    eps = np.where(use_fdp, fd, st)
    names = np.where(use_fdp, "fdp", "steinke")
    return eps, names


def _check_ks(k_plus, k_minus, m: int) -> tuple[int, int]:
    kp = check_count(k_plus, "k_plus")
    km = check_count(k_minus, "k_minus")
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
    s, inc = validate_canaries(scores, included)
    delta = check_delta(delta)
    alpha = 1.0 - check_confidence(confidence)
    check_choice(estimator, ONE_RUN_ESTIMATORS, "estimator")
    kp, km = _check_ks(k_plus, k_minus, s.size)
    v, r = one_run_counts(s, inc, kp, km, tie_break_key(s.size, tie_break, seed))
    out = {"correct": v, "guesses": r, "canaries": int(s.size)}
    if estimator == "steinke":
        return {"epsilon": one_run_eps(s.size, r, v, delta, alpha), **out}
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


def check_k_grid(k_grid, m: int) -> list[tuple[int, int]]:
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
    s, inc = validate_canaries(scores, included)
    delta = check_delta(delta)
    alpha = 1.0 - check_confidence(confidence)
    check_choice(estimator, ONE_RUN_ESTIMATORS, "estimator")
    grid = check_k_grid(k_grid, s.size)
    key = tie_break_key(s.size, tie_break, seed)
    conf_k = 1.0 - alpha / len(grid)
    counts = [one_run_counts(s, inc, kp, km, key) for kp, km in grid]
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
