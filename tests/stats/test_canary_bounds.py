"""Soundness of the designed-canary bounds: one-run with repetition, Gaussian one-run audit.

Each soundness test runs >= 200 seeded trials of a mechanism whose ε is known exactly and
counts how often the bound exceeds it (must be <= 5 % of trials at 95 % confidence)."""

import math

import numpy as np
import pytest

from privacy_audit.stats.canary_bounds import (
    gaussian_mu_lower,
    gaussian_one_run_epsilon,
    group_delta,
    one_run_group_best,
    one_run_group_epsilon,
    tpr_at_1pct_fpr,
)
from privacy_audit.stats.epsilon_bounds import gaussian_mechanism_epsilon
from privacy_audit.stats.one_run_bounds import one_run_best, one_run_epsilon

DELTA = 1e-5


def test_group_delta_known_answers():
    assert group_delta(1.0, 1e-5, 1) == pytest.approx(1e-5)
    # δ (1 + e + e²) for r = 3
    assert group_delta(1.0, 1e-5, 3) == pytest.approx(1e-5 * (1 + math.e + math.e**2))
    assert group_delta(0.0, 1e-5, 4) == pytest.approx(4e-5)
    assert group_delta(2.0, 0.0, 5) == 0.0


def test_group_one_is_steinke_and_pure_dp_group_divides_by_r():
    for v, r, m in [(90, 100, 1000), (30, 40, 200), (10, 10, 1000)]:
        assert one_run_group_epsilon(v, r, m, DELTA, 1) == pytest.approx(
            one_run_epsilon(v, r, m, DELTA), abs=1e-6
        )
        assert one_run_group_epsilon(v, r, m, 0.0, 4) == pytest.approx(
            one_run_group_epsilon(v, r, m, 0.0, 1) / 4, abs=1e-6
        )
    # with δ > 0 the group bound is at most the pure-DP-style division
    assert (
        one_run_group_epsilon(90, 100, 1000, DELTA, 4)
        <= one_run_epsilon(90, 100, 1000, DELTA) / 4 + 1e-9
    )


def _rr_scores(rng, m, eps, group):
    """Each canary = `group` copies, each released by ε-randomized response of its bit;
    the score is the number of copies reported IN (per-example ε exact)."""
    inc = rng.integers(0, 2, size=m)
    keep = rng.random((m, group)) < math.exp(eps) / (1 + math.exp(eps))
    reports = np.where(keep, inc[:, None], 1 - inc[:, None])
    return reports.sum(1) + rng.random(m) * 1e-3, inc  # tiny jitter: ties are abstained on


@pytest.mark.parametrize("group", [1, 4])
def test_one_run_bound_sound_on_randomized_response_with_repetition(group):
    eps_true, m, trials = 1.0, 500, 200
    rng = np.random.default_rng(20)
    over = naive_over = 0
    for _ in range(trials):
        s, inc = _rr_scores(rng, m, eps_true, group)
        b = one_run_group_best(s, inc, DELTA, group=group)
        assert b["epsilon"] <= b["ceiling"] + 1e-9
        over += b["epsilon"] > eps_true
        naive_over += one_run_best(s, inc, DELTA)["epsilon"] > eps_true
    assert over <= 0.05 * trials
    if group > 1:  # ignoring the repetition would overstate ε: the group bound is needed
        assert naive_over > 0.5 * trials


