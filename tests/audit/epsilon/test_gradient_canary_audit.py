"""White-box gradient-canary audit on the released gradient mechanism: known answers
for DP-SGD as claimed, for non-private training, and for a mechanism that adds less
noise than it claims."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from privacy_audit.audit.epsilon.gradient_canary_audit import GradientCanaryAudit
from privacy_audit.defenses.base import Surface
from privacy_audit.defenses.dp_sgd import dp_accounting_epsilon
from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism, SamplingSchedule

DELTA = 1e-5
# The default audit's DP-SGD: 1000 members, Poisson q = 1/16, 8 epochs, σ from Opacus for ε = 8.
Q, STEPS, SIGMA = 1 / 16, 128, 0.79315


POISSON = SamplingSchedule(Q, STEPS)


def _release(mechanism, schedule=POISSON):
    return SimpleNamespace(
        gradient_mechanism=mechanism, schedule=schedule, surfaces=frozenset({Surface.GRADIENTS})
    )


@pytest.fixture(scope="module")
def accountant_epsilon():
    # A second maintained accountant for the same mechanism (RDP is looser than PRV).
    return dp_accounting_epsilon(SIGMA, Q, STEPS, DELTA)


def test_dp_sgd_as_claimed_gives_a_positive_bound_below_the_claim(accountant_epsilon):
    result = GradientCanaryAudit(trials=50_000).run(
        _release(GaussianGradientMechanism(1.0, SIGMA)), DELTA, claimed_epsilon=8.0
    )
    assert result["status"] == "ok"
    assert 0 < result["epsilon_lb"] < 8.0
    assert result["epsilon_lb"] < accountant_epsilon
    assert result["exceeds_claim"] is False
    assert result["ceiling"] > 8.0  # so the audit *could* have caught a violation


def test_mechanism_with_ten_times_less_noise_is_caught():
    broken = GaussianGradientMechanism(1.0, SIGMA / 10)
    result = GradientCanaryAudit(trials=100_000).run(_release(broken), DELTA, claimed_epsilon=8.0)
    assert result["epsilon_lb"] > 8.0
    assert result["exceeds_claim"] is True


def test_non_private_release_hits_the_ceiling():
    shuffled = SamplingSchedule(Q, STEPS, appearances=8)
    result = GradientCanaryAudit(trials=20_000).run(
        _release(GaussianGradientMechanism(None), shuffled), DELTA
    )
    # perfect separation: the bound is the ceiling (up to the counted half's rounding)
    assert result["epsilon_lb"] == pytest.approx(result["ceiling"], rel=1e-3)
    assert result["exceeds_claim"] is False  # no claim to exceed


def test_soundness_over_seeds_for_a_mechanism_with_known_epsilon():
    # One step, q = 1: the canary transcript is a plain Gaussian mechanism with μ = 1/σ,
    # whose exact ε is known; the 95% bound must stay below it in nearly all trials.
    from privacy_audit.stats.epsilon_bounds import gaussian_mechanism_epsilon

    sigma = 0.5
    true_eps = gaussian_mechanism_epsilon(1 / sigma, DELTA)
    release = _release(GaussianGradientMechanism(1.0, sigma), SamplingSchedule(1.0, 1))
    bounds = [
        GradientCanaryAudit(trials=2_000, seed=s).run(release, DELTA)["epsilon_lb"]
        for s in range(40)
    ]
    assert sum(b > true_eps for b in bounds) <= 5  # ≤ 5% nominal, with binomial slack at n = 40
    assert np.mean(bounds) > 0.3 * true_eps  # and the audit has power


def test_scores_use_the_mechanisms_own_noise():
    calls = []

    class Spy(GaussianGradientMechanism):
        def add_noise(self, summed, generator=None):
            calls.append(summed.shape)
            return super().add_noise(summed, generator)

    GradientCanaryAudit(trials=1_000, chunk=500).scores(_release(Spy(1.0, SIGMA)))
    assert calls == [torch.Size([500, STEPS])] * 4


def test_not_applicable_without_gradients_or_schedule():
    no_grad = SimpleNamespace(surfaces=frozenset({Surface.PROBABILITIES}))
    r = GradientCanaryAudit(trials=1_000).run(no_grad, DELTA)
    assert r["status"] == "not_applicable" and r["reason"] == "not applicable: needs gradients"
    outside = SimpleNamespace(
        surfaces=frozenset({Surface.GRADIENTS}), gradient_mechanism=None, schedule=None
    )
    r = GradientCanaryAudit(trials=1_000).run(outside, DELTA)
    assert r["status"] == "not_applicable" and "sampling schedule" in r["reason"]


def test_too_few_trials_is_an_error():
    with pytest.raises(ValueError, match="at least 100"):
        GradientCanaryAudit(trials=10)


def test_mechanism_release_clips_sums_and_adds_stated_noise():
    mech = GaussianGradientMechanism(1.0, 2.0)
    per_example = torch.tensor([[3.0, 4.0], [0.3, 0.4]], dtype=torch.float64)
    clipped = mech.clip(per_example)
    assert torch.allclose(clipped.norm(dim=1), torch.tensor([1.0, 0.5], dtype=torch.float64))
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([mech.release(per_example, 2, g) for _ in range(20_000)])
    assert torch.allclose(draws.mean(0), clipped.sum(0) / 2, atol=0.03)
    assert torch.allclose(
        draws.std(0), torch.full((2,), 2.0 * 1.0 / 2, dtype=torch.float64), rtol=0.03
    )
    with pytest.raises(ValueError):
        GaussianGradientMechanism(0.0, 1.0)
    with pytest.raises(ValueError):
        GaussianGradientMechanism(1.0, -1.0)
