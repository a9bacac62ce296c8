"""Shadow-model membership attacks: LiRA (Carlini et al. 2022) and RMIA (Zarifzadeh et al. 2024).

Both compare the target model's output on an example with the outputs of *reference*
("shadow") models trained on random halves of a population pool that holds the target's
members and non-members plus public population samples. The inclusion design is the
standard one: every pool example is in the training set of exactly half of the shadow
models (:func:`inclusion_design`), so each example has ``n/2`` IN and ``n/2`` OUT models.

This module is pure numpy on per-example numbers; training the shadow models is a task of
the executor layer (``privacy_audit.audit.scale.tasks.train_shadow``), so these functions run anywhere.

Scores (higher = member):

- ``lira-online``: log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²), where φ is the target's
  logit-scaled confidence log(p_y / (1 − p_y)) and the Gaussians are fit per example to the
  IN and OUT shadow models' φ. ``fixed_variance`` replaces the per-example σ by the median
  σ over all examples (the paper's choice for few shadow models).
- ``lira-offline``: the one-sided test log Pr[Z ≤ φ], Z ~ N(μ_out, σ_out²), from OUT models only.
- ``rmia-online`` / ``rmia-offline``: the fraction of population samples z with
  [p(x|θ)/p(x)] / [p(z|θ)/p(z)] > γ, where p(·|θ) is the target's probability of the true
  label and p(·) is its average over reference models: all of them (online), or only the
  OUT models with the paper's offline approximation p(x) = ½((1 + a)·p_OUT(x) + (1 − a)).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

SHADOW_ATTACKS = ("lira-online", "lira-offline", "rmia-online", "rmia-offline")

DESCRIPTIONS = {
    "lira-online": "LiRA online (Carlini et al. 2022): per-example Gaussian likelihood ratio "
    "of the logit-scaled confidence under IN vs OUT shadow models.",
    "lira-offline": "LiRA offline (Carlini et al. 2022): one-sided Gaussian test of the "
    "logit-scaled confidence against OUT shadow models only.",
    "rmia-online": "RMIA (Zarifzadeh et al. 2024): pairwise likelihood ratio against population "
    "samples, reference probability averaged over all shadow models.",
    "rmia-offline": "RMIA offline (Zarifzadeh et al. 2024): as RMIA with OUT shadow models only "
    "and the offline approximation p(x) = ½((1+a)p_OUT(x) + 1 − a).",
}

#: ``privacy-audit attacks``: (one line, needs, cost) of each shadow / reference attack, in
#: the words of attacks/base.py's ``NEEDS`` (these are functions of scores, not classes).
CATALOG = {
    "lira-online": (
        "Gaussian likelihood ratio of the loss under IN vs OUT shadow models (LiRA, Carlini et al. 2022).",
        ("population",),
        "trains N shadow models (half IN per text), then 1 forward pass per text per model",
    ),
    "lira-offline": (
        "One-sided Gaussian test of the loss against OUT reference models (LiRA offline).",
        ("reference",),
        "1 forward pass per text per reference model (given, or fine-tuned from shadow.base_dir)",
    ),
    "rmia-online": (
        "Pairwise likelihood ratio against population texts over all shadow models (RMIA, Zarifzadeh et al. 2024).",
        ("population",),
        "trains N shadow models, then 1 forward pass per text and population text per model",
    ),
    "rmia-offline": (
        "RMIA with OUT reference models only and its offline approximation of p(x).",
        ("reference", "population"),
        "1 forward pass per text and population text per reference model",
    ),
}

_TINY = 1e-300


def logit_confidence_from_loss(loss: np.ndarray) -> np.ndarray:
    """φ = log(p_y / (1 − p_y)) from the per-example cross-entropy ℓ = −log p_y, computed
    stably: log p_y = −ℓ and log(1 − p_y) = log(−expm1(−ℓ))."""
    ell = np.maximum(np.asarray(loss, dtype=np.float64), _TINY)
    return -ell - np.log(-np.expm1(-ell))


def inclusion_design(n_models: int, n: int, seed: int) -> np.ndarray:
    """Boolean ``(n_models, n)`` mask: example j is in shadow model i's training set.

    Every column has exactly ``n_models / 2`` True entries (each example is IN for half the
    models), and the rows are random halves-in-expectation of the pool."""
    if n_models < 2 or n_models % 2:
        raise ValueError(f"n_models must be an even integer >= 2, got {n_models}")
    rng = np.random.default_rng(seed)
    order = rng.uniform(size=(n_models, n)).argsort(axis=0)
    return order < n_models // 2


def _check(target: np.ndarray, shadow: np.ndarray, keep: np.ndarray) -> None:
    if shadow.ndim != 2 or shadow.shape != keep.shape or shadow.shape[1] != target.shape[0]:
        raise ValueError(
            f"shadow outputs {shadow.shape}, inclusion mask {keep.shape} and target outputs "
            f"{target.shape} do not line up"
        )
    if not (np.all(np.isfinite(target)) and np.all(np.isfinite(shadow))):
        raise ValueError("shadow-model or target outputs contain NaN or infinity")


def _masked_mean_std(x: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cnt = mask.sum(axis=0)
    if np.any(cnt < 1):
        raise ValueError("an example has no shadow model on one side of the inclusion design")
    mean = np.where(mask, x, 0.0).sum(axis=0) / cnt
    var = np.where(mask, (x - mean) ** 2, 0.0).sum(axis=0) / cnt
    return mean, np.sqrt(var)


def _one_sigma(sd: np.ndarray, count: np.ndarray) -> np.ndarray:
    """LiRA's fixed variance: the median σ over examples. With one model on a side every
    per-example σ is 0, and σ → 0 turns the Gaussian test into ties and ±inf; then the
    σ is 1: for the one-sided test log Pr[Z ≤ φ] any common σ ranks the examples by
    φ − μ_OUT alone, so its value changes no AUC or TPR."""
    if np.all(count < 2):
        return np.ones_like(sd)
    return np.full_like(sd, np.median(sd[count >= 2]))


def lira_scores(
    target_phi: np.ndarray,
    shadow_phi: np.ndarray,
    keep: np.ndarray,
    online: bool = True,
    fixed_variance: bool = False,
) -> np.ndarray:
    """LiRA scores for the examples (columns) given the target's and the shadow models' φ."""
    target_phi = np.asarray(target_phi, dtype=np.float64)
    shadow_phi = np.asarray(shadow_phi, dtype=np.float64)
    keep = np.asarray(keep, dtype=bool)
    _check(target_phi, shadow_phi, keep)
    mu_out, sd_out = _masked_mean_std(shadow_phi, ~keep)
    if not online:
        sd_out = _one_sigma(sd_out, (~keep).sum(axis=0)) if fixed_variance else sd_out + 1e-30
        return norm.logcdf(target_phi, mu_out, sd_out)
    mu_in, sd_in = _masked_mean_std(shadow_phi, keep)
    if fixed_variance:
        if np.all(keep.sum(axis=0) < 2) or np.all((~keep).sum(axis=0) < 2):
            # one model on a side: no σ to estimate; one common σ ranks the examples by
            # (φ − μ_out)² − (φ − μ_in)², which does not depend on its value
            sd_out = sd_in = np.ones_like(sd_out)
        else:
            sd_out = _one_sigma(sd_out, (~keep).sum(axis=0))
            sd_in = _one_sigma(sd_in, keep.sum(axis=0))
    else:
        sd_out, sd_in = sd_out + 1e-30, sd_in + 1e-30
    return norm.logpdf(target_phi, mu_in, sd_in) - norm.logpdf(target_phi, mu_out, sd_out)


def _reference_prob(shadow_p: np.ndarray, keep: np.ndarray, online: bool, a: float) -> np.ndarray:
    if online:
        return shadow_p.mean(axis=0)
    out = ~keep
    cnt = out.sum(axis=0)
    if np.any(cnt < 1):
        raise ValueError("an example has no OUT shadow model")
    p_out = np.where(out, shadow_p, 0.0).sum(axis=0) / cnt
    return 0.5 * ((1 + a) * p_out + (1 - a))


def rmia_scores(
    target_p: np.ndarray,
    shadow_p: np.ndarray,
    keep: np.ndarray,
    population: np.ndarray,
    online: bool = True,
    a: float = 0.3,
    gamma: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """RMIA scores for every pool column; ``population`` indexes the z samples.

    Returns ``(scores, ratios)``: the score of column j is the fraction of population
    samples z (z ≠ j) with ratio_j / ratio_z > γ."""
    target_p = np.asarray(target_p, dtype=np.float64)
    shadow_p = np.asarray(shadow_p, dtype=np.float64)
    keep = np.asarray(keep, dtype=bool)
    _check(target_p, shadow_p, keep)
    population = np.asarray(population, dtype=np.int64)
    if population.size == 0:
        raise ValueError("RMIA needs at least one population sample")
    ref = _reference_prob(shadow_p, keep, online, a)
    ratio = np.maximum(target_p, _TINY) / np.maximum(ref, _TINY)
    rz = np.sort(ratio[population])
    scores = np.searchsorted(rz, ratio / gamma, side="left") / rz.size
    return scores, ratio
