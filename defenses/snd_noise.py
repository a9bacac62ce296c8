"""The dχ-privacy token noise of Split-and-Denoise (Mai et al.; seed 002, §3.3).

Per token embedding x ∈ R^d the client releases M(x) = x + z with z = l·v,
l ~ Gamma(shape d, scale 1/η) and v uniform on the unit sphere S^{d-1}. The density of z is

    p(z) = c · exp(−η‖z‖),   c = η^d Γ(d/2) / (2 π^{d/2} Γ(d)),

so M is η·dχ-private with dχ the Euclidean distance (Fernandes et al. 2019, Lemma 4):
p(M(x)=y)/p(M(x')=y) ≤ exp(η‖x − x'‖). The client then clips each noisy embedding to a
public, data-independent norm bound C (post-processing). Over inputs in the ball of
radius C the per-token pure ε is at most η·2C.

``variant="reference-code"`` reproduces the authors' public sampler (independent
Gamma(d, rate η) per coordinate times U(−1, 1)), whose noise norms are about √(d/3) larger.
It is a product law, not c·exp(−η‖z‖): it is **not** η-dχ-private in L2 at the stated η
and exists only to compare with the paper's η scale.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

VARIANTS = ("metric-dp", "reference-code")


def check_eta(eta: float) -> float:
    try:
        value = float(eta)
    except (TypeError, ValueError):
        raise ValueError(f"eta must be a positive number, got {eta!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"eta must be a positive finite number, got {eta!r}")
    return value


def check_clip(clip: float) -> float:
    try:
        value = float(clip)
    except (TypeError, ValueError):
        raise ValueError(f"clip norm C must be a positive number, got {clip!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"clip norm C must be a positive finite number, got {clip!r}")
    return value


def _check_dim(d: int) -> int:
    if int(d) != d or d < 1:
        raise ValueError(f"dimension must be an integer >= 1, got {d!r}")
    return int(d)


def dx_log_normaliser(d: int, eta: float) -> float:
    """log c for p(z) = c·exp(−η‖z‖) in R^d."""
    d, eta = _check_dim(d), check_eta(eta)
    return (
        d * math.log(eta) + gammaln(d / 2) - math.log(2) - (d / 2) * math.log(math.pi) - gammaln(d)
    )


def dx_logpdf(z: np.ndarray, eta: float) -> np.ndarray:
    """log p(z) per row of ``z`` (shape (n, d)); a 1-d array is one row."""
    z = np.atleast_2d(np.asarray(z, dtype=np.float64))
    return dx_log_normaliser(z.shape[1], eta) - eta * np.linalg.norm(z, axis=1)


def dx_entropy(d: int, eta: float) -> float:
    """Differential entropy of the noise in nats: E[−log p(z)] = η·E‖z‖ − log c = d − log c."""
    return _check_dim(d) - dx_log_normaliser(d, eta)


def sample_dx_noise(
    n: int, d: int, eta: float, rng: np.random.Generator, variant: str = "metric-dp"
) -> np.ndarray:
    """``n`` noise vectors in R^d (float64), shape (n, d)."""
    d, eta = _check_dim(d), check_eta(eta)
    if variant == "metric-dp":
        norms = rng.gamma(shape=d, scale=1.0 / eta, size=n)
        g = rng.standard_normal((n, d))
        g /= np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300)
        return g * norms[:, None]
    if variant == "reference-code":
        # NusIoraPrivacy/eaas-privacy sample_noise_Chi: per-coordinate Gamma(d, rate η)·U(−1, 1)
        return rng.gamma(shape=d, scale=1.0 / eta, size=(n, d)) * rng.uniform(-1, 1, (n, d))
    raise ValueError(f"unknown noise variant {variant!r}; allowed: {', '.join(VARIANTS)}")


def clip_rows(y: np.ndarray, clip: float) -> np.ndarray:
    """Scale every row with norm above C down to norm C (M′ of the paper's Eq. 3)."""
    clip = check_clip(clip)
    y = np.asarray(y)
    norms = np.linalg.norm(y.astype(np.float64), axis=-1, keepdims=True)
    scale = np.minimum(1.0, clip / np.maximum(norms, 1e-300))
    out = (y * scale).astype(y.dtype)
    # float rounding can leave a scaled row a hair above C: shrink those by one ulp steps
    over = np.linalg.norm(out.astype(np.float64), axis=-1) > clip
    while over.any():
        out[over] = np.nextafter(out[over], np.zeros_like(out[over]))
        over = np.linalg.norm(out.astype(np.float64), axis=-1) > clip
    return out


def privatize(
    x: np.ndarray,
    eta: float,
    clip: float | None,
    rng: np.random.Generator,
    variant: str = "metric-dp",
) -> tuple[np.ndarray, np.ndarray]:
    """Noise and clip token embeddings ``x`` (shape (n, d), float32).

    Returns ``(noisy, noise)``: ``noisy`` (float32) is what the client uploads, and
    ``noise = noisy − x`` recomputed *after* clipping in float64, which is exact for
    float32 inputs, so ``noisy − noise == x`` holds exactly in float64.
    ``clip=None`` skips clipping (the MI estimate of the paper uses unclipped noise).
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError("privatize needs a non-empty (n, d) batch of token embeddings")
    z = sample_dx_noise(x.shape[0], x.shape[1], eta, rng, variant)
    noisy = (x.astype(np.float64) + z).astype(np.float32)
    if clip is not None:
        noisy = clip_rows(noisy, clip)
    noise = noisy.astype(np.float64) - x.astype(np.float64)
    return noisy, noise


def implied_token_epsilon(eta: float, clip: float) -> float:
    """Per-token pure ε implied by η-dχ privacy over inputs of norm ≤ C: η · 2C."""
    return check_eta(eta) * 2.0 * check_clip(clip)


__all__ = [
    "VARIANTS",
    "check_clip",
    "check_eta",
    "clip_rows",
    "dx_entropy",
    "dx_log_normaliser",
    "dx_logpdf",
    "implied_token_epsilon",
    "privatize",
    "sample_dx_noise",
]
