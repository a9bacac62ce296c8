"""ε of the mechanism a DP-SGD run actually executed, as sound lower and upper bounds.

Small pure functions over (σ, q, T, δ); every one states what it assumes. The lower
bounds are what a VIOLATED verdict may rest on, so each rounds towards a *smaller* ε:

- :func:`poisson_epsilon` — the Poisson-subsampled Gaussian composed T times (the
  mechanism Opacus's, TF Privacy's and jax_privacy's accountants assume), from
  dp-accounting's privacy loss distribution (PLD). ``pessimistic=False`` rounds every
  privacy loss down and drops truncated mass, so the ε it returns is at most the
  mechanism's (a lower bound); ``pessimistic=True`` is dp-accounting's usual upper bound.
  The discretisation is refined until the two sides are within ``rel_gap`` or a decision
  against a threshold is reached (:func:`poisson_interval`).
- :func:`gaussian_composition_epsilon` — E releases of one Gaussian without subsampling:
  the exact ε of a run whose batches are the same every epoch (the record's step is known).
- :func:`shuffle_lower_bound` — shuffled batches (a new permutation every epoch), the
  adversarial pair of Chua et al. (ICML 2024, "How Private are DP-SGD Implementations?"),
  its per-epoch max statistic binned exactly and composed over epochs with an optimistic
  PLD: a lower bound with no Monte Carlo error.
- :func:`rdp_epsilon` — dp-accounting's RDP accountant beside the PLD (an upper bound).

Units: σ is the noise multiplier (noise std / sensitivity), q the sampling rate, T the
number of noisy releases, δ the target δ. Add/remove adjacency throughout (Opacus's); the
zero-out pair of the shuffle bound is one the Poisson accountant's add/remove ε also
covers (Kairouz et al. 2021: the Poisson-subsampled Gaussian has the same PLD under both).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

#: coarsest → finest discretisation tried by :func:`poisson_interval`
VDI_LADDER = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)


def _check(sigma: float, q: float, steps: int, delta: float) -> None:
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"noise multiplier must be a finite number > 0, got {sigma!r}")
    if not (0 < q <= 1):
        raise ValueError(f"sampling rate must be in (0, 1], got {q!r}")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps!r}")
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")


def _quiet_pld():
    """dp-accounting logs a warning per optimistic PLD (its connect-the-dots path does not
    support them); the message says nothing about the result."""
    return _LogFilter()


class _LogFilter:
    def __enter__(self):
        self._level = logging.root.manager.disable
        logging.disable(logging.WARNING)

    def __exit__(self, *exc):
        logging.disable(self._level)


def poisson_epsilon(
    sigma: float,
    q: float,
    steps: int,
    delta: float,
    pessimistic: bool,
    vdi: float = 1e-3,
    relation: str = "add-remove",
) -> float:
    """ε at ``delta`` of T-fold Poisson(q)-subsampled Gaussian with noise multiplier σ.

    ``pessimistic=False``: a lower bound on the true ε (privacy losses rounded down to the
    grid of width ``vdi``, truncated mass dropped); ``True``: an upper bound. Both are
    dp-accounting's ``from_gaussian_mechanism(...).self_compose(T)``. ``relation``
    ``"replace-one"``: dp-accounting's REPLACE_ONE, where each example's contribution is
    bounded by the sensitivity, so replacing one moves the sum by up to twice it."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    _check(sigma, q, steps, delta)
    rel = (
        pldm.NeighborRel.REPLACE_ONE
        if relation == "replace-one"
        else pldm.NeighborRel.ADD_OR_REMOVE_ONE
    )
    with _quiet_pld():
        pld = pldm.from_gaussian_mechanism(
            standard_deviation=float(sigma),
            sensitivity=1.0,
            pessimistic_estimate=bool(pessimistic),
            sampling_prob=float(q),
            value_discretization_interval=float(vdi),
            use_connect_dots=bool(pessimistic),
            neighboring_relation=rel,
        )
        eps = pld.self_compose(int(steps)).get_epsilon_for_delta(float(delta))
    return max(0.0, float(eps))


@dataclass(frozen=True)
class EpsilonInterval:
    """A sound interval [lower, upper] on one mechanism's ε and how it was computed."""

    lower: float
    upper: float
    how: str

    def as_dict(self) -> dict:
        return {"lower": self.lower, "upper": self.upper, "how": self.how}


