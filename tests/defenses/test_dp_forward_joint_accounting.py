"""Accounting of DP-Forward's joint release (noisy representation + randomized-response
label, composed before subsampling) against independent computations: scipy for the f-DP
envelope and the one-release profile, dp-accounting's own Gaussian and discrete-pair PLDs
for the subsampled composition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import integrate
from scipy.stats import norm

from privacy_audit.defenses.dp_forward_accounting import (
    joint_gdp_noise_multiplier,
    joint_local_delta,
    joint_local_epsilon,
    joint_release_epsilon,
    rr_binary_keep,
    rr_gdp_mu,
)

DELTA = 1e-5


@pytest.mark.parametrize("eps2", [0.3, 1.0, 2.2, 4.0])
def test_every_eps2_dp_mechanism_is_mu_prime_gdp_touching_at_the_kink(eps2):
    """G_μ'(α) = Φ(Φ⁻¹(1 − α) − μ') lies below the ε2-DP trade-off curve
    f(α) = max(0, 1 − e^ε2·α, e^−ε2·(1 − α)) on a fine α grid (below the first piece left of
    the kink α* = 1/(1 + e^ε2), below the second right of it; not below both pieces
    everywhere, each piece is under f away from its side) and meets f at the kink."""
    mu = rr_gdp_mu(eps2)
    alpha = np.linspace(1e-9, 1 - 1e-9, 200_001)
    g = norm.cdf(norm.ppf(1 - alpha) - mu)
    kink = 1 / (1 + math.exp(eps2))
    first, second = 1 - math.exp(eps2) * alpha, math.exp(-eps2) * (1 - alpha)
    assert np.all(g <= np.maximum(0, np.maximum(first, second)) + 1e-12)
    assert np.all((g <= first + 1e-12)[alpha <= kink])
    assert np.all((g <= second + 1e-12)[alpha >= kink])
    g_kink = norm.cdf(norm.ppf(1 - kink) - mu)
    assert g_kink == pytest.approx(1 - math.exp(eps2) * kink, abs=1e-12)
    assert g_kink == pytest.approx(math.exp(-eps2) * (1 - kink), abs=1e-12)
    # a larger μ' would cross the curve at the kink: μ' is the smallest valid one
    assert norm.cdf(norm.ppf(1 - kink) - mu * 0.999) > 1 - math.exp(eps2) * kink
    z = 0.5
    assert joint_gdp_noise_multiplier(z, eps2) == pytest.approx(1 / math.sqrt(4 + mu**2))


@pytest.mark.parametrize(("z", "eps2", "eps"), [(0.5, 2.2, 3.0), (0.8, 1.0, 0.5), (0.3, 2.2, 12.0)])
def test_one_joint_release_profile_matches_numerical_integration(z, eps2, eps):
    """δ(ε) = Σ_b ∫ (Q(x, b) − e^ε P(x, b))₊ dx for P = N(0,1)×Bern(p), Q = N(1/z,1)×Bern(1−p)."""
    mu, p = 1 / z, rr_binary_keep(eps2)
    total = 0.0
    for qb, pb in ((p, 1 - p), (1 - p, p)):  # (Q's, P's) probability of each bit

        def f(x, qb=qb, pb=pb):
            return max(qb * norm.pdf(x - mu) - math.exp(eps) * pb * norm.pdf(x), 0.0)

        total += integrate.quad(f, -12, mu + 12, limit=400, epsabs=1e-14)[0]
    assert joint_local_delta(eps, z, eps2) == pytest.approx(total, rel=1e-6, abs=1e-13)
    e = joint_local_epsilon(z, eps2, DELTA)
    assert joint_local_delta(e, z, eps2) == pytest.approx(DELTA, rel=1e-6)


def test_without_label_rr_the_joint_accountant_is_dp_accountings_subsampled_gaussian():
    q, steps = 1 / 200, 600
    for z in (0.5, 0.9):
        ours = joint_release_epsilon(z, 0.0, q, steps, DELTA)
        ref = (
            pld_lib.from_gaussian_mechanism(z, sampling_prob=q)
            .self_compose(steps)
            .get_epsilon_for_delta(DELTA)
        )
        assert ours == pytest.approx(ref, rel=1e-4)


def _discretised_joint_epsilon(z, eps2, q, steps, delta, bins=1500):
    """Independent: the Gaussian output binned (post-processing, so ε can only fall) times
    the bit, subsampled by hand, through dp-accounting's discrete-pair PLD, both directions."""
    p = rr_binary_keep(eps2)
    mu = 0.0 if math.isinf(z) else 1 / z
    if mu == 0:
        gp, gq = np.array([1.0]), np.array([1.0])
    else:
        edges = np.concatenate([[-np.inf], np.linspace(-10, mu + 10, bins), [np.inf]])
        gp, gq = np.diff(norm.cdf(edges)), np.diff(norm.cdf(edges - mu))
    P = np.concatenate([gp * p, gp * (1 - p)])
    Q = np.concatenate([gq * (1 - p), gq * p])
    A = (1 - q) * P + q * Q
    keep = (P > 0) & (A > 0)

    def logpmf(v):
        return {i: math.log(x) for i, x in enumerate(v) if keep[i]}

    eps = []
    for lower, upper in ((P, A), (A, P)):
        pld = pld_lib.from_two_probability_mass_functions(
            logpmf(lower), logpmf(upper), pessimistic_estimate=False
        )
        eps.append(pld.self_compose(steps).get_epsilon_for_delta(delta))
    return max(eps)


@pytest.mark.parametrize("z", [0.6, math.inf])
def test_joint_accountant_agrees_with_an_independent_discretised_pld(z):
    q, steps, eps2 = 1 / 200, 600, 2.2
    ours = joint_release_epsilon(z, eps2, q, steps, DELTA)
    ref = _discretised_joint_epsilon(z, eps2, q, steps, DELTA)
    # binning and the optimistic rounding can only lower ε, connect-the-dots only raise ours
    assert ref <= ours * (1 + 1e-3)
    assert ours == pytest.approx(ref, rel=0.03)


def test_joint_accountant_sits_between_its_parts_and_the_gdp_envelope():
    n, epochs, eps2, z = 100, 3, 2.2, 0.6
    q, steps = 1 / n, epochs * n
    joint = joint_release_epsilon(z, eps2, q, steps, DELTA, interval=1e-3)
    gauss = joint_release_epsilon(z, 0.0, q, steps, DELTA, interval=1e-3)
    rr = joint_release_epsilon(math.inf, eps2, q, steps, DELTA, interval=1e-3)
    envelope = (
        pld_lib.from_gaussian_mechanism(
            joint_gdp_noise_multiplier(z, eps2), sampling_prob=q, value_discretization_interval=1e-3
        )
        .self_compose(steps)
        .get_epsilon_for_delta(DELTA)
    )
    assert max(gauss, rr) < joint < envelope


def test_calibrated_noise_meets_the_target_by_an_independent_dp_accounting_call():
    from experiments.dp_forward_paper_setting import (
        calibrate_joint_noise_multiplier,
    )

    n, epochs, target = 100, 1, 8.0
    z = calibrate_joint_noise_multiplier(target, n, epochs, DELTA, 2.2)
    assert _discretised_joint_epsilon(z, 2.2, 1 / n, epochs * n, DELTA) <= target
    # not wasteful: 1 % less noise breaks the target
    assert joint_release_epsilon(z / 1.01, 2.2, 1 / n, epochs * n, DELTA) > target
