"""Defense ``dp-attention``: the Gaussian sampling mechanism on the attention matrix.

Source: Gao, Song, Yang & Zhou, "Differentially Private Attention Computation" (theory
only; notes in ``shared/notes/seeds/dp_attention.md``, whose errata P1–P17 are cited
below). The paper privatises the symmetric Gram ("attention logit") matrix A = XXᵀ of
one attention input X ∈ R^{n×d} by releasing

    B = (1/k) Σ_{i≤k} g_i g_iᵀ,   g_i ~ N(0, A)   (Algorithm 2, Alabi et al. 2022),

i.e. B ~ Wishart_n(k, A)/k, and then the attention D(B)⁻¹f(B), f ∈ {exp, cosh}, as
post-processing. Theorem 4.1 makes B (ε, δ)-DP with respect to X under the β-close
neighbouring relation (Def 1.6): X and X′ differ in ONE feature column i, with
‖X_{*,i} − X′_{*,i}‖₂ ≤ β. That is the whole guarantee. It does not cover V, the residual
stream, other layers, or the training set (P14, P17), and the claims this module makes
say so.

Contents:

* samplers that agree in distribution: :func:`gaussian_sampling_mechanism` (``"explicit"``
  = Algorithm 2 literally, ``"wishart"`` = Cholesky + Bartlett decomposition, O(n³)
  whatever k is) and :func:`gaussian_sampling_from_factor` (the random-projection sketch
  B = (XΩ)(XΩ)ᵀ/k for A = XXᵀ);
* the theorem's constants: :func:`delta_cap` (both of the paper's variants, P1),
  :func:`rho` and :func:`k_min` (with the O(·) constant made explicit, P4),
  :func:`sensitivity_bound` (the corrected form √n·c/(1−c), P3), :func:`beta_max`;
* :func:`check_assumptions`, reporting exactly which of the theorem's conditions hold;
* the privacy loss of one release between two Gram matrices (exact draws, its mean) lives
  in :mod:`privacy_audit.defenses.dp_attention_privacy_loss`;
* :class:`DPSymmetricAttention`, a drop-in self-attention module for BERT-family encoders
  (shared Q = K projection, row and column clipping, ridge mode, masks as
  post-processing, differentiable), and :class:`DPAttention`, the defense adapter.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from privacy_audit.defenses.base import Defense, Examples, PrivacyClaim, TrainingReport

#: Constant of ρ (the paper's O(·), P4). As k → ∞, √k(A^{-1/2}BA^{-1/2} − I) tends to a
#: symmetric Gaussian matrix whose squared Frobenius norm is 2·χ²_{n(n+1)/2}, so the
#: (1 − γ)-quantile of the error is √(2·χ²_{n(n+1)/2}(1 − γ)/k). Its largest ratio to
#: √((n² + ln 1/γ)/k) over n ≤ 128 and γ ∈ [1e-9, 0.1] is 1.905 (n = 2, γ = 1e-9; 1.62 at
#: γ = 0.01); finite k measures below the limit. 2.0 covers it with a margin; the
#: empirical quantiles are checked against it in ``tests/defenses/test_dp_attention.py``.
RHO_CONSTANT = 2.0

#: The theorem's open range for r, ε and δ (Theorem 4.1: r, ε, δ ∈ (0, 0.1)).
THEOREM_RANGE = (0.0, 0.1)

METHODS = ("explicit", "wishart")
DELTA_VARIANTS = ("thm4.1", "def5.5")
FUNCTIONS = ("exp", "cosh")
MODES = ("paper", "ridge")

_EXPLICIT_CHUNK = 1 << 15


# ---------------------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------------------


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        if isinstance(k, float) and k.is_integer():
            k = int(k)
        else:
            raise ValueError(
                f"k (number of Gaussian samples) must be a positive integer, got {k!r}"
            )
    if int(k) <= 0:
        raise ValueError(f"k (number of Gaussian samples) must be a positive integer, got {k!r}")
    return int(k)


def _check_unit_interval(name: str, value: Any, low: float = 0.0, high: float = 1.0) -> float:
    v = float(value)
    if not (math.isfinite(v) and low < v < high):
        raise ValueError(f"{name} must be in ({low:g}, {high:g}), got {value!r}")
    return v


def check_psd_input(A: Any, what: str = "A") -> torch.Tensor:
    """A as a float64 tensor; raises ValueError for a non-square, non-symmetric, non-finite
    or non-positive-definite matrix (the mechanism needs A invertible, P15)."""
    t = torch.as_tensor(A)
    if not torch.is_floating_point(t):
        t = t.double()
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{what} must be a square matrix, got shape {tuple(t.shape)}")
    if t.shape[-1] == 0:
        raise ValueError(f"{what} must be at least 1×1")
    if not torch.isfinite(t).all():
        raise ValueError(f"{what} contains NaN or infinity")
    d = t.detach().double()
    scale = d.abs().amax().clamp_min(1e-300)
    if (d - d.transpose(-1, -2)).abs().amax() > 1e-8 * scale:
        raise ValueError(f"{what} must be symmetric (it is a covariance / Gram matrix)")
    _, info = torch.linalg.cholesky_ex(d)
    if (info != 0).any():
        raise ValueError(
            f"{what} is not positive definite (a Cholesky factorisation failed); the Gaussian "
            "sampling mechanism needs an invertible PSD input (use ridge mode or a larger eta)"
        )
    return t


def validate_theorem_range(force: bool = False, **values: float) -> list[str]:
    """Check that each named value (``r``, ``eps``, ``delta``) lies in the theorem's range
    (0, 0.1). Outside it raises ValueError naming the value, unless ``force`` is set, in
    which case it warns with the reason and returns the reasons (the claim is then
    heuristic)."""
    reasons = []
    lo, hi = THEOREM_RANGE
    for name, value in values.items():
        v = float(value)
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not lo < v < hi:
            reasons.append(
                f"{name}={v:g} is outside Theorem 4.1's range ({lo:g}, {hi:g}), so the "
                "theorem does not apply and the claim is heuristic"
            )
    if reasons and not force:
        raise ValueError(reasons[0] + " (set force = true to run anyway)")
    for reason in reasons:
        warnings.warn(reason, stacklevel=2)
    return reasons


# ---------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------


def numpy_rng(generator: torch.Generator | None) -> np.random.Generator:
    """A numpy generator seeded from ``generator`` (or torch's global RNG), so every
    sampler is reproducible from one torch seed."""
    seed = torch.randint(0, 2**62, (1,), generator=generator).item()
    return np.random.default_rng(int(seed))


def bartlett_factor(
    n: int,
    k: int,
    batch_shape: tuple[int, ...] = (),
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Lower-triangular L with L Lᵀ ~ Wishart_n(k, I)/k (Bartlett decomposition):
    L_jj = √χ²_{k−j} (j = 0..n−1), L_ij ~ N(0, 1) for i > j, all scaled by 1/√k.
    Needs k ≥ n (below that the Wishart matrix is singular)."""
    k = check_k(k)
    if k < n:
        raise ValueError(f"the Bartlett sampler needs k >= n, got k={k}, n={n}")
    rng = numpy_rng(generator)
    df = k - np.arange(n)
    diag = np.sqrt(rng.chisquare(df, size=(*batch_shape, n)))
    low = torch.randn((*batch_shape, n, n), generator=generator, dtype=torch.float64)
    low = torch.tril(low, diagonal=-1)
    L = low + torch.diag_embed(torch.from_numpy(diag))
    return (L / math.sqrt(k)).to(dtype=dtype, device=device)


def gaussian_sampling_mechanism(
    A: Any, k: int, generator: torch.Generator | None = None, method: str = "wishart"
) -> torch.Tensor:
    """The Gaussian sampling mechanism (Algorithm 2): B = (1/k) Σ g_i g_iᵀ, g_i ~ N(0, A).

    ``method="explicit"`` draws the k Gaussians (O(n²k)); ``method="wishart"`` samples
    B = C W Cᵀ with C = chol(A) and W = LLᵀ ~ Wishart(k, I)/k by the Bartlett
    decomposition (O(n³) whatever k is; for k < n it falls back to explicit draws). Both
    have exactly the law Wishart_n(k, A)/k. A may carry leading batch dimensions;
    gradients flow through A (via its Cholesky factor). Raises ValueError for k ≤ 0 and
    for a non-square, non-symmetric or non-positive-definite A.
    """
    k = check_k(k)
    if method not in METHODS:
        raise ValueError(f"unknown sampling method {method!r}; allowed: {', '.join(METHODS)}")
    A = check_psd_input(A)
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    C = torch.linalg.cholesky(A)
    if method == "wishart" and k >= n:
        L = bartlett_factor(n, k, batch, generator, A.dtype, A.device)
        CL = C @ L
        return CL @ CL.transpose(-1, -2)
    B = torch.zeros_like(A)
    done = 0
    while done < k:
        m = min(_EXPLICIT_CHUNK, k - done)
        G = torch.randn((*batch, n, m), generator=generator, dtype=torch.float64).to(A)
        G = C @ G
        B = B + G @ G.transpose(-1, -2)
        done += m
    return B / k


def gaussian_sampling_from_factor(
    X: Any, k: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """The random-projection sketch of the mechanism for A = XXᵀ: Y = XΩ/√k with
    Ω ∈ R^{d×k} i.i.d. N(0, 1), B = YYᵀ. The columns of XΩ are N(0, XXᵀ), so B has the
    law Wishart_n(k, XXᵀ)/k, the same as :func:`gaussian_sampling_mechanism` on XXᵀ
    (costs O(ndk), chunked over k). Raises ValueError for k ≤ 0 or a rank-deficient X
    (XXᵀ must be invertible)."""
    k = check_k(k)
    X = torch.as_tensor(X)
    if not torch.is_floating_point(X):
        X = X.double()
    if X.ndim != 2:
        raise ValueError(f"X must be a matrix (n × d), got shape {tuple(X.shape)}")
    check_psd_input(X.detach().double() @ X.detach().double().T, "XXᵀ")
    n, d = X.shape
    B = torch.zeros(n, n, dtype=X.dtype, device=X.device)
    done = 0
    while done < k:
        m = min(_EXPLICIT_CHUNK, k - done)
        omega = torch.randn((d, m), generator=generator, dtype=torch.float64).to(X)
        Y = X @ omega
        B = B + Y @ Y.T
        done += m
    return B / k


def gram(X: Any) -> torch.Tensor:
    X = torch.as_tensor(X)
    return X @ X.transpose(-1, -2)


def attention_from_logits(
    B: torch.Tensor, f: str = "exp", keep: torch.Tensor | None = None, logit_scale: float = 1.0
) -> torch.Tensor:
    """D(B)⁻¹ f(B) row-normalised, with ``keep`` (bool, broadcastable; True = attend)
    applied as post-processing. For exp the row max is subtracted first (same result)."""
    if f not in FUNCTIONS:
        raise ValueError(f"unknown attention function {f!r}; allowed: {', '.join(FUNCTIONS)}")
    z = B * logit_scale
    if f == "exp":
        if keep is not None:
            z = z.masked_fill(~keep, float("-inf"))
        z = z - z.amax(dim=-1, keepdim=True).clamp_min(-1e30).detach()
        w = torch.exp(z)
    else:
        w = torch.cosh(z)
        if keep is not None:
            w = w * keep.to(w.dtype)
    total = w.sum(dim=-1, keepdim=True)
    return w / total.clamp_min(1e-300)


# ---------------------------------------------------------------------------------------
# The theorem's constants
# ---------------------------------------------------------------------------------------


def delta_cap(eps: float, delta: float, k: int, variant: str = "thm4.1") -> float:
    """The cap Δ on the sensitivity (P1). ``"thm4.1"``: 0.1·min{ε/√(k ln 1/δ), ε/ln(1/δ)}
    (Theorems 1.7/4.1; the smaller, default); ``"def5.5"``: min{ε/√(8k ln 1/δ),
    ε/(8 ln 1/δ)} (Definition 5.5, what the privacy proof uses)."""
    eps = _check_unit_interval("eps", eps, 0.0, math.inf)
    delta = _check_unit_interval("delta", delta)
    k = check_k(k)
    log = math.log(1 / delta)
    if variant == "thm4.1":
        return 0.1 * min(eps / math.sqrt(k * log), eps / log)
    if variant == "def5.5":
        return min(eps / math.sqrt(8 * k * log), eps / (8 * log))
    raise ValueError(f"unknown Δ variant {variant!r}; allowed: {', '.join(DELTA_VARIANTS)}")


def rho(n: int, k: int, gamma: float, constant: float = RHO_CONSTANT) -> float:
    """ρ = C·(√(m/k) + m/k), m = n² + ln(1/γ): w.p. ≥ 1 − γ, ‖A^{-1/2}BA^{-1/2} − I‖_F ≤ ρ
    (Theorem 3.1; the paper's constant is unspecified, P4; C is calibrated here)."""
    k = check_k(k)
    gamma = _check_unit_interval("gamma", gamma)
    m = n * n + math.log(1 / gamma)
    return constant * (math.sqrt(m / k) + m / k)


def k_min(n: int, eps: float, gamma: float, constant: float = RHO_CONSTANT) -> int:
    """Smallest k with ρ(n, k, γ) < 0.1·ε (utility condition of Theorem 4.1):
    s = (−1 + √(1 + 0.4ε/C))/2 solves C(s + s²) = 0.1ε, k = ⌊m/s²⌋ + 1."""
    eps = _check_unit_interval("eps", eps, 0.0, math.inf)
    gamma = _check_unit_interval("gamma", gamma)
    m = n * n + math.log(1 / gamma)
    s = (-1 + math.sqrt(1 + 0.4 * eps / constant)) / 2
    k = max(1, math.floor(m / (s * s)) + 1)
    while rho(n, k, gamma, constant) >= 0.1 * eps:  # guard the closed form's rounding
        k += 1
    return k


def sensitivity_bound(
    n: int, alpha: float, beta: float, eta: float, corrected: bool = True
) -> float:
    """Bound on ‖A^{1/2}Ã⁻¹A^{1/2} − I‖_F over β-close neighbours (both orders).

    With c = 2αβ/η, Lemma D.1 gives (1 − c)A ⪯ Ã ⪯ (1 + c)A. The paper's bound √n·c
    (Lemma 5.11) is for A^{-1/2}ÃA^{-1/2}; the mechanism needs the inverse, whose
    eigenvalues deviate by up to c/(1 − c), hence the corrected √n·c/(1 − c) (P3).
    Infinite when c ≥ 1."""
    if min(alpha, eta) <= 0 or beta < 0:
        raise ValueError("alpha and eta must be > 0 and beta >= 0")
    c = 2 * alpha * beta / eta
    if not corrected:
        return math.sqrt(n) * c
    return math.inf if c >= 1 else math.sqrt(n) * c / (1 - c)


def beta_max(
    n: int,
    alpha: float,
    eta: float,
    eps: float,
    delta: float,
    k: int,
    variant: str = "thm4.1",
    corrected: bool = True,
) -> float:
    """Largest β for which the sensitivity condition (bound < Δ) can hold: the inverse of
    :func:`sensitivity_bound` at Δ = :func:`delta_cap`. Corrected: √n·c/(1 − c) < Δ ⟺
    c < Δ/(√n + Δ), β = c·η/(2α); paper form: c < Δ/√n. Returned a hair below the
    boundary (the condition is strict)."""
    cap = delta_cap(eps, delta, k, variant)
    root = math.sqrt(n)
    c = cap / (root + cap) if corrected else cap / root
    return c * eta / (2 * alpha) * (1 - 1e-9)


def measured_sensitivity(A: Any, A_tilde: Any) -> tuple[float, float]:
    """‖A^{1/2}Ã⁻¹A^{1/2} − I‖_F and the same with A, Ã swapped (generalised eigenvalues)."""
    from scipy.linalg import eigh

    a = check_psd_input(A).detach().double().numpy()
    b = check_psd_input(A_tilde, "A_tilde").detach().double().numpy()
    lam = eigh(a, b, eigvals_only=True)  # eigenvalues of Ã⁻¹A = those of A^{1/2}Ã⁻¹A^{1/2}
    return float(np.sqrt(np.sum((lam - 1) ** 2))), float(np.sqrt(np.sum((1 / lam - 1) ** 2)))


def attention_error_bound_paper(eps: float, r: float) -> float:
    """Theorem 4.1 Part 1: ‖D(A)⁻¹f(A) − D(B)⁻¹f(B)‖_∞ ≤ 4(1 + ε + 2r)r (entrywise max)."""
    return 4 * (1 + eps + 2 * r) * r


def attention_error_bound_relative(P_A: Any, P_B: Any, eps: float, r: float) -> np.ndarray:
    """The tighter entrywise bound the paper's Lemma B.4 proof yields before dropping a
    factor (P6): |P_A − P_B|_ij ≤ c·r·((P_A)_ij + (P_B)_ij), c = 2 + 2ε + 4r."""
    c = 2 + 2 * eps + 4 * r
    return c * r * (np.asarray(P_A) + np.asarray(P_B))


# ---------------------------------------------------------------------------------------
# Assumption checker
# ---------------------------------------------------------------------------------------


@dataclass
class Condition:
    name: str
    holds: bool
    value: float | None
    requirement: str


@dataclass
class AssumptionReport:
    """Which of Theorem 4.1's conditions hold for one input and parameter set."""

    conditions: list[Condition] = field(default_factory=list)

    @property
    def all_hold(self) -> bool:
        return bool(self.conditions) and all(c.holds for c in self.conditions)

    def failed(self) -> list[str]:
        return [c.name for c in self.conditions if not c.holds]

    def to_dict(self) -> dict[str, Any]:
        return {"all_hold": self.all_hold, "conditions": [asdict(c) for c in self.conditions]}

    def summary(self) -> str:
        if self.all_hold:
            return "all of Theorem 4.1's conditions hold"
        return "failed: " + "; ".join(
            f"{c.name} ({c.requirement}, got {c.value:.4g})"
            if c.value is not None
            else f"{c.name} ({c.requirement})"
            for c in self.conditions
            if not c.holds
        )


def check_parameters(
    *,
    n: int,
    d: int,
    r: float,
    alpha: float,
    eta: float,
    beta: float,
    eps: float,
    delta: float,
    k: int,
    gamma: float,
    rho_constant: float = RHO_CONSTANT,
    variant: str = "thm4.1",
) -> AssumptionReport:
    """The data-independent conditions of Theorem 4.1 for inputs with n rows and d columns."""
    lo, hi = THEOREM_RANGE
    k = check_k(k)
    cap = delta_cap(eps, delta, k, variant) if 0 < delta < 1 and eps > 0 else math.nan
    sens = sensitivity_bound(n, alpha, beta, eta, corrected=True)
    rh = rho(n, k, gamma, rho_constant)
    conds = [
        Condition("d >= n", d >= n, float(d), f"d >= n = {n}"),
        Condition("r in (0, 0.1)", lo < r < hi, r, "0 < r < 0.1"),
        Condition("eps in (0, 0.1)", lo < eps < hi, eps, "0 < eps < 0.1"),
        Condition("delta in (0, 0.1)", lo < delta < hi, delta, "0 < delta < 0.1"),
        Condition("eta < r", 0 < eta < r, eta, f"0 < eta < r = {r:g}"),
        Condition("rho < 0.1 eps", rh < 0.1 * eps, rh, f"rho < 0.1 eps = {0.1 * eps:.4g}"),
        Condition(
            "sensitivity < Delta",
            sens < cap,
            sens,
            f"sqrt(n)c/(1-c) < Delta = {cap:.4g} (c = 2 alpha beta/eta)",
        ),
    ]
    return AssumptionReport(conds)


def check_assumptions(
    X: Any,
    *,
    r: float,
    alpha: float,
    eta: float,
    beta: float,
    eps: float,
    delta: float,
    k: int,
    gamma: float = 0.01,
    rho_constant: float = RHO_CONSTANT,
    variant: str = "thm4.1",
    tol: float = 1e-9,
) -> AssumptionReport:
    """Exactly which of Theorem 4.1's conditions hold for the input X (n × d) and the
    parameters: d ≥ n; r, ε, δ ∈ (0, 0.1); max_i ‖x_i‖² ≤ r (‖A‖_∞ ≤ r, P5);
    λ_min(XXᵀ) ≥ η with η < r; every column norm ≤ α; ρ < 0.1ε; sensitivity
    √n·c/(1 − c) < Δ. Never raises for a failing condition: it reports it."""
    X = torch.as_tensor(X).detach().double()
    if X.ndim != 2:
        raise ValueError(f"X must be a matrix (n × d), got shape {tuple(X.shape)}")
    n, d = X.shape
    report = check_parameters(
        n=n,
        d=d,
        r=r,
        alpha=alpha,
        eta=eta,
        beta=beta,
        eps=eps,
        delta=delta,
        k=k,
        gamma=gamma,
        rho_constant=rho_constant,
        variant=variant,
    )
    row = float((X * X).sum(dim=1).max())
    col = float(X.norm(dim=0).max())
    lam = float(torch.linalg.eigvalsh(X @ X.T).min())
    report.conditions[1:1] = [
        Condition("max row norm^2 <= r", row <= r * (1 + tol), row, f"max_i |x_i|^2 <= r = {r:g}"),
        Condition("lambda_min(XX^T) >= eta", lam >= eta * (1 - tol), lam, f">= eta = {eta:g}"),
        Condition("column norms <= alpha", col <= alpha * (1 + tol), col, f"<= alpha = {alpha:g}"),
    ]
    return report


# ---------------------------------------------------------------------------------------
# Drop-in attention module
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DPAttentionConfig:
    """Public constants of one DP attention layer (never estimated from private data, P16).

    ``max_tokens`` bounds n (the padded sequence length); k, ρ, Δ and β_max are computed
    for it, which covers every shorter input. ``k = 0`` sets k = k_min(max_tokens).
    ``beta = 0`` sets β = β_max (the largest neighbour radius the theorem covers)."""

    eps: float = 0.09
    delta: float = 1e-5
    r: float = 0.09
    gamma: float = 0.01
    k: int = 0
    alpha: float = 0.3
    eta: float = 0.01
    beta: float = 0.0
    mode: str = "ridge"
    f: str = "exp"
    logit_scale: float = 1.0
    max_tokens: int = 64
    rho_constant: float = RHO_CONSTANT
    variant: str = "thm4.1"
    strict: bool = False
    force: bool = False
    sampling: bool = True  # False: B = A, the clipped non-private ablation (no privacy)

    def validate(self) -> list[str]:
        if self.mode not in MODES:
            raise ValueError(
                f"unknown dp-attention mode {self.mode!r}; allowed: {', '.join(MODES)}"
            )
        if self.f not in FUNCTIONS:
            raise ValueError(f"unknown attention function {self.f!r}; allowed: exp, cosh")
        if self.variant not in DELTA_VARIANTS:
            raise ValueError(f"unknown Δ variant {self.variant!r}; allowed: thm4.1, def5.5")
        if isinstance(self.k, bool) or int(self.k) != self.k or self.k < 0:
            raise ValueError(f"k must be a positive integer (or 0 for k_min), got {self.k!r}")
        for name in ("alpha", "eta", "logit_scale", "rho_constant"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta!r}")
        if int(self.max_tokens) < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens!r}")
        _check_unit_interval("gamma", self.gamma)
        reasons = validate_theorem_range(self.force, r=self.r, eps=self.eps, delta=self.delta)
        if self.mode == "ridge" and self.eta >= self.r:
            raise ValueError(f"eta ({self.eta:g}) must be < r ({self.r:g})")
        return reasons

    @property
    def n(self) -> int:
        return int(self.max_tokens)

    @property
    def samples(self) -> int:
        return int(self.k) if self.k else k_min(self.n, self.eps, self.gamma, self.rho_constant)

    @property
    def delta_cap(self) -> float:
        return delta_cap(self.eps, self.delta, self.samples, self.variant)

    @property
    def beta_max(self) -> float:
        return beta_max(
            self.n, self.alpha, self.eta, self.eps, self.delta, self.samples, self.variant
        )

    @property
    def radius(self) -> float:
        return self.beta if self.beta > 0 else self.beta_max

    def parameter_report(self, d_head: int) -> AssumptionReport:
        """Data-independent conditions; in ridge mode the theorem is applied to the
        augmented input [X, √η·I] (d_head + n columns, λ_min ≥ η by construction)."""
        d = d_head + self.n if self.mode == "ridge" else d_head
        rep = check_parameters(
            n=self.n,
            d=d,
            r=self.r,
            alpha=self.alpha,
            eta=self.eta,
            beta=self.radius,
            eps=self.eps,
            delta=self.delta,
            k=self.samples,
            gamma=self.gamma,
            rho_constant=self.rho_constant,
            variant=self.variant,
        )
        if self.mode == "ridge":
            ok = math.sqrt(self.eta) <= self.alpha
            rep.conditions.append(
                Condition("ridge columns <= alpha", ok, math.sqrt(self.eta), "sqrt(eta) <= alpha")
            )
        return rep


def _keep_mask(attention_mask: torch.Tensor | None, shape: tuple[int, ...]) -> torch.Tensor | None:
    """A boolean keep-mask (True = attend) from a Hugging Face attention mask: boolean, or
    additive float (0 = attend, very negative = masked)."""
    if attention_mask is None:
        return None
    m = attention_mask
    if m.dtype != torch.bool:
        m = m > torch.finfo(m.dtype).min / 2 if torch.is_floating_point(m) else m != 0
    return m.expand(shape) if m.shape != shape else m


class DPSymmetricAttention(nn.Module):
    """Drop-in self-attention for BERT-family encoders releasing DP attention.

    Per sequence and head: X = H·W_qk (one shared Q = K projection, the paper's
    symmetric case); rows clipped to ‖x_i‖² ≤ r (or r − η in ridge mode) so ‖A‖_∞ ≤ r;
    columns clipped to norm ≤ α; in ridge mode the public columns √η·I are appended,
    so A = XXᵀ + ηI ⪰ ηI and d ≥ n hold by construction; B = C·W·Cᵀ with C = chol(A) and
    W ~ Wishart(k, I)/k (gradients flow through C); P = D(B)⁻¹f(B) with the attention
    mask applied to P as post-processing; output P·V. V is computed from H without noise.

    Padding rows are zeroed before the mechanism, so the block of B over the real tokens
    has exactly the law of the mechanism on the real tokens alone (Wishart marginals).
    ``stats`` counts releases and those whose input failed a data condition (paper mode).
    """

    def __init__(
        self, hidden_size: int, num_heads: int, config: DPAttentionConfig, dropout: float = 0.0
    ):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden size {hidden_size} is not a multiple of {num_heads} heads")
        self.reasons = config.validate()
        self.cfg = config
        self.num_attention_heads = num_heads
        self.attention_head_size = hidden_size // num_heads
        self.all_head_size = hidden_size
        self.qk = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.k = config.samples
        self.generator: torch.Generator | None = None
        self.stats = {"releases": 0, "data_violations": 0}
        self.report = config.parameter_report(self.attention_head_size)
        if config.strict and not self.report.all_hold:
            raise ValueError(f"dp-attention (strict): {self.report.summary()}")

    @classmethod
    def from_bert(cls, old: nn.Module, config: DPAttentionConfig) -> DPSymmetricAttention:
        """Replace a BertSelfAttention: Q = K initialised from the old query, V copied."""
        heads = old.num_attention_heads
        hidden = old.query.in_features
        new = cls(hidden, heads, config, dropout=float(old.dropout.p))
        with torch.no_grad():
            new.qk.weight.copy_(old.query.weight)
            new.qk.bias.copy_(old.query.bias)
            new.value.weight.copy_(old.value.weight)
            new.value.bias.copy_(old.value.bias)
        return new.to(old.query.weight.device)

    def clipped_input(self, hidden_states: torch.Tensor, keep_rows: torch.Tensor | None = None):
        """X per head after the Q = K projection, padding zeroed, row and column clipping:
        shape (batch, heads, n, d_head), float64."""
        b, n, _ = hidden_states.shape
        x = self.qk(hidden_states).view(b, n, self.num_attention_heads, -1).transpose(1, 2)
        x = x.double()
        if keep_rows is not None:
            x = x * keep_rows[:, None, :, None].to(x.dtype)
        cfg = self.cfg
        row_cap = cfg.r - cfg.eta if cfg.mode == "ridge" else cfg.r
        row = x.norm(dim=-1, keepdim=True)
        x = x * torch.clamp(math.sqrt(row_cap) / (row + 1e-30), max=1.0)
        col = x.norm(dim=-2, keepdim=True)
        return x * torch.clamp(cfg.alpha / (col + 1e-30), max=1.0)

    def release(self, x: torch.Tensor) -> torch.Tensor:
        """B for clipped inputs x (…, n, d): the Gaussian sampling mechanism on XXᵀ (+ηI)."""
        cfg = self.cfg
        n = x.shape[-2]
        if n > cfg.n:
            raise ValueError(
                f"sequence of {n} tokens exceeds dp-attention max_tokens={cfg.n} (k and "
                "beta_max were computed for it)"
            )
        A = x @ x.transpose(-1, -2)
        if cfg.mode == "ridge":
            A = A + cfg.eta * torch.eye(n, dtype=A.dtype, device=A.device)
        else:
            bad = x.shape[-1] < n
            if not bad:
                lam = torch.linalg.eigvalsh(A.detach()).amin()
                bad = bool(lam < cfg.eta)
            if bad:
                self.stats["data_violations"] += 1
                msg = "dp-attention (paper mode): input has d < n or lambda_min(XX^T) < eta"
                if cfg.strict:
                    raise ValueError(msg + "; use mode = 'ridge'")
                A = A + 1e-9 * torch.eye(n, dtype=A.dtype, device=A.device)
        if not cfg.sampling:
            return A
        C = torch.linalg.cholesky(A)
        L = bartlett_factor(n, self.k, tuple(A.shape[:-2]), self.generator, A.dtype, A.device)
        CL = C @ L
        self.stats["releases"] += int(np.prod(A.shape[:-2]))
        return CL @ CL.transpose(-1, -2)

    def forward(self, hidden_states, attention_mask=None, *args, **kwargs):
        b, n, _ = hidden_states.shape
        shape = (b, self.num_attention_heads, n, n)
        keep = _keep_mask(attention_mask, shape) if attention_mask is not None else None
        # keys no query attends to (padding) are zeroed before the mechanism
        keep_rows = None if keep is None else keep[:, 0].any(dim=-2)
        x = self.clipped_input(hidden_states, keep_rows)
        B = self.release(x)
        P = attention_from_logits(B, self.cfg.f, keep, self.cfg.logit_scale)
        P = self.dropout(P.to(hidden_states.dtype))
        v = self.value(hidden_states).view(b, n, self.num_attention_heads, -1).transpose(1, 2)
        out = (P @ v).transpose(1, 2).reshape(b, n, self.all_head_size).contiguous()
        return out, P


def encoder_layers(model: nn.Module) -> list[nn.Module]:
    """The encoder layers of a BERT-family model (``model.base_model.encoder.layer``)."""
    base = getattr(model, "base_model", model)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if layers is None or not all(hasattr(lyr, "attention") for lyr in layers):
        raise ValueError("dp-attention needs a BERT-family encoder (encoder.layer[i].attention)")
    return list(layers)


def swap_attention(model: nn.Module, layers: list[int], config: DPAttentionConfig) -> list[int]:
    """Replace the self-attention of the chosen encoder layers by DPSymmetricAttention;
    returns the layer indices swapped. Negative indices count from the last layer."""
    all_layers = encoder_layers(model)
    chosen = []
    for i in layers:
        j = i + len(all_layers) if i < 0 else i
        if not 0 <= j < len(all_layers):
            raise ValueError(
                f"dp-attention layer {i} does not exist; the encoder has {len(all_layers)} layers"
            )
        chosen.append(j)
    for j in sorted(set(chosen)):
        att = all_layers[j].attention
        att.self = DPSymmetricAttention.from_bert(att.self, config)
    return sorted(set(chosen))


def dp_modules(model: nn.Module) -> list[DPSymmetricAttention]:
    return [m for m in model.modules() if isinstance(m, DPSymmetricAttention)]


# ---------------------------------------------------------------------------------------
# Defense adapter
# ---------------------------------------------------------------------------------------

PROTECTED = (
    "one feature column of one head's clipped Q=K input X (n x d_head, after the shared "
    "projection, row and column clipping) of one swapped layer, in one forward pass, changed "
    "by at most beta (the paper's beta-close neighbours, Def 1.6)"
)
NOT_PROTECTED = (
    "V and the layer output P·V (computed from the un-noised input)",
    "the residual stream and every layer that is not swapped",
    "the composition over heads, swapped layers and repeated forward passes",
    "the training set and the weights (training is not DP; membership is not covered)",
    "tokens, sequences and users (a token swap or a removed feature is far beyond beta)",
)


class DPAttention(Defense):
    name = "dp-attention"
    description = (
        "Gaussian sampling mechanism on the symmetric attention matrix (Gao et al.): "
        "input-level DP of one layer's attention for beta-close feature columns only."
    )
    PARAMS = {
        "epsilon": ((int, float), 0.09),
        "delta": ((int, float), 1e-5),
        "r": ((int, float), 0.09),
        "gamma": ((int, float), 0.01),
        "k": (int, 0),
        "alpha": ((int, float), 0.3),
        "eta": ((int, float), 0.01),
        "beta": ((int, float), 0.0),
        "mode": (str, "ridge"),
        "f": (str, "exp"),
        "logit_scale": ((int, float), 1.0),
        "layers": (list, [0]),
        "strict": (bool, False),
        "force": (bool, False),
        "sampling": (bool, True),
    }

    def config(self, max_tokens: int) -> DPAttentionConfig:
        p = self.params
        return DPAttentionConfig(
            eps=float(p["epsilon"]),
            delta=float(p["delta"]),
            r=float(p["r"]),
            gamma=float(p["gamma"]),
            k=int(p["k"]),
            alpha=float(p["alpha"]),
            eta=float(p["eta"]),
            beta=float(p["beta"]),
            mode=p["mode"],
            f=p["f"],
            logit_scale=float(p["logit_scale"]),
            max_tokens=int(max_tokens),
            strict=bool(p["strict"]),
            force=bool(p["force"]),
            sampling=bool(p["sampling"]),
        )

    def validate(self) -> None:
        layers = self.params["layers"]
        if not layers or not all(isinstance(i, int) and not isinstance(i, bool) for i in layers):
            raise ValueError(
                f"dp-attention layers must be a non-empty list of integers, got {layers!r}"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.config(8).validate()

    def claim(
        self,
        cfg: DPAttentionConfig,
        d_head: int,
        heads: int,
        layers: list[int],
        stats: dict[str, int],
        forced: list[str] | None = None,
    ) -> PrivacyClaim:
        """The honest claim: ``proven`` only when every condition of the checker holds
        (parameters, and no data violation seen in any release), else ``heuristic``."""
        rep = cfg.parameter_report(d_head)
        proven = rep.all_hold and stats["data_violations"] == 0 and not forced
        status = "proven" if proven else "heuristic"
        note = (
            f"Gaussian sampling mechanism (Gao et al., Thm 4.1): k={cfg.samples:.4g}, "
            f"Delta={cfg.delta_cap:.3g}, beta={cfg.radius:.3g} (beta_max={cfg.beta_max:.3g}), "
            f"r={cfg.r:g}, alpha={cfg.alpha:g}, eta={cfg.eta:g}, mode={cfg.mode}. Protects "
            + PROTECTED
            + ". Not protected: "
            + "; ".join(NOT_PROTECTED)
            + ". Status: "
            + (status if proven else f"heuristic ({rep.summary()})")
            + "."
        )
        details = {
            "status": status,
            "protected": PROTECTED,
            "not_protected": list(NOT_PROTECTED),
            "k": cfg.samples,
            "rho": rho(cfg.n, cfg.samples, cfg.gamma, cfg.rho_constant),
            "rho_constant": cfg.rho_constant,
            "delta_cap": cfg.delta_cap,
            "delta_cap_variant": cfg.variant,
            "beta": cfg.radius,
            "beta_max": cfg.beta_max,
            "sensitivity_bound": sensitivity_bound(cfg.n, cfg.alpha, cfg.radius, cfg.eta),
            "alpha": cfg.alpha,
            "eta": cfg.eta,
            "r": cfg.r,
            "max_tokens": cfg.n,
            "mode": cfg.mode,
            "f": cfg.f,
            "logit_scale": cfg.logit_scale,
            "utility_bound_paper": attention_error_bound_paper(cfg.eps, cfg.r),
            "layers": layers,
            "heads_per_layer": heads,
            "releases": stats["releases"],
            "data_violations": stats["data_violations"],
            "assumptions": rep.to_dict(),
        }
        return PrivacyClaim(
            epsilon=cfg.eps,
            delta=cfg.delta,
            unit=None,
            notion="central-dp",
            accountant=None,
            proven=proven,
            note=note,
            details=details,
        )

    def fit(self, target, train: Examples, training, seed: int):
        from privacy_audit.defenses.gradient_mechanism import (
            GaussianGradientMechanism,
            SamplingSchedule,
        )
        from privacy_audit.targets.classifier import (
            ClassifierRelease,
            make_loader,
            train_loop,
        )

        cfg = self.config(training.max_length)
        forced = cfg.validate()
        model, tokenizer = target.build(seed)
        layers = swap_attention(model, list(self.params["layers"]), cfg)
        mods = dp_modules(model)
        gen = torch.Generator().manual_seed(seed + 7919)
        for m in mods:
            m.generator = gen
        torch.manual_seed(seed)
        loader = make_loader(tokenizer, train, training, seed)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=training.learning_rate, weight_decay=training.weight_decay
        )
        info = train_loop(model, optimizer, loader, training, desc="train dp-attention")
        stats = {
            "releases": sum(m.stats["releases"] for m in mods),
            "data_violations": sum(m.stats["data_violations"] for m in mods),
        }
        claim = self.claim(
            cfg, mods[0].attention_head_size, mods[0].num_attention_heads, layers, stats, forced
        )
        if not cfg.sampling:
            claim = PrivacyClaim.none(
                "Ablation: the same clipped symmetric attention with B = A (no Gaussian "
                "sampling), no privacy; separates the utility cost of clipping from sampling."
            )
        info.update(
            dp_attention_layers=layers,
            dp_attention_k=cfg.samples,
            dp_attention_beta_max=cfg.beta_max,
            dp_attention_releases_in_training=stats["releases"],
            dp_attention_status=claim.details.get("status", "no sampling (ablation)"),
        )
        schedule = SamplingSchedule(
            min(1.0, training.batch_size / len(train)), int(info["steps"]), training.epochs
        )
        release = ClassifierRelease(
            model,
            tokenizer,
            training.max_length,
            claim,
            target.label_names,
            training.device,
            gradient_mechanism=GaussianGradientMechanism(None),
            schedule=schedule,
        )
        if cfg.sampling:
            release.attention_mechanism = AttentionMechanismView(model, tokenizer, cfg, layers[0])
        return release, TrainingReport(info)


class AttentionMechanismView:
    """White-box view of a dp-attention release for the attention LRT: the clipped
    mechanism input X of a layer and head for a text, and the mechanism itself."""

    def __init__(self, model, tokenizer, cfg: DPAttentionConfig, layer: int):
        self.model = model
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.layer = layer

    @torch.no_grad()
    def clipped_inputs(self, text: str, head: int = 0) -> np.ndarray:
        """X (n × d_head) entering the mechanism at ``layer``/``head`` for ``text``."""
        from privacy_audit.targets.classifier import encode, forward_kwargs

        ids, mask = encode(self.tokenizer, [text], self.cfg.n)
        n = int(mask.sum())
        ids, mask = ids[:, :n], mask[:, :n]
        captured = {}
        mod = encoder_layers(self.model)[self.layer].attention.self

        def hook(_m, args, kwargs):
            captured["h"] = (args[0] if args else kwargs["hidden_states"]).detach()

        handle = mod.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            device = next(self.model.parameters()).device
            self.model(**forward_kwargs(self.model, ids.to(device), mask.to(device)))
        finally:
            handle.remove()
        x = mod.clipped_input(captured["h"])[0, head]
        return x.cpu().numpy()