def poisson_interval(
    sigma: float,
    q: float,
    steps: int,
    delta: float,
    decide_against: float | None = None,
    rel_gap: float = 0.01,
    max_seconds: float = 5.0,
    relation: str = "add-remove",
) -> EpsilonInterval:
    """Lower and upper PLD bounds on the Poisson-subsampled Gaussian's ε, refined from a
    coarse grid until they are within ``rel_gap`` (relative) or, with ``decide_against``,
    until that threshold lies outside [lower, upper]. Stops refining after
    ``max_seconds``; the interval returned is sound at whatever grid it reached."""
    import time

    start = time.perf_counter()
    lo, hi, used = 0.0, math.inf, None
    for vdi in VDI_LADDER:
        lo = max(lo, _lower_or_fewer_steps(sigma, q, steps, delta, vdi, relation))
        try:
            hi = min(hi, poisson_epsilon(sigma, q, steps, delta, True, vdi, relation))
        except (OverflowError, FloatingPointError, MemoryError):
            pass  # no upper bound at this grid: the interval keeps ∞
        used = vdi
        if hi - lo <= rel_gap * max(hi, 1e-9):
            break
        # reported numbers are refined to rel_gap; a decided comparison may stop earlier
        # only once refining has become slow
        decided = decide_against is not None and (lo > decide_against or hi <= decide_against)
        if decided and time.perf_counter() - start > 2.0:
            break
        if time.perf_counter() - start > max_seconds:
            break
    how = (
        f"dp-accounting PLD ({relation}), Poisson-subsampled Gaussian (σ={sigma:.4g}, q={q:.4g}, "
        f"T={int(steps)}), optimistic/pessimistic rounding at interval {used:g}"
    )
    return EpsilonInterval(lo, hi, how)


def _lower_or_fewer_steps(sigma, q, steps, delta, vdi, relation) -> float:
    """The optimistic PLD at T steps; where the composition overflows (ε in the
    hundreds), the same at T/2, T/4 ...: ε grows with T, so fewer steps still give a lower
    bound."""
    t = int(steps)
    while t >= 1:
        try:
            return poisson_epsilon(sigma, q, t, delta, False, vdi, relation)
        except (OverflowError, FloatingPointError, MemoryError):
            t //= 2
    return 0.0


def rdp_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    """dp-accounting's RDP accountant on the same mechanism (an upper bound on ε)."""
    import dp_accounting
    from absl import logging as absl_logging

    _check(sigma, q, steps, delta)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(float(q), dp_accounting.GaussianDpEvent(sigma)),
        int(steps),
    )
    acc = dp_accounting.rdp.RdpAccountant()
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.ERROR)
    try:
        acc.compose(event)
        return float(acc.get_epsilon(delta))
    finally:
        absl_logging.set_verbosity(verbosity)


def gaussian_composition_epsilon(sigma: float, releases: int, delta: float) -> float:
    """Exact ε at ``delta`` of ``releases`` Gaussian releases of one record with noise
    multiplier σ and no subsampling: μ-GDP with μ = √E/σ (Dong, Roth & Su), solved by
    :func:`privacy_audit.stats.epsilon_bounds.gaussian_mechanism_epsilon`."""
    from privacy_audit.stats.epsilon_bounds import gaussian_mechanism_epsilon

    _check(sigma, 1.0, releases, delta)
    return float(gaussian_mechanism_epsilon(math.sqrt(int(releases)) / float(sigma), delta))


def shuffle_lower_bound(
    sigma: float,
    steps_per_epoch: int,
    epochs: int,
    delta: float,
    bins: int = 1500,
    vdi: float = 1e-3,
) -> float:
    """A lower bound on the ε of DP-SGD with SHUFFLED batches (a fresh permutation every
    epoch, each record in exactly one step per epoch), by Chua et al.'s adversarial pair:
    every other record has gradient −C·e_j, the differing record +C·e_j against a zero
    gradient (zero-out). After the known batch sums are subtracted, one epoch of T steps
    releases P = (1/T)·Σ_t N(2·e_t, σ²I) against Q = (1/T)·Σ_t N(e_t, σ²I) (units of C).

    The statistic is each epoch's max_t x_t, whose CDF is exact,
    Φ((m − μ)/σ)·Φ(m/σ)^(T−1); it is binned into ``bins`` intervals plus two tails (a
    post-processing of the release), and the E epochs are composed with an optimistic
    PLD (losses rounded down, truncated mass dropped). Every step only lowers the
    hockey-stick divergence, so the ε returned is a valid lower bound."""
    from dp_accounting.pld import privacy_loss_distribution as pldm
    from scipy.stats import norm

    t, e = int(steps_per_epoch), int(epochs)
    if t < 1 or e < 1 or not (math.isfinite(sigma) and sigma > 0) or not 0 < delta < 1:
        raise ValueError("need steps_per_epoch, epochs >= 1, sigma > 0 and 0 < delta < 1")
    edges = np.concatenate([[-np.inf], np.linspace(-8 * sigma, 2 + 12 * sigma, bins), [np.inf]])

    def log_mass(mu: float) -> np.ndarray:  # log P(a < max_t x_t <= b), per bin
        cdf = norm.logcdf((edges - mu) / sigma)
        if t > 1:
            cdf = cdf + (t - 1) * norm.logcdf(edges / sigma)
        lo, hi = cdf[:-1], cdf[1:]
        with np.errstate(divide="ignore", invalid="ignore"):
            return hi + np.log(-np.expm1(lo - hi))

    lp, lq = log_mass(2.0), log_mass(1.0)
    upper = {i: float(v) for i, v in enumerate(lp) if np.isfinite(v)}
    lower = {i: float(v) for i, v in enumerate(lq) if np.isfinite(v)}
    with _quiet_pld():
        pld = pldm.from_two_probability_mass_functions(
            lower, upper, pessimistic_estimate=False, value_discretization_interval=vdi
        )
        if e > 1:
            pld = pld.self_compose(e)
        return max(0.0, float(pld.get_epsilon_for_delta(delta)))


