"""One-run ε lower bounds for designed canaries: repetition (group privacy) and the
Gaussian one-run audit (Agrawal et al. 2026, "Let's Ask Gauss").

Small pure functions, each with its assumptions in the docstring.

Repetition. A canary inserted ``r`` times is a *group* of r examples. A mechanism that is
(ε, δ)-DP for one example is, for a group of r (Dwork & Roth 2014, group privacy, by
chaining r neighbouring datasets)

    (r ε,  δ_r)-DP   with   δ_r = δ · Σ_{i=0}^{r-1} e^{i ε} = δ (e^{r ε} − 1) / (e^ε − 1).

The one-run test of Steinke, Nasr & Jagielski (2023) is applied to the groups: the
per-example hypothesis "the mechanism is ε-DP" is rejected when the one-run p-value at
(r ε, δ_r) is at most α; the bound is ``inf{ε : p(r ε, δ_r(ε)) > α}``, so it is valid
whether or not p is monotone (ε_LB > ε* implies p(ε*) ≤ α, which has probability ≤ α).
With δ = 0 this is exactly (group bound) / r.

Gaussian one-run audit. In white-box DP-SGD a canary's aligned signal (the sum over steps
of the released update projected on the canary's clipped gradient) is a sum of many
independent per-step terms, so by the CLT the present and absent canaries' signals are
asymptotically N(μσ, σ²) and N(0, σ²). Fitting that Gaussian pair and reading ε off the
μ-GDP privacy profile (hockey-stick divergence of the two Gaussians) uses the whole score,
not a thresholded guess. It is **asymptotic**: valid only where the signals are Gaussian
with a common variance; on bounded-likelihood-ratio mechanisms (randomized response) it
overstates ε, which the tests show.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats
from scipy.optimize import brentq

from privacy_audit.stats.epsilon_bounds import (
    check_count,
    check_delta,
    gaussian_mechanism_epsilon,
)
from privacy_audit.stats.metrics import (
    CI_METHODS,
    check_confidence,
    tpr_at_fpr,
    tpr_interval_exact,
)
from privacy_audit.stats.one_run_bounds import (
    one_run_best,
    one_run_ceiling,
    one_run_counts,
    one_run_fdp_epsilon,
    one_run_p_value_fn,
    validate_canaries,
)

_GRID = 48
_XTOL = 1e-7


def group_delta(epsilon: float, delta: float, group: int) -> float:
    """δ_r of an (ε, δ)-DP mechanism for a group of ``group`` examples: δ Σ_{i<r} e^{iε}."""
    r = int(group)
    if r < 1:
        raise ValueError(f"group size must be >= 1, got {group!r}")
    if delta == 0.0:
        return 0.0
    if epsilon == 0.0:
        return r * delta
    log_sum = r * epsilon + math.log(-math.expm1(-r * epsilon)) - math.log(math.expm1(epsilon))
    return min(1.0, delta * math.exp(log_sum)) if log_sum < 700 else 1.0


def _check_delta_or_zero(delta) -> float:
    d = float(delta)
    return 0.0 if d == 0.0 else check_delta(d)


def _group_p(m: int, r: int, v: int, delta: float, group: int, eps: float) -> float:
    dg = group_delta(eps, delta, group)
    if dg >= 1.0:
        return 1.0
    return one_run_p_value_fn(m, r, v, dg)(group * eps)


def _group_eps(m: int, r: int, v: int, delta: float, group: int, alpha: float) -> float:
    """``inf{ε >= 0 : p(group ε, δ_group(ε)) > α}`` (0 when ε = 0 is not rejected)."""

    def p(e: float) -> float:
        return _group_p(m, r, v, delta, group, e)

    if v == 0 or p(0.0) > alpha:
        return 0.0
    hi = 1.0
    while p(hi) <= alpha:
        hi *= 2.0
        if hi > 1e6:  # pragma: no cover - all guesses right with absurd m
            return math.inf
    grid = np.linspace(0.0, hi, _GRID + 1)
    bad = next(i for i, e in enumerate(grid) if p(float(e)) > alpha)
    lo, hi = float(grid[bad - 1]), float(grid[bad])
    while hi - lo > _XTOL * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if p(mid) <= alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_group_epsilon(
    correct, guesses, canaries, delta: float, group: int = 1, confidence: float = 0.95
) -> float:
    """Per-example ε lower bound from one run whose canaries are each repeated ``group`` times.

    Assumptions: those of :func:`privacy_audit.stats.one_run_bounds.one_run_epsilon` for the m groups (each
    group's inclusion an independent fair coin, all r copies in or all out), and that the
    mechanism's (ε, δ) guarantee is per example, so a group enjoys (group·ε, δ_group) by
    group privacy (module docstring). ``group = 1`` is Steinke et al.'s bound.
    """
    delta = _check_delta_or_zero(delta)
    alpha = 1.0 - check_confidence(confidence)
    v = check_count(correct, "correct")
    r = check_count(guesses, "guesses")
    m = check_count(canaries, "canaries", 1)
    k = check_count(group, "group", 1)
    if r > m or v > r:
        raise ValueError(f"need correct <= guesses <= canaries, got {v}, {r}, {m}")
    return _group_eps(m, r, v, delta, k, alpha)


def one_run_group_best(
    scores,
    included,
    delta: float,
    group: int = 1,
    confidence: float = 0.95,
    k_grid=None,
    seed=0,
) -> dict:
    """:func:`privacy_audit.stats.one_run_bounds.one_run_best` with repetition, plus the design's ceiling.

    ``group = 1``: exactly ``one_run_best`` (the larger of Steinke et al.'s and the f-DP
    one-run bound, ties ordered by seeded jitter), and ``ceiling`` is the larger of the
    two estimators with every guess right at the best grid entry. ``group > 1``: the same
    Bonferroni grid of (k_plus, k_minus) guesses, each bound from
    :func:`one_run_group_epsilon` (Steinke et al. with group privacy; tied scores are
    abstained on)."""
    s, inc = validate_canaries(scores, included)
    delta = check_delta(delta)
    alpha = 1.0 - check_confidence(confidence)
    k = check_count(group, "group", 1)
    base = one_run_best(s, inc, delta, confidence=confidence, k_grid=k_grid, seed=seed)
    grid = [tuple(g) for g in base["k_grid"]]
    if k == 1:
        conf_k = base["confidence_per_k"]
        ceiling = max(
            max(
                one_run_ceiling(s.size, kp + km, delta, conf_k),
                one_run_fdp_epsilon(kp + km, kp + km, s.size, delta, conf_k),
            )
            for kp, km in grid
        )
        return {**base, "group": 1, "ceiling": max(ceiling, base["epsilon"])}
    a_k = alpha / len(grid)
    best: dict | None = None
    ceiling = 0.0
    for kp, km in grid:
        v, r = one_run_counts(s, inc, kp, km)
        eps = _group_eps(s.size, r, v, delta, k, a_k)
        ceiling = max(ceiling, _group_eps(s.size, kp + km, kp + km, delta, k, a_k))
        if best is None or eps > best["epsilon"]:
            best = {"epsilon": eps, "correct": v, "guesses": r, "k_plus": kp, "k_minus": km}
    assert best is not None
    best.update(
        canaries=int(s.size),
        group=k,
        ceiling=ceiling,
        k_grid=grid,
        confidence=1.0 - alpha,
        confidence_per_k=1.0 - a_k,
        estimator="steinke (group privacy)",
        method=f"one-run (Steinke et al. 2023) with group privacy, r = {k}",
    )
    return best


# ---------------------------------------------------------------------------
# Gaussian one-run audit (Agrawal et al. 2026)
# ---------------------------------------------------------------------------


#: relative margin on the tail level when inverting scipy's noncentral t: its survival
#: function agrees with a 30-digit mpmath quadrature to ~1e-13 relative for t ≤ 10⁴
#: (tests/stats/test_formula_pins.py), so inverting at α(1 − 1e-6) cannot land above the
#: exact root through that error
NCT_LEVEL_MARGIN = 1e-6


def noncentral_t_split_lower(t_obs: float, df: int, alpha: float, grid: int = 64) -> float:
    """A lower confidence bound on the noncentrality that needs no noncentral-t numerics.

    For T = (Z + nc)/S with S = √(V/df), V ~ χ²_df: P[T ≥ t] ≤ P[S ≤ s₀] + P[Z ≥ t·s₀ − nc]
    for every s₀ > 0 (t ≥ 0). With s₀ = √(χ²_df⁻¹(a)/df) and nc = t·s₀ − z_{1−(α−a)},
    the right side is α, so such nc is at or below the exact bound for every a ∈ (0, α);
    the largest over a grid of a is returned (never below 0)."""
    if not t_obs > 0:
        return 0.0
    best = 0.0
    for a in alpha * (np.arange(1, grid) / grid):
        s0 = math.sqrt(float(stats.chi2.ppf(a, df)) / df)
        best = max(best, t_obs * s0 - float(stats.norm.isf(alpha - a)))
    return best


def noncentral_t_lower(t_obs: float, df: int, alpha: float) -> float:
    """The one-sided (1 − α) lower confidence bound on the noncentrality of a Student t
    with ``df`` degrees of freedom observed at ``t_obs``: the nc with P_nc[T ≥ t_obs] = α
    (0 when even nc = 0 gives a tail ≥ α).

    Exact inversion of scipy's ``nct.sf`` at the slightly stricter level α(1 − 1e-6)
    (:data:`NCT_LEVEL_MARGIN`), taking brentq's lower bracket, so the result is never
    above the exact root; where scipy returns no finite tail the Bonferroni split bound
    (:func:`noncentral_t_split_lower`), which is conservative by construction, is used."""
    level = alpha * (1.0 - NCT_LEVEL_MARGIN)
    fallback = noncentral_t_split_lower(t_obs, df, level)

    def tail(nc: float) -> float:  # P[T >= t_obs | nc] - level, increasing in nc
        return float(stats.nct.sf(t_obs, df, nc)) - level

    t0 = tail(0.0)
    if not math.isfinite(t0):
        return fallback
    if t0 >= 0.0:
        return 0.0
    hi = max(1.0, 2.0 * abs(t_obs))
    for _ in range(200):
        th = tail(hi)
        if not math.isfinite(th):
            return fallback
        if th >= 0.0:
            break
        hi *= 2.0
    else:
        return fallback
    root, info = brentq(tail, 0.0, hi, xtol=1e-12, rtol=1e-14, full_output=True)
    if not info.converged:
        return fallback
    nc = root
    # brentq's answer is within its tolerance of the root: step down until the tail at nc
    # is at or below the level, so nc is on the conservative side
    step = max(1e-12, 4e-14 * abs(root))
    while nc > 0.0 and tail(nc) > 0.0:
        nc -= step
        step *= 2.0
    return max(0.0, nc)


def gaussian_mu_lower(scores, included, confidence: float = 0.95) -> dict:
    """Lower confidence bound on μ = (mean_in − mean_out) / σ under the Gaussian-pair model.

    Assumption (the audit's asymptotic one): present and absent canaries' scores are
    independent draws from N(μσ + c, σ²) and N(c, σ²) (common variance). Then Welch-free
    Student's t = (x̄_in − x̄_out) / (s_p √(1/n_in + 1/n_out)) is noncentral t with
    n_in + n_out − 2 degrees of freedom and noncentrality μ / √(1/n_in + 1/n_out); the
    bound inverts it exactly (the μ with P[T ≥ t_obs] = α). Returns ``mu_hat``, ``mu_lo``.
    """
    s, inc = validate_canaries(scores, included)
    alpha = 1.0 - check_confidence(confidence)
    x, y = s[inc], s[~inc]
    n1, n2 = x.size, y.size
    if n1 < 2 or n2 < 2:
        raise ValueError("the Gaussian audit needs at least 2 present and 2 absent canaries")
    df = n1 + n2 - 2
    sp = math.sqrt(((n1 - 1) * x.var(ddof=1) + (n2 - 1) * y.var(ddof=1)) / df)
    scale = math.sqrt(1.0 / n1 + 1.0 / n2)
    if sp == 0.0:
        return {"mu_hat": math.inf if x.mean() > y.mean() else 0.0, "mu_lo": 0.0, "df": df}
    t_obs = (x.mean() - y.mean()) / (sp * scale)
    mu_hat = (x.mean() - y.mean()) / sp

    nc_lo = noncentral_t_lower(float(t_obs), df, alpha)
    return {"mu_hat": float(mu_hat), "mu_lo": float(nc_lo * scale), "df": df}


def gaussian_regime(scores, included, min_per_side: int = 30, level: float = 0.01) -> dict:
    """Diagnostics of the Gaussian audit's assumption on these scores: enough canaries on
    each side, no rejection of normality (D'Agostino–Pearson) or of equal variances
    (Levene) at ``level``. ``ok`` is True only when all hold; it cannot prove the
    assumption, only fail to contradict it."""
    s, inc = validate_canaries(scores, included)
    x, y = s[inc], s[~inc]
    enough = x.size >= min_per_side and y.size >= min_per_side
    # constant scores on a side (e.g. no noise at all): not Gaussian, nothing to test
    enough = enough and bool(np.ptp(x) > 0 and np.ptp(y) > 0)
    normal_p = levene_p = float("nan")
    if enough:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            normal_p = min(float(stats.normaltest(x).pvalue), float(stats.normaltest(y).pvalue))
            levene_p = float(stats.levene(x, y).pvalue)
    ok = bool(enough and normal_p > level and levene_p > level)
    return {
        "ok": ok,
        "normality_p": normal_p,
        "equal_variance_p": levene_p,
        "n_in": int(x.size),
        "n_out": int(y.size),
    }


def gaussian_one_run_epsilon(
    scores, included, delta: float, confidence: float = 0.95, approximation_share: float = 0.5
) -> dict:
    """ε lower bound of the Gaussian one-run audit (Agrawal et al. 2026).

    ε_LB = the ε at ``delta`` of μ_lo-GDP (:func:`privacy_audit.stats.epsilon_bounds.gaussian_mechanism_epsilon`),
    μ_lo from :func:`gaussian_mu_lower`.

    **Asymptotic**: valid only when the canary signals are Gaussian with a common variance
    (e.g. white-box DP-SGD canary-aligned sums over many steps); ``regime`` reports the
    diagnostics. Never use it as a verdict on its own.

    Level: of the error budget α = 1 − ``confidence``, the share ``approximation_share``
    (default ½) is held back for the CLT approximation, so μ_lo is the exact noncentral-t
    bound at level α·(1 − share) (97.5 % by default). Without the hold-back the bound is an
    exact-level test in its own model and would exceed the true ε in α of all runs *before*
    any approximation error; with it, the exceedance is α/2 in the model and at most α
    while the approximation costs no more than the share held back.
    """
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    if not 0.0 <= approximation_share < 1.0:
        raise ValueError(f"approximation_share must be in [0, 1), got {approximation_share!r}")
    sampling = 1.0 - (1.0 - confidence) * (1.0 - approximation_share)
    mu = gaussian_mu_lower(scores, included, sampling)
    eps = gaussian_mechanism_epsilon(mu["mu_lo"], delta) if mu["mu_lo"] > 0 else 0.0
    return {
        "epsilon": eps,
        **mu,
        "regime": gaussian_regime(scores, included),
        "confidence": confidence,
        "sampling_confidence": sampling,
        "assumption": "asymptotic: canary signals Gaussian with a common variance (CLT over "
        f"many steps); {approximation_share:.3g} of the error budget α = {1 - confidence:.3g} "
        "held back for the approximation",
    }


def tpr_at_1pct_fpr(scores, included, n_boot: int = 1000, confidence: float = 0.95, seed=0):
    """TPR at 1% FPR of the canary scores with the exact, distribution-free interval.

    The value is :func:`privacy_audit.stats.metrics.tpr_at_fpr` (largest TPR with empirical FPR
    <= 1 %; with fewer than 100 absent canaries, the TPR at zero false positives). The
    interval is :func:`privacy_audit.stats.metrics.tpr_interval_exact` at ``confidence``: valid for
    any score distribution, tied scores included, with coverage >= ``confidence``
    (conservative; the percentile bootstrap it replaces covered well below 95 % at 100
    canaries per side, measured in docs/statistics.md). ``n_boot`` and ``seed`` are accepted for
    callers of the bootstrap version and unused: nothing is resampled."""
    s, inc = validate_canaries(scores, included)
    confidence = check_confidence(confidence)
    if inc.all() or not inc.any():
        return {"tpr": float("nan"), "ci": [float("nan"), float("nan")], "n_out": int((~inc).sum())}
    point = tpr_at_fpr(s, inc, 0.01)
    lo, hi = tpr_interval_exact(
        -np.sort(-s[inc])[None], -np.sort(-s[~inc])[None], 0.01, 1.0 - confidence
    )
    return {
        "tpr": point,
        "ci": [float(lo[0]), float(hi[0])],
        "n_in": int(inc.sum()),
        "n_out": int((~inc).sum()),
        "method": CI_METHODS["tpr_at_fpr"],
    }
