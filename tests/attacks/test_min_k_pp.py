"""Min-K%++ on memorised tokens (attacks/min_k_pp.py): a near one-hot next-token
distribution has a tiny σ_t, and z_t must be divided by that σ_t itself, not by a floor
above it. Hand-computed with ``math``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privacy_audit.attacks.min_k_pp import min_k_pp_scores, token_z_scores
from privacy_audit.defenses.base import TokenStats


def _stats(logit_rows, targets):
    lp, mu, var = [], [], []
    for row, y in zip(logit_rows, targets, strict=True):
        top = max(row)
        lz = top + math.log(sum(math.exp(v - top) for v in row))
        logq = [v - lz for v in row]
        p = [math.exp(v) for v in logq]
        m = sum(pi * li for pi, li in zip(p, logq, strict=True))
        lp.append(logq[y])
        mu.append(m)
        var.append(sum(pi * (li - m) ** 2 for pi, li in zip(p, logq, strict=True)))
    return TokenStats(np.array(targets), np.array(lp), np.array(mu), np.array(var))


def test_a_memorised_token_is_standardised_by_its_own_small_sigma():
    # logit 20 against four 0s: p(other) ~ 2e-9, σ ~ 1.8e-3 (well above the 1e-6 floor)
    s = _stats([[20.0, 0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 1.5, -0.5, 0.0]], [0, 2])
    sigma = [math.sqrt(v) for v in s.var_log_prob]
    assert 1e-5 < sigma[0] < 5e-3
    z = [(s.log_probs[t] - s.mean_log_prob[t]) / sigma[t] for t in range(2)]
    np.testing.assert_allclose(token_z_scores(s), z, rtol=1e-9)
    assert min_k_pp_scores([s], 1.0)[0] == pytest.approx(sum(z) / 2, rel=1e-9)


def test_a_one_hot_distribution_uses_the_floor():
    # σ = 0 exactly: z = (log p − μ) / 1e-6
    s = TokenStats(np.array([0]), np.array([-1e-7]), np.array([-3e-7]), np.array([0.0]))
    assert token_z_scores(s)[0] == pytest.approx(0.2, rel=1e-9)


def test_an_empty_sequence_scores_zero():
    empty = TokenStats(np.array([], int), np.array([]), np.array([]), np.array([]))
    assert min_k_pp_scores([empty]).tolist() == [0.0]
