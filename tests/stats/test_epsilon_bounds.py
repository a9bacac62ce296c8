"""Known-answer tests for privacy_audit.stats.epsilon_bounds against the Gaussian mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import beta, binom, norm

from privacy_audit.stats.epsilon_bounds import (
    epsilon_ceiling,
    epsilon_lower_bound,
    epsilon_point_estimate,
    gaussian_mechanism_epsilon,
)
from privacy_audit.stats.metrics import stratified_split

DELTA = 1e-5
COMBOS = [
    ("clopper-pearson", "split"),
    ("clopper-pearson", "bonferroni"),
    ("gdp", "split"),
    ("gdp", "bonferroni"),
]


def gaussian_delta(eps: float, mu: float) -> float:
    """Independent implementation of the Gaussian mechanism's privacy profile."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def mu_for_epsilon(eps: float, delta: float) -> float:
    return brentq(lambda mu: gaussian_mechanism_epsilon(mu, delta) - eps, 1e-3, 50.0, xtol=1e-12)


def gaussian_scores(mu: float, n_in: int, n_out: int, seed: int):
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.normal(mu, 1.0, n_in), rng.normal(0.0, 1.0, n_out)])
    members = np.concatenate([np.ones(n_in, dtype=int), np.zeros(n_out, dtype=int)])
    return scores, members


def cp_upper(k: int, n: int, q: float) -> float:
    return 1.0 if k == n else float(beta.ppf(q, k + 1, n - k))


def cp_epsilon(fp: int, n_out: int, fn: int, n_in: int, delta: float, q: float) -> float:
    """Jagielski et al. bound written out independently of the library."""
    fpr, fnr = cp_upper(fp, n_out, q), cp_upper(fn, n_in, q)
    cands = [0.0]
    if 1 - delta - fnr > 0:
        cands.append(math.log((1 - delta - fnr) / fpr))
    if 1 - delta - fpr > 0:
        cands.append(math.log((1 - delta - fpr) / fnr))
    return max(cands)


def perfect_attack_ceiling(k: int, delta: float = DELTA, confidence: float = 0.95) -> float:
    """Clopper-Pearson bound with FP = FN = 0 counted over k trials per side."""
    p = 1.0 - ((1.0 - confidence) / 2.0) ** (1.0 / k)
    return math.log((1.0 - delta - p) / p)


# --------------------------------------------------------------------------- (d) GDP conversion


@pytest.mark.parametrize("mu", [0.05, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0])
@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-8])
def test_gaussian_epsilon_round_trip(mu, delta):
    eps = gaussian_mechanism_epsilon(mu, delta)
    if delta >= 2 * norm.cdf(mu / 2) - 1:
        assert eps == 0.0
    else:
        assert eps > 0.0
        assert gaussian_delta(eps, mu) == pytest.approx(delta, rel=1e-9, abs=0)


def test_gaussian_epsilon_edge_cases_and_classical_bound():
    assert gaussian_mechanism_epsilon(0.0, 1e-5) == 0.0
    # delta above delta(0) = 2 Phi(mu/2) - 1 needs no epsilon at all.
    assert gaussian_mechanism_epsilon(0.1, 0.5) == 0.0
    # Monotone in mu and in delta.
    eps = [gaussian_mechanism_epsilon(mu, 1e-5) for mu in (0.2, 0.5, 1.0, 3.0)]
    assert eps == sorted(eps) and len(set(eps)) == 4
    assert gaussian_mechanism_epsilon(1.0, 1e-3) < gaussian_mechanism_epsilon(1.0, 1e-6)
    # The classical calibration sigma = sqrt(2 ln(1.25/delta)) / eps is (eps, delta)-DP
    # for eps < 1, so the exact epsilon at that mu must be smaller.
    for eps_c in (0.25, 0.5, 0.9):
        mu = eps_c / math.sqrt(2 * math.log(1.25 / DELTA))
        exact = gaussian_mechanism_epsilon(mu, DELTA)
        assert 0.5 * eps_c < exact < eps_c


# --------------------------------------------------------------------------- (e) CP pieces


