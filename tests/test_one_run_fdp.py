"""The f-DP one-run audit (Mahloujifar, Melis & Chaudhuri 2024) and one_run_best's tie-breaking."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy.stats import norm

from attacks.epsilon import one_run_best, one_run_epsilon, one_run_fdp_epsilon
from audit.benchmarks.statistics import ONE_RUN_SETTINGS, draw_canaries, one_run_simulation

DELTA = 1e-5
ALPHA = 0.05
TRIALS = 200
LIMIT = int(0.05 * TRIALS)  # <= 5 % exceedances


def rejects(eps, m, r, v, delta, alpha, curve):
    """The audit recursion written out independently, one scalar at a time."""
    if curve == "dp":

        def finv(y):
            e = math.exp(eps)
            return max(0.0, (y - delta) / e, 1.0 - delta - e * (1.0 - y))
    else:
        mu = eps

        def finv(y):
            return float(norm.cdf(norm.ppf(min(max(y, 0.0), 1.0)) - mu))

    rr, hh = alpha * v / m, alpha * (r - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(hh, finv(rr))
        rr = min(rr + i / (r - i) * (h_new - hh), 1.0)
        hh = h_new
    return v > 0 and rr + hh > r / m


@pytest.mark.parametrize(
    "m, r, v", [(1000, 10, 10), (1000, 100, 90), (200, 60, 50), (1000, 200, 150), (10_000, 10, 10)]
)
def test_bound_is_the_largest_rejected_epsilon(m, r, v):
    eps = one_run_fdp_epsilon(v, r, m, DELTA)
    assert eps > 0
    assert rejects(eps, m, r, v, DELTA, ALPHA, "dp")
    assert not any(
        rejects(eps * (1 + 1e-6) + 1e-9 * k, m, r, v, DELTA, ALPHA, "dp") for k in (0, 10)
    )
    # Gaussian curve: the search runs on mu; check the rejected mu via the returned eps.
    g = one_run_fdp_epsilon(v, r, m, DELTA, curve="gaussian")
    assert g > eps  # a Gaussian curve is stronger than the (eps, delta) curve at equal eps


def test_all_correct_matches_the_exact_pure_dp_limit():
    # Pure eps-DP (delta -> 0), r guesses all right: randomised response attains
    # P[W = r] = q^r, so no valid bound can exceed logit(alpha^(1/r)); the audit gets close.
    for r in (10, 50, 200):
        exact = math.log(ALPHA ** (1 / r) / (1 - ALPHA ** (1 / r)))
        got = one_run_fdp_epsilon(r, r, 1000, 1e-12)
        assert exact * 0.97 <= got <= exact + 1e-6, (r, got, exact)
        assert got == pytest.approx(one_run_epsilon(r, r, 1000, 1e-12), rel=0.02)


def test_no_signal_and_validation():
    assert one_run_fdp_epsilon(0, 100, 1000, DELTA) == 0.0
    assert one_run_fdp_epsilon(50, 100, 1000, DELTA) == 0.0  # chance level
    assert one_run_fdp_epsilon(0, 0, 10, DELTA) == 0.0
    with pytest.raises(ValueError, match="curve"):
        one_run_fdp_epsilon(5, 10, 100, DELTA, curve="laplace")
    with pytest.raises(ValueError, match="must not exceed"):
        one_run_fdp_epsilon(11, 10, 100, DELTA)
    with pytest.raises(ValueError, match="must not exceed"):
        one_run_fdp_epsilon(5, 200, 100, DELTA)


@functools.cache
def simulate(name):
    return one_run_simulation(name, trials=TRIALS)


@pytest.mark.parametrize("name", list(ONE_RUN_SETTINGS))
def test_one_run_estimators_are_sound(name):
    res = simulate(name)
    print(name, res["exceedances"], res["mean_fraction_of_true"])
    for key in ("steinke", "fdp", "best"):
        assert res["exceedances"][key] <= LIMIT, (name, key, res["exceedances"][key])
    if name.startswith("gaussian"):
        assert res["exceedances"]["fdp-gaussian"] <= LIMIT
    else:
        # The harness has power: the Gaussian-curve bound assumes a Gaussian mechanism
        # and overstates eps on randomised response in most trials.
        assert res["exceedances"]["fdp-gaussian"] > TRIALS // 2


@pytest.mark.parametrize("name", list(ONE_RUN_SETTINGS))
def test_fdp_is_at_least_as_tight_on_the_same_guesses(name):
    res = simulate(name)
    st = np.array(res["bounds"]["steinke"])
    fd = np.array(res["bounds"]["fdp"])
    best = np.array(res["bounds"]["best"])
    assert np.all(best == np.maximum(st, fd))
    frac = res["mean_fraction_of_true"]
    # Same guesses, same level: the f-DP bound is never much looser on average ...
    assert frac["fdp"] >= frac["steinke"] - 0.005
    # ... and binary randomised-response scores get real power from the tie-breaking.
    if name.startswith("randomised"):
        assert frac["best"] > 0.75


def test_simulation_path_equals_one_run_best():
    # The vectorised simulation computes exactly what one_run_best reports.
    name = "randomised response eps=1"
    res = one_run_simulation(name, trials=3)
    kind, eps = ONE_RUN_SETTINGS[name]
    rng = np.random.default_rng([0, list(ONE_RUN_SETTINGS).index(name)])
    for t in range(3):
        s, inc = draw_canaries(kind, eps, 1000, rng)
        best = one_run_best(s, inc, DELTA, seed=[0, t])
        assert best["epsilon"] == pytest.approx(res["bounds"]["best"][t], abs=1e-12)
        assert best["estimator"] in ("steinke", "fdp")
        assert best["tie_break"] == "random"


def test_random_tie_break_gives_binary_scores_power_and_is_seeded():
    rng = np.random.default_rng(3)
    s, inc = draw_canaries("rr", 2.0, 1000, rng)
    abstain = one_run_best(s, inc, DELTA, tie_break="abstain")
    assert abstain["guesses"] == 0 and abstain["epsilon"] == 0.0
    a = one_run_best(s, inc, DELTA, seed=1)
    assert a == one_run_best(s, inc, DELTA, seed=1)
    assert a["guesses"] == a["k_plus"] + a["k_minus"]
    assert 1.0 < a["epsilon"] < 2.0
    # Continuous scores: random tie-breaking changes nothing.
    x = rng.normal(size=1000)
    assert one_run_best(x, inc, DELTA, seed=4) == {
        **one_run_best(x, inc, DELTA, tie_break="abstain"),
        "tie_break": "random",
        "seed": 4,
    }
    with pytest.raises(ValueError, match="tie_break"):
        one_run_best(s, inc, DELTA, tie_break="jitter")
    with pytest.raises(ValueError, match="estimator"):
        one_run_best(s, inc, DELTA, estimator="mmc")