def test_one_run_and_gaussian_bounds_sound_on_gaussian_mechanism():
    """Score = μ·b + N(0, 1): a Gaussian mechanism on the inclusion bit, ε known exactly.

    Each bound at its defaults exceeds the true ε in at most 5 % of the trials (Steinke:
    200 trials; the cheap Gaussian audit: 2000, for a tight rate). The Gaussian audit's
    model holds exactly here, so its exceedance is its sampling level α/2 = 2.5 % (half
    the budget is held back for the CLT approximation). The exact-level variant (no
    hold-back) sits at 5 %: it would fail "≤ 5 %" in about half of all seeds."""
    mu, m = 2.0, 400
    eps_true = gaussian_mechanism_epsilon(mu, DELTA)
    rng = np.random.default_rng(7)
    over_steinke = over_gauss = over_exact = 0
    trials = 2000
    for t in range(trials):
        inc = rng.integers(0, 2, size=m)
        s = mu * inc + rng.standard_normal(m)
        if t < 200:
            over_steinke += one_run_group_best(s, inc, DELTA)["epsilon"] > eps_true
        g = gaussian_one_run_epsilon(s, inc, DELTA)
        assert g["sampling_confidence"] == pytest.approx(0.975)
        over_gauss += g["epsilon"] > eps_true
        exact = gaussian_one_run_epsilon(s, inc, DELTA, approximation_share=0.0)
        over_exact += exact["epsilon"] > eps_true
    assert over_steinke <= 0.05 * 200
    assert over_gauss <= 0.05 * trials
    se = math.sqrt(0.025 * 0.975 / trials)  # the hold-back's rate is the nominal 2.5 %
    assert 0.025 - 3 * se <= over_gauss / trials <= 0.025 + 3 * se
    se = math.sqrt(0.05 * 0.95 / trials)
    assert 0.05 - 3 * se <= over_exact / trials <= 0.05 + 3 * se


def test_group_bound_sound_on_gaussian_mechanism_with_repetition():
    """Repetition on the Gaussian mechanism: each canary inserted r = 4 times, each copy
    μ = 0.25-GDP, so the canary's score is 4μ·b + N(0, 1). The group bound stays below
    the per-example ε in ≤ 5 % of 200 trials; the naive bound that ignores repetition
    overstates it in most (so the group correction is doing the work)."""
    mu, r, m = 0.25, 4, 500
    eps_true = gaussian_mechanism_epsilon(mu, DELTA)
    rng = np.random.default_rng(21)
    over = naive = 0
    for _ in range(200):
        inc = rng.integers(0, 2, size=m)
        s = r * mu * inc + rng.standard_normal(m)
        over += one_run_group_best(s, inc, DELTA, group=r)["epsilon"] > eps_true
        naive += one_run_best(s, inc, DELTA)["epsilon"] > eps_true
    assert over <= 0.05 * 200
    assert naive > 0.5 * 200


def test_gaussian_mu_bound_coverage_is_nominal():
    """The exact noncentral-t bound on μ covers at ~95 %: 2000 trials, one-sided 3-SE slack."""
    rng = np.random.default_rng(3)
    mu, n = 1.0, 2000
    bad = 0
    for _ in range(n):
        inc = rng.integers(0, 2, size=300)
        s = 5.0 + 2.0 * (mu * inc + rng.standard_normal(300))
        bad += gaussian_mu_lower(s, inc)["mu_lo"] > mu
    se = math.sqrt(0.05 * 0.95 / n)
    assert 0.05 - 3 * se <= bad / n <= 0.05 + 3 * se


def _dpsgd_signals(rng, m, q, steps, sigma):
    """White-box DP-SGD canary-aligned signals: each present canary is Poisson-sampled
    each step (prob q) and adds its clipped contribution 1 in its own coordinate; the
    release adds N(0, σ²); the signal is the sum over steps."""
    inc = rng.integers(0, 2, size=m)
    sampled = rng.binomial(steps, q, size=m) * inc
    return sampled + sigma * math.sqrt(steps) * rng.standard_normal(m), inc


