"""Noise calibration with bounded work: Opacus's σ search, with an iteration and a time
limit that end in a clear error instead of running for minutes.

:func:`bounded_noise_multiplier` is the search of ``opacus.accountants.utils.
get_noise_multiplier`` (double σ from 20 until ε(σ) <= target, then bisect until
``target - ε(σ_high) <= tolerance``, return the conservative end ``σ_high``), so it returns
the same σ for the same inputs; ε(σ) comes from Opacus's maintained accountants. Opacus's
own loop has no bound: for ε = 1e308 the bisection drives σ towards 0 forever, and for a
tiny ε the doubling evaluates the (slow) PRV accountant up to σ = 10^6 first. The config
loader rejects such ε up front (``privacy_audit.audit.config.EPS_DELTA_RANGES``); these bounds are the
backstop for any input that still gets here.
"""

from __future__ import annotations

import functools
import math
import time
import warnings

from privacy_audit.ground.errors import AuditError

#: Most accountant evaluations one calibration may make (doubling + bisection).
MAX_ITERATIONS = 200
#: Most seconds one calibration may take.
MAX_SECONDS = 600.0


class CalibrationError(AuditError):
    """The noise calibration could not reach the target ε within its bounds."""


def bounded_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    steps: int,
    accountant: str = "prv",
    epsilon_tolerance: float = 0.01,
    max_iterations: int = MAX_ITERATIONS,
    max_seconds: float = MAX_SECONDS,
) -> float:
    """Smallest σ found by Opacus's search with ε(σ) <= ``target_epsilon``; raises
    :class:`CalibrationError` (one line, exit 2) past ``max_iterations`` accountant
    evaluations or ``max_seconds``. The search is deterministic, so its result is
    memoised per argument tuple (an error is not: the next call searches again); a
    many-runs audit that trains thousands of times at one schedule calibrates once."""
    return _search(
        target_epsilon,
        target_delta,
        sample_rate,
        steps,
        accountant,
        epsilon_tolerance,
        max_iterations,
        max_seconds,
    )


@functools.lru_cache(maxsize=1024)
def _search(
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    steps,
    accountant: str,
    epsilon_tolerance: float,
    max_iterations: int,
    max_seconds: float,
) -> float:
    from opacus.accountants import create_accountant
    from opacus.accountants.utils import MAX_SIGMA

    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise CalibrationError(f"cannot calibrate noise to ε = {target_epsilon!r}")
    acc = create_accountant(mechanism=accountant)
    start = time.perf_counter()
    calls = [0]

    def eps(sigma: float) -> float:
        calls[0] += 1
        if calls[0] > max_iterations or time.perf_counter() - start > max_seconds:
            raise CalibrationError(
                f"noise calibration to ε = {target_epsilon:g}, δ = {target_delta:g} with the "
                f"{accountant} accountant did not converge within {max_iterations} steps or "
                f"{max_seconds:g} s (stopped at σ = {sigma:.3g}); choose an ε the accountant "
                "can calibrate (README: 'ε ranges')"
                + ("" if accountant == "rdp" else " or the rdp accountant")
            )
        acc.history = [(sigma, sample_rate, int(steps))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(acc.get_epsilon(delta=target_delta))

    sigma_low, sigma_high, eps_high = 0.0, 10.0, math.inf
    while eps_high > target_epsilon:
        sigma_high = 2 * sigma_high
        eps_high = eps(sigma_high)
        if sigma_high > MAX_SIGMA:
            raise CalibrationError(
                f"the privacy budget ε = {target_epsilon:g} is too low to calibrate: even "
                f"σ = {MAX_SIGMA:g} gives ε = {eps_high:.3g} with the {accountant} accountant"
            )
    while target_epsilon - eps_high > epsilon_tolerance:
        sigma = (sigma_low + sigma_high) / 2
        e = eps(sigma)
        if e < target_epsilon:
            sigma_high, eps_high = sigma, e
        else:
            sigma_low = sigma
    return sigma_high
