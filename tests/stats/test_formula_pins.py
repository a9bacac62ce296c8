"""Known answers that pin formulas a plausible mutation would break (issue 26, item 5).

Each test compares with a computation written out here (scipy, numpy, sklearn or a hand
example), never with the suite's own wrapper. The mutation each one kills is named in
its docstring; each was applied by hand and seen to fail the test, then reverted."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from privacy_audit.attacks.shadow import lira_scores, rmia_scores
from privacy_audit.stats.canary_bounds import (
    gaussian_mu_lower,
    gaussian_one_run_epsilon,
    one_run_group_epsilon,
)
from privacy_audit.stats.epsilon_bounds import tradeoff_violations

# --------------------------------------------------------------------------- LiRA / RMIA


def _logpdf(x: float, mu: float, sd: float) -> float:
    return -0.5 * ((x - mu) / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi)


def test_lira_online_fixed_variance_uses_each_sides_own_median_sigma():
    """Mutation: LiRA online with ``fixed_variance`` giving the IN side the OUT sigma."""
    # 4 shadow models x 3 examples; IN values spread far more than OUT values
    shadow = np.array(
        [
            [0.0, 1.0, 2.0],
            [4.0, 5.0, 9.0],
            [1.0, 2.0, 3.0],
            [1.5, 2.5, 3.2],
        ]
    )
    keep = np.array(
        [
            [True, False, True],
            [True, True, True],
            [False, True, False],
            [False, False, False],
        ]
    )
    target = np.array([3.0, 2.0, 4.0])
    # by hand: per-example population SDs, then the median over examples on each side
    sd_in, sd_out, mu_in, mu_out = [], [], [], []
    for j in range(3):
        a, b = shadow[keep[:, j], j], shadow[~keep[:, j], j]
        mu_in.append(sum(a) / len(a))
        mu_out.append(sum(b) / len(b))
        sd_in.append(math.sqrt(sum((x - mu_in[j]) ** 2 for x in a) / len(a)))
        sd_out.append(math.sqrt(sum((x - mu_out[j]) ** 2 for x in b) / len(b)))
    s_in, s_out = sorted(sd_in)[1], sorted(sd_out)[1]
    assert abs(s_in - s_out) > 0.5  # the two sides really differ
    expected = [
        _logpdf(target[j], mu_in[j], s_in) - _logpdf(target[j], mu_out[j], s_out) for j in range(3)
    ]
    got = lira_scores(target, shadow, keep, online=True, fixed_variance=True)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # per-example variances (fixed_variance=False) by hand as well
    expected_pe = [
        _logpdf(target[j], mu_in[j], sd_in[j]) - _logpdf(target[j], mu_out[j], sd_out[j])
        for j in range(3)
    ]
    np.testing.assert_allclose(lira_scores(target, shadow, keep), expected_pe, rtol=1e-12)


@pytest.mark.parametrize("gamma", [0.5, 2.0, 3.0])
def test_rmia_score_counts_population_ratios_beaten_by_a_factor_gamma(gamma):
    """Mutation: RMIA comparing ``ratio * gamma`` instead of ``ratio / gamma``."""
    target_p = np.array([0.9, 0.5, 0.2, 0.6, 0.05, 0.3])
    shadow_p = np.array(
        [
            [0.3, 0.5, 0.4, 0.2, 0.1, 0.3],
            [0.5, 0.5, 0.2, 0.4, 0.3, 0.1],
        ]
    )
    keep = np.array(
        [[True, False, True, False, True, False], [False, True, False, True, False, True]]
    )
    population = np.array([3, 4, 5])
    got, ratios = rmia_scores(target_p, shadow_p, keep, population, online=True, gamma=gamma)
    # by hand: p(x) = mean over all reference models; score = share of z with
    # [p(x|θ)/p(x)] / [p(z|θ)/p(z)] > γ
    ref = [(shadow_p[0, j] + shadow_p[1, j]) / 2 for j in range(6)]
    ratio = [target_p[j] / ref[j] for j in range(6)]
    expected = [sum(ratio[j] / ratio[z] > gamma for z in population) / 3 for j in range(6)]
    np.testing.assert_allclose(ratios, ratio, rtol=1e-12)
    np.testing.assert_array_equal(got, expected)
    assert len(set(expected)) > 1  # the example separates scores


# --------------------------------------------------------------------------- trade-off test


def test_tradeoff_violation_bounds_are_clopper_pearson_at_alpha_over_2g():
    """Mutation: the violation test at alpha / G instead of alpha / (2 G)."""
    rng = np.random.default_rng(5)
    n = 300
    scores = np.r_[rng.normal(3.0, 1.0, n), rng.normal(0.0, 1.0, n)]
    members = np.r_[np.ones(n), np.zeros(n)]
    res = tradeoff_violations(scores, members, epsilon=0.5, delta=1e-5, max_points=10)
    g = res["n_thresholds"]
    assert g == 10 and res["violated"] and res["points"]
    q = 1.0 - 0.05 / (2 * g)
    for p in res["points"]:
        fp = round(p["fpr"] * n)
        fn = round((1.0 - p["tpr"]) * n)
        fpr_hi = 1.0 if fp == n else stats.beta.ppf(q, fp + 1, n - fp)
        fnr_hi = 1.0 if fn == n else stats.beta.ppf(q, fn + 1, n - fn)
        assert p["fpr_hi"] == pytest.approx(fpr_hi, rel=1e-9, abs=1e-12)
        assert p["tpr_lo"] == pytest.approx(1.0 - fnr_hi, rel=1e-9, abs=1e-12)
        # the ceiling of (eps, delta)-DP at FPR_hi, by hand
        e = math.exp(0.5)
        ceiling = min(1.0, e * fpr_hi + 1e-5, 1.0 - (1.0 - 1e-5 - fpr_hi) / e)
        assert p["max_tpr_allowed"] == pytest.approx(ceiling, rel=1e-9)
        assert p["tpr_lo"] > ceiling


# --------------------------------------------------------------------------- group privacy


def _steinke_p(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Steinke, Nasr & Jagielski (2023), Thm. 5.2 / Prop. 5.7, one scalar at a time:
    p = P[B >= v] + 2 m delta max_{i=1..v} P[v - i <= B <= v - 1] / i, B ~ Bin(r, q)."""
    q = math.exp(eps) / (1.0 + math.exp(eps))
    tail = float(stats.binom.sf(v - 1, r, q))
    extra = max(
        (float(stats.binom.cdf(v - 1, r, q) - stats.binom.cdf(v - i - 1, r, q)) / i)
        for i in range(1, v + 1)
    )
    return min(1.0, tail + 2 * m * delta * extra)


