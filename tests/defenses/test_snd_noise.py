"""The dχ-privacy noise of Split-and-Denoise: law, density, entropy, clipping, variants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privacy_audit.attacks.mutual_info import kl_entropy
from privacy_audit.defenses.snd_noise import (
    clip_rows,
    dx_entropy,
    dx_logpdf,
    implied_token_epsilon,
    privatize,
    sample_dx_noise,
)


def test_d1_is_exactly_laplace():
    rng = np.random.default_rng(0)
    eta = 2.0
    z = sample_dx_noise(20000, 1, eta, rng)[:, 0]
    assert stats.kstest(z, stats.laplace(scale=1 / eta).cdf).pvalue > 0.01
    assert np.mean(np.abs(z)) == pytest.approx(1 / eta, rel=0.03)  # a ball direction gives 1/(2η)
    # the KS test has power against the common bugs: rate-for-scale and a ball direction
    assert stats.kstest(z * 2, stats.laplace(scale=1 / eta).cdf).pvalue < 1e-6
    ball = z * rng.uniform(0, 1, z.size)
    assert stats.kstest(ball, stats.laplace(scale=1 / eta).cdf).pvalue < 1e-6
    # log-density at d = 1 equals Laplace's
    pts = np.linspace(-3, 3, 7)[:, None]
    assert dx_logpdf(pts, eta) == pytest.approx(stats.laplace(scale=1 / eta).logpdf(pts[:, 0]))


@pytest.mark.parametrize(("d", "eta"), [(1, 0.1), (8, 10.0), (384, 100.0)])
def test_norm_is_gamma_and_direction_uniform(d, eta):
    rng = np.random.default_rng(d)
    z = sample_dx_noise(4000, d, eta, rng)
    norms = np.linalg.norm(z, axis=1)
    assert stats.kstest(norms, stats.gamma(a=d, scale=1 / eta).cdf).pvalue > 0.01
    assert norms.mean() == pytest.approx(d / eta, rel=0.05)
    if d >= 3:
        v = z / norms[:, None]
        assert np.abs(v.mean(axis=0)).max() < 5 / math.sqrt(4000)
        cov = np.cov(v, rowvar=False) * d
        assert np.abs(np.diag(cov) - 1).max() < 0.25
        # direction independent of norm: first coordinate uncorrelated with the norm
        assert abs(np.corrcoef(v[:, 0] ** 2, norms)[0, 1]) < 0.1


def test_direction_at_d3_has_uniform_coordinate():
    z = sample_dx_noise(5000, 3, 1.0, np.random.default_rng(1))
    v1 = z[:, 0] / np.linalg.norm(z, axis=1)
    assert stats.kstest(v1, stats.uniform(-1, 2).cdf).pvalue > 0.01


def test_density_ratio_is_bounded_by_eta_times_distance():
    rng = np.random.default_rng(2)
    d, eta = 5, 3.0
    x, xp, y = rng.standard_normal((3, 200, d))
    ratio = dx_logpdf(y - x, eta) - dx_logpdf(y - xp, eta)
    assert np.all(ratio <= eta * np.linalg.norm(x - xp, axis=1) + 1e-9)


@pytest.mark.parametrize(("d", "eta"), [(1, 1.0), (2, 1.0), (5, 2.0), (10, 1.0)])
def test_closed_form_entropy_matches_kozachenko_leonenko(d, eta):
    z = sample_dx_noise(5000, d, eta, np.random.default_rng(d))
    assert kl_entropy(z, k=1) == pytest.approx(dx_entropy(d, eta), rel=0.02)


def test_clipping_bounds_norms_and_noise_is_exact():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((500, 16)).astype(np.float32) * 0.3
    c = 1.5
    noisy, noise = privatize(x, 5.0, c, rng)
    assert noisy.dtype == np.float32
    assert np.linalg.norm(noisy.astype(np.float64), axis=1).max() <= c
    assert np.array_equal(noisy.astype(np.float64) - noise, x.astype(np.float64))
    # a no-op when every row is already inside the ball
    small = rng.standard_normal((50, 16)) * 0.01
    assert np.array_equal(clip_rows(small, 10.0), small)


def test_reference_code_variant_norm_ratio():
    d, eta = 384, 100.0
    rng = np.random.default_rng(4)
    ref = np.linalg.norm(sample_dx_noise(3000, d, eta, rng, "reference-code"), axis=1)
    paper = np.linalg.norm(sample_dx_noise(3000, d, eta, rng), axis=1)
    rms = math.sqrt(np.mean(ref**2) / np.mean(paper**2))
    assert rms == pytest.approx(math.sqrt(d / 3), rel=0.05)


def test_implied_epsilon_and_errors():
    assert implied_token_epsilon(10.0, 1.5) == pytest.approx(30.0)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eta must be a positive"):
            sample_dx_noise(3, 2, bad, np.random.default_rng(0))
    for bad in (0, -2.0):
        with pytest.raises(ValueError, match="clip norm C must be a positive"):
            clip_rows(np.ones((2, 2)), bad)
    with pytest.raises(ValueError, match="non-empty"):
        privatize(np.zeros((0, 4)), 1.0, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown noise variant"):
        sample_dx_noise(3, 2, 1.0, np.random.default_rng(0), "ball")
