"""Gradient-level ε audit of the DP-BloGS shuffle, with a Gaussian positive control."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privacy_audit.attacks.shuffle_audit import (
    GaussianControl,
    ShuffleAudit,
    batch_gradient,
    certified_ceiling,
)
from privacy_audit.defenses.dp_blogs import BloGSGenerator, BloGSMechanism

pytestmark = pytest.mark.filterwarnings("ignore::privacy_audit.defenses.dp_blogs.AccountantWarning")


def _loss(model, batch):
    return torch.nn.functional.cross_entropy(model(batch[0]), batch[1])


def mlp_worlds(seed=0):
    """A bias-free 2-layer MLP (two 64×64 tensors), a batch of 50 and the same batch with
    one example replaced by a canary (a large input with a fixed label)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64, bias=False), torch.nn.Tanh(), torch.nn.Linear(64, 64, bias=False)
    )
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(50, 64, generator=g), torch.randint(0, 64, (50,), generator=g)
    xc, yc = x.clone(), y.clone()
    xc[0], yc[0] = 5 * torch.randn(64, generator=g), 7
    return model, batch_gradient(model, _loss, (xc, yc)), batch_gradient(model, _loss, (x, y))


def test_shuffle_audit_violates_the_accountant_claim():
    model, g_in, g_out = mlp_worlds()
    blogs = BloGSGenerator(model.named_parameters(), target_epsilon=1.0, steps=100, seed=0)
    claimed = blogs.epsilon_planned
    assert claimed <= 1.0  # the accountant's whole-run claim for 100 such steps
    result = ShuffleAudit(trials=1000, seed=0).run(
        g_in, g_out, blogs.mechanism(), delta=1e-5, claimed_epsilon=claimed
    )
    # one step's release is part of the run's transcript, so this bounds the run's ε too
    assert result["epsilon_lb"] >= 5.0
    assert result["exceeds_claim"] is True
    assert result["true_positives"] == 1000 and result["false_positives"] == 0
    assert result["epsilon_lb"] == pytest.approx(certified_ceiling(1000, 1e-5))
    assert result["epsilon_lb_split_threshold"] > 4  # the data-driven threshold agrees


def test_shuffle_audit_strict_mode_and_block_size_one():
    _, g_in, g_out = mlp_worlds(1)
    for mech in (BloGSMechanism((60, 60), 1.0, "strict"), BloGSMechanism((1, 1), 1.0)):
        for stat in ("extremes", "sorted"):
            r = ShuffleAudit(trials=200, seed=1, statistic=stat).run(g_in, g_out, mech, delta=1e-5)
            assert r["true_positives"] == 200 and r["false_positives"] == 0


def test_gaussian_positive_control_stays_below_its_epsilon():
    """Valid bound: a real Gaussian mechanism is never caught above its ε, but detected."""
    d = 32
    g_in = [torch.zeros(d, dtype=torch.float64)]
    g_in[0][3] = 2.0  # clipped to C = 1
    g_out = [torch.zeros(d, dtype=torch.float64)]
    for sigma, seed in ((0.35, 0), (0.5, 1), (1.0, 2)):
        control = GaussianControl(clip_value=1.0, sigma=sigma)
        true_eps = control.epsilon(1e-5)
        r = ShuffleAudit(trials=1000, seed=seed, statistic="projection").run(
            g_in, g_out, control, delta=1e-5, claimed_epsilon=true_eps
        )
        assert 0 < r["epsilon_lb"] <= true_eps
        assert r["exceeds_claim"] is False
    # the sorted statistic on noisy releases is a valid, weaker test
    r = ShuffleAudit(trials=300, seed=3).run(g_in, g_out, GaussianControl(1.0, 0.5), delta=1e-5)
    assert r["epsilon_lb"] <= GaussianControl(1.0, 0.5).epsilon(1e-5)


def test_audit_bad_input():
    with pytest.raises(ValueError, match="at least 100"):
        ShuffleAudit(trials=10)
    with pytest.raises(ValueError, match="unknown audit statistic"):
        ShuffleAudit(statistic="norm")
    mech = BloGSMechanism((4,), 1.0)
    with pytest.raises(ValueError, match="shapes differ"):
        ShuffleAudit(trials=100).run([torch.zeros(8)], [torch.zeros(4)], mech, 1e-5)
    scores, members, thr = ShuffleAudit(trials=100).scores([torch.ones(8)], [torch.zeros(8)], mech)
    assert scores.shape == (200,) and np.array_equal(np.unique(members), [0, 1]) and thr == 0