def _group_delta(eps: float, delta: float, k: int) -> float:
    return delta * sum(math.exp(i * eps) for i in range(k))


@pytest.mark.parametrize("v, r, m, k", [(95, 100, 1000, 4), (60, 60, 500, 3)])
def test_group_bound_tests_the_group_delta(v, r, m, k):
    """Mutation: the group-privacy bound tested at delta instead of delta_r."""
    delta, alpha = 1e-5, 0.05
    eps = one_run_group_epsilon(v, r, m, delta, group=k)
    assert eps > 0
    # the per-example eps is rejected for the group at (k eps, delta_k(eps)) ...
    assert _steinke_p(m, r, v, k * eps, _group_delta(eps, delta, k)) <= alpha * (1 + 1e-9)
    # ... and nothing noticeably larger is
    above = eps * (1 + 1e-5) + 1e-8
    assert _steinke_p(m, r, v, k * above, _group_delta(above, delta, k)) > alpha
    # at delta itself (the mutant) a larger eps would be rejected: the test can tell
    assert _steinke_p(m, r, v, k * above, delta) <= alpha


# --------------------------------------------------------------------------- Gaussian audit


def _nct_sf_by_quadrature(t: float, df: int, nc: float) -> float:
    """P[T >= t] for T = (Z + nc) / sqrt(V / df), V ~ chi2(df), by integrating over V."""

    def f(v):
        return stats.norm.cdf(nc - t * math.sqrt(v / df)) * stats.chi2.pdf(v, df)

    lo, hi = stats.chi2.ppf([1e-12, 1 - 1e-12], df)
    return float(integrate.quad(f, lo, hi, epsabs=1e-14, epsrel=1e-10, limit=200)[0])


