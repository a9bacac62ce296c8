"""Accounting of dp-forward's joint release: the noisy representation together with the
randomized-response label (Du et al., CCS 2023).

One example's release is its matrix-Gaussian-noised block (noise multiplier z = σ / S2)
and its label through binary randomized response at ε2. Both are Gaussian-like
trade-offs: randomized response is dominated by a Gaussian of μ = :func:`rr_gdp_mu`, so
the pair is at most μ-GDP with μ² = 1/z² + μ_rr² (:func:`joint_gdp_noise_multiplier`); the
exact pair's privacy profile gives :func:`joint_local_delta` and
:func:`joint_local_epsilon`, and :func:`joint_release_epsilon` composes the Poisson
subsampled pair over the training steps with dp-accounting's PLD. The single-release
calibration (B(ε, δ), σ) stays in :mod:`privacy_audit.defenses.dp_forward`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from privacy_audit.defenses.dp_forward import check_eps_delta


def rr_binary_keep(epsilon2: float) -> float:
    """p = e^ε2 / (1 + e^ε2): binary randomized response, whose pair (Bern(p), Bern(1 − p))
    dominates every ε2-DP mechanism (Kairouz, Oh & Viswanath 2015; in f-DP terms its
    trade-off curve f_{ε2,0} is the lowest an ε2-DP mechanism can have), k-ary RR included."""
    e2 = float(epsilon2)
    if not (math.isfinite(e2) and e2 >= 0):
        raise ValueError(f"epsilon2 must be a finite number >= 0, got {epsilon2!r}")
    return 1.0 / (1.0 + math.exp(-e2))


def rr_gdp_mu(epsilon2: float) -> float:
    """μ' = 2 Φ⁻¹(e^ε2 / (1 + e^ε2)): every ε2-DP mechanism is μ'-GDP.

    The Gaussian trade-off curve G_μ'(α) = Φ(Φ⁻¹(1 − α) − μ') lies below both pieces of the
    ε2-DP curve, 1 − e^ε2·α and e^−ε2·(1 − α), and touches them at their kink
    α* = 1 / (1 + e^ε2) (Dong, Roth & Su 2022, f-DP; checked on a grid in the tests)."""
    from scipy.stats import norm

    return float(2.0 * norm.ppf(rr_binary_keep(epsilon2)))


def joint_gdp_noise_multiplier(noise_multiplier: float, epsilon2: float) -> float:
    """z_eff = 1 / √(1/z² + μ'²): the Gaussian release (μ = 1/z) and the label RR (μ'-GDP,
    :func:`rr_gdp_mu`) made together compose to √(μ² + μ'²)-GDP, one Gaussian with noise
    multiplier z_eff. Valid but loose: the GDP envelope of RR has unbounded privacy loss, so
    subsampling amplifies it far less than it amplifies the RR itself."""
    z = float(noise_multiplier)
    if not (math.isfinite(z) and z > 0):
        raise ValueError(f"noise multiplier must be a positive finite number, got {z!r}")
    return 1.0 / math.sqrt(1.0 / z**2 + rr_gdp_mu(epsilon2) ** 2)


def _gauss_delta(eps: float, mu: float) -> float:
    """δ(ε) of the pair N(0,1) vs N(μ,1) for any real ε (Balle & Wang 2018, Thm 8)."""
    return float(ndtr(mu / 2 - eps / mu) - math.exp(eps + log_ndtr(-mu / 2 - eps / mu)))


def joint_local_delta(epsilon: float, noise_multiplier: float, epsilon2: float) -> float:
    """δ(ε) of one joint release (Gaussian, μ = 1/z, and label RR at ε2), not subsampled.
    With the dominating pair P = N(0,1)×Bern(p), Q = N(μ,1)×Bern(1−p) the privacy loss is
    the Gaussian's shifted by ±ε2, so δ(ε) = p·δ_G(ε − ε2) + (1 − p)·δ_G(ε + ε2)."""
    mu, p, e2 = 1.0 / float(noise_multiplier), rr_binary_keep(epsilon2), float(epsilon2)
    return p * _gauss_delta(epsilon - e2, mu) + (1 - p) * _gauss_delta(epsilon + e2, mu)


def joint_local_epsilon(noise_multiplier: float, epsilon2: float, delta: float) -> float:
    """Smallest ε with :func:`joint_local_delta` ≤ δ: the per-release local ε of the
    representation and its RR label released together."""
    check_eps_delta(1.0, delta)
    if joint_local_delta(0.0, noise_multiplier, epsilon2) <= delta:
        return 0.0
    hi = 1.0
    while joint_local_delta(hi, noise_multiplier, epsilon2) > delta:
        hi *= 2
    return float(
        brentq(
            lambda e: joint_local_delta(e, noise_multiplier, epsilon2) - delta, 0.0, hi, xtol=1e-12
        )
    )


def _joint_qp_delta(eps: np.ndarray, mu: float, keep: float) -> np.ndarray:
    """Vectorised :func:`joint_local_delta` (pair Q against P before subsampling); μ = 0 is
    the label RR alone: δ(ε) = (p − e^ε(1 − p))₊ + (1 − p − e^ε p)₊."""
    e2 = math.log(keep / (1 - keep))
    if mu == 0:
        return np.maximum(keep - np.exp(eps) * (1 - keep), 0.0) + np.maximum(
            (1 - keep) - np.exp(eps) * keep, 0.0
        )

    def gauss(e):
        return ndtr(mu / 2 - e / mu) - np.exp(e + log_ndtr(-mu / 2 - e / mu))

    return keep * gauss(eps - e2) + (1 - keep) * gauss(eps + e2)


def _joint_subsampled_profiles(
    mu: float, keep: float, q: float, interval: float, tail: float = 1e-16
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Privacy profiles on the grid iΔ of one Poisson-subsampled joint release, both
    add/remove directions (Zhu, Dong & Wang 2022, Thm 11), from the dominating pair before
    subsampling P = N(0,1) × Bern(keep), Q = N(μ,1) × Bern(1 − keep) (the Gaussian's pair
    times binary RR's), whose profile is :func:`joint_local_delta`:

    - remove, A = (1 − q)P + qQ against P: δ(ε) = q·δ_QP(log((e^ε − 1 + q)/q)), and
      1 − e^ε where e^ε ≤ 1 − q;
    - add, P against A: δ(ε) = 1 − e^ε + e^ε q·δ_QP(log c), c = (1 − e^ε(1 − q))/(e^ε q),
      and 0 where c ≤ 0.

    Returns ``(grid_remove, delta_remove, grid_add, delta_add)``; each grid ends where δ is
    below ``tail`` (that mass goes to +inf, which is pessimistic)."""
    log1mq = math.log1p(-q)
    hi = 1.0
    while (
        q * float(_joint_qp_delta(np.array([math.log((math.exp(hi) - 1 + q) / q)]), mu, keep)[0])
        > tail
    ):
        hi *= 1.5
    grid_r = np.arange(math.floor(log1mq / interval), math.ceil(hi / interval) + 1)
    e = grid_r * interval
    inner = np.exp(e) - 1 + q
    with np.errstate(divide="ignore", invalid="ignore"):
        shifted = np.log(np.where(inner > 0, inner, 1.0) / q)
        d_r = np.where(inner > 0, q * _joint_qp_delta(shifted, mu, keep), -np.expm1(e))
    grid_a = np.arange(-grid_r[-1], math.ceil(-log1mq / interval) + 1)
    e = grid_a * interval
    c = (1 - np.exp(e) * (1 - q)) / (np.exp(e) * q)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_c = np.log(np.where(c > 0, c, 1.0))
        d_a = np.where(c > 0, -np.expm1(e) + np.exp(e) * q * _joint_qp_delta(log_c, mu, keep), 0.0)
    # hockey-stick curves are non-increasing; remove rounding wiggles (upwards: pessimistic)
    d_r = np.maximum.accumulate(np.clip(d_r, 0.0, 1.0)[::-1])[::-1]
    d_a = np.maximum.accumulate(np.clip(d_a, 0.0, 1.0)[::-1])[::-1]
    return grid_r, d_r, grid_a, d_a


def joint_release_epsilon(
    noise_multiplier: float,
    epsilon2: float,
    sample_rate: float,
    steps: int,
    delta: float,
    interval: float = 1e-4,
) -> float:
    """Central ε (dp-accounting PLD, pessimistic) of ``steps`` Poisson-subsampled releases,
    each a Gaussian with noise multiplier z on a sensitivity-1 representation *together
    with* a label randomized response at ε2 (same user, same step: composed before
    subsampling). ``epsilon2 = 0`` is the subsampled Gaussian alone; ``noise_multiplier =
    inf`` the subsampled label RR alone.

    Exact up to dp-accounting's pessimistic connect-the-dots discretisation (Doroshenko et
    al. 2022) of the profiles of :func:`_joint_subsampled_profiles`; never above the GDP envelope (:func:`joint_gdp_noise_multiplier`).
    """
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    z, q, e2 = float(noise_multiplier), float(sample_rate), float(epsilon2)
    if not z > 0 or math.isnan(z) or (math.isinf(z) and e2 == 0):
        raise ValueError(f"noise multiplier must be a positive number, got {z!r}")
    if not 0 < q < 1:
        raise ValueError(f"sample rate must be in (0, 1), got {sample_rate!r}")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps!r}")
    check_eps_delta(1.0, delta)
    from dp_accounting.pld import pld_pmf

    grid_r, d_r, grid_a, d_a = _joint_subsampled_profiles(
        0.0 if math.isinf(z) else 1.0 / z, rr_binary_keep(e2), q, interval
    )
    pld = pld_lib.PrivacyLossDistribution(
        pld_pmf.create_pmf_pessimistic_connect_dots(interval, grid_r, d_r),
        pld_pmf.create_pmf_pessimistic_connect_dots(interval, grid_a, d_a),
    )
    return float(pld.self_compose(int(steps)).get_epsilon_for_delta(float(delta)))
