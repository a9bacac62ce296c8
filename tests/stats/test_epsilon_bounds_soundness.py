"""Soundness, tightness and known-answer tests for the audit statistics in privacy_audit.stats.epsilon_bounds.

Covers the one-run audit (Steinke, Nasr & Jagielski 2023), the (eps, delta)-DP
trade-off ceiling and its ROC test, the count-only Clopper-Pearson bound, and a
simulation check of EVERY estimator against two mechanisms whose exact eps is
known: the Gaussian mechanism and the Laplace mechanism.

Tightness of the Clopper-Pearson split bound at 1e5 samples per side (>= 0.5 x
the true eps = 2 at delta = 1e-5) is pinned by
``tests/stats/test_epsilon_bounds.py::test_tightness_at_large_n`` and not repeated here.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import beta, binom, norm

from privacy_audit.stats.epsilon_bounds import (
    dp_tradeoff_max_tpr,
    epsilon_ceiling,
    epsilon_lower_bound,
    epsilon_lower_bound_from_counts,
    epsilon_point_estimate,
    gaussian_mechanism_epsilon,
    tradeoff_curve,
    tradeoff_violations,
)
from privacy_audit.stats.one_run_bounds import (
    one_run_best,
    one_run_ceiling,
    one_run_epsilon,
    one_run_from_scores,
    one_run_p_value,
)

DELTA = 1e-5
TRIALS = 200
ALPHA = 0.05
# Largest exceedance count compatible with a 5 % rate: P[Bin(200, 0.05) > LIMIT] <= 1e-3.
LIMIT = next(k for k in range(TRIALS + 1) if binom.sf(k, TRIALS, ALPHA) <= 1e-3)


# --------------------------------------------------------------------------- mechanisms


def laplace_delta(eps: float, sensitivity: float) -> float:
    """Exact privacy profile of Laplace(sensitivity, 1) vs Laplace(0, 1).

    The privacy loss L(x) = |x - D| - |x| is D for x <= 0, D - 2x on [0, D] and
    -D for x >= D.  For 0 <= eps < D the hockey-stick divergence is
    P_0[x < a] - e^eps P_D[x < a] with a = (D - eps) / 2, i.e.
    (1 - e^{-a} / 2) - e^eps e^{a - D} / 2 = 1 - e^{(eps - D) / 2};
    it is 0 for eps >= D (pure D-DP).  Symmetric in the two distributions.
    """
    return max(0.0, -math.expm1((eps - sensitivity) / 2.0)) if eps < sensitivity else 0.0


def laplace_epsilon(sensitivity: float, delta: float) -> float:
    """Inverse of laplace_delta: eps(delta) = D + 2 ln(1 - delta), floored at 0."""
    return max(0.0, sensitivity + 2.0 * math.log1p(-delta))


def mu_for_epsilon(eps: float, delta: float) -> float:
    return brentq(lambda mu: gaussian_mechanism_epsilon(mu, delta) - eps, 1e-3, 50.0, xtol=1e-12)


def draw(kind: str, rng, loc, size: int) -> np.ndarray:
    if kind == "gaussian":
        return rng.normal(loc, 1.0, size)
    return rng.laplace(loc, 1.0, size)


def true_epsilon(kind: str, param: float, delta: float) -> float:
    if kind == "gaussian":
        return gaussian_mechanism_epsilon(param, delta)
    return laplace_epsilon(param, delta)


# --------------------------------------------------------------------------- Laplace profile


@pytest.mark.parametrize("sensitivity", [0.5, 1.0, 3.0])
def test_laplace_profile_matches_privacy_loss_monte_carlo(sensitivity):
    # delta(eps) = E_P[(1 - e^{eps - L})_+], L the privacy loss under P, in both directions.
    rng = np.random.default_rng(0)
    x0 = rng.laplace(0.0, 1.0, 1_000_000)
    x1 = rng.laplace(sensitivity, 1.0, 1_000_000)
    loss0 = np.abs(x0 - sensitivity) - np.abs(x0)  # ln p0/p1 under p0
    loss1 = np.abs(x1) - np.abs(x1 - sensitivity)  # ln p1/p0 under p1
    for eps in np.linspace(0.0, 1.2 * sensitivity, 7):
        want = laplace_delta(eps, sensitivity)
        for loss in (loss0, loss1):
            terms = np.maximum(0.0, -np.expm1(eps - loss))
            se = terms.std() / math.sqrt(terms.size)
            assert abs(terms.mean() - want) <= 5 * se + 1e-12, (eps, terms.mean(), want)
    # The inverse, and eps(delta) just below the sensitivity for small delta.
    for delta in (1e-5, 1e-2, 0.2):
        eps = laplace_epsilon(sensitivity, delta)
        if eps > 0:
            assert laplace_delta(eps, sensitivity) == pytest.approx(delta, rel=1e-9)
    assert sensitivity - 2.1e-5 < laplace_epsilon(sensitivity, 1e-5) < sensitivity


# --------------------------------------------------------------------------- trade-off ceiling


@pytest.mark.parametrize(
    "eps, at_01, at_1",
    [(1.0, "0.27", "2.7"), (2.0, "0.74", "7.4"), (4.0, "5.5", "54.6")],
)
def test_tradeoff_known_values_from_note(eps, at_01, at_1):
    # The note's values in percent; each must round to the printed digits.
    got = dp_tradeoff_max_tpr([0.001, 0.01], eps, DELTA)
    for value, printed in zip(got, (at_01, at_1), strict=True):
        half_unit = 0.5 * 10.0 ** -len(printed.split(".")[1])
        assert abs(100 * value - float(printed)) <= half_unit, (eps, value, printed)
    # Both inequalities matter: near FPR = 1 the second line binds.
    assert float(dp_tradeoff_max_tpr(0.5, eps, DELTA)) == pytest.approx(
        1 - math.exp(-eps) * (0.5 - DELTA)
    )
    assert float(dp_tradeoff_max_tpr(0.0, eps, DELTA)) == pytest.approx(DELTA)
    assert float(dp_tradeoff_max_tpr(1.0, eps, DELTA)) == 1.0


def test_tradeoff_is_tight_for_exact_laplace_and_gaussian_roc():
    # Analytic ROC curves never exceed the ceiling at their exact eps(delta), and
    # touch it; a slightly smaller eps is exceeded.
    t = np.linspace(-15.0, 20.0, 20_001)
    for d in (1.0, 3.0):  # Laplace(d, 1) vs Laplace(0, 1), test "score >= t".
        fpr = np.where(t >= 0, 0.5 * np.exp(-t), 1 - 0.5 * np.exp(t))
        tpr = np.where(t >= d, 0.5 * np.exp(d - t), 1 - 0.5 * np.exp(t - d))
        eps = laplace_epsilon(d, DELTA)
        gap = tpr - dp_tradeoff_max_tpr(fpr, eps, DELTA)
        assert gap.max() <= 1e-12
        assert gap.max() > -1e-4
        assert np.max(tpr - dp_tradeoff_max_tpr(fpr, 0.97 * eps, DELTA)) > 0
    for mu in (0.5, 1.0, 2.0):
        fpr, tpr = norm.sf(t), norm.sf(t - mu)
        eps = gaussian_mechanism_epsilon(mu, DELTA)
        gap = tpr - dp_tradeoff_max_tpr(fpr, eps, DELTA)
        assert gap.max() <= 1e-9
        assert gap.max() > -1e-4 * DELTA
        assert np.max(tpr - dp_tradeoff_max_tpr(fpr, 0.97 * eps, DELTA)) > 0


def test_tradeoff_curve_grid():
    fpr, tpr = tradeoff_curve(2.0, DELTA)
    assert fpr.size == tpr.size == 200
    assert fpr[0] == pytest.approx(1e-4) and fpr[-1] == pytest.approx(1.0)
    assert np.all(np.diff(np.log(fpr)) > 0) and np.all(np.diff(tpr) >= 0)
    np.testing.assert_allclose(tpr, dp_tradeoff_max_tpr(fpr, 2.0, DELTA))
    assert tradeoff_curve(1.0, DELTA, n=7)[0].size == 7


def test_tradeoff_flags_a_weaker_mechanism_than_claimed():
    n = 20_000
    for kind, param in (("gaussian", mu_for_epsilon(4.0, DELTA)), ("laplace", 4.0)):
        assert true_epsilon(kind, param, DELTA) == pytest.approx(4.0, abs=1e-4)
        rng = np.random.default_rng(7)
        scores = np.r_[draw(kind, rng, param, n), draw(kind, rng, 0.0, n)]
        members = np.r_[np.ones(n), np.zeros(n)]
        res = tradeoff_violations(scores, members, 1.0, DELTA)
        assert res["violated"], kind
        assert res["n_thresholds"] == 100 and res["confidence"] == 0.95
        for pt in res["points"]:
            assert pt["tpr_lo"] > pt["max_tpr_allowed"]
            assert pt["tpr_lo"] <= pt["tpr"] and pt["fpr"] <= pt["fpr_hi"]
            assert pt["max_tpr_allowed"] == pytest.approx(
                float(dp_tradeoff_max_tpr(pt["fpr_hi"], 1.0, DELTA))
            )
        # Claiming the true eps is not flagged on the same data.
        assert not tradeoff_violations(scores, members, 4.0, DELTA)["violated"]
        # Plotting payload.
        roc = res["roc"]
        assert len(roc["fpr"]) <= 400 and len(roc["fpr"]) == len(roc["tpr"])
        assert (roc["fpr"][0], roc["tpr"][0]) == (0.0, 0.0)
        assert (roc["fpr"][-1], roc["tpr"][-1]) == (1.0, 1.0)
        assert np.all(np.diff(roc["fpr"]) >= 0) and np.all(np.diff(roc["tpr"]) >= 0)
        assert len(res["curve"]["fpr"]) == 200


def test_tradeoff_true_epsilon_rarely_flagged():
    # 100 trials at n = 20000 per side, at the exact eps(delta); the Laplace ROC
    # lies ON the ceiling for all thresholds outside [0, D], the hardest case.
    n, flagged = 20_000, {}
    members = np.r_[np.ones(n), np.zeros(n)]
    for kind, param in (("laplace", 1.0), ("gaussian", 1.0)):
        eps = true_epsilon(kind, param, DELTA)
        count = 0
        for t in range(100):
            rng = np.random.default_rng(90_000 + t)
            scores = np.r_[draw(kind, rng, param, n), draw(kind, rng, 0.0, n)]
            count += tradeoff_violations(scores, members, eps, DELTA)["violated"]
        flagged[kind] = count
        assert count <= 5, (kind, count)
    print(f"\ntrade-off test at the true eps, 100 trials, n=2e4/side: flagged {flagged}")


def test_tradeoff_has_power_just_below_the_true_epsilon():
    # Laplace D = 1 (true eps ~ 1) claimed as eps = 0.7: flagged.
    n = 20_000
    rng = np.random.default_rng(3)
    scores = np.r_[rng.laplace(1.0, 1.0, n), rng.laplace(0.0, 1.0, n)]
    members = np.r_[np.ones(n), np.zeros(n)]
    assert tradeoff_violations(scores, members, 0.7, DELTA)["violated"]


def test_tradeoff_grid_size_and_small_samples():
    scores = np.r_[np.arange(10.0, 20.0), np.arange(10.0)]
    members = np.r_[np.ones(10), np.zeros(10)]
    res = tradeoff_violations(scores, members, 0.1, DELTA, max_points=500)
    assert res["n_thresholds"] == 20
    # 10 v 10 perfectly separated: no CI at alpha / 40 can exclude eps = 0.1.
    assert res["violated"] is False and res["points"] == []
    assert tradeoff_violations(scores, members, 0.1, DELTA, max_points=3)["n_thresholds"] == 3


# --------------------------------------------------------------------------- one-run audit


def naive_p_value(m, r, v, eps, delta):
    """One-run p-value written out with scipy.stats.binom (independent of the library)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    tail = binom.sf(v - 1, r, q)
    if delta == 0 or v == 0:
        return tail if v > 0 else 1.0
    best = max((binom.sf(v - i - 1, r, q) - tail) / i for i in range(1, v + 1))
    return min(1.0, tail + 2 * m * delta * best)