def test_gaussian_audit_sound_in_its_regime_white_box_dpsgd():
    from privacy_audit.defenses.dp_engine import epsilon_pld

    q, steps, sigma, m = 0.1, 200, 1.0, 500
    eps_true = epsilon_pld(sigma, q, steps, DELTA)  # the accountant's tight ε (≥ true ε)
    rng = np.random.default_rng(11)
    over, regime_ok, gains = 0, 0, []
    for _ in range(200):
        s, inc = _dpsgd_signals(rng, m, q, steps, sigma)
        g = gaussian_one_run_epsilon(s, inc, DELTA)
        over += g["epsilon"] > eps_true
        regime_ok += g["regime"]["ok"]
        gains.append(g["epsilon"] - one_run_group_best(s, inc, DELTA)["epsilon"])
    assert over <= 10
    assert regime_ok >= 150  # the diagnostics accept this regime
    assert np.mean(gains) > 0  # tighter than the thresholded bound on the same scores


def test_gaussian_audit_fails_outside_its_regime_randomized_response():
    """Binary scores (randomized response, bounded likelihood ratio): the Gaussian fit
    overstates ε in most trials, and the regime diagnostics flag it."""
    eps_true = 1.0
    rng = np.random.default_rng(5)
    over = flagged = 0
    for _ in range(200):
        s, inc = _rr_scores(rng, 400, eps_true, 1)
        g = gaussian_one_run_epsilon(s, inc, DELTA)
        over += g["epsilon"] > eps_true
        flagged += not g["regime"]["ok"]
    assert over > 0.5 * 200
    assert flagged == 200


def test_tpr_at_1pct_fpr_has_ci():
    rng = np.random.default_rng(0)
    inc = rng.integers(0, 2, size=400)
    s = 3.0 * inc + rng.standard_normal(400)
    t = tpr_at_1pct_fpr(s, inc, n_boot=200)
    assert t["ci"][0] <= t["tpr"] <= t["ci"][1] and 0.5 < t["tpr"] < 1


def test_one_run_white_box_audit_on_a_mechanism_and_schedule():
    from privacy_audit.audit.epsilon.gradient_canary_audit import OneRunWhiteBoxAudit
    from privacy_audit.defenses.dp_engine import epsilon_pld
    from privacy_audit.defenses.gradient_mechanism import (
        GaussianGradientMechanism,
        SamplingSchedule,
    )

    class Release:
        pass

    plain = Release()
    plain.gradient_mechanism = GaussianGradientMechanism(None)
    plain.schedule = SamplingSchedule(0.05, 200, 10)  # shuffled epochs, no noise
    thr, gauss = OneRunWhiteBoxAudit(500).run(plain, DELTA)
    assert thr["epsilon_lb"] == pytest.approx(thr["ceiling"]) and thr["epsilon_lb"] > 3
    assert gauss["regime"]["ok"] is False and gauss["exceeds_claim"] is False
    assert gauss["status"] == "not_applicable"  # no number outside its regime

    dp = Release()
    dp.gradient_mechanism = GaussianGradientMechanism(1.0, 1.0)
    dp.schedule = SamplingSchedule(0.05, 200)
    eps = epsilon_pld(1.0, 0.05, 200, DELTA)
    thr, gauss = OneRunWhiteBoxAudit(1000).run(dp, DELTA, claimed_epsilon=eps)
    assert 0 <= thr["epsilon_lb"] < eps and not thr["exceeds_claim"]
    assert 0 < gauss["epsilon_lb"] < eps and gauss["regime"]["ok"] and gauss["status"] == "ok"
    assert gauss["epsilon_lb"] > thr["epsilon_lb"]  # tighter on the same signals


def test_group_bound_splits_alpha_over_the_grid_by_hand():
    # perfectly separated canaries, δ = 1e-12 (pure DP to 1e-6), groups of 4: every guess
    # is right, so the p-value of v = r correct guesses is q^r with q = e^(4ε) / (1 + e^(4ε));
    # at the Bonferroni level α / G = 0.05 / 2 per grid entry the bound solves q^r = 0.025,
    # and the largest r (100 guesses) gives the best bound
    inc = np.r_[np.ones(100, dtype=int), np.zeros(100, dtype=int)]
    s = inc + np.linspace(0.0, 0.5, 200)
    b = one_run_group_best(s, inc, 1e-12, group=4, k_grid=[(10, 10), (50, 50)])
    q = 0.025 ** (1 / 100)
    expected = math.log(q / (1 - q)) / 4
    assert (b["correct"], b["guesses"], b["group"]) == (100, 100, 4)
    assert b["epsilon"] == pytest.approx(expected, abs=1e-4)
    assert b["confidence_per_k"] == pytest.approx(1 - 0.05 / 2)
    # without the split (level 0.05 per entry) the bound would be larger
    q_naive = 0.05 ** (1 / 100)
    assert b["epsilon"] < math.log(q_naive / (1 - q_naive)) / 4 - 0.01