def persistence_lower_bound(
    response, q: float, steps: int, delta: float, grid: float = 0.01, max_window: int = 256
) -> float:
    """A lower bound on ε when one example's clipped gradient reappears in later releases.

    ``response[ℓ]`` is the measured shift of a release, in units of its noise's standard
    deviation and projected on one fixed direction, when the example was sampled ℓ steps
    earlier (ℓ = 0: in that step). Assumes the release is linear and time-invariant in
    the examples' gradients (what the schedule check measures) and fresh unit Gaussian
    noise per release. The dataset is the example alone (a lone canary with a constant
    gradient), sampled by Poisson(q) at each of the first T' = min(T, len(response))
    steps.

    Statistic: the sum x of the last W of those T' releases along the direction
    (noise N(0, W)). An inclusion at step s shifts x by c_s = Σ_{t in window} response[t−s]
    ≥ 0; each c_s is rounded DOWN to the grid, so the exact distribution of the rounded
    total shift (a convolution over steps) is dominated by the real one, and
    P(x > τ) = Σ_g p_g Φ̄((τ − g)/√W) is a lower bound on the real probability, while
    Q(x > τ) = Φ̄(τ/√W) is exact. Then ε(τ) = log(P(x>τ) − δ) − log Q(x>τ) is at most the
    mechanism's ε for every τ and W; the maximum over a grid of both is returned. Looking
    at the first T' releases only is a post-processing of the run. Returns 0 when a
    response is negative (the rounding argument needs c_s ≥ 0)."""
    from scipy.special import logsumexp
    from scipy.stats import norm

    r = np.asarray(response, dtype=float)
    t_eff = int(min(int(steps), r.size))
    if t_eff < 1 or not (0 < q <= 1) or not 0 < delta < 1:
        return 0.0
    r = r[:t_eff]
    if (r < -1e-9).any() or not np.isfinite(r).all():
        return 0.0
    r = np.clip(r, 0.0, None)
    cum = np.concatenate([[0.0], np.cumsum(r)])
    best = 0.0
    windows = sorted({1, t_eff, *[2**k for k in range(1, 12) if 2**k < t_eff]})
    for w in windows:
        if w > max_window and w != t_eff:
            continue
        w = min(w, max_window)
        lo_t = t_eff - w  # releases lo_t .. t_eff-1
        s = np.arange(t_eff)
        # lags of release t from step s: t - s, for t in [max(lo_t, s), t_eff - 1]
        first = np.maximum(lo_t, s) - s
        last = (t_eff - 1) - s
        c = cum[last + 1] - cum[first]  # Σ response[first..last]
        c = c[c > 0]
        if c.size == 0:
            continue
        k = np.floor(c / grid).astype(np.int64)
        k = k[k > 0]
        size = int(k.sum()) + 1
        if size > 2_000_000:
            continue
        p = np.zeros(size)
        p[0] = 1.0
        top = 0
        for kk in k:  # each step independently adds kk grid units with probability q
            nxt = p.copy()
            nxt[: top + 1] *= 1 - q
            nxt[kk : kk + top + 1] += q * p[: top + 1]
            p = nxt
            top += int(kk)
        support = np.nonzero(p > 0)[0]
        logp = np.log(p[support])
        shift = support * grid
        sd = math.sqrt(w)
        for tau in np.linspace(0.0, shift.max() + 8 * sd, 600):
            log_p = logsumexp(logp + norm.logsf((tau - shift) / sd))
            log_q = norm.logsf(tau / sd)
            pr = math.exp(log_p)
            if pr <= delta:
                continue
            eps = math.log(pr - delta) - log_q
            best = max(best, eps)
    return max(0.0, best)