def test_cp_upper_bound_formula_and_zero_counts():
    from privacy_audit.stats.epsilon_bounds import clopper_pearson_upper

    n, q = 200, 0.975
    ks = np.array([0, 1, 7, 100, 199, 200])
    got = clopper_pearson_upper(ks, n, q)
    want = [cp_upper(int(k), n, q) for k in ks]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert got[0] == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-12)  # FP = 0
    assert got[-1] == 1.0  # FP = N
    assert np.all(np.diff(got) > 0)


@pytest.mark.parametrize("n", [20, 150, 1000])
def test_cp_upper_bound_exact_coverage(n):
    # Exact coverage P(rate <= upper bound) over Binomial(n, p) counts, for many p:
    # never below 1 - alpha/2, and close to it somewhere (not needlessly loose).
    from privacy_audit.stats.epsilon_bounds import clopper_pearson_upper

    k = np.arange(n + 1)
    upper = clopper_pearson_upper(k, n, 0.975)
    coverages = []
    for p in np.geomspace(1e-4, 0.9, 300):
        coverages.append(np.sum(binom.pmf(k, n, p)[upper >= p]))
    assert min(coverages) >= 0.975 - 1e-9
    assert min(coverages) < 0.98


def test_epsilon_from_rate_bounds_by_hand():
    from privacy_audit.stats.epsilon_bounds import eps_from_rate_bounds

    assert eps_from_rate_bounds(0.01, 0.5, 0.0) == pytest.approx(math.log(50))
    assert eps_from_rate_bounds(0.5, 0.01, 0.0) == pytest.approx(math.log(50))
    assert eps_from_rate_bounds(0.02, 0.3, 0.1) == pytest.approx(math.log(0.6 / 0.02))
    assert eps_from_rate_bounds(0.6, 0.6, 1e-5) == 0.0  # both numerators <= 0
    assert eps_from_rate_bounds(1.0, 1.0, 1e-5) == 0.0  # FP = N_out and FN = N_in


def test_bonferroni_bound_known_counts():
    # Scores in {0, 1}: every grid threshold in (0, 1] gives FP = 10, FN = 20;
    # thresholds <= 0 give FP = 100, FN = 0.
    members = np.r_[np.ones(100), np.zeros(100)]
    scores = np.r_[np.ones(80), np.zeros(20), np.ones(10), np.zeros(90)]
    q = 1 - 0.05 / (2 * 100)
    want = max(cp_epsilon(10, 100, 20, 100, DELTA, q), cp_epsilon(100, 100, 0, 100, DELTA, q))
    got = epsilon_lower_bound(scores, members, DELTA, threshold="bonferroni")
    assert got == pytest.approx(want, rel=1e-10)
    # gdp: mu from the same bounds, converted with the Gaussian profile.
    mu = -norm.ppf(cp_upper(10, 100, q)) - norm.ppf(cp_upper(20, 100, q))
    got = epsilon_lower_bound(scores, members, DELTA, method="gdp", threshold="bonferroni")
    assert got == pytest.approx(gaussian_mechanism_epsilon(mu, DELTA), rel=1e-9)


def test_split_bound_counts_on_half_b_only():
    members = np.r_[np.ones(100), np.zeros(100)].astype(int)
    scores = np.r_[np.ones(80), np.zeros(20), np.ones(10), np.zeros(90)]
    for seed in range(5):
        _, half_b = stratified_split(members.astype(bool), seed)
        sb, mb = scores[half_b], members[half_b] == 1
        fp, fn = int(np.sum(sb[~mb] >= 0.5)), int(np.sum(sb[mb] < 0.5))
        want = cp_epsilon(fp, int((~mb).sum()), fn, int(mb.sum()), DELTA, 0.975)
        got = epsilon_lower_bound(scores, members, DELTA, seed=seed)
        assert got == pytest.approx(want, rel=1e-10)


# --------------------------------------------------------------------------- (c) ceilings