# --------------------------------------------------------------------------- #
# issue 49: one-line mutants that survived the suite
# --------------------------------------------------------------------------- #
def test_more_correct_guesses_than_guesses_is_refused():
    with pytest.raises(ValueError, match="correct <= guesses"):
        one_run_group_epsilon(5, 3, 10, 0.0, group=2)


def test_group_ceiling_is_the_largest_perfect_guess_bound_over_the_grid():
    # perfectly separated canaries: every grid entry guesses right, so the best bound IS
    # the design's ceiling (the largest entry, 100 guesses); the smallest entry's perfect
    # bound (20 guesses) is far below it
    inc = np.r_[np.ones(100, dtype=int), np.zeros(100, dtype=int)]
    s = inc + np.linspace(0.0, 0.5, 200)
    b = one_run_group_best(s, inc, 1e-12, group=4, k_grid=[(10, 10), (50, 50)])
    q = 0.025 ** (1 / 100)  # as in the by-hand test above
    assert b["ceiling"] == pytest.approx(math.log(q / (1 - q)) / 4, abs=1e-4)
    assert b["ceiling"] >= b["epsilon"] - 1e-9


def test_gaussian_regime_rejects_unequal_variances():
    from scipy import stats

    from privacy_audit.stats.canary_bounds import gaussian_regime

    # exact normal quantiles: as Gaussian as 300 points can be, SD 1 against SD 10
    x = stats.norm.ppf((np.arange(300) + 0.5) / 300)
    y = 10.0 * x
    assert stats.levene(x, y).pvalue < 1e-6  # independent check: variances differ
    assert min(stats.normaltest(x).pvalue, stats.normaltest(y).pvalue) > 0.01
    inc = np.r_[np.ones(300, dtype=int), np.zeros(300, dtype=int)]
    r = gaussian_regime(np.r_[x, y], inc)
    assert r["ok"] is False


def test_tpr_at_1pct_fpr_interval_is_at_the_stated_confidence_by_hand():
    # 100 present canaries all above 2000 absent ones: every member clears the threshold,
    # so the lower end is Clopper-Pearson's for 100 / 100 at α/4 (α/2 per side of the
    # FPR quantile, then α/2 two-sided): (α/4)^(1/100) with α = 1 - confidence
    inc = np.r_[np.ones(100, int), np.zeros(2000, int)]
    s = np.r_[np.linspace(10, 11, 100), np.linspace(0, 1, 2000)]
    r = tpr_at_1pct_fpr(s, inc, confidence=0.95)
    assert r["tpr"] == 1.0
    assert r["ci"][0] == pytest.approx((0.05 / 4) ** (1 / 100), rel=1e-9)
    assert r["ci"][1] == 1.0


def test_gaussian_audit_needs_two_canaries_a_side_and_holds_back_half_of_alpha():
    with pytest.raises(ValueError, match="at least 2 present"):
        gaussian_mu_lower(np.array([1.0, 0.0, 0.1, 0.2]), np.array([1, 0, 0, 0]))
    rng = np.random.default_rng(0)
    inc = np.r_[np.ones(50, int), np.zeros(50, int)]
    s = rng.normal(0.0, 1.0, 100) + inc
    g = gaussian_one_run_epsilon(s, inc, DELTA, confidence=0.95)
    assert g["sampling_confidence"] == pytest.approx(1 - 0.05 * 0.5)  # 97.5 %