@pytest.mark.parametrize(
    "m, r, v, eps, delta",
    [
        (1000, 10, 10, 1.0, 1e-5),
        (1000, 100, 90, 1.6, 1e-5),
        (1000, 100, 60, 0.3, 1e-5),
        (5000, 1000, 700, 0.8, 1e-4),
        (200, 50, 30, 0.0, 1e-3),
        (1000, 100, 95, 2.5, 0.0),
        (1000, 100, 0, 2.5, 1e-5),
    ],
)
def test_one_run_p_value_matches_independent_implementation(m, r, v, eps, delta):
    got = one_run_p_value(m, r, v, eps, delta)
    assert got == pytest.approx(naive_p_value(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(
    "m, r, frac, note",
    [
        (1000, 10, 1.0, 1.02),
        (1000, 100, 1.0, 3.47),
        (1000, 1000, 1.0, 5.78),
        (1000, 10, 0.9, 0.40),
        (1000, 100, 0.9, 1.63),
        (1000, 1000, 0.9, 2.02),
        (10_000, 10, 1.0, 0.61),
    ],
)
def test_one_run_reproduces_note_ceilings(m, r, frac, note):
    v = int(round(frac * r))
    got = one_run_epsilon(v, r, m, DELTA)
    assert got == pytest.approx(note, abs=0.03)
    if frac == 1.0:
        assert one_run_ceiling(m, r, DELTA) == got
    # The returned eps is the crossing: p(eps) <= alpha < p(eps + 1e-6).
    assert one_run_p_value(m, r, v, got, DELTA) <= ALPHA
    assert one_run_p_value(m, r, v, got + 1e-6, DELTA) > ALPHA


def test_one_run_p_value_monotone_in_epsilon():
    # Proven for 2 m delta <= 1 (see one_run_epsilon's docstring); checked on a grid.
    grid = np.linspace(0.0, 8.0, 400)
    for m, r, v, delta in [(1000, 100, 80, 1e-5), (1000, 50, 45, 5e-4), (2000, 300, 200, 2.5e-4)]:
        p = [one_run_p_value(m, r, v, e, delta) for e in grid]
        assert np.all(np.diff(p) >= -1e-12)  # rounding where p is within 1e-13 of 1


def test_one_run_exact_coverage_under_randomised_response():
    # Each guess correct independently w.p. q(eps): the extremal eps-DP case, where
    # W ~ Bin(r, q).  Exact P[eps_LB(W) > eps] over all W must be <= alpha; the
    # eps-DP test is exact there, so the level is also nearly attained.
    for eps_true, r in [(0.5, 100), (1.0, 100), (2.0, 400), (1.0, 1000)]:
        q = math.exp(eps_true) / (1 + math.exp(eps_true))
        pmf = binom.pmf(np.arange(r + 1), r, q)
        lbs = np.array([one_run_epsilon(v, r, 10 * r, 1e-12) for v in range(r + 1)])
        assert np.all(np.diff(lbs) >= 0)
        size = float(np.sum(pmf[lbs > eps_true]))
        assert 0.02 < size <= ALPHA, (eps_true, r, size)


def test_one_run_large_m_delta_regime():
    # 2 m delta > 1: monotonicity is not guaranteed; the largest crossing is found.
    m, delta = 100_000, 1e-4  # 2 m delta = 20
    assert one_run_epsilon(100, 100, m, delta) == 0.0  # 20 / 100 > alpha: p >= 0.2 always
    r = v = 1000
    got = one_run_epsilon(v, r, m, delta)
    assert got > 0.0
    assert one_run_p_value(m, r, v, got, delta) <= ALPHA
    finer = np.linspace(got + 1e-6, got + 10.0, 3000)
    assert all(one_run_p_value(m, r, v, e, delta) > ALPHA for e in finer)
    assert got < one_run_epsilon(v, r, m, 1e-6)


def test_one_run_from_scores_by_hand():
    scores = np.array([9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    included = np.array([1, 1, 0, 1, 0, 1, 0, 0, 1, 0])
    res = one_run_from_scores(scores, included, DELTA, k_plus=3, k_minus=2)
    # IN on 9, 8, 7 (2 right), OUT on 1, 0 (1 right).
    assert res == {
        "epsilon": one_run_epsilon(3, 5, 10, DELTA),
        "correct": 3,
        "guesses": 5,
        "canaries": 10,
    }
    perm = np.random.default_rng(0).permutation(10)
    assert one_run_from_scores(scores[perm], included[perm], DELTA, 3, 2) == res
    # Ties at the cut are abstained on: scores 7 and 6 tie, so only 9 and 8 get IN.
    tied = scores.copy()
    tied[3] = 7.0
    res = one_run_from_scores(tied, included, DELTA, k_plus=3)
    assert (res["correct"], res["guesses"]) == (2, 2)
    assert one_run_from_scores(scores, included, DELTA, k_plus=10)["guesses"] == 10
    assert one_run_from_scores(scores, included, DELTA, 0, 10)["correct"] == 5
    assert one_run_from_scores(scores, included, DELTA, 0)["epsilon"] == 0.0
    # One class absent is legitimate (coin flips) in a one-run audit.
    assert one_run_from_scores(scores, np.ones(10), DELTA, 5)["correct"] == 5


def test_one_run_best_is_bonferroni_corrected():
    rng = np.random.default_rng(5)
    m = 2000
    included = rng.random(m) < 0.5
    scores = rng.normal(3.0 * included, 1.0)
    best = one_run_best(scores, included, DELTA, estimator="steinke")
    grid = best["k_grid"]
    assert grid == [
        (20, 0),
        (20, 20),
        (60, 0),
        (60, 60),
        (200, 0),
        (200, 200),
        (600, 0),
        (600, 600),
    ]
    assert best["confidence_per_k"] == pytest.approx(1 - 0.05 / 8)
    per_k = [
        one_run_from_scores(scores, included, DELTA, kp, km, confidence=1 - 0.05 / 8)
        for kp, km in grid
    ]
    eps = [r["epsilon"] for r in per_k]
    assert best["epsilon"] == max(eps) > 0
    i = int(np.argmax(eps))
    assert (best["k_plus"], best["k_minus"]) == grid[i]
    assert (best["correct"], best["guesses"]) == (per_k[i]["correct"], per_k[i]["guesses"])
    # Paying for the grid: each entry alone at 95 % would certify more.
    plain = one_run_from_scores(scores, included, DELTA, *grid[i])["epsilon"]
    assert plain > best["epsilon"]
    assert best["estimator"] == "steinke"
    # The default takes the larger of Steinke's and the f-DP bound on the same guesses.
    both = one_run_best(scores, included, DELTA)
    fdp = [
        one_run_from_scores(scores, included, DELTA, kp, km, 1 - 0.05 / 8, estimator="fdp")
        for kp, km in grid
    ]
    assert both["epsilon"] == max(max(eps), max(r["epsilon"] for r in fdp))
    assert both["estimator"] in ("steinke", "fdp")
    custom = one_run_best(scores, included, DELTA, k_grid=[50, (30, 30)])
    assert custom["k_grid"] == [(50, 0), (30, 30)]
    assert custom["confidence_per_k"] == pytest.approx(1 - 0.05 / 2)


# --------------------------------------------------------------------------- counts-only CP bound


def test_epsilon_lower_bound_from_counts():
    def cp_upper(k, n, q):
        return 1.0 if k == n else float(beta.ppf(q, k + 1, n - k))

    for fp, n_neg, fn, n_pos in [(0, 100, 0, 100), (3, 1000, 400, 1000), (50, 60, 2, 80)]:
        fpr, fnr = cp_upper(fp, n_neg, 0.975), cp_upper(fn, n_pos, 0.975)
        cands = [0.0]
        for num, den in ((1 - DELTA - fnr, fpr), (1 - DELTA - fpr, fnr)):
            if num > 0:
                cands.append(math.log(num / den))
        got = epsilon_lower_bound_from_counts(fp, n_neg, fn, n_pos, DELTA)
        assert got == pytest.approx(max(cands), rel=1e-10)
    # The same computation as the split ceiling (FP = FN = 0 on half B).
    assert epsilon_lower_bound_from_counts(0, 500, 0, 500, DELTA) == pytest.approx(
        epsilon_ceiling(1000, 1000, DELTA), rel=1e-12
    )
    assert epsilon_lower_bound_from_counts(0, 500, 0, 500, DELTA, confidence=0.99) < (
        epsilon_lower_bound_from_counts(0, 500, 0, 500, DELTA)
    )
    assert epsilon_lower_bound_from_counts(100, 100, 100, 100, DELTA) == 0.0


# --------------------------------------------------------------------------- soundness


SETTINGS = {
    # name: (mechanism, mu or sensitivity, delta)
    "gaussian eps=2 d=1e-5": ("gaussian", mu_for_epsilon(2.0, DELTA), DELTA),
    "gaussian mu=1 d=0.1": ("gaussian", 1.0, 0.1),
    "laplace D=1 d=1e-5": ("laplace", 1.0, DELTA),
    "laplace D=3 d=1e-5": ("laplace", 3.0, DELTA),
}
SOUND = ("cp-split", "cp-bonferroni", "one-run k=5%+5%", "one-run best", "tradeoff")
GDP = ("gdp-split", "gdp-bonferroni")
N_PER_SIDE = 1000
CANARIES = 1000


@functools.cache
def simulate(name: str) -> dict:
    """Exceedance counts over TRIALS seeded trials for every estimator (cached)."""
    kind, param, delta = SETTINGS[name]
    eps = true_epsilon(kind, param, delta)
    n, m = N_PER_SIDE, CANARIES
    members = np.r_[np.ones(n, dtype=int), np.zeros(n, dtype=int)]
    counts = dict.fromkeys((*SOUND, *GDP, "point estimate"), 0)
    for t in range(TRIALS):
        rng = np.random.default_rng(10_000 * (1 + list(SETTINGS).index(name)) + t)
        scores = np.r_[draw(kind, rng, param, n), draw(kind, rng, 0.0, n)]
        included = rng.random(m) < 0.5
        canary_scores = draw(kind, rng, param * included, m)
        lbs = {
            "cp-split": epsilon_lower_bound(scores, members, delta, seed=t),
            "cp-bonferroni": epsilon_lower_bound(scores, members, delta, threshold="bonferroni"),
            "gdp-split": epsilon_lower_bound(scores, members, delta, method="gdp", seed=t),
            "gdp-bonferroni": epsilon_lower_bound(
                scores, members, delta, method="gdp", threshold="bonferroni"
            ),
            "one-run k=5%+5%": one_run_from_scores(
                canary_scores, included, delta, m // 20, m // 20
            )["epsilon"],
            "one-run best": one_run_best(canary_scores, included, delta)["epsilon"],
            "point estimate": epsilon_point_estimate(scores, members, delta),
        }
        for key, lb in lbs.items():
            counts[key] += lb > eps
        counts["tradeoff"] += tradeoff_violations(scores, members, eps, delta)["violated"]
    print(f"\n{name} (true eps {eps:.4f}): exceedances / {TRIALS} = {counts}")
    return counts


@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_estimator_is_sound(name):
    counts = simulate(name)
    kind = SETTINGS[name][0]
    checked = SOUND + (GDP if kind == "gaussian" else ())
    for key in checked:
        assert counts[key] <= LIMIT, (name, key, counts[key], LIMIT)


def test_simulation_has_power():
    # The same harness catches an estimator without a guarantee: the raw point
    # estimate exceeds the true eps far more often than 5 % where the bounds get close.
    for name in ("gaussian mu=1 d=0.1", "laplace D=1 d=1e-5", "laplace D=3 d=1e-5"):
        assert simulate(name)["point estimate"] > 3 * LIMIT, name


def test_gdp_is_unsound_on_laplace():
    # Documented limitation: the "gdp" method assumes a Gaussian trade-off curve.
    # On the Laplace mechanism it exceeds the true eps in most trials.
    for name in ("laplace D=1 d=1e-5", "laplace D=3 d=1e-5"):
        counts = simulate(name)
        for key in GDP:
            assert counts[key] > TRIALS // 2, (name, key, counts[key])


# --------------------------------------------------------------------------- errors


def test_validation_errors():
    rng = np.random.default_rng(0)
    scores, labels = rng.normal(size=20), np.r_[np.ones(10), np.zeros(10)]
    for bad in (0.0, 1.0, -1e-5, 1.5, float("nan")):
        calls = [
            lambda d: one_run_epsilon(5, 10, 100, d),
            lambda d: one_run_ceiling(100, 10, d),
            lambda d: one_run_from_scores(scores, labels, d, 5),
            lambda d: one_run_best(scores, labels, d),
            lambda d: dp_tradeoff_max_tpr(0.1, 1.0, d),
            lambda d: tradeoff_curve(1.0, d),
            lambda d: tradeoff_violations(scores, labels, 1.0, d),
            lambda d: epsilon_lower_bound_from_counts(1, 10, 1, 10, d),
        ]
        for call in calls:
            with pytest.raises(ValueError, match="delta"):
                call(bad)
    for bad in (0.0, 1.0, -0.5, 2.0):
        calls = [
            lambda c: one_run_epsilon(5, 10, 100, DELTA, c),
            lambda c: one_run_ceiling(100, 10, DELTA, c),
            lambda c: one_run_from_scores(scores, labels, DELTA, 5, confidence=c),
            lambda c: one_run_best(scores, labels, DELTA, confidence=c),
            lambda c: tradeoff_violations(scores, labels, 1.0, DELTA, confidence=c),
            lambda c: epsilon_lower_bound_from_counts(1, 10, 1, 10, DELTA, c),
        ]
        for call in calls:
            with pytest.raises(ValueError, match="confidence"):
                call(bad)
    with pytest.raises(ValueError, match="fewer canaries than guesses"):
        one_run_epsilon(5, 101, 100, DELTA)
    with pytest.raises(ValueError, match="fewer canaries than guesses"):
        one_run_ceiling(10, 11, DELTA)
    with pytest.raises(ValueError, match="fewer canaries than guesses"):
        one_run_from_scores(scores, labels, DELTA, 15, 6)
    with pytest.raises(ValueError, match="fewer canaries than guesses"):
        one_run_best(scores, labels, DELTA, k_grid=[(10, 11)])
    with pytest.raises(ValueError, match="correct .* must not exceed guesses"):
        one_run_epsilon(11, 10, 100, DELTA)
    for bad_count in (-1, 2.5, float("inf"), True, "3"):
        with pytest.raises(ValueError, match="correct"):
            one_run_epsilon(bad_count, 10, 100, DELTA)
    with pytest.raises(ValueError, match="guesses"):
        one_run_epsilon(0, -1, 100, DELTA)
    with pytest.raises(ValueError, match="canaries"):
        one_run_epsilon(0, 0, 0, DELTA)
    with pytest.raises(ValueError, match="k_plus"):
        one_run_from_scores(scores, labels, DELTA, -1)
    with pytest.raises(ValueError, match="k_minus"):
        one_run_from_scores(scores, labels, DELTA, 1, -2)
    with pytest.raises(ValueError, match="k_grid"):
        one_run_best(scores, labels, DELTA, k_grid=[])
    with pytest.raises(ValueError, match="same length"):
        one_run_from_scores(scores, labels[:-1], DELTA, 5)
    with pytest.raises(ValueError, match="same length"):
        tradeoff_violations(scores, labels[:-1], 1.0, DELTA)
    with pytest.raises(ValueError, match="same length"):
        one_run_best(scores[:-1], labels, DELTA)
    with pytest.raises(ValueError, match="included"):
        one_run_from_scores(scores, labels * 2, DELTA, 5)
    with pytest.raises(ValueError, match="finite"):
        one_run_from_scores(np.r_[scores[:-1], np.nan], labels, DELTA, 5)
    with pytest.raises(ValueError, match="empty"):
        one_run_from_scores([], [], DELTA, 0)
    with pytest.raises(ValueError, match="negative|non-negative"):
        epsilon_lower_bound_from_counts(-1, 10, 1, 10, DELTA)
    with pytest.raises(ValueError, match="fp .* must not exceed n_neg"):
        epsilon_lower_bound_from_counts(11, 10, 1, 10, DELTA)
    with pytest.raises(ValueError, match="fn .* must not exceed n_pos"):
        epsilon_lower_bound_from_counts(1, 10, 11, 10, DELTA)
    with pytest.raises(ValueError, match="n_neg"):
        epsilon_lower_bound_from_counts(0, 0, 1, 10, DELTA)
    with pytest.raises(ValueError, match="fpr"):
        dp_tradeoff_max_tpr([0.1, 1.2], 1.0, DELTA)
    for bad_eps in (-0.1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="epsilon"):
            dp_tradeoff_max_tpr(0.1, bad_eps, DELTA)
        with pytest.raises(ValueError, match="epsilon"):
            tradeoff_violations(scores, labels, bad_eps, DELTA)
    with pytest.raises(ValueError, match="max_points"):
        tradeoff_violations(scores, labels, 1.0, DELTA, max_points=0)
    with pytest.raises(ValueError, match="both classes"):
        tradeoff_violations(scores, np.ones(20), 1.0, DELTA)
    with pytest.raises(ValueError, match="n must be"):
        tradeoff_curve(1.0, DELTA, n=1)