@pytest.mark.parametrize(
    "k, note_value", [(100, 3.28), (1_000, 5.60), (10_000, 7.91), (100_000, 10.21)]
)
def test_ceiling_matches_note(k, note_value):
    formula = perfect_attack_ceiling(k)
    assert formula == pytest.approx(note_value, abs=0.006)
    # With the split, half B counts k per side when there are 2k per side.
    assert epsilon_ceiling(2 * k, 2 * k, DELTA) == pytest.approx(formula, rel=1e-10)
    assert epsilon_ceiling(k, k, DELTA) == pytest.approx(perfect_attack_ceiling(k // 2), rel=1e-10)


def test_ceiling_unequal_odd_sizes_and_bonferroni():
    # Split: half B holds ceil(n/2) of each class.
    q = 0.975
    want = cp_epsilon(0, 51, 0, 151, DELTA, q)
    assert epsilon_ceiling(301, 101, DELTA) == pytest.approx(want, rel=1e-10)
    q_b = 1 - 0.05 / (2 * 100)
    want_b = cp_epsilon(0, 500, 0, 300, DELTA, q_b)
    assert epsilon_ceiling(300, 500, DELTA, threshold="bonferroni") == pytest.approx(want_b)
    # Bonferroni counts all examples but pays for 100 thresholds.
    q_small = 1 - 0.05 / (2 * 60)
    want_small = cp_epsilon(0, 30, 0, 30, DELTA, q_small)
    assert epsilon_ceiling(30, 30, DELTA, threshold="bonferroni") == pytest.approx(want_small)
    assert epsilon_ceiling(1000, 1000, DELTA, confidence=0.99) < epsilon_ceiling(1000, 1000, DELTA)


def test_perfect_attack_reaches_the_ceiling():
    scores, members = gaussian_scores(20.0, 400, 600, seed=1)
    for method in ("clopper-pearson", "gdp"):
        lb = epsilon_lower_bound(scores, members, DELTA, method=method)
        assert lb == pytest.approx(epsilon_ceiling(400, 600, DELTA, method=method), rel=1e-9)
    binary = np.r_[np.ones(400), np.zeros(600)]
    lb = epsilon_lower_bound(binary, members, DELTA, threshold="bonferroni")
    assert lb == pytest.approx(epsilon_ceiling(400, 600, DELTA, threshold="bonferroni"))


def test_bound_never_exceeds_ceiling():
    for mu, seed in [(0.5, 0), (2.0, 1), (4.0, 2), (8.0, 3)]:
        scores, members = gaussian_scores(mu, 300, 200, seed)
        for method, threshold in COMBOS:
            lb = epsilon_lower_bound(scores, members, DELTA, method=method, threshold=threshold)
            ceiling = epsilon_ceiling(300, 200, DELTA, threshold=threshold, method=method)
            assert 0.0 <= lb <= ceiling * (1 + 1e-12)


# --------------------------------------------------------------------------- (a) validity


@pytest.mark.parametrize("true_eps", [1.0, 2.0])
def test_bounds_are_valid_for_gaussian_mechanism(true_eps):
    mu = mu_for_epsilon(true_eps, DELTA)
    assert gaussian_mechanism_epsilon(mu, DELTA) == pytest.approx(true_eps, rel=1e-9)
    trials, n = 100, 1000
    exceed = dict.fromkeys(COMBOS, 0)
    point_exceed = 0
    for t in range(trials):
        scores, members = gaussian_scores(mu, n, n, seed=1000 * int(true_eps) + t)
        for method, threshold in COMBOS:
            lb = epsilon_lower_bound(
                scores, members, DELTA, method=method, threshold=threshold, seed=t
            )
            exceed[(method, threshold)] += lb > true_eps
        point_exceed += epsilon_point_estimate(scores, members, DELTA) > true_eps
    for combo, count in exceed.items():
        assert count <= 10, (combo, count)
    print(f"\ntrue eps {true_eps}: exceedances {exceed}; raw point estimate {point_exceed}")


def test_validity_where_bounds_are_close_to_truth():
    # delta = 0.2, mu = 1: the optimal test sits at moderate rates, so the bounds
    # get close to the true epsilon; the raw point estimate (no guarantee)
    # exceeds it most of the time, which shows this check has power.
    mu, delta = 1.0, 0.2
    true_eps = gaussian_mechanism_epsilon(mu, delta)
    exceed = dict.fromkeys(COMBOS, 0)
    point_exceed = 0
    closest = 0.0
    for t in range(100):
        scores, members = gaussian_scores(mu, 1000, 1000, seed=50_000 + t)
        for method, threshold in COMBOS:
            lb = epsilon_lower_bound(
                scores, members, delta, method=method, threshold=threshold, seed=t
            )
            exceed[(method, threshold)] += lb > true_eps
            closest = max(closest, lb)
        point_exceed += epsilon_point_estimate(scores, members, delta) > true_eps
    for combo, count in exceed.items():
        assert count <= 10, (combo, count)
    assert point_exceed >= 50
    assert closest > 0.7 * true_eps


# --------------------------------------------------------------------------- (b) tightness


def test_tightness_at_large_n():
    mu = mu_for_epsilon(2.0, DELTA)
    n = 100_000
    scores, members = gaussian_scores(mu, n, n, seed=0)
    cp = epsilon_lower_bound(scores, members, DELTA)
    gdp = epsilon_lower_bound(scores, members, DELTA, method="gdp")
    cp_b = epsilon_lower_bound(scores, members, DELTA, threshold="bonferroni")
    print(f"\ntightness at n=1e5/side, true eps 2: CP split {cp / 2:.3f}, gdp split {gdp / 2:.3f}")
    print(f"CP bonferroni {cp_b / 2:.3f}")
    assert 0.5 * 2.0 <= cp < 2.0
    assert cp < gdp < 2.0
    assert 0.5 * 2.0 <= cp_b < 2.0


# --------------------------------------------------------------------------- (e) behaviour


@pytest.mark.parametrize("method, threshold", COMBOS)
def test_more_separation_gives_higher_bound(method, threshold):
    rng = np.random.default_rng(0)
    z_in, z_out = rng.normal(size=1000), rng.normal(size=1000)
    members = np.r_[np.ones(1000), np.zeros(1000)]
    bounds = [
        epsilon_lower_bound(
            np.r_[z_in + mu, z_out], members, DELTA, method=method, threshold=threshold
        )
        for mu in (0.5, 1.5, 3.0, 5.0)
    ]
    assert all(a < b for a, b in zip(bounds[:-1], bounds[1:], strict=True)), bounds
    assert epsilon_lower_bound(np.r_[z_in, z_out], members, DELTA, method=method) < 0.3


def test_no_signal_and_reversed_scores_give_small_bounds():
    scores, members = gaussian_scores(0.0, 500, 500, seed=4)
    assert epsilon_lower_bound(scores, members, DELTA) == 0.0
    # Reversed scores (low = member) are not exploited: higher must mean member.
    scores, members = gaussian_scores(-3.0, 500, 500, seed=4)
    assert epsilon_lower_bound(scores, members, DELTA) == 0.0
    assert epsilon_lower_bound(scores, members, DELTA, threshold="bonferroni") == 0.0
    ties = np.zeros(200)
    assert epsilon_lower_bound(ties, np.r_[np.ones(100), np.zeros(100)], DELTA) == 0.0


def test_unequal_class_sizes():
    for n_in, n_out in [(300, 3000), (3000, 300)]:
        scores, members = gaussian_scores(3.0, n_in, n_out, seed=6)
        for method, threshold in COMBOS:
            lb = epsilon_lower_bound(scores, members, DELTA, method=method, threshold=threshold)
            assert (
                0.0 < lb <= epsilon_ceiling(n_in, n_out, DELTA, threshold=threshold, method=method)
            )
    # Shuffling the order of examples changes nothing for Bonferroni.
    scores, members = gaussian_scores(2.0, 300, 700, seed=8)
    perm = np.random.default_rng(0).permutation(1000)
    a = epsilon_lower_bound(scores, members, DELTA, threshold="bonferroni")
    assert a == epsilon_lower_bound(scores[perm], members[perm], DELTA, threshold="bonferroni")


def test_split_seed_reproducible():
    scores, members = gaussian_scores(2.0, 500, 500, seed=9)
    a = epsilon_lower_bound(scores, members, DELTA, seed=3)
    assert a == epsilon_lower_bound(scores, members, DELTA, seed=3)
    assert len({epsilon_lower_bound(scores, members, DELTA, seed=s) for s in range(5)}) > 1


def test_point_estimate_by_hand():
    # Threshold 1: TPR = 1, FPR = 10/100 (10 false positives) -> ln((1 - delta) / 0.1).
    members = np.r_[np.ones(100), np.zeros(100)]
    scores = np.r_[np.ones(100), np.ones(10), np.zeros(90)]
    assert epsilon_point_estimate(scores, members, DELTA) == pytest.approx(
        math.log((1 - DELTA) / 0.1)
    )
    # Nine false positives are not enough: nothing qualifies on that side.
    scores = np.r_[np.ones(100), np.ones(9), np.zeros(91)]
    assert epsilon_point_estimate(scores, members, DELTA) == 0.0
    # Symmetric form: TNR = 1, FNR = 20/100.
    scores = np.r_[np.ones(80), np.zeros(20), np.zeros(100)]
    assert epsilon_point_estimate(scores, members, DELTA) == pytest.approx(
        math.log((1 - DELTA) / 0.2)
    )


# --------------------------------------------------------------------------- validation


def test_validation_errors():
    scores, members = gaussian_scores(1.0, 50, 50, seed=0)
    for bad in (0.0, 1.0, -0.1, 2.0, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            epsilon_lower_bound(scores, members, bad)
        with pytest.raises(ValueError, match="delta"):
            epsilon_ceiling(50, 50, bad)
        with pytest.raises(ValueError, match="delta"):
            gaussian_mechanism_epsilon(1.0, bad)
        with pytest.raises(ValueError, match="delta"):
            epsilon_point_estimate(scores, members, bad)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="confidence"):
            epsilon_lower_bound(scores, members, DELTA, confidence=bad)
        with pytest.raises(ValueError, match="confidence"):
            epsilon_ceiling(50, 50, DELTA, confidence=bad)
    with pytest.raises(ValueError, match="'clopper-pearson', 'gdp'"):
        epsilon_lower_bound(scores, members, DELTA, method="rdp")
    with pytest.raises(ValueError, match="'split', 'bonferroni'"):
        epsilon_lower_bound(scores, members, DELTA, threshold="best")
    with pytest.raises(ValueError, match="'split', 'bonferroni'"):
        epsilon_ceiling(50, 50, DELTA, threshold="best")
    with pytest.raises(ValueError, match="both classes"):
        epsilon_lower_bound(scores, np.ones(100), DELTA)
    with pytest.raises(ValueError, match="finite"):
        epsilon_lower_bound(np.r_[scores[:-1], np.nan], members, DELTA)
    with pytest.raises(ValueError, match="same length"):
        epsilon_lower_bound(scores, members[:-1], DELTA)
    with pytest.raises(ValueError, match="empty"):
        epsilon_lower_bound([], [], DELTA)
    with pytest.raises(ValueError, match="at least 2 members"):
        epsilon_lower_bound([3.0, 1.0, 0.0, 0.5], [1, 0, 0, 0], DELTA)
    with pytest.raises(ValueError, match="n_members"):
        epsilon_ceiling(0, 50, DELTA)
    with pytest.raises(ValueError, match="n_nonmembers"):
        epsilon_ceiling(50, 2.5, DELTA)
    with pytest.raises(ValueError, match="mu"):
        gaussian_mechanism_epsilon(-1.0, DELTA)
    with pytest.raises(ValueError, match="mu"):
        gaussian_mechanism_epsilon(float("inf"), DELTA)


def test_split_selection_candidates_keep_the_exhaustive_choice():
    # Above SPLIT_CANDIDATES thresholds, half A's exact bound is computed only for the
    # best candidates by a Wilson-limit ranking (power only; counting stays on half B).
    from privacy_audit.stats import epsilon_bounds as E

    scores, members = gaussian_scores(2.0, 3000, 3000, seed=11)
    fast = epsilon_lower_bound(scores, members, DELTA, seed=4)
    old = E.SPLIT_CANDIDATES
    try:
        E.SPLIT_CANDIDATES = 10**9  # exhaustive
        slow = epsilon_lower_bound(scores, members, DELTA, seed=4)
    finally:
        E.SPLIT_CANDIDATES = old
    assert fast == slow > 0
