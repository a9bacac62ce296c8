"""Simulations behind the suite's statistical claims, shared by the tests and the docs.

* :func:`one_run_simulation`: soundness and tightness of the one-run eps lower bounds
  (Steinke et al. 2023; the f-DP audit of Mahloujifar, Melis & Chaudhuri 2024) on
  canaries whose true eps is known in closed form: randomised response (binary scores,
  so ties are broken by the seeded jitter of :func:`attacks.epsilon.one_run_best`) and
  Gaussian scores (the Gaussian mechanism).

``python -m audit.benchmarks.statistics --out docs/one-run-fdp.json`` records the tables
quoted in docs/statistics.md; the tests assert on the same functions with the same seeds.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from attacks.epsilon import (
    _check_k_grid,
    _fdp_bound,
    _fdp_epsilon_array,
    _one_run_counts,
    _one_run_eps,
    _tie_key,
    gaussian_mechanism_epsilon,
)

#: name -> (mechanism, true eps at delta = 1e-5 for Gaussian; eps of randomised response).
ONE_RUN_SETTINGS = {
    "randomised response eps=1": ("rr", 1.0),
    "randomised response eps=2": ("rr", 2.0),
    "gaussian eps=1": ("gaussian", 1.0),
    "gaussian eps=2": ("gaussian", 2.0),
}


def rr_epsilon(eps: float, delta: float) -> float:
    """Smallest eps' with eps-randomised response (eps', delta)-DP: ln((p - delta) / (1 - p))."""
    p = math.exp(eps) / (1.0 + math.exp(eps))
    return math.log((p - delta) / (1.0 - p))


def gaussian_mu(eps: float, delta: float) -> float:
    """mu of the Gaussian mechanism whose exact eps at ``delta`` is ``eps``."""
    return brentq(lambda mu: gaussian_mechanism_epsilon(mu, delta) - eps, 1e-3, 50.0, xtol=1e-13)


def draw_canaries(kind: str, param: float, m: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, included)`` for m canaries, each included with probability 1/2."""
    included = rng.random(m) < 0.5
    if kind == "rr":
        keep = rng.random(m) < math.exp(param) / (1.0 + math.exp(param))
        return np.where(keep, included, ~included).astype(np.float64), included
    return rng.normal(param * included, 1.0), included


def one_run_simulation(
    name: str,
    trials: int = 200,
    canaries: int = 1000,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """Bounds of every one-run estimator over ``trials`` seeded runs of one setting.

    Each trial draws fresh canaries and computes, on the SAME guesses (default grid of
    :func:`attacks.epsilon.one_run_best`, random tie-breaking with the trial's seed,
    Bonferroni over the grid), the Steinke bound, the f-DP bound with the (eps, delta)-DP
    curve, their maximum (``"best"``, the default of ``one_run_best``) and the
    f-DP bound with the Gaussian curve (``"fdp-gaussian"``: valid for the Gaussian
    mechanism only, since it assumes a Gaussian trade-off curve).  Gaussian canaries score
    ``N(mu * included, 1)`` with mu calibrated so that the exact eps at ``delta`` is the
    setting's eps; randomised-response canaries report their inclusion bit, flipped with
    probability ``1 / (1 + e^eps)``.
    Returns per-estimator bound arrays, exceedance counts (bound > true eps) and the
    mean bound as a fraction of the true eps.
    """
    kind, eps = ONE_RUN_SETTINGS[name]
    if kind == "rr":
        param, eps_true = eps, rr_epsilon(eps, delta)
    else:
        param = gaussian_mu(eps, delta)
        eps_true = gaussian_mechanism_epsilon(param, delta)
    grid = _check_k_grid(None, canaries)
    alpha_k = (1.0 - confidence) / len(grid)
    rng = np.random.default_rng([seed, list(ONE_RUN_SETTINGS).index(name)])
    r = np.zeros((trials, len(grid)), dtype=np.int64)
    v = np.zeros_like(r)
    for t in range(trials):
        s, inc = draw_canaries(kind, param, canaries, rng)
        key = _tie_key(canaries, "random", [seed, t])
        for j, (kp, km) in enumerate(grid):
            v[t, j], r[t, j] = _one_run_counts(s, inc, kp, km, key)
    steinke = np.array(
        [
            [_one_run_eps(canaries, a, b, delta, alpha_k) for a, b in zip(ra, va, strict=True)]
            for ra, va in zip(r, v, strict=True)
        ]
    )
    bounds = {
        "steinke": steinke.max(axis=1),
        "fdp": _fdp_epsilon_array(canaries, r, v, delta, alpha_k, "dp")
        .reshape(r.shape)
        .max(axis=1),
    }
    bounds["best"] = np.maximum(bounds["steinke"], bounds["fdp"])
    # The Gaussian curve is valid for the Gaussian mechanism only; on randomised response
    # it shows that the harness catches an unsound bound.
    mu = _fdp_bound(canaries, r, v, delta, alpha_k, "gaussian").reshape(r.shape).max(axis=1)
    bounds["fdp-gaussian"] = np.array([gaussian_mechanism_epsilon(x, delta) for x in mu])
    return {
        "setting": name,
        "true_epsilon": eps_true,
        "trials": trials,
        "canaries": canaries,
        "delta": delta,
        "confidence": confidence,
        "bounds": {k: b.tolist() for k, b in bounds.items()},
        "exceedances": {k: int(np.sum(b > eps_true)) for k, b in bounds.items()},
        "mean_fraction_of_true": {k: float(np.mean(b) / eps_true) for k, b in bounds.items()},
    }
