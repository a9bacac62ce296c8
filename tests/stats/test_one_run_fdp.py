"""The f-DP one-run audit (Mahloujifar, Melis & Chaudhuri 2024) and one_run_best's tie-breaking."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy.stats import binom, norm

from experiments.statistics import (
    ONE_RUN_SETTINGS,
    draw_canaries,
    gaussian_mu,
    one_run_simulation,
)
from privacy_audit.stats.one_run_bounds import one_run_best, one_run_epsilon, one_run_fdp_epsilon

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
    assert st.shape == fd.shape == (TRIALS,)
    frac = res["mean_fraction_of_true"]
    # Same guesses, same level: the f-DP bound is never much looser on average ...
    assert frac["fdp"] >= frac["steinke"] - 0.005
    # ... and binary randomised-response scores get real power from the tie-breaking.
    if name.startswith("randomised"):
        assert frac["best"] > 0.75


def steinke_p(m, r, v, eps, delta):
    """Steinke, Nasr & Jagielski (2023) p-value written out with scipy, one scalar at a time:
    P[B >= v] + 2 m delta max_{i=1..v} P[v - i <= B <= v - 1] / i, B ~ Bin(r, e^eps/(1+e^eps))."""
    if v == 0:
        return 1.0
    q = math.exp(eps) / (1.0 + math.exp(eps))
    i = np.arange(1, v + 1)
    window = binom.cdf(v - 1, r, q) - binom.cdf(v - i - 1, r, q)  # P[v - i <= B <= v - 1]
    return min(1.0, float(binom.sf(v - 1, r, q)) + 2 * m * delta * float(np.max(window / i)))


def guess_counts(s, inc, grid, key):
    """(correct, guesses) per grid entry: IN for the top k+ by (score, key), OUT for the
    bottom k- (ties ordered by the documented uniform key), counted with plain Python."""
    ranked = sorted(range(len(s)), key=lambda i: (s[i], key[i]))  # ascending
    out = []
    for kp, km in grid:
        top, bottom = ranked[len(s) - kp :], ranked[:km]
        out.append((sum(bool(inc[i]) for i in top) + sum(not inc[i] for i in bottom), kp + km))
    return out


def largest_rejected(eps, counts, m, alpha, tests):
    """eps is rejected on some entry by one of ``tests`` and nothing above it is."""
    margin = eps * (1 + 1e-5) + 2e-7
    hit = any(t(eps, m, r, v, alpha * (1 + 1e-9)) for t in tests for v, r in counts)
    above = any(t(margin, m, r, v, alpha) for t in tests for v, r in counts)
    return (hit or eps == 0.0) and not above


def st_rejects(eps, m, r, v, alpha):
    return steinke_p(m, r, v, eps, DELTA) <= alpha


def fdp_rejects(eps, m, r, v, alpha):
    return rejects(eps, m, r, v, DELTA, alpha, "dp")


@pytest.mark.parametrize("name", ["randomised response eps=2", "gaussian eps=2"])
def test_simulation_and_one_run_best_give_the_largest_eps_rejected_on_the_grid(name):
    # Independent of the suite's bound code: counts by plain sorting, the Steinke p-value
    # with scipy and the f-DP recursion of rejects() above, Bonferroni over the grid.
    trials, m = 2, 1000
    res = one_run_simulation(name, trials=trials)
    kind, eps = ONE_RUN_SETTINGS[name]
    param = eps if kind == "rr" else gaussian_mu(eps, DELTA)
    rng = np.random.default_rng([0, list(ONE_RUN_SETTINGS).index(name)])
    for t in range(trials):
        s, inc = draw_canaries(kind, param, m, rng)
        best = one_run_best(s, inc, DELTA, seed=[0, t])
        grid = [tuple(g) for g in best["k_grid"]]
        a_k = ALPHA / len(grid)
        counts = guess_counts(s, inc, grid, np.random.default_rng([0, t]).random(m))
        st, fd = res["bounds"]["steinke"][t], res["bounds"]["fdp"][t]
        assert st > 0 and fd > 0
        assert largest_rejected(st, counts, m, a_k, [st_rejects])
        assert largest_rejected(fd, counts, m, a_k, [fdp_rejects])
        for value in (res["bounds"]["best"][t], best["epsilon"]):
            assert largest_rejected(value, counts, m, a_k, [st_rejects, fdp_rejects])
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