def test_gaussian_mu_lower_far_tail_matches_the_noncentral_t_by_quadrature():
    """Far out (t > 40), where an earlier normal approximation leaned anti-conservative."""
    rng = np.random.default_rng(11)
    n = 200
    x = rng.normal(0.0, 1.0, n)
    y = rng.normal(0.0, 1.0, n)
    x = (x - x.mean()) / x.std(ddof=1) + 6.0  # exactly mu_hat = 6 with pooled sd 1
    y = (y - y.mean()) / y.std(ddof=1)
    scores = np.r_[x, y]
    inc = np.r_[np.ones(n, dtype=bool), np.zeros(n, dtype=bool)]
    df = 2 * n - 2
    scale = math.sqrt(2.0 / n)
    t_obs = 6.0 / scale
    assert t_obs > 40
    alpha = 0.05
    nc = optimize.brentq(
        lambda c: _nct_sf_by_quadrature(t_obs, df, c) - alpha, 0.5 * t_obs, t_obs, xtol=1e-9
    )
    got = gaussian_mu_lower(scores, inc, confidence=1 - alpha)
    assert got["mu_hat"] == pytest.approx(6.0, rel=1e-12)
    assert got["mu_lo"] == pytest.approx(nc * scale, rel=1e-5)


def _nct_sf_mpmath(t: float, df: int, nc: float) -> float:
    """P[(Z + nc)/√(V/df) ≥ t], t > 0, at 25 digits: E_Z[P(V ≤ df (Z + nc)²/t²); Z > −nc],
    integrated over Z (smooth at every t, unlike the integral over V)."""
    import mpmath as mp

    with mp.workdps(25):
        t_, df_, nc_ = mp.mpf(t), mp.mpf(df), mp.mpf(nc)

        def f(z):
            x = df_ * (z + nc_) ** 2 / t_**2
            return mp.npdf(z) * mp.gammainc(df_ / 2, 0, x / 2, regularized=True)

        pts = sorted({-nc_, *(mp.mpf(j) for j in range(-12, 13, 3) if j > -nc)}) + [mp.inf]
        return float(mp.quad(f, pts))


@pytest.mark.parametrize("df", [2, 30, 398, 1998])
def test_noncentral_t_lower_is_never_above_the_exact_bound_for_t_up_to_1e4(df):
    """μ_lo's noncentrality at every t in [0, 10⁴]: the exact tail there (mpmath) is at or
    below α (never anti-conservative), and within 1e-5 of it (not needlessly loose); the
    split bound used when scipy fails is below the exact one too."""
    from privacy_audit.stats.canary_bounds import (
        noncentral_t_lower,
        noncentral_t_split_lower,
    )

    alpha = 0.05
    for t in (0.5, 2.0, 10.0, 40.0, 41.0, 60.0, 120.0, 1e3, 1e4):
        nc = noncentral_t_lower(t, df, alpha)
        if nc == 0.0:  # then even nc = 0 has a tail ≥ α
            assert float(stats.nct.sf(t, df, 0.0)) >= alpha * (1 - 1e-6)
            continue
        tail = _nct_sf_mpmath(t, df, nc)
        assert tail <= alpha, (t, df, nc, tail)
        assert tail >= alpha * (1 - 1e-5), (t, df, nc, tail)
        split = noncentral_t_split_lower(t, df, alpha)
        assert split <= nc
        if split > 0:
            assert _nct_sf_mpmath(t, df, split) <= alpha


def test_gaussian_one_run_epsilon_is_at_most_the_exact_bound_far_out():
    """End to end through the scores: at t ≈ 120 and 1,000 the ε bound is at most the ε of
    the exact noncentral-t root (mpmath), where the old normal branch was above it."""
    from privacy_audit.stats.epsilon_bounds import gaussian_mechanism_epsilon

    n = 200
    df, scale = 2 * n - 2, math.sqrt(2.0 / n)
    rng = np.random.default_rng(3)
    base_x, base_y = rng.normal(size=n), rng.normal(size=n)
    for mu_hat in (12.0, 100.0):
        x = (base_x - base_x.mean()) / base_x.std(ddof=1) + mu_hat
        y = (base_y - base_y.mean()) / base_y.std(ddof=1)
        scores = np.r_[x, y]
        inc = np.r_[np.ones(n, dtype=bool), np.zeros(n, dtype=bool)]
        g = gaussian_one_run_epsilon(scores, inc, 1e-5)
        t_obs = mu_hat / scale
        a = 1 - g["sampling_confidence"]
        exact = optimize.brentq(
            lambda c, t=t_obs, a=a: _nct_sf_mpmath(t, df, c) - a, 0.5 * t_obs, t_obs, xtol=1e-10
        )
        assert g["mu_lo"] <= exact * scale
        assert g["epsilon"] <= gaussian_mechanism_epsilon(exact * scale, 1e-5)
        assert g["mu_lo"] == pytest.approx(exact * scale, rel=1e-5)
