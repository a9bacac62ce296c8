"""MI estimators against correlated Gaussians with known MI, and their error handling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privacy_audit.attacks.mutual_info import (
    additive_noise_mi,
    estimate_mi,
    gaussian_copula_mi,
    kl_entropy,
    recommended_method,
)


def gaussians(n: int, d: int, rho: float, seed: int, extra_y: int = 0):
    """x ~ N(0, I_d); y = ρx + √(1−ρ²)ε (plus ``extra_y`` independent coordinates).
    True MI = −(d/2)·log(1 − ρ²)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    y = rho * x + math.sqrt(1 - rho**2) * rng.standard_normal((n, d))
    if extra_y:
        y = np.hstack([y, rng.standard_normal((n, extra_y))])
    return x, y, -d / 2 * math.log(1 - rho**2)


@pytest.mark.parametrize(("d", "rho"), [(1, 0.5), (1, 0.95), (2, 0.8), (3, 0.6)])
def test_ksg_within_10_percent_up_to_joint_dimension_6(d, rho):
    x, y, truth = gaussians(3000, d, rho, seed=d)
    est = estimate_mi(x, y, method="ksg", k=3, n_boot=20)
    assert est.method == "ksg" and est.dims[0] + est.dims[1] <= 6
    assert abs(est.value - truth) <= max(0.10 * truth, 0.05), (est.value, truth)
    assert est.ci_low <= est.value <= est.ci_high


@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_ksg_within_10_percent_at_joint_dimension_8_with_enough_samples(rho):
    """KSG's downward bias at joint dimension 8 shrinks with N: at N = 20,000 (k = 3) it is
    within the 10% target (measured −0.1% and −3.3%; at N = 3,000 it is −28% and −15%)."""
    x, y, truth = gaussians(20_000, 4, rho, seed=4)
    est = estimate_mi(x, y, method="ksg", k=3, n_boot=0)
    assert est.dims == (4, 4)
    assert abs(est.value - truth) <= max(0.10 * truth, 0.05), (est.value, truth)


def test_ksg_at_joint_dimension_8_underestimates_by_at_most_20_percent():
    """Measured limitation: at joint dimension 8 KSG (N = 3000, k = 3) is 8–15% low, outside
    the 10% target, so the default switches to the Gaussian copula above joint dimension 6."""
    x, y, truth = gaussians(3000, 4, 0.6, seed=4)
    est = estimate_mi(x, y, method="ksg", k=3, n_boot=0)
    assert 0.8 * truth <= est.value < truth, (est.value, truth)


def test_ksg_near_zero_for_independent_data():
    rng = np.random.default_rng(5)
    est = estimate_mi(
        rng.standard_normal((2000, 2)), rng.standard_normal((2000, 2)), "ksg", n_boot=20
    )
    assert abs(est.value) < 0.05
    assert est.ci_low < 0.05


@pytest.mark.parametrize(("d", "rho"), [(6, 0.5), (12, 0.7), (16, 0.3), (16, 0.8)])
def test_default_method_within_25_percent_up_to_16_per_side(d, rho):
    x, y, truth = gaussians(2000, d, rho, seed=10 + d)
    est = estimate_mi(x, y, n_boot=30)
    assert est.method == "gaussian-copula"
    assert abs(est.value - truth) <= 0.25 * truth, (est.value, truth)
    assert est.ci_low < est.ci_high
    assert "underestimate" in est.note


def test_default_is_ksg_in_low_dimension():
    assert recommended_method(3, 3) == "ksg"
    assert recommended_method(4, 4) == "gaussian-copula"
    x, y, _ = gaussians(500, 2, 0.5, seed=1)
    assert estimate_mi(x, y, n_boot=5).method == "ksg"


def test_mi_is_monotone_in_signal_to_noise():
    values = [
        estimate_mi(*gaussians(1500, 3, r, seed=3)[:2], n_boot=0).value for r in (0.2, 0.5, 0.8)
    ]
    assert values[0] < values[1] < values[2]


def test_infonce_never_exceeds_log_batch_and_is_close_below_it():
    b = 128
    # true MI ≈ 1.02 nats < log(128) − 1 ≈ 3.85: within 20%
    x, y, truth = gaussians(4000, 2, 0.8, seed=7)
    est = estimate_mi(x, y, method="infonce", batch_size=b, steps=400, n_boot=200)
    assert abs(est.value - truth) <= 0.2 * truth, (est.value, truth)
    assert est.upper_limit == pytest.approx(math.log(b))
    # true MI ≈ 24.9 nats ≫ log(128): the bound saturates but never exceeds log B
    x, y, truth = gaussians(2048, 8, 0.999, seed=8)
    big = estimate_mi(x, y, method="infonce", batch_size=b, steps=200, n_boot=200)
    assert big.value <= math.log(b) and big.ci_high <= math.log(b) + 1e-12
    assert big.value < truth


def test_kozachenko_leonenko_and_additive_noise_form():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4000, 2))
    truth_h = 0.5 * 2 * math.log(2 * math.pi * math.e)
    assert kl_entropy(x, k=3) == pytest.approx(truth_h, abs=0.05)
    z = rng.standard_normal((4000, 2))
    # I(X; X+Z) with unit variances = (d/2) log 2
    assert additive_noise_mi(x + z, z, k=1) == pytest.approx(math.log(2), abs=0.1)
    est = estimate_mi(x, x + z, method="kl", k=3, n_boot=10)
    assert est.value == pytest.approx(math.log(2), abs=0.1)


def test_gaussian_copula_invariant_to_monotone_marginals():
    x, y, truth = gaussians(3000, 2, 0.7, seed=4)
    a = gaussian_copula_mi(x, y)
    b = gaussian_copula_mi(np.exp(x), y**3)
    assert a == pytest.approx(b, abs=1e-9)
    assert a == pytest.approx(truth, rel=0.1)


@pytest.mark.parametrize(
    ("x", "y", "kwargs", "message"),
    [
        (np.zeros((0, 2)), np.zeros((0, 2)), {}, "empty"),
        (np.zeros((5, 2)), np.zeros((4, 2)), {}, "different numbers of samples"),
        (np.ones((5, 1)), np.ones((5, 1)), {"method": "ksg", "k": 5}, "k \\(5\\) must be smaller"),
        (np.ones((5, 1)), np.ones((5, 1)), {"method": "kl", "k": 9}, "must be smaller"),
        (np.full((5, 1), np.nan), np.ones((5, 1)), {}, "NaN"),
        (np.ones((5, 1)), np.ones((5, 1)), {"method": "magic"}, "unknown MI method"),
    ],
)
def test_bad_input_gives_one_clear_error(x, y, kwargs, message):
    with pytest.raises(ValueError, match=message):
        estimate_mi(x, y, **kwargs)
